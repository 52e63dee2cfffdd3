package awsstack_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"stead/functions/awsstack"
	"stead/infra/moto"
	"stead/infra/rie"
	"stead/notify"
	"stead/store"
	"stead/store/dynamostore"
)

// fakeAWS answers just enough of DynamoDB (GetItem: no item), S3 (no such
// key) and Lambda (202 Accepted) to see which service each request was for.
type fakeAWS struct {
	mu   sync.Mutex
	seen []string
}

func (f *fakeAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	var what string
	switch {
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_"):
		what = "dynamodb " + r.Header.Get("X-Amz-Target")
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{}`)
	case strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/"):
		what = "lambda " + r.Method + " " + r.URL.Path + " " + r.Header.Get("X-Amz-Invocation-Type")
		w.WriteHeader(http.StatusAccepted)
	default:
		what = "s3 " + r.Method + " " + r.URL.Path
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>`)
	}
	f.mu.Lock()
	f.seen = append(f.seen, what)
	f.mu.Unlock()
}

func (f *fakeAWS) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.seen
	f.seen = nil
	return s
}

const digest = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

// The SDK honours the endpoint overrides by itself (the same binary runs
// against emulators under RIE): AWS_ENDPOINT_URL_<SERVICE>, and
// AWS_ENDPOINT_URL for every service.
func TestOpenHonoursEndpointVariables(t *testing.T) {
	// t.Setenv: not parallel.
	for _, perService := range []bool{true, false} {
		fake := &fakeAWS{}
		srv := httptest.NewServer(fake)
		t.Cleanup(srv.Close)
		for k, v := range map[string]string{
			"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "",
			"AWS_PROFILE": "", "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
			"AWS_EC2_METADATA_DISABLED": "true",
			"AWS_ENDPOINT_URL":          "", "AWS_ENDPOINT_URL_DYNAMODB": "", "AWS_ENDPOINT_URL_S3": "", "AWS_ENDPOINT_URL_LAMBDA": "",
		} {
			t.Setenv(k, v)
		}
		if perService {
			t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1") // overridden by each service's own
			t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", srv.URL)
			t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
			t.Setenv("AWS_ENDPOINT_URL_LAMBDA", srv.URL)
		} else {
			t.Setenv("AWS_ENDPOINT_URL", srv.URL)
		}
		cfg, err := awsstack.FromEnv(awsstack.APIFunction, env(map[string]string{
			"AWS_REGION": "us-east-1", awsstack.EnvTable: "tbl", awsstack.EnvBucket: "bkt",
			awsstack.EnvRunnerFunction: "stead-runner", awsstack.EnvS3PathStyle: "true",
		}))
		if err != nil {
			t.Fatal(err)
		}
		st, err := awsstack.Open(t.Context(), cfg, awsstack.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		if st.API == nil || st.Handler() == nil {
			t.Fatal("the api function's stack has no API")
		}

		if _, err := st.Store.GetRun(t.Context(), "run_1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetRun through the fake: %v", err)
		}
		if _, err := st.Bundles.Get(t.Context(), digest); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("bundle Get through the fake: %v", err)
		}
		if err := st.Dispatch.Dispatch(t.Context(), "run_1"); err != nil {
			t.Errorf("Dispatch through the fake: %v", err)
		}
		want := []string{
			"dynamodb DynamoDB_20120810.GetItem",
			"s3 GET /bkt/bundles/" + digest,
			"lambda POST /2015-03-31/functions/stead-runner/invocations Event",
		}
		if got := fake.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("per-service variables %v: requests\n%s\nwant\n%s", perService, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestRunnerStackDoesNotDispatch(t *testing.T) {
	t.Parallel()
	cfg, err := awsstack.FromEnv(awsstack.RunnerFunction, env(map[string]string{"AWS_REGION": "us-east-1", awsstack.EnvTable: "t", awsstack.EnvBucket: "b"}))
	if err != nil {
		t.Fatal(err)
	}
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	st, err := awsstack.Open(t.Context(), cfg, awsstack.Options{AWS: &awsCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.API != nil {
		t.Error("the runner's stack serves the API")
	}
	if err := st.Dispatch.Dispatch(t.Context(), "run_1"); err == nil || !strings.Contains(err.Error(), "does not dispatch") {
		t.Errorf("runner dispatch: %v", err)
	}
	if _, ok := st.Handler().(*awsstack.RunnerHandler); !ok {
		t.Errorf("runner handler is %T", st.Handler())
	}
}

// The dispatcher against the stand-in for Lambda's Invoke API: an async
// invocation of {"runId"}, and a refusal that is returned and logged (the
// run stays queued; the sweeper dispatches it again).
func TestDispatcher(t *testing.T) {
	t.Parallel()
	q := rie.StartQueue(t)
	client := awslambda.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("a", "b", ""),
		BaseEndpoint: aws.String(q.URL),
	})
	var logs bytes.Buffer
	d := awsstack.NewDispatcher(client, "stead-runner", slog.New(slog.NewJSONHandler(&logs, nil)))
	ctx := context.Background()

	if err := d.Dispatch(ctx, "run_01"); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(ctx, "run_01"); err != nil { // a duplicate is just another event
		t.Fatal(err)
	}
	if got := q.Take("stead-runner"); len(got) != 2 || string(got[0]) != `{"runId":"run_01"}` {
		t.Fatalf("queued %q", got)
	}

	q.Refuse("stead-runner", "not authorized to perform: lambda:InvokeFunction")
	err := d.Dispatch(ctx, "run_02")
	if err == nil || !strings.Contains(err.Error(), "dispatch run run_02 to function stead-runner") || !strings.Contains(err.Error(), "AccessDeniedException") {
		t.Fatalf("refused dispatch: %v", err)
	}
	if n := q.Requests("stead-runner"); n != 3 {
		t.Errorf("%d Invoke requests, want 3 (a refusal is not retried)", n)
	}
	if len(q.Take("stead-runner")) != 0 {
		t.Error("a refused event was queued")
	}
	if !strings.Contains(logs.String(), `"level":"ERROR","msg":"dispatch failed; the sweeper will dispatch the run again","run":"run_02"`) {
		t.Errorf("the refusal is not logged: %s", logs.String())
	}
}

// answering is an Invoker that answers every Invoke with status.
type answering struct{ status int32 }

func (a answering) Invoke(context.Context, *awslambda.InvokeInput, ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error) {
	return &awslambda.InvokeOutput{StatusCode: a.status}, nil
}

// An asynchronous Invoke is queued only when Lambda answers 202 Accepted:
// any other status (a 200 is a synchronous invocation's) is a failed
// dispatch, returned and logged, so the sweeper dispatches the run again.
func TestDispatcherWantsAccepted(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	d := awsstack.NewDispatcher(answering{http.StatusOK}, "stead-runner", slog.New(slog.NewJSONHandler(&logs, nil)))
	err := d.Dispatch(context.Background(), "run_03")
	if err == nil || !strings.Contains(err.Error(), "lambda answered status 200, not 202 Accepted") {
		t.Errorf("dispatch answered 200: %v", err)
	}
	if !strings.Contains(logs.String(), `"msg":"dispatch failed; the sweeper will dispatch the run again","run":"run_03"`) {
		t.Errorf("the failed dispatch is not logged: %s", logs.String())
	}
	if err := awsstack.NewDispatcher(answering{http.StatusAccepted}, "stead-runner", nil).Dispatch(context.Background(), "run_04"); err != nil {
		t.Errorf("dispatch answered 202: %v", err)
	}
}

// Every function's notifier sends through the owner's egress policy, from
// the same variable as handlers' fetch: a receiver on loopback is refused
// until STEAD_EGRESS_ALLOW admits it. The API function's ping shows it.
func TestNotificationsDialThroughEgressPolicy(t *testing.T) {
	t.Parallel()
	srv := moto.Start(t)
	ctx := t.Context()
	db, err := dynamostore.New(srv.DynamoDB(), dynamostore.Options{Table: "stead-egress"})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTable(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var received []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Get("webhook-id"))
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	secret, err := notify.NewSecret(strings.NewReader(strings.Repeat("k", 24)))
	if err != nil {
		t.Fatal(err)
	}
	ep := store.Endpoint{ID: "whe_1", ProjectID: "prj_1", URL: receiver.URL, Secrets: []store.EndpointSecret{{Secret: secret}}, Version: 1}
	if err := db.CreateEndpoint(ctx, ep); err != nil {
		t.Fatal(err)
	}
	awsCfg := srv.Config()
	awsCfg.BaseEndpoint = aws.String(srv.URL)
	for i, allow := range []string{"", "127.0.0.0/8"} {
		cfg, err := awsstack.FromEnv(awsstack.APIFunction, env(map[string]string{
			"AWS_REGION": moto.Region, awsstack.EnvTable: "stead-egress", awsstack.EnvBucket: "b",
			awsstack.EnvRunnerFunction: "stead-runner", awsstack.EnvEgressAllow: allow,
		}))
		if err != nil {
			t.Fatal(err)
		}
		st, err := awsstack.Open(ctx, cfg, awsstack.Options{AWS: &awsCfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		d, err := st.Notifications.Ping(ctx, ep, fmt.Sprintf("msg_%d", i))
		if err != nil {
			t.Fatal(err)
		}
		a := d.Attempts[len(d.Attempts)-1]
		switch allow {
		case "":
			if d.Status != store.DeliveryFailed || !strings.Contains(a.Error, "is refused: it is a loopback address") {
				t.Errorf("ping to loopback without %s: %s %+v, want failed, refused by the egress policy", awsstack.EnvEgressAllow, d.Status, a)
			}
		default:
			if d.Status != store.DeliveryDelivered || a.Status != http.StatusOK {
				t.Errorf("ping to loopback with %s=%s: %s %+v, want delivered", awsstack.EnvEgressAllow, allow, d.Status, a)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(received, []string{"msg_1"}) {
		t.Errorf("the receiver saw %q, want only the allowed ping msg_1", received)
	}
}
