package jsvm

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/dop251/goja"

	"stead/runtime/bundle"
)

const benchSource = `
export async function noop(input, context) {
  return { ok: true, n: input.n, run: context.run.id };
}
`

func benchBundle(b *testing.B, r *Runtime) *bundle.Bundle {
	b.Helper()
	c := bundle.NewCompiler(bundle.Options{Setup: r.Setup})
	bn, err := c.Load(context.Background(), "handlers.mjs", []byte(benchSource))
	if err != nil {
		b.Fatal(err)
	}
	return bn
}

func benchInvocation() Invocation {
	return Invocation{
		Export:         "noop",
		Input:          json.RawMessage(`{"n":42}`),
		RunID:          "run_01",
		StepID:         "lookup",
		StepIndex:      2,
		EndUserID:      "user_7",
		IdempotencyKey: "idem_run_01_lookup",
		Broker:         &MemoryBroker{},
		BrokerToken:    "brk_secret_token_value",
		Secrets:        []string{"another-secret"},
	}
}

// warmInvoker returns a function doing one warm jsvm invocation.
func warmInvoker(b *testing.B) (func(), func()) {
	r := New(Options{})
	bn := benchBundle(b, r)
	inv := benchInvocation()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	one := func() {
		if _, err := r.Invoke(ctx, bn, inv); err != nil {
			b.Fatal(err)
		}
	}
	one() // warm the pool
	return one, func() { cancel(); r.Close() }
}

// bareInvoker returns a function calling the same handler on a bare goja
// runtime: prebuilt arguments, no limits, no JSON, no context object.
func bareInvoker(b *testing.B) func() {
	r := New(Options{})
	bn := benchBundle(b, r)
	r.Close()
	vm := goja.New()
	exports, err := bundle.Instantiate(vm, bn)
	if err != nil {
		b.Fatal(err)
	}
	fn, _ := goja.AssertFunction(exports.Get("noop"))
	input, _ := vm.RunString(`({n: 42})`)
	cx, _ := vm.RunString(`({run: {id: "run_01"}})`)
	return func() {
		ret, err := fn(goja.Undefined(), input, cx)
		if err != nil {
			b.Fatal(err)
		}
		if p := ret.Export().(*goja.Promise); p.State() != goja.PromiseStateFulfilled {
			b.Fatal("not fulfilled")
		}
	}
}

// BenchmarkInvokeInProcess is a trivial async handler through
// Runtime.Invoke with a full context (broker, token, ids) on a warm VM in
// this process (a sandbox worker's side of a call; the call through the
// sandbox is package sandbox's BenchmarkInvokeWarm).
func BenchmarkInvokeInProcess(b *testing.B) {
	one, done := warmInvoker(b)
	defer done()
	b.ReportAllocs()
	for b.Loop() {
		one()
	}
}

// BenchmarkGojaBare is the same handler called directly on a bare goja
// runtime: the floor jsvm is measured against.
func BenchmarkGojaBare(b *testing.B) {
	one := bareInvoker(b)
	b.ReportAllocs()
	for b.Loop() {
		one()
	}
}

// BenchmarkInvokeRatio measures both in one run, interleaved in small
// batches (alternating which goes first) so that machine noise and garbage
// collection hit both alike, and reports the median batch of each as
// ns/invoke and ns/bare, and their ratio.
func BenchmarkInvokeRatio(b *testing.B) {
	warm, done := warmInvoker(b)
	defer done()
	bare := bareInvoker(b)
	const batch = 32
	var warmNs, bareNs []float64
	timeBatch := func(f func()) float64 {
		start := time.Now()
		for range batch {
			f()
		}
		return float64(time.Since(start).Nanoseconds()) / batch
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			warmNs = append(warmNs, timeBatch(warm))
			bareNs = append(bareNs, timeBatch(bare))
		} else {
			bareNs = append(bareNs, timeBatch(bare))
			warmNs = append(warmNs, timeBatch(warm))
		}
		i++
	}
	w, bb := median(warmNs), median(bareNs)
	b.ReportMetric(w, "ns/invoke")
	b.ReportMetric(bb, "ns/bare")
	b.ReportMetric(w/bb, "ratio")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
