package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"stead/api/wire"
	"stead/examples/refunds"
	"stead/functions/awsstack"
	"stead/infra/moto"
	"stead/infra/rie"
	"stead/store"
	"stead/store/dynamostore"
	"stead/store/s3blob"
)

const (
	table      = "stead-e2e"
	bucket     = "stead-e2e"
	runnerName = "stead-e2e-runner"
	goldenDir  = "../testdata/apigw"
	badEvents  = "../testdata/bad"
	// publicURL is the functions' STEAD_PUBLIC_URL: the base of the links
	// in notifications.
	publicURL = "https://stead-e2e.example.com"
)

// stack is the three functions under the emulator, the queue standing in
// for Lambda's async Invoke, and a direct view of the table.
type stack struct {
	t       *testing.T
	api     *rie.Instance
	runner  *rie.Instance
	sweeper *rie.Instance
	queue   *rie.Queue
	store   *dynamostore.Store
	key     string
}

// TestLambdaEndToEnd drives the real bootstraps: bootstrap a project,
// deploy the refunds example through the API function, deliver webhooks
// from the runner and the sweeper, run it through the runner, approve,
// deny, expire through the sweeper, repeat deliveries, and recover a
// refused dispatch.
func TestLambdaEndToEnd(t *testing.T) {
	start := time.Now()
	srv := moto.Start(t)
	rie.Binary(t) // skip (or fail in CI) before building anything
	buildStart := time.Now()
	bins := rie.BuildFunctions(t, "./functions/api", "./functions/runner", "./functions/sweeper", "./functions/admin")
	t.Logf("built the four binaries for this machine in %s", time.Since(buildStart).Round(time.Millisecond))
	ctx := t.Context()

	st, err := dynamostore.New(srv.DynamoDB(), dynamostore.Options{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	queue := rie.StartQueue(t)
	aws := []string{
		"AWS_REGION=" + moto.Region,
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_DYNAMODB=" + srv.URL,
		"AWS_ENDPOINT_URL_S3=" + srv.URL,
		"AWS_ENDPOINT_URL_LAMBDA=" + queue.URL,
	}
	env := append(slices.Clone(aws),
		awsstack.EnvTable+"="+table,
		awsstack.EnvBucket+"="+bucket,
		awsstack.EnvRunnerFunction+"="+runnerName,
		awsstack.EnvS3PathStyle+"=true",
		awsstack.EnvDispatchGrace+"=1s",
		// The webhook receiver is on loopback, which the egress policy
		// refuses unless the owner allows it.
		awsstack.EnvEgressAllow+"=127.0.0.1/32",
		awsstack.EnvPublicURL+"="+publicURL,
		// Long enough for a decision on the other API instance to land
		// within it on a busy machine, short enough to see a call outlive it.
		awsstack.EnvMCPWait+"=5s",
		"AWS_LAMBDA_LOG_LEVEL=DEBUG",
	)
	s := &stack{
		t:       t,
		api:     rie.Start(t, rie.Function{Name: "stead-e2e-api", Bootstrap: bins["api"], Env: env}),
		runner:  rie.Start(t, rie.Function{Name: runnerName, Bootstrap: bins["runner"], Env: env}),
		sweeper: rie.Start(t, rie.Function{Name: "stead-e2e-sweeper", Bootstrap: bins["sweeper"], Env: env}),
		queue:   queue,
		store:   st,
	}

	// The first project and its owner key: the admin command, with the
	// operator's credentials, straight into the table.
	s.key = bootstrap(t, bins["admin"], append(slices.Clone(aws), awsstack.EnvTable+"="+table))

	t0 := time.Now()
	if status, _ := s.call(ctx, "healthz.json", nil); status != 200 {
		t.Fatalf("healthz: status %d", status)
	}
	t.Logf("api function: first invocation (cold) %s", time.Since(t0).Round(time.Millisecond))

	// Deploy the example and seed its demo orders, through API Gateway
	// events.
	dep := s.deploy(ctx, refunds.Config)
	if dep.Version != 1 || !slices.Contains(dep.Agents, "refunds") {
		t.Fatalf("deployment: %+v", dep)
	}
	bundles, err := s3blob.New(srv.S3(), s3blob.Options{Bucket: bucket, Prefix: awsstack.DefaultBundlePrefix})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := bundles.Get(ctx, dep.Digest); err != nil || len(b) == 0 {
		t.Fatalf("the deployed bundle is not in s3://%s/%s%s: %v", bucket, awsstack.DefaultBundlePrefix, dep.Digest, err)
	}
	seed, err := refunds.DemoSeed()
	if err != nil {
		t.Fatal(err)
	}
	for key, value := range seed.Records["orders"] {
		body, _ := json.Marshal(map[string]json.RawMessage{"value": value})
		s.mustCall(ctx, 200, "put-broker.json", map[string]string{"ORDER": key, "BODY": string(body)})
	}

	// First, while no runner environment has read the project's endpoints:
	// one that had trusts what it read for up to 2 s (notify's Notifies).
	t.Run("webhooks", func(t *testing.T) {
		s.t = t
		s.webhooks(ctx)
	})

	t.Run("approve", func(t *testing.T) {
		s.t = t
		run := s.startRun(ctx, "o-1001")
		if run.Status != "queued" {
			t.Fatalf("a new run is %s, want queued", run.Status)
		}
		t1 := time.Now()
		s.drainRunner(ctx, run.ID)
		t.Logf("runner: to the approval gate %s", time.Since(t1).Round(time.Millisecond))
		run = s.getRun(ctx, run.ID)
		if run.Status != "awaiting-approval" || run.Approval == nil || run.Approval.Tool != "refundOrder" {
			t.Fatalf("after the runner: %+v, want awaiting-approval on refundOrder", run)
		}

		// A duplicate delivery while the run waits changes nothing.
		s.duplicateDelivery(ctx, run.ID)

		s.mustCall(ctx, 200, "approve.json", map[string]string{"APPROVAL": run.Approval.ID})
		s.drainRunner(ctx, run.ID)
		run = s.getRun(ctx, run.ID)
		if run.Status != "succeeded" {
			t.Fatalf("after approval: %s (%+v), want succeeded", run.Status, run.Error)
		}
		var out struct {
			OrderID  string  `json:"orderId"`
			Refunded float64 `json:"refunded"`
		}
		if err := json.Unmarshal(run.Output, &out); err != nil || out.OrderID != "o-1001" || out.Refunded != 89.5 {
			t.Fatalf("run output %s (%v), want the refund of o-1001 (89.5)", run.Output, err)
		}
		// A late duplicate (an async retry) after the run ended changes
		// nothing either.
		s.duplicateDelivery(ctx, run.ID)
		types := s.eventTypes(ctx, run.ID)
		for _, want := range []string{"run.created", "approval.requested", "approval.approved", "run.succeeded"} {
			if !slices.Contains(types, want) {
				t.Errorf("trace %v lacks %s", types, want)
			}
		}
	})

	t.Run("deny", func(t *testing.T) {
		s.t = t
		run := s.startRun(ctx, "o-1002")
		s.drainRunner(ctx, run.ID)
		run = s.getRun(ctx, run.ID)
		if run.Status != "awaiting-approval" {
			t.Fatalf("after the runner: %s, want awaiting-approval", run.Status)
		}
		s.mustCall(ctx, 200, "deny.json", map[string]string{"APPROVAL": run.Approval.ID})
		if evs := s.queue.Take(runnerName); len(evs) != 0 {
			t.Fatalf("a denial dispatched the runner: %q", evs)
		}
		run = s.getRun(ctx, run.ID)
		if run.Status != "failed" || run.Error == nil || run.Error.Code != "approval-denied" {
			t.Fatalf("after the denial: %s %+v, want failed approval-denied", run.Status, run.Error)
		}
	})

	t.Run("expire, and recover refused dispatches", func(t *testing.T) {
		s.t = t
		// On version 1 (approvals wait 15m): a run that will be approved
		// while the runner cannot be invoked.
		approved := s.startRun(ctx, "o-1002")
		s.drainRunner(ctx, approved.ID)
		approved = s.getRun(ctx, approved.ID)
		if approved.Status != "awaiting-approval" {
			t.Fatalf("after the runner: %s, want awaiting-approval", approved.Status)
		}

		// Version 2 gives approvals one second.
		short := bytes.Replace(refunds.Config, []byte(`"timeout": "15m"`), []byte(`"timeout": "1s"`), 1)
		if bytes.Equal(short, refunds.Config) {
			t.Fatal("the example's approval timeout is no longer 15m; update this test")
		}
		if dep := s.deploy(ctx, short); dep.Version != 2 {
			t.Fatalf("second deployment is version %d", dep.Version)
		}
		expiring := s.startRun(ctx, "o-1003")
		s.drainRunner(ctx, expiring.ID)
		expiring = s.getRun(ctx, expiring.ID)
		if expiring.Status != "awaiting-approval" {
			t.Fatalf("after the runner: %s, want awaiting-approval", expiring.Status)
		}

		// The runner cannot be invoked (a missing lambda:InvokeFunction,
		// say): a new run is created all the same and stays queued, and an
		// approval is recorded all the same and its run stays queued.
		s.queue.Refuse(runnerName, "User: arn:aws:sts::123456789012:assumed-role/api is not authorized to perform: lambda:InvokeFunction")
		before := s.queue.Requests(runnerName)
		stranded := s.startRun(ctx, "o-1002")
		s.mustCall(ctx, 200, "approve.json", map[string]string{"APPROVAL": approved.Approval.ID})
		approvedAt := time.Now()
		if s.queue.Requests(runnerName) != before+2 || len(s.queue.Take(runnerName)) != 0 {
			t.Fatal("the refused dispatches were not attempted exactly once each")
		}
		for _, id := range []string{stranded.ID, approved.ID} {
			if r := s.getRun(ctx, id); r.Status != "queued" {
				t.Fatalf("after a refused dispatch run %s is %s, want queued", id, r.Status)
			}
		}
		s.queue.Refuse(runnerName, "")
		if n := strings.Count(s.api.Logs(), `"msg":"dispatch failed; the sweeper will dispatch the run again"`); n != 2 {
			t.Errorf("%d refused dispatches in the API function's log, want 2", n)
		}

		// Wall-clock waits, bounded and short: the functions run on the real
		// clock in their own processes. Past the approval's deadline and the
		// dispatch grace (1s each), one sweep does all three jobs.
		wait := max(time.Until(expiring.Approval.ExpiresAt), time.Until(stranded.CreatedAt.Add(time.Second)), time.Until(approvedAt.Add(time.Second)))
		time.Sleep(wait + 100*time.Millisecond)
		var res struct{ Expired, Redispatched int }
		s.invokeJSON(ctx, s.sweeper, []byte(`{"source":"stead.sweeper"}`), &res)
		if res.Expired != 1 || res.Redispatched != 2 {
			t.Fatalf("sweep: %+v, want 1 expired and 2 redispatched", res)
		}
		expiring = s.getRun(ctx, expiring.ID)
		if expiring.Status != "failed" || expiring.Error == nil || expiring.Error.Code != "approval-expired" {
			t.Fatalf("the expired run is %s %+v, want failed approval-expired", expiring.Status, expiring.Error)
		}
		if types := s.eventTypes(ctx, expiring.ID); !slices.Contains(types, "approval.expired") || slices.Contains(types, "approval.denied") {
			t.Fatalf("expired trace %v: want approval.expired, never approval.denied", types)
		}
		s.drainRunner(ctx, stranded.ID, approved.ID)
		if r := s.getRun(ctx, stranded.ID); r.Status != "awaiting-approval" {
			t.Errorf("the re-dispatched new run is %s, want awaiting-approval", r.Status)
		}
		if r := s.getRun(ctx, approved.ID); r.Status != "succeeded" {
			t.Errorf("the re-dispatched approved run is %s (%+v), want succeeded", r.Status, r.Error)
		}
	})

	t.Run("hostile handler", func(t *testing.T) {
		s.t = t
		// A handler whose JSON.parse recurses natively until Go's stack
		// overflows — fatal to a Go process — runs in the runner's sandbox
		// worker: the invocation returns, the step is tried three times, then
		// the run fails sandbox-crashed; the next run is fine.
		hostile := append(slices.Clone(refunds.Handlers),
			[]byte("\nexport async function deepParse() { return JSON.parse(\"[\".repeat(3e6) + \"]\".repeat(3e6)); }\n")...)
		config := strings.Replace(string(refunds.Config), `"tool": "listOrders"`, `"tool": "deepParse"`, 1)
		config = strings.Replace(config, `"listOrders": {`, `"deepParse": { "effect": "read" }, "listOrders": {`, 1)
		if dep := s.deployBundle(ctx, hostile, []byte(config)); dep.Version != 3 {
			t.Fatalf("hostile deployment is version %d", dep.Version)
		}
		run := s.startRun(ctx, "o-1001")
		s.drainRunner(ctx, run.ID) // one invocation: the retries need no dispatch
		r := s.getRun(ctx, run.ID)
		if r.Status != "failed" || r.Error == nil || r.Error.Code != "sandbox-crashed" || r.Error.Step != "orders" {
			t.Fatalf("the hostile run is %s %+v, want failed sandbox-crashed at step orders", r.Status, r.Error)
		}
		if n := strings.Count(strings.Join(s.eventTypes(ctx, run.ID), ","), "step.retrying"); n != 2 {
			t.Errorf("%d step.retrying events, want 2", n)
		}
		if dep := s.deploy(ctx, refunds.Config); dep.Version != 4 {
			t.Fatalf("redeployment is version %d", dep.Version)
		}
		next := s.startRun(ctx, "o-1002")
		s.drainRunner(ctx, next.ID)
		if r := s.getRun(ctx, next.ID); r.Status != "awaiting-approval" {
			t.Errorf("the next run is %s (%+v), want awaiting-approval", r.Status, r.Error)
		}
		if strings.Contains(s.runner.Logs(), "panic") || strings.Contains(s.runner.Logs(), "fatal error") {
			t.Errorf("the runner's own process died or panicked:\n%s", s.runner.Logs())
		}
	})

	t.Run("bad input", func(t *testing.T) {
		s.t = t
		cases := []struct {
			fn       *rie.Instance
			file     string
			contains string
		}{
			{s.runner, "runner-not-json.txt", "not JSON"},
			{s.runner, "runner-wrong-field.json", `unknown field "runID"`},
			{s.runner, "runner-missing-runid.json", "runId is missing"},
			{s.runner, "runner-unknown-run.json", "nothing to execute for run run_01JDOESNOTEXIST000000000000"},
			{s.api, "api-payload-v1.json", `version is "1.0"`},
			{s.api, "api-runner-event.json", `version is ""`},
			{s.sweeper, "sweeper-string.json", "not a JSON object"},
		}
		for _, c := range cases {
			payload, err := os.ReadFile(filepath.Join(badEvents, c.file))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.fn.Invoke(ctx, payload)
			var fe *rie.FunctionError
			if !errors.As(err, &fe) {
				t.Errorf("%s: %v, want a function error", c.file, err)
				continue
			}
			if fe.Type != "EventError" || !strings.Contains(fe.Message, c.contains) {
				t.Errorf("%s: %s, want an EventError mentioning %q", c.file, fe, c.contains)
			}
		}
		// The functions survived every one of them.
		status, body := s.call(ctx, "unknown-route.json", nil)
		if status != 404 || !strings.Contains(string(body), `"not_found"`) {
			t.Errorf("unknown route: %d %s, want 404 not_found", status, body)
		}
		for _, fn := range []*rie.Instance{s.api, s.runner, s.sweeper} {
			if strings.Contains(fn.Logs(), "panic") {
				t.Errorf("a function panicked:\n%s", fn.Logs())
			}
		}
	})

	t.Run("mcp", func(t *testing.T) {
		s.t = t
		s.mcp(ctx, bins["api"], env)
	})

	t.Run("misconfigured function", func(t *testing.T) {
		broken := rie.Start(t, rie.Function{Name: "stead-e2e-broken", Bootstrap: bins["runner"], Env: aws})
		_, err := broken.Invoke(ctx, []byte(`{"runId":"run_x"}`))
		var fe *rie.FunctionError
		if !errors.As(err, &fe) || fe.Type != "ConfigError" || !strings.Contains(fe.Message, awsstack.EnvTable+" is not set") {
			t.Fatalf("invoking a runner without %s: %v, want a ConfigError naming it", awsstack.EnvTable, err)
		}
	})

	for _, fn := range []struct {
		name string
		inst *rie.Instance
	}{{"api", s.api}, {"runner", s.runner}, {"sweeper", s.sweeper}} {
		if d, ok := fn.inst.InitDuration(); ok {
			t.Logf("%s function: init (cold start) under the emulator %s", fn.name, d)
		}
	}
	t.Logf("end to end in %s", time.Since(start).Round(time.Millisecond))
	if os.Getenv("STEAD_E2E_LOGS") != "" {
		t.Logf("api function log:\n%s\nrunner function log:\n%s\nsweeper function log:\n%s", s.api.Logs(), s.runner.Logs(), s.sweeper.Logs())
	}
}

// bootstrap runs the admin command and returns the owner key.
func bootstrap(t *testing.T, bin string, env []string) string {
	t.Helper()
	cmd := exec.Command(bin, "bootstrap", "-name", "E2E project", "-json")
	cmd.Env = append(env, "HOME="+t.TempDir(), "PATH="+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("admin bootstrap: %v\n%s", err, stderr.String())
	}
	var res struct{ ProjectID, Name, OwnerKey string }
	if err := json.Unmarshal(out, &res); err != nil || !strings.HasPrefix(res.ProjectID, "prj_") || res.Name != "E2E project" || !strings.HasPrefix(res.OwnerKey, "stk_") {
		t.Fatalf("admin bootstrap printed %q (%v)", out, err)
	}
	return res.OwnerKey
}

// placeholder is ${NAME} in a golden event.
var placeholder = regexp.MustCompile(`\$\{([A-Z]+)\}`)

// call sends a golden API Gateway event, with vars filled in, through the
// API function and returns the HTTP status and body.
func (s *stack) call(ctx context.Context, file string, vars map[string]string) (int, []byte) {
	s.t.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenDir, file))
	if err != nil {
		s.t.Fatal(err)
	}
	vars = maps.Clone(vars)
	if vars == nil {
		vars = map[string]string{}
	}
	vars["KEY"] = s.key
	var pairs []string
	for _, m := range placeholder.FindAllStringSubmatch(string(raw), -1) {
		v, ok := vars[m[1]]
		if !ok {
			s.t.Fatalf("%s: no value for ${%s}", file, m[1])
		}
		quoted, _ := json.Marshal(v)
		pairs = append(pairs, m[0], string(quoted[1:len(quoted)-1]))
	}
	payload := []byte(strings.NewReplacer(pairs...).Replace(string(raw)))
	var res events.APIGatewayV2HTTPResponse
	s.invokeJSON(ctx, s.api, payload, &res)
	if ct := res.Headers["Content-Type"]; res.Body != "" && !strings.HasPrefix(ct, "application/json") {
		s.t.Fatalf("%s: Content-Type %q", file, ct)
	}
	return res.StatusCode, []byte(res.Body)
}

