package dynamostore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"stead/approvals"
	"stead/store"
	"stead/store/dynamostore"
	"stead/store/fsblob"
	"stead/store/s3blob"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// faults answers chosen DynamoDB requests itself instead of passing them
// on: the fault injected into the client's HTTP transport.
type faults struct {
	mu sync.Mutex
	// answer returns a canned response for a request of operation op (the
	// X-Amz-Target suffix), or nil to pass it on.
	answer func(op string) *http.Response
	// lose, if it says so, passes a request on and then drops DynamoDB's
	// answer, replying 500 as if the connection broke after the write.
	lose  func(op string) bool
	calls map[string]int
}

func (f *faults) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndex(op, ".")+1:]
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	var resp *http.Response
	if f.answer != nil {
		resp = f.answer(op)
	}
	lose := f.lose != nil && f.lose(op)
	f.mu.Unlock()
	if lose {
		real, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, real.Body)
		real.Body.Close()
		resp = awsError(500, "InternalServerError", "injected: the answer was lost")
	}
	if resp != nil {
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
		}
		resp.Request = r
		return resp, nil
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (f *faults) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *faults) set(answer func(op string) *http.Response) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answer = answer
}

func (f *faults) client(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: f} }

// awsError is DynamoDB's answer for an error of type typ.
func awsError(status int, typ, msg string) *http.Response {
	body := fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":%q}`, typ, msg)
	return &http.Response{
		StatusCode: status,
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Errortype": {typ}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

func throttled() *http.Response {
	return awsError(400, "ProvisionedThroughputExceededException", "The level of configured provisioned throughput for the table was exceeded.")
}

func newRun(id string) store.Run {
	return store.Run{
		ID: id, ProjectID: "p1", Agent: "support", EndUserID: "u1", Deployment: 1, Status: store.RunQueued,
		Input: json.RawMessage(`{"orderId":"o-1"}`), Trust: store.Trusted, LeaseUntil: t0.Add(time.Minute),
		CreatedAt: t0, UpdatedAt: t0,
	}
}

func ev(typ string) store.Event {
	return store.Event{Type: typ, At: t0, Data: json.RawMessage(`{"type":"` + typ + `"}`)}
}

func mustCreate(t *testing.T, s store.Store, r store.Run, events ...store.Event) store.Run {
	t.Helper()
	got, err := s.CreateRun(t.Context(), r, events)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func types2(es []store.Event) string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%d:%s", e.Seq, e.Type))
	}
	return strings.Join(out, " ")
}

// TestThrottlingRetried: throttled requests are retried by the SDK; when
// every attempt is throttled, the error says so and how many attempts were
// made.
func TestThrottlingRetried(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{MaxAttempts: 4, MaxBackoff: 5 * time.Millisecond}, f.client)
	ctx := t.Context()
	mustCreate(t, s, newRun("r1"))

	var left atomic.Int32
	left.Store(2)
	f.set(func(op string) *http.Response {
		if op == "GetItem" && left.Add(-1) >= 0 {
			return throttled()
		}
		return nil
	})
	before := f.count("GetItem")
	if _, err := s.GetRun(ctx, "r1"); err != nil {
		t.Fatalf("get run after 2 throttled attempts: %v", err)
	}
	if n := f.count("GetItem") - before; n != 3 {
		t.Errorf("GetItem sent %d times, want 3 (2 throttled, 1 answered)", n)
	}

	f.set(func(op string) *http.Response {
		if op == "UpdateItem" {
			return throttled()
		}
		return nil
	})
	before = f.count("UpdateItem")
	_, err := s.ClaimRun(ctx, store.ClaimParams{RunID: "r1", Owner: "w1", Now: t0, Until: t0.Add(time.Minute)})
	if !errors.Is(err, dynamostore.ErrThrottled) {
		t.Fatalf("claim with every attempt throttled: got %v, want ErrThrottled", err)
	}
	if n := f.count("UpdateItem") - before; n != 4 {
		t.Errorf("UpdateItem sent %d times, want MaxAttempts = 4", n)
	}
	for _, want := range []string{"throttled", "ProvisionedThroughputExceededException", "after 4 attempts", "claim run r1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	f.set(nil)
	r, err := s.GetRun(ctx, "r1")
	if err != nil || r.Status != store.RunQueued || r.Version != 1 {
		t.Fatalf("run after a throttled claim: %+v, %v; want it unchanged", r, err)
	}
}

// TestLargeOutputSpills: a 300 KB step output does not fit an item inline.
// With a blob store it is spilled and read back whole; without one the
// commit is refused with *TooLargeError and writes nothing.
func TestLargeOutputSpills(t *testing.T) {
	t.Parallel()
	big := bigJSON(300 << 10)
	blobs, err := fsblob.Open(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		blobs dynamostore.Blobs
	}{
		{"fsblob", blobs},
		{"s3blob", s3Blobs(t)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fresh(t, dynamostore.Options{Blobs: tc.blobs})
			ctx := t.Context()
			r := mustCreate(t, s, newRun("r1"), ev("run.created"))
			r.Cursor = 1
			r.Output = big
			st := store.Step{Index: 0, ID: "s0", Output: big, CompletedAt: t0}
			done := ev("step.completed")
			done.Data = json.RawMessage(`{"output":` + string(big) + `}`)
			got, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{done}, Steps: []store.Step{st}})
			if err != nil {
				t.Fatalf("commit a 300 KB output: %v", err)
			}
			if !bytes.Equal(got.Output, big) {
				t.Errorf("returned run output: %d bytes, want %d", len(got.Output), len(big))
			}
			step, err := s.GetStep(ctx, "r1", 0)
			if err != nil || !bytes.Equal(step.Output, big) {
				t.Fatalf("stored step output: %d bytes, %v; want %d bytes", len(step.Output), err, len(big))
			}
			stored, err := s.GetRun(ctx, "r1")
			if err != nil || !bytes.Equal(stored.Output, big) {
				t.Fatalf("stored run output: %d bytes, %v", len(stored.Output), err)
			}
			es, err := s.ListEvents(ctx, "r1", 0, 10)
			if err != nil || len(es) != 2 || !bytes.Contains(es[1].Data, big[:1000]) {
				t.Fatalf("events: %s, %v", types2(es), err)
			}
		})
	}

	t.Run("no blob store", func(t *testing.T) {
		s := fresh(t, dynamostore.Options{})
		ctx := t.Context()
		r := mustCreate(t, s, newRun("r1"), ev("run.created"))
		next := r
		next.Cursor = 1
		st := store.Step{Index: 0, ID: "s0", Output: big, CompletedAt: t0}
		_, err := s.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{ev("step.completed")}, Steps: []store.Step{st}})
		var tl *dynamostore.TooLargeError
		if !errors.As(err, &tl) || tl.Size < 300<<10 || tl.Limit != dynamostore.DefaultInlineCap {
			t.Fatalf("commit a 300 KB output without a blob store: got %v, want *TooLargeError", err)
		}
		if !strings.Contains(err.Error(), "Options.Blobs") {
			t.Errorf("error %q does not say what to do", err)
		}
		if _, err := s.GetStep(ctx, "r1", 0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("step of a refused commit: %v", err)
		}
		after, _ := s.GetRun(ctx, "r1")
		if after.Version != r.Version || after.Cursor != 0 {
			t.Errorf("run after a refused commit: version %d cursor %d", after.Version, after.Cursor)
		}
	})
}

