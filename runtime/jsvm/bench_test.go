package jsvm

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	c := r.Compiler(bundle.Options{})
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

// BenchmarkInvokeRatio measures both in one run, interleaved (see
// interleaved), and reports the median batch of each as ns/invoke and
// ns/bare, and their ratio.
func BenchmarkInvokeRatio(b *testing.B) {
	warm, done := warmInvoker(b)
	defer done()
	bare := bareInvoker(b)
	m := interleaved(b, 32, warm, bare)
	b.ReportMetric(m[0], "ns/invoke")
	b.ReportMetric(m[1], "ns/bare")
	b.ReportMetric(m[0]/m[1], "ratio")
}

// interleaved runs each of fs in batches of batch calls, in turn (rotating
// which goes first) so that machine noise and garbage collection hit all
// alike, and returns the median batch of each in ns per call.
func interleaved(b *testing.B, batch int, fs ...func()) []float64 {
	ns := make([][]float64, len(fs))
	for i := 0; b.Loop(); i++ {
		for j := range fs {
			k := (i + j) % len(fs)
			start := time.Now()
			for range batch {
				fs[k]()
			}
			ns[k] = append(ns[k], float64(time.Since(start).Nanoseconds())/float64(batch))
		}
	}
	m := make([]float64, len(fs))
	for i := range ns {
		m[i] = median(ns[i])
	}
	return m
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchInput returns a step input of about size bytes: an order with a
// customer and as many line items as fit, the shape a handler typically
// receives.
func benchInput(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"customer":{"id":"cus_01J9Z3","name":"Zoë Müller","email":"zoe@example.com","vip":true},"items":[`)
	for i := 0; b.Len() < size-40; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%05d","qty":%d,"price":%d.95,"tags":["a","b"]}`, i, i%7+1, i%90+10)
	}
	b.WriteString(`],"note":"leave at the door","total":123.45}`)
	return []byte(b.String())
}

// BenchmarkInputToVM builds a handler's input in the VM the way a call
// does (decodeInput) and with goja's JSON.parse alone, the reference, at
// about 200 B, 1 KB and 64 KB, interleaved, and reports the median of each
// as ns/decodeInput and ns/JSON.parse, how many times faster the first is
// (x-faster), and the allocations of one call of each.
func BenchmarkInputToVM(b *testing.B) {
	r := newRuntime(b, Options{})
	w, err := r.install(bundle.NewRuntime())
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{200, 1 << 10, 64 << 10} {
		in := benchInput(size)
		b.Run(fmt.Sprintf("%dB", len(in)), func(b *testing.B) {
			run := func(decode func() (goja.Value, error)) func() {
				return func() {
					if _, err := decode(); err != nil {
						b.Fatal(err)
					}
				}
			}
			batch := max(1, 8<<10/len(in))
			decode := run(func() (goja.Value, error) { return w.decodeInput(in) })
			parse := run(func() (goja.Value, error) { return w.parse(goja.Undefined(), w.vm.ToValue(string(in))) })
			m := interleaved(b, batch, decode, parse)
			b.ReportMetric(m[0], "ns/decodeInput")
			b.ReportMetric(m[1], "ns/JSON.parse")
			b.ReportMetric(m[1]/m[0], "x-faster")
			b.ReportMetric(testing.AllocsPerRun(10, decode), "allocs/decodeInput")
			b.ReportMetric(testing.AllocsPerRun(10, parse), "allocs/JSON.parse")
		})
	}
}
