package awsstack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"stead/runtime/engine"
)

var _ engine.Dispatcher = (*Dispatcher)(nil)

// Invoker is the part of the Lambda client a Dispatcher uses.
type Invoker interface {
	Invoke(ctx context.Context, in *awslambda.InvokeInput, optFns ...func(*awslambda.Options)) (*awslambda.InvokeOutput, error)
}

// Dispatcher hands runs to the runner function with an asynchronous Invoke
// (InvocationType Event) of RunnerEvent{RunID}. Lambda queues the event
// and retries a failed execution (the template allows two retries, then
// the on-failure queue). Delivery is at least once; the runner's claim is
// a conditional write, so a duplicate is harmless. A refused Invoke is
// logged and returned: the run stays queued and the sweeper dispatches it
// again once the engine's dispatch grace has passed.
type Dispatcher struct {
	client   Invoker
	function string
	log      *slog.Logger
}

// NewDispatcher returns a Dispatcher that invokes function (a name or
// ARN) through client.
func NewDispatcher(client Invoker, function string, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{client: client, function: function, log: log}
}

// Dispatch queues one execution of the run.
func (d *Dispatcher) Dispatch(ctx context.Context, runID string) error {
	payload, err := json.Marshal(RunnerEvent{RunID: runID})
	if err != nil {
		return fmt.Errorf("dispatch run %s: %w", runID, err)
	}
	out, err := d.client.Invoke(ctx, &awslambda.InvokeInput{
		FunctionName:   aws.String(d.function),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	})
	if err == nil && out.StatusCode != http.StatusAccepted {
		err = fmt.Errorf("lambda answered status %d, not 202 Accepted", out.StatusCode)
	}
	if err != nil {
		err = fmt.Errorf("dispatch run %s to function %s: %w", runID, d.function, err)
		d.log.ErrorContext(ctx, "dispatch failed; the sweeper will dispatch the run again", "run", runID, "runner", d.function, "error", err)
		return err
	}
	return nil
}