// TestInlineCapIsTheLargestInlinePayload: a payload of exactly
// Options.InlineCap bytes is kept in its item; one byte more, without a
// blob store, is *TooLargeError. A payload under 96 bytes is its JSON after
// one kind byte (never deflated).
func TestInlineCapIsTheLargestInlinePayload(t *testing.T) {
	t.Parallel()
	p := store.Project{ID: "p1", CreatedAt: t0}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) >= 96 {
		t.Fatalf("project JSON is %d bytes; the test wants one under 96, which is not deflated", len(data))
	}
	size := 1 + len(data)

	s := fresh(t, dynamostore.Options{InlineCap: size})
	if err := s.CreateProject(t.Context(), p); err != nil {
		t.Fatalf("create a project of a %d-byte payload, InlineCap %d: %v", size, size, err)
	}
	got, err := s.GetProject(t.Context(), "p1")
	if err != nil || !got.CreatedAt.Equal(t0) {
		t.Fatalf("project read back = %+v, %v", got, err)
	}

	s = fresh(t, dynamostore.Options{InlineCap: size - 1})
	err = s.CreateProject(t.Context(), p)
	var tl *dynamostore.TooLargeError
	if !errors.As(err, &tl) || tl.Size != len(data) || tl.Stored != size || tl.Limit != size-1 {
		t.Fatalf("create a project of a %d-byte payload, InlineCap %d: %v, want *TooLargeError of %d bytes of JSON, %d stored, over %d", size, size-1, err, len(data), size, size-1)
	}
	if want := fmt.Sprintf("is %d bytes of JSON, %d as stored, over the %d bytes", len(data), size, size-1); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if _, err := s.GetProject(t.Context(), "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("project of the refused create: %v, want ErrNotFound", err)
	}
}

// bigJSON is a JSON object of about n bytes that does not compress well.
func bigJSON(n int) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"rows":[`)
	x := uint64(88172645463325252)
	for i := 0; b.Len() < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%016x%016x"`, x, x*0x9E3779B97F4A7C15)
	}
	b.WriteString(`]}`)
	return json.RawMessage(b.String())
}

