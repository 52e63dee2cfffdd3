package rie_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"stead/infra/rie"
)

type answer struct {
	Event    json.RawMessage `json:"event"`
	Function string          `json:"function"`
	Secret   string          `json:"secret"`
	Pid      int             `json:"pid"`
}

func TestRIE(t *testing.T) {
	t.Setenv("RIE_TEST_SECRET", "from the test process") // must not leak into the function
	bins := rie.BuildFunctions(t, "./infra/rie/testdata/echo")
	fn := rie.Start(t, rie.Function{Name: "echo-fn", Bootstrap: bins["echo"], Env: []string{"AWS_REGION=us-east-1"}})
	ctx := context.Background()

	out, err := fn.Invoke(ctx, []byte(`{"hello":"world"}`))
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if string(a.Event) != `{"hello":"world"}` || a.Function != "echo-fn" || a.Secret != "" {
		t.Fatalf("answer %+v (the function must see only the environment it was given)", a)
	}
	if d, ok := fn.InitDuration(); !ok || d <= 0 {
		t.Errorf("init duration %s %v", d, ok)
	}

	// A handler error is a *FunctionError read from the 200 answer's body.
	_, err = fn.Invoke(ctx, []byte(`"fail"`))
	var fe *rie.FunctionError
	if !errors.As(err, &fe) || fe.Type != "errorString" || fe.Message != "asked to fail" {
		t.Fatalf("failing handler: %v", err)
	}

	// A process that dies is a Runtime.ExitError, and the next invocation
	// starts a new one.
	_, err = fn.Invoke(ctx, []byte(`"exit"`))
	if !errors.As(err, &fe) || fe.Type != "Runtime.ExitError" || !strings.Contains(fe.Message, "exit status 3") {
		t.Fatalf("exiting process: %v", err)
	}
	out, err = fn.Invoke(ctx, []byte(`{}`))
	if err != nil {
		t.Fatalf("after a crash: %v", err)
	}
	if err := json.Unmarshal(out, &a); err != nil {
		t.Fatalf("after a crash: %s %v", out, err)
	}

	// Invocations from many goroutines are passed one at a time (the
	// emulator would crash on concurrent ones).
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := fn.Invoke(ctx, []byte(`{"n":`+string(rune('0'+i))+`}`))
			if err == nil && !strings.Contains(string(b), `"n":`) {
				err = errors.New(string(b))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent invoke: %v", err)
		}
	}

	// Stop ends the emulator and the function's process with it.
	fn.Stop()
	if err := syscall.Kill(a.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the function's process %d is still there after Stop: %v", a.Pid, err)
	}
	if _, err := fn.Invoke(ctx, []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "has exited") {
		t.Errorf("invoke after Stop: %v", err)
	}
}

func TestQueue(t *testing.T) {
	t.Parallel()
	q := rie.StartQueue(t)
	client := awslambda.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("a", "b", ""),
		BaseEndpoint: aws.String(q.URL),
	})
	ctx := context.Background()
	out, err := client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String("fn"), InvocationType: types.InvocationTypeEvent, Payload: []byte(`{"a":1}`)})
	if err != nil || out.StatusCode != 202 {
		t.Fatalf("async invoke: %+v %v", out, err)
	}
	if _, err := client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String("fn"), Payload: []byte(`{}`)}); err == nil {
		t.Error("a synchronous invoke was accepted")
	}
	if _, err := client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String("fn"), InvocationType: types.InvocationTypeEvent, Payload: []byte(`nope`)}); err == nil {
		t.Error("a non-JSON payload was accepted")
	}
	q.Refuse("fn", "denied")
	_, err = client.Invoke(ctx, &awslambda.InvokeInput{FunctionName: aws.String("fn"), InvocationType: types.InvocationTypeEvent, Payload: []byte(`{}`)})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" || !strings.Contains(api.ErrorMessage(), "denied") {
		t.Errorf("refused invoke: %v", err)
	}
	q.Refuse("fn", "")
	if got := q.Take("fn"); len(got) != 1 || string(got[0]) != `{"a":1}` {
		t.Errorf("queued %q", got)
	}
	if got := q.Take("fn"); len(got) != 0 {
		t.Errorf("Take did not empty the queue: %q", got)
	}
	if n := q.Requests("fn"); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
}