// mustCall is call that expects status and decodes nothing.
func (s *stack) mustCall(ctx context.Context, status int, file string, vars map[string]string) []byte {
	s.t.Helper()
	got, body := s.call(ctx, file, vars)
	if got != status {
		s.t.Fatalf("%s: status %d, want %d: %s", file, got, status, body)
	}
	return body
}

func (s *stack) invokeJSON(ctx context.Context, fn *rie.Instance, payload []byte, out any) {
	s.t.Helper()
	b, err := fn.Invoke(ctx, payload)
	if err != nil {
		s.t.Fatalf("invoke: %v", err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		s.t.Fatalf("decode %s: %v", b, err)
	}
}

func (s *stack) deploy(ctx context.Context, config []byte) wire.Deployment {
	s.t.Helper()
	return s.deployBundle(ctx, refunds.Handlers, config)
}

func (s *stack) deployBundle(ctx context.Context, bundle, config []byte) wire.Deployment {
	s.t.Helper()
	body, _ := json.Marshal(map[string]string{"bundle": string(bundle), "config": string(config)})
	var d wire.Deployment
	if err := json.Unmarshal(s.mustCall(ctx, 201, "deploy.json", map[string]string{"BODY": string(body)}), &d); err != nil {
		s.t.Fatal(err)
	}
	return d
}

func (s *stack) startRun(ctx context.Context, order string) wire.Run {
	s.t.Helper()
	status, body := s.call(ctx, "start-run.json", map[string]string{"ORDER": order})
	if status != 201 && status != 202 {
		s.t.Fatalf("start run: status %d: %s", status, body)
	}
	var r wire.Run
	if err := json.Unmarshal(body, &r); err != nil {
		s.t.Fatal(err)
	}
	return r
}

func (s *stack) getRun(ctx context.Context, id string) wire.Run {
	s.t.Helper()
	var r wire.Run
	if err := json.Unmarshal(s.mustCall(ctx, 200, "get-run.json", map[string]string{"RUN": id}), &r); err != nil {
		s.t.Fatal(err)
	}
	return r
}

func (s *stack) eventTypes(ctx context.Context, id string) []string {
	s.t.Helper()
	var page wire.EventList
	if err := json.Unmarshal(s.mustCall(ctx, 200, "run-events.json", map[string]string{"RUN": id}), &page); err != nil {
		s.t.Fatal(err)
	}
	var types []string
	for _, e := range page.Events {
		types = append(types, e.Type)
	}
	return types
}

// drainRunner replays the queued runner events, which must be one for each
// of ids (in any order), into the runner's emulator, one at a time.
func (s *stack) drainRunner(ctx context.Context, ids ...string) {
	s.t.Helper()
	evs := s.queue.Take(runnerName)
	var got, want []string
	for _, ev := range evs {
		got = append(got, string(ev))
	}
	for _, id := range ids {
		want = append(want, fmt.Sprintf(`{"runId":%q}`, id))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		s.t.Fatalf("queued runner events %q, want %q", got, want)
	}
	for _, ev := range evs {
		var res awsstack.RunnerResult
		s.invokeJSON(ctx, s.runner, ev, &res)
		if want := fmt.Sprintf(`{"runId":%q}`, res.RunID); want != string(ev) {
			s.t.Fatalf("runner answered %+v for %s", res, ev)
		}
	}
}

// duplicateDelivery invokes the runner again for run id, as an async retry
// or a duplicate delivery would, and checks that the run's version and
// trace did not change.
func (s *stack) duplicateDelivery(ctx context.Context, id string) {
	s.t.Helper()
	before := s.snapshot(ctx, id)
	var res awsstack.RunnerResult
	s.invokeJSON(ctx, s.runner, fmt.Appendf(nil, `{"runId":%q}`, id), &res)
	after := s.snapshot(ctx, id)
	if after.version != before.version || after.status != before.status || !slices.Equal(after.trace, before.trace) {
		s.t.Fatalf("a duplicate delivery changed the run: %+v → %+v", before, after)
	}
	if evs := s.queue.Take(runnerName); len(evs) != 0 {
		s.t.Fatalf("a duplicate delivery dispatched %q", evs)
	}
}

type snapshot struct {
	version int64
	status  store.RunStatus
	trace   []string
}

func (s *stack) snapshot(ctx context.Context, id string) snapshot {
	s.t.Helper()
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		s.t.Fatal(err)
	}
	evs, err := s.store.ListEvents(ctx, id, 0, 1000)
	if err != nil {
		s.t.Fatal(err)
	}
	snap := snapshot{version: r.Version, status: r.Status}
	for _, e := range evs {
		snap.trace = append(snap.trace, fmt.Sprintf("%d %s %s", e.Seq, e.Type, e.Data))
	}
	return snap
}
