package jsvm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"stead/runtime/bundle"
	"stead/runtime/jsvm"
)

func ExampleRuntime_Invoke() {
	rt := jsvm.New(jsvm.Options{})
	defer rt.Close()
	compiler := rt.Compiler(bundle.Options{})
	b, err := compiler.Load(context.Background(), "handlers.mjs", []byte(`
export async function refundOrder(input, context) {
  const order = await context.broker.get("orders", input.id);
  await context.broker.put("orders", input.id, { ...order, amount: 0 });
  context.recordCost({ tokensInput: 12, tokensOutput: 3, costUsd: 0.0004 });
  console.log("refunded", input.id, "with key", context.idempotencyKey);
  return { refunded: order.amount };
}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	broker := &jsvm.MemoryBroker{}
	_ = broker.Put(context.Background(), "orders", "o1", json.RawMessage(`{"amount":25}`))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := rt.Invoke(ctx, b, jsvm.Invocation{
		Export:         "refundOrder",
		Input:          json.RawMessage(`{"id":"o1"}`),
		RunID:          "run_1",
		StepID:         "refund",
		IdempotencyKey: "idem_run_1_refund",
		Broker:         broker,
		BrokerToken:    "brk_secret",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	stored, _, _ := broker.Get(ctx, "orders", "o1")
	fmt.Println(string(res.Output))
	fmt.Println(res.Logs[0].Level, res.Logs[0].Message)
	fmt.Printf("%+v\n", res.Cost)
	fmt.Println(string(stored))
	// Output:
	// {"refunded":25}
	// log refunded o1 with key idem_run_1_refund
	// {TokensInput:12 TokensOutput:3 CostUSD:0.0004}
	// {"amount":0}
}