func s3Blobs(t *testing.T) dynamostore.Blobs {
	t.Helper()
	srv := aws.Get(t)
	name := fmt.Sprintf("spill-%d", tables.Add(1))
	if err := srv.CreateBucket(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	b, err := s3blob.New(srv.S3(), s3blob.Options{Bucket: name, Prefix: "spill/"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLostRunUpdateLeavesNothing: a commit whose commit item was written but
// whose run update never happened (the worker died between the two) shows
// nothing of itself, and the next commit of the same version overwrites its
// item.
func TestLostRunUpdateLeavesNothing(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{MaxAttempts: 1}, f.client)
	ctx := t.Context()
	r := mustCreate(t, s, newRun("r1"), ev("run.created"))

	// The run update and the clean-up fail: as if the worker died.
	f.set(func(op string) *http.Response {
		if op == "UpdateItem" || op == "DeleteItem" {
			return awsError(400, "ValidationException", "injected: the worker died here")
		}
		return nil
	})
	lost := r
	lost.Cursor = 1
	st := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{"lost":true}`)}
	a := approvals.Approval{ID: "apr1", ProjectID: "p1", RunID: "r1", Status: approvals.Pending, Input: json.RawMessage(`{}`), RequestedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	lost.Status, lost.ApprovalID = store.RunAwaitingApproval, "apr1"
	if _, err := s.CommitRun(ctx, store.RunCommit{Run: lost, Events: []store.Event{ev("lost.1"), ev("lost.2")}, Steps: []store.Step{st}, Approval: &a}); err == nil {
		t.Fatal("commit with a failing run update: no error")
	}
	if f.count("PutItem") < 2 {
		t.Fatalf("the commit wrote %d items before its run update, want the approval and the commit item", f.count("PutItem"))
	}
	f.set(nil)

	es, err := s.ListEvents(ctx, "r1", 0, 50)
	if err != nil || types2(es) != "1:run.created" {
		t.Fatalf("events after a lost commit: %s, %v", types2(es), err)
	}
	if _, err := s.GetStep(ctx, "r1", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("step of a lost commit: %v", err)
	}
	if _, err := s.GetApproval(ctx, "apr1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("approval of a lost commit: %v", err)
	}
	page, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1"})
	if err != nil || len(page.Items) != 0 {
		t.Errorf("approvals of p1 after a lost commit: %v, %v", page.Items, err)
	}

	// The dead writer's commit item holds its version's slot: another writer
	// of that version is refused, as it would be had the commit happened.
	// The engine goes on the way it recovers from any dead worker: the lease
	// runs out, a claim moves the version, and the step runs again.
	same := r
	same.Cursor = 1
	st2 := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{"won":true}`)}
	if _, err := s.CommitRun(ctx, store.RunCommit{Run: same, Events: []store.Event{ev("same")}, Steps: []store.Step{st2}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("commit from the dead writer's version: got %v, want ErrConflict", err)
	}
	next, err := s.ClaimRun(ctx, store.ClaimParams{RunID: "r1", Owner: "w2", Now: t0.Add(time.Hour), Until: t0.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	next.Cursor = 1
	got, err := s.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{ev("won")}, Steps: []store.Step{st2}})
	if err != nil {
		t.Fatalf("commit after a lost one and a claim: %v", err)
	}
	es, err = s.ListEvents(ctx, "r1", 0, 50)
	if err != nil || types2(es) != "1:run.created 2:won" || got.LastSeq != 2 {
		t.Fatalf("events: %s (lastSeq %d), %v", types2(es), got.LastSeq, err)
	}
	step, err := s.GetStep(ctx, "r1", 0)
	if err != nil || string(step.Output) != `{"won":true}` {
		t.Fatalf("step 0: %s, %v", step.Output, err)
	}
}

// TestFullTailFlushes: a commit whose events fit TailBytes on their own
// but not beside the tail's is redone as a flush (a commit item), so the
// run item's tail never holds more than TailBytes.
func TestFullTailFlushes(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{TailBytes: 200}, f.client)
	r := mustCreate(t, s, newRun("r1"), ev("e1"))
	puts := f.count("PutItem")
	for i := 2; i <= 11; i++ {
		var err error
		if r, err = s.CommitRun(t.Context(), store.RunCommit{Run: r, Events: []store.Event{ev(fmt.Sprintf("e%d", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if f.count("PutItem") == puts {
		t.Fatal("10 commits of one event each with TailBytes 200 wrote no commit item: the tail took them all")
	}
	es, err := s.ListEvents(t.Context(), "r1", 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 11 || es[10].Seq != 11 || es[10].Type != "e11" {
		t.Fatalf("events %+v, want e1..e11", es)
	}
}

// TestEventsAcrossTailAndItems: events come back in order and without gaps
// whatever mix of tail appends and commit items wrote them, from any
// starting point.
func TestEventsAcrossTailAndItems(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{TailBytes: 200})
	ctx := t.Context()
	r := mustCreate(t, s, newRun("r1"), ev("e1"))
	n := 1
	for i := range 12 {
		var batch []store.Event
		for range i%3 + 1 {
			n++
			e := ev(fmt.Sprintf("e%d", n))
			if i%4 == 3 {
				e.Data = json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 300)))
			}
			batch = append(batch, e)
		}
		c := store.RunCommit{Run: r, Events: batch}
		if i%5 == 4 {
			c.Steps = []store.Step{{Index: i, ID: fmt.Sprintf("s%d", i), Output: json.RawMessage(`{}`)}}
		}
		var err error
		if r, err = s.CommitRun(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if r.LastSeq != int64(n) {
		t.Fatalf("lastSeq %d, want %d", r.LastSeq, n)
	}
	for after := int64(0); after <= int64(n); after++ {
		for _, limit := range []int{1, 3, 50} {
			es, err := s.ListEvents(ctx, "r1", after, limit)
			if err != nil {
				t.Fatal(err)
			}
			want := min(limit, n-int(after))
			if len(es) != want {
				t.Fatalf("after %d limit %d: %d events, want %d", after, limit, len(es), want)
			}
			for i, e := range es {
				if e.Seq != after+int64(i)+1 || e.Type != fmt.Sprintf("e%d", e.Seq) || e.RunID != "r1" {
					t.Fatalf("after %d limit %d: event %d is %d:%s", after, limit, i, e.Seq, e.Type)
				}
			}
		}
	}
}

// TestApprovalSettledLazily: a decision is one write of the run item; the
// approval item is settled when the run takes its next approval, and reads
// see the decision either way.
func TestApprovalSettledLazily(t *testing.T) {
	t.Parallel()
	srv := aws.Get(t)
	db := srv.DynamoDB()
	s := fresh(t, dynamostore.Options{})
	ctx := t.Context()
	r := mustCreate(t, s, newRun("r1"))
	pause := func(r store.Run, id string) store.Run {
		t.Helper()
		a := approvals.Approval{ID: id, ProjectID: "p1", RunID: "r1", Status: approvals.Pending, Input: json.RawMessage(`{"n":1}`),
			RequestedAt: t0, ExpiresAt: t0.Add(time.Hour)}
		r.Status, r.ApprovalID = store.RunAwaitingApproval, id
		got, err := s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a, Events: []store.Event{ev("approval.requested")}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	rawStatus := func(id string) string {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: awssdk.String(s.Table()), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "A#" + id}, "sk": &types.AttributeValueMemberS{Value: "A"}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item["st"].(*types.AttributeValueMemberS).Value
	}
	pause(r, "apr1")
	_, _, err := s.DecideApproval(ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "p1", ApprovalID: "apr1", Status: approvals.Approved, By: "k1", At: t0.Add(time.Minute)},
		RunStatus: store.RunQueued, LeaseUntil: t0.Add(2 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := rawStatus("apr1"); st != "pending" {
		t.Fatalf("approval item after the decision says %q; the decision should have written only the run", st)
	}
	a, err := s.GetApproval(ctx, "apr1")
	if err != nil || a.Status != approvals.Approved || a.DecidedBy != "k1" {
		t.Fatalf("approval read after the decision: %+v, %v", a, err)
	}
	page, err := s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", Status: approvals.Approved})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("approved approvals: %v, %v", page.Items, err)
	}

	r, err = s.ClaimRun(ctx, store.ClaimParams{RunID: "r1", Owner: "w", Now: t0.Add(time.Minute), Until: t0.Add(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	pause(r, "apr2")
	if st := rawStatus("apr1"); st != "approved" {
		t.Fatalf("approval item after the run's next approval says %q, want approved", st)
	}
	a, err = s.GetApproval(ctx, "apr1")
	if err != nil || a.Status != approvals.Approved || a.DecidedBy != "k1" {
		t.Fatalf("settled approval: %+v, %v", a, err)
	}
	page, err = s.ListApprovals(ctx, store.ApprovalFilter{ProjectID: "p1", RunID: "r1"})
	if err != nil || len(page.Items) != 2 || page.Items[0].ID != "apr2" {
		t.Fatalf("approvals of r1: %v, %v", page.Items, err)
	}
}

// TestCursorsRefused: a cursor is refused unless this list handed it out.
func TestCursorsRefused(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	ctx := t.Context()
	runs := map[string]store.Run{}
	for i := range 3 {
		for _, p := range []string{"p1", "p2"} {
			r := newRun(fmt.Sprintf("%s-r%d", p, i))
			r.ProjectID = p
			runs[r.ID] = mustCreate(t, s, r)
		}
	}
	page, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p1", Limit: 1})
	if err != nil || page.NextCursor == "" {
		t.Fatalf("first page: %v, %v", page, err)
	}
	if _, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p1", Limit: 1, Cursor: page.NextCursor}); err != nil {
		t.Fatalf("second page: %v", err)
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for name, c := range map[string]string{
		"another project's": page.NextCursor,
		"garbage":           "%%%",
		"base64 garbage":    b64("not json"),
		"empty object":      b64("{}"),
		"foreign key":       b64(`{"l":"byProject|R#p2","k":{"g1pk":"R#p1","g1sk":"x","pk":"R#x","sk":"R"}}`),
		"missing key parts": b64(`{"l":"byProject|R#p2","k":{"g1pk":"R#p2"}}`),
		"no position":       b64(`{"l":"byProject|R#p2"}`),
	} {
		_, err := s.ListRuns(ctx, store.RunFilter{ProjectID: "p2", Cursor: c})
		if !errors.Is(err, store.ErrInvalidCursor) {
			t.Errorf("%s cursor: got %v, want ErrInvalidCursor", name, err)
		}
	}
	// Another project's cursor of pending approvals, expiring first (a
	// position in a list sorted in memory), is not this project's.
	for i, id := range []string{"p1-r0", "p1-r1", "p2-r0"} {
		r := runs[id]
		a := approvals.Approval{ID: fmt.Sprintf("apr%d", i), ProjectID: r.ProjectID, RunID: r.ID, Status: approvals.Pending,
			Input: json.RawMessage(`{"n":1}`), RequestedAt: t0, ExpiresAt: t0.Add(time.Duration(i+1) * time.Hour)}
		r.Status, r.ApprovalID = store.RunAwaitingApproval, a.ID
		if _, err := s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a, Events: []store.Event{ev("approval.requested")}}); err != nil {
			t.Fatal(err)
		}
	}
	expiring := store.ApprovalFilter{ProjectID: "p1", Status: approvals.Pending, Order: store.ExpiringFirst, Limit: 1}
	ap, err := s.ListApprovals(ctx, expiring)
	if err != nil || ap.NextCursor == "" {
		t.Fatalf("p1's pending approvals, expiring first: %v, %v", ap, err)
	}
	expiring.ProjectID, expiring.Cursor = "p2", ap.NextCursor
	if _, err := s.ListApprovals(ctx, expiring); !errors.Is(err, store.ErrInvalidCursor) {
		t.Errorf("p1's expiring-first cursor in p2's list: got %v, want ErrInvalidCursor", err)
	}
	// A deployments cursor is not a broker cursor.
	for range 3 {
		if _, err := s.CreateDeployment(ctx, store.Deployment{ProjectID: "p1", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	dp, err := s.ListDeployments(ctx, "p1", "", 1)
	if err != nil || dp.NextCursor == "" {
		t.Fatalf("deployments: %v, %v", dp, err)
	}
	if _, err := s.ListBrokerRecords(ctx, store.BrokerScope{ProjectID: "p1"}, "c", dp.NextCursor, 1); !errors.Is(err, store.ErrInvalidCursor) {
		t.Errorf("deployments cursor in a broker list: got %v", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	srv := aws.Get(t)
	for name, o := range map[string]dynamostore.Options{
		"no table":          {},
		"inline cap > 300K": {Table: "t", InlineCap: 400 << 10},
	} {
		if _, err := dynamostore.New(srv.DynamoDB(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := dynamostore.New(nil, dynamostore.Options{Table: "t"}); err == nil {
		t.Error("no client: no error")
	}
}

func TestMissingTable(t *testing.T) {
	t.Parallel()
	srv := aws.Get(t)
	s, err := dynamostore.New(srv.DynamoDB(), dynamostore.Options{Table: "never-created"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetRun(context.Background(), "r1")
	if !errors.Is(err, dynamostore.ErrNoTable) || !strings.Contains(err.Error(), "CreateTable") {
		t.Fatalf("get from a missing table: %v", err)
	}
}

func TestCreateTableTwice(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	if err := s.CreateTable(t.Context()); err != nil {
		t.Fatalf("create an existing table: %v", err)
	}
}

// TestLostAnswerIsNotALoss: when DynamoDB applied a write but its answer
// was lost, the SDK's retry finds the condition failed; the store sees its
// own write token on the item and reports the write as done, not as a
// conflict.
func TestLostAnswerIsNotALoss(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{MaxBackoff: time.Millisecond}, f.client)
	ctx := t.Context()
	mustCreate(t, s, newRun("r1"), ev("run.created"))
	var once atomic.Bool
	f.lose = func(op string) bool { return op == "UpdateItem" && once.CompareAndSwap(false, true) }
	before := f.count("UpdateItem")
	r, err := s.ClaimRun(ctx, store.ClaimParams{RunID: "r1", Owner: "w1", Now: t0, Until: t0.Add(time.Minute)})
	if err != nil {
		t.Fatalf("claim whose first answer was lost: %v", err)
	}
	if n := f.count("UpdateItem") - before; n != 2 || r.Attempts != 1 || r.Version != 2 {
		t.Fatalf("claim: %d UpdateItems, attempts %d, version %d; want 2, 1, 2", n, r.Attempts, r.Version)
	}

	once.Store(false)
	r.Cursor = 1
	r, err = s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("step.done")}})
	if err != nil {
		t.Fatalf("commit whose first answer was lost: %v", err)
	}
	es, err := s.ListEvents(ctx, "r1", 0, 50)
	if err != nil || types2(es) != "1:run.created 2:step.done" || r.Version != 3 {
		t.Fatalf("events after a lost answer: %s (version %d), %v", types2(es), r.Version, err)
	}

	a := approvals.Approval{ID: "apr1", ProjectID: "p1", RunID: "r1", Status: approvals.Pending, Input: json.RawMessage(`{}`), RequestedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	r.Status, r.ApprovalID = store.RunAwaitingApproval, "apr1"
	if _, err = s.CommitRun(ctx, store.RunCommit{Run: r, Approval: &a}); err != nil {
		t.Fatal(err)
	}
	once.Store(false)
	got, run, err := s.DecideApproval(ctx, store.DecideParams{
		Decision:  approvals.Decision{ProjectID: "p1", ApprovalID: "apr1", Status: approvals.Denied, By: "k1", At: t0.Add(time.Minute)},
		RunStatus: store.RunFailed, RunError: &store.RunError{Code: "approval-denied"},
	})
	if err != nil || got.Status != approvals.Denied || run.Status != store.RunFailed {
		t.Fatalf("decision whose first answer was lost: %v, %v, %v", got.Status, run.Status, err)
	}
}

// TestTableSchema: CreateTable makes the key schema and exactly the indexes
// that Indexes describes (template.yaml must declare the same).
func TestTableSchema(t *testing.T) {
	t.Parallel()
	srv := aws.Get(t)
	s := fresh(t, dynamostore.Options{})
	out, err := srv.DynamoDB().DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: awssdk.String(s.Table())})
	if err != nil {
		t.Fatal(err)
	}
	tbl := out.Table
	if ks := tbl.KeySchema; len(ks) != 2 || *ks[0].AttributeName != dynamostore.AttrPK || *ks[1].AttributeName != dynamostore.AttrSK {
		t.Errorf("key schema: %+v", ks)
	}
	if tbl.BillingModeSummary == nil || tbl.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing mode: %+v", tbl.BillingModeSummary)
	}
	got := map[string]string{}
	for _, g := range tbl.GlobalSecondaryIndexes {
		got[*g.IndexName] = fmt.Sprintf("%s %s %s %v", *g.KeySchema[0].AttributeName, *g.KeySchema[1].AttributeName, g.Projection.ProjectionType, g.Projection.NonKeyAttributes)
	}
	want := map[string]string{}
	for _, ix := range dynamostore.Indexes() {
		p := types.ProjectionTypeKeysOnly
		if len(ix.Projected) > 0 {
			p = types.ProjectionTypeInclude
		}
		want[ix.Name] = fmt.Sprintf("%s %s %s %v", ix.PK, ix.SK, p, ix.Projected)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("indexes:\n got  %v\n want %v", got, want)
	}
}

// TestStalledByRealLease: the stall index keeps a lower bound of each
// run's lease that lease renewals do not move; the list still orders by the
// real lease, and a lease set below the bound moves the bound down.
func TestStalledByRealLease(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	ctx := t.Context()
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	claim := func(id string, now, until int) store.Run {
		t.Helper()
		r, err := s.ClaimRun(ctx, store.ClaimParams{RunID: id, Owner: "w", Now: at(now), Until: at(until)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	stalled := func(now, limit int) string {
		t.Helper()
		rs, err := s.ListStalledRuns(ctx, at(now), limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return strings.Join(ids, " ")
	}
	// r1: bound 1m; its lease is renewed to 20m by a commit.
	r1 := newRun("r1")
	r1.LeaseUntil = at(1)
	mustCreate(t, s, r1)
	r := claim("r1", 0, 10)
	r.LeaseUntil = at(20)
	if _, err := s.CommitRun(ctx, store.RunCommit{Run: r, Events: []store.Event{ev("renew")}}); err != nil {
		t.Fatal(err)
	}
	// r2: bound 2m, lease 5m.
	r2 := newRun("r2")
	r2.LeaseUntil = at(2)
	mustCreate(t, s, r2)
	claim("r2", 0, 5)
	// r3: bound 10m; claimed with a lease of 3m, below its bound.
	r3 := newRun("r3")
	r3.LeaseUntil = at(10)
	mustCreate(t, s, r3)
	claim("r3", 0, 3)

	for _, c := range []struct {
		now, limit int
		want       string
	}{
		{2, 10, ""},
		{4, 10, "r3"},
		{6, 10, "r3 r2"},
		{30, 10, "r3 r2 r1"},
		{30, 2, "r3 r2"},
		{30, 1, "r3"},
	} {
		if got := stalled(c.now, c.limit); got != c.want {
			t.Errorf("stalled at %dm, limit %d: %q, want %q", c.now, c.limit, got, c.want)
		}
	}
}

// A commit whose commit-item PutItem was applied but whose answer was lost:
// the SDK's retry fails its own condition, and the write token tells it was
// this very put, so the commit goes on instead of reporting a conflict.
func TestLostPutAnswerIsNotAConflict(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{MaxBackoff: time.Millisecond}, f.client)
	ctx := t.Context()
	mustCreate(t, s, newRun("r1"), ev("run.created"))
	r, err := s.ClaimRun(ctx, store.ClaimParams{RunID: "r1", Owner: "w1", Now: t0, Until: t0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var once atomic.Bool
	f.lose = func(op string) bool { return op == "PutItem" && once.CompareAndSwap(false, true) }
	next := r
	next.Cursor = 1
	st := store.Step{Index: 0, ID: "s0", Output: json.RawMessage(`{"refunded":true}`)}
	got, err := s.CommitRun(ctx, store.RunCommit{Run: next, Events: []store.Event{ev("step.completed")}, Steps: []store.Step{st}})
	if err != nil || got.Cursor != 1 {
		t.Fatalf("commit whose commit-item answer was lost: %+v, %v", got, err)
	}
	if !once.Load() {
		t.Fatal("no PutItem answer was lost: the test tested nothing")
	}
	if _, err := s.GetStep(ctx, "r1", 0); err != nil {
		t.Errorf("the step is not recorded: %v", err)
	}
}

// txConflict is DynamoDB's answer to a transaction that met another request
// changing its first item at the same moment.
func txConflict() *http.Response {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",` +
		`"Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict, None]",` +
		`"CancellationReasons":[{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"},{"Code":"None"}]}`
	return &http.Response{
		StatusCode: 400,
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Errortype": {"TransactionCanceledException"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

// TestIdempotentCreateRaceReplays: two creates with the same idempotency key
// at the same moment. DynamoDB cancels the one whose transaction met the
// other's with TransactionConflict; that create tries again and answers with
// the other's run (store.ErrExists), as a replay does — not with an error.
// A conflict that never clears gives up after a few tries.
func TestIdempotentCreateRaceReplays(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{}, f.client)
	other := sameTable(t, s)
	ctx := t.Context()
	first := newRun("r-first")
	first.IdempotencyKey = "k1"
	var raced atomic.Bool
	f.set(func(op string) *http.Response {
		if op != "TransactWriteItems" || raced.Swap(true) {
			return nil
		}
		// The other create wins while this one's transaction is in flight.
		if _, err := other.CreateRun(ctx, first, nil); err != nil {
			t.Errorf("the other create: %v", err)
		}
		return txConflict()
	})
	second := newRun("r-second")
	second.IdempotencyKey = "k1"
	got, err := s.CreateRun(ctx, second, nil)
	if !errors.Is(err, store.ErrExists) || got.ID != "r-first" {
		t.Fatalf("create racing another with the same key = %s, %v; want the other's run r-first and ErrExists", got.ID, err)
	}
	if n := f.count("TransactWriteItems"); n != 2 {
		t.Errorf("TransactWriteItems sent %d times, want 2 (the conflict, then the try that found the key taken)", n)
	}
	if _, err := s.GetRun(ctx, "r-second"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the losing create left run r-second behind: %v", err)
	}

	f.set(func(op string) *http.Response {
		if op == "TransactWriteItems" {
			return txConflict()
		}
		return nil
	})
	before := f.count("TransactWriteItems")
	third := newRun("r-third")
	third.IdempotencyKey = "k2"
	_, err = s.CreateRun(ctx, third, nil)
	if err == nil || errors.Is(err, store.ErrExists) || !strings.Contains(err.Error(), "TransactionConflict") {
		t.Fatalf("create whose transaction always conflicts: %v, want the conflict reported", err)
	}
	if n := f.count("TransactWriteItems") - before; n != 6 {
		t.Errorf("TransactWriteItems sent %d times, want 6 (the first try and 5 more)", n)
	}
}

func ownerKey(p, id string) store.APIKey {
	return store.APIKey{ID: id, ProjectID: p, Role: approvals.RoleOwner, Hash: "sha256-" + p + "-" + id, Prefix: "sk_" + id, CreatedAt: t0}
}

// ownerCount is the project's count of active owner keys as stored.
func ownerCount(t *testing.T, raw rawTable, p string) string {
	t.Helper()
	return raw.get("P#"+p, "OWNERS")["n"].(*types.AttributeValueMemberN).Value
}

// TestOwnerCountSeeded: a project whose owner count is missing (its keys
// were written before the count existed) gets it from its active owner
// keys at the next owner key's create or revoke, and the last owner rule
// holds from there.
func TestOwnerCountSeeded(t *testing.T) {
	t.Parallel()
	s := fresh(t, dynamostore.Options{})
	raw := newRawTable(t, s)
	ctx := t.Context()
	revoked := ownerKey("p1", "o0")
	revoked.RevokedAt = t0
	for _, k := range []store.APIKey{revoked, ownerKey("p1", "o1"), ownerKey("p1", "o2")} {
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if got := ownerCount(t, raw, "p1"); got != "2" {
		t.Fatalf("owner count = %s, want 2 (a key created revoked does not count)", got)
	}
	forget := func() {
		t.Helper()
		if _, err := raw.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: awssdk.String(s.Table()),
			Key: map[string]types.AttributeValue{dynamostore.AttrPK: avStr("P#p1"), dynamostore.AttrSK: avStr("OWNERS")}}); err != nil {
			t.Fatal(err)
		}
	}

	forget()
	if _, err := s.RevokeAPIKey(ctx, "p1", "o1", t0.Add(time.Minute)); err != nil {
		t.Fatalf("revoke one of two owner keys, count missing: %v", err)
	}
	if got := ownerCount(t, raw, "p1"); got != "1" {
		t.Fatalf("owner count after the revoke = %s, want 1", got)
	}
	if _, err := s.RevokeAPIKey(ctx, "p1", "o2", t0.Add(time.Minute)); !errors.Is(err, store.ErrLastOwner) {
		t.Fatalf("revoke the last owner key: %v, want ErrLastOwner", err)
	}

	forget()
	if err := s.CreateAPIKey(ctx, ownerKey("p1", "o3")); err != nil {
		t.Fatalf("create an owner key, count missing: %v", err)
	}
	if got := ownerCount(t, raw, "p1"); got != "2" {
		t.Fatalf("owner count after the create = %s, want 2 (o2 and o3)", got)
	}
	if _, err := s.RevokeAPIKey(ctx, "p1", "o2", t0.Add(time.Minute)); err != nil {
		t.Fatalf("revoke o2 now that o3 exists: %v", err)
	}
	if _, err := s.RevokeAPIKey(ctx, "p1", "o3", t0.Add(time.Minute)); !errors.Is(err, store.ErrLastOwner) {
		t.Fatalf("revoke o3, the last owner key: %v, want ErrLastOwner", err)
	}
}

// TestOwnerRevokeConflictRetried: an owner key's revoke whose transaction
// meets a concurrent one (TransactionConflict) tries again, and the count
// goes down once.
func TestOwnerRevokeConflictRetried(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{}, f.client)
	raw := newRawTable(t, s)
	ctx := t.Context()
	for _, id := range []string{"o1", "o2"} {
		if err := s.CreateAPIKey(ctx, ownerKey("p1", id)); err != nil {
			t.Fatal(err)
		}
	}
	var left atomic.Int32
	left.Store(2)
	f.set(func(op string) *http.Response {
		if op == "TransactWriteItems" && left.Add(-1) >= 0 {
			return txConflict()
		}
		return nil
	})
	before := f.count("TransactWriteItems")
	k, err := s.RevokeAPIKey(ctx, "p1", "o1", t0.Add(time.Minute))
	if err != nil || !k.RevokedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("revoke after two conflicts = %v, %v", k.RevokedAt, err)
	}
	if n := f.count("TransactWriteItems") - before; n != 3 {
		t.Errorf("TransactWriteItems sent %d times, want 3 (two conflicts, then the revoke)", n)
	}
	if got := ownerCount(t, raw, "p1"); got != "1" {
		t.Errorf("owner count = %s, want 1", got)
	}
}

// TestRevokeRacingRevokeKeepsTheFirst: a key revoked by another write
// after a revoke read it and before the revoke wrote keeps that first
// revocation: the write is conditional on the key being active, not only
// on its payload (which a revoke does not change).
func TestRevokeRacingRevokeKeepsTheFirst(t *testing.T) {
	t.Parallel()
	f := &faults{}
	s := fresh(t, dynamostore.Options{}, f.client)
	plain := sameTable(t, s)
	ctx := t.Context()
	k := store.APIKey{ID: "k1", ProjectID: "p1", Role: approvals.RoleApprover, Hash: "sha256-p1-k1", Prefix: "sk_k1", CreatedAt: t0}
	if err := s.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	first, second := t0.Add(time.Minute), t0.Add(2*time.Minute)
	revoked := false
	f.set(func(op string) *http.Response {
		if op == "UpdateItem" && !revoked {
			revoked = true
			if _, err := plain.RevokeAPIKey(ctx, "p1", "k1", first); err != nil {
				t.Errorf("revoke k1 before the other revoke's write: %v", err)
			}
		}
		return nil
	})
	got, err := s.RevokeAPIKey(ctx, "p1", "k1", second)
	f.set(nil)
	if !revoked {
		t.Fatal("k1 was not revoked before the revoke's write")
	}
	if err != nil || !got.RevokedAt.Equal(first) {
		t.Fatalf("revoke of a key revoked meanwhile = %v, %v; want the first revocation, %v", got.RevokedAt, err, first)
	}
	stored, err := s.GetAPIKeyByHash(ctx, k.Hash)
	if err != nil || !stored.RevokedAt.Equal(first) {
		t.Fatalf("stored key revoked at %v, %v; want %v", stored.RevokedAt, err, first)
	}
}
