package jsvm

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"

	"github.com/dop251/goja"
	"github.com/dop251/goja_nodejs/url"

	"stead/runtime/bundle"
)

//go:embed prelude.js
var preludeSource string

// prelude is compiled once and shared by every VM.
var prelude = sync.OnceValues(func() (*goja.Program, error) {
	return goja.Compile("stead:prelude", preludeSource, true)
})

// worker is one warm VM for one tenant's bundle, with the host state its
// globals close over. It is used by one invocation at a time, on that
// invocation's goroutine.
type worker struct {
	rt *Runtime
	// pool is the key of the pool the worker belongs to (poolKey).
	pool   string
	vm     *goja.Runtime
	loop   *loop
	watch  watch
	cur    *call // the running invocation; nil between invocations
	broken bool  // retire instead of returning to the pool

	exports *goja.Object
	fns     map[string]goja.Callable

	parse, stringify goja.Callable
	describeError    goja.Callable
	brokerItems      goja.Callable
	makeError        goja.Callable
	rangeError       *goja.Object // the original RangeError constructor
}

// install prepares vm for handler code: host globals, size-checked
// built-ins, cached helpers.
func (r *Runtime) install(vm *goja.Runtime) (*worker, error) {
	w := &worker{rt: r, vm: vm, loop: newLoop(), fns: make(map[string]goja.Callable)}
	w.watch.vm = vm
	prog, err := prelude()
	if err != nil {
		return nil, fmt.Errorf("compile prelude: %w", err)
	}
	host := vm.NewObject()
	urlModule := vm.NewObject()
	urlExports := vm.NewObject()
	_ = urlModule.Set("exports", urlExports)
	url.Require(vm, urlModule)
	set := func(name string, v any) {
		if err == nil {
			err = host.Set(name, v)
		}
	}
	set("URL", urlExports.Get("URL"))
	set("URLSearchParams", urlExports.Get("URLSearchParams"))
	set("log", w.fn("log", 2, w.hostLog))
	set("logFull", w.fn("logFull", 0, w.hostLogFull))
	set("uncaught", w.fn("uncaught", 2, w.hostUncaught))
	set("setTimeout", w.fn("setTimeout", 2, w.setTimeout))
	set("clearTimeout", w.fn("clearTimeout", 1, w.clearTimeout))
	set("utf8Encode", w.fn("utf8Encode", 1, w.utf8Encode))
	set("utf8Decode", w.fn("utf8Decode", 3, w.utf8Decode))
	set("atob", w.fn("atob", 1, w.atob))
	set("btoa", w.fn("btoa", 1, w.btoa))
	set("randomUUID", w.fn("randomUUID", 0, w.randomUUID))
	set("getRandomValues", w.fn("getRandomValues", 1, w.getRandomValues))
	set("fetch", w.fn("fetch", 4, w.hostFetch))
	if err != nil {
		return nil, err
	}
	f, err := vm.RunProgram(prog)
	if err != nil {
		return nil, fmt.Errorf("run prelude: %w", err)
	}
	init, ok := goja.AssertFunction(f)
	if !ok {
		return nil, errors.New("prelude is not a function")
	}
	ret, err := init(goja.Undefined(), host)
	if err != nil {
		return nil, fmt.Errorf("run prelude: %w", err)
	}
	api := ret.ToObject(vm)
	for name, dst := range map[string]*goja.Callable{
		"parse": &w.parse, "stringify": &w.stringify,
		"describeError": &w.describeError, "brokerItems": &w.brokerItems, "makeError": &w.makeError,
	} {
		if *dst, ok = goja.AssertFunction(api.Get(name)); !ok {
			return nil, fmt.Errorf("prelude has no function %s", name)
		}
	}
	if err := w.guardBuiltins(); err != nil {
		return nil, fmt.Errorf("guard built-ins: %w", err)
	}
	return w, nil
}

// fn wraps a Go function as a JS function named name. (goja would name it
// after its Go symbol, which handler code must never see.)
func (w *worker) fn(name string, length int, f func(goja.FunctionCall) goja.Value) goja.Value {
	o := w.vm.ToValue(f).(*goja.Object)
	_ = o.DefineDataProperty("name", w.vm.ToValue(name), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	_ = o.DefineDataProperty("length", w.vm.ToValue(length), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	return o
}

// throwType throws a JS TypeError.
func (w *worker) throwType(format string, args ...any) {
	panic(w.vm.NewTypeError(fmt.Sprintf(format, args...)))
}

// active returns the running invocation, or throws when what is used
// outside one (on the compiler's throwaway VM, or by top-level code).
func (w *worker) active(what string) *call {
	c := w.cur
	if c == nil || c.loading {
		w.throwType("%s is only available while a handler runs, not in the bundle's top-level code", what)
	}
	return c
}

// bound checks that a context function is called during its own
// invocation.
func (w *worker) bound(c *call, what string) {
	if w.cur != c {
		w.throwType("%s: this context belongs to an invocation that has ended", what)
	}
}

// invoke runs one invocation on w. It returns the result as JSON or an
// *Error; it marks w broken whenever the VM must not be reused.
func (w *worker) invoke(ctx context.Context, c *call, b *bundle.Bundle, name string, input []byte) (out []byte, e *Error) {
	w.cur = c
	w.rt.wd.add(&w.watch, ctx)
	defer func() {
		if r := recover(); r != nil {
			w.broken = true
			e = &Error{Code: CodeInternal, Message: fmt.Sprintf("internal error in a host function: %v", r)}
			out = nil
		}
		memory, shared, deadline := w.rt.wd.remove(&w.watch)
		if deadline {
			w.broken = true // the interrupt may be pending
		}
		if memory {
			w.broken = true
			if e == nil || e.Code != CodeMemory {
				e, out = w.memoryError(), nil
			}
			if shared && c.memBreach == "" {
				e = w.sharedMemoryError()
			}
		}
		if c.memBreach != "" {
			w.broken = true
		}
		c.end()
		w.loop.reset()
		w.cur = nil
	}()
	out, err := w.call(ctx, b, name, input)
	if err != nil {
		return nil, w.classify(err)
	}
	return out, nil
}

func (w *worker) call(ctx context.Context, b *bundle.Bundle, name string, input []byte) ([]byte, error) {
	vm, c := w.vm, w.cur
	if w.exports == nil {
		c.loading = true
		exports, err := bundle.Instantiate(vm, b)
		c.loading = false
		if err != nil {
			w.broken = true
			var ex *goja.Exception
			if errors.As(err, &ex) && !uncatchable(err) {
				return nil, w.thrown(ex.Value(), "the bundle's top-level code failed: ")
			}
			return nil, err
		}
		w.exports = exports
	}
	fn, ok := w.fns[name]
	if !ok {
		if fn, ok = goja.AssertFunction(w.exports.Get(name)); !ok {
			return nil, &Error{Code: CodeNotFunction, Message: fmt.Sprintf("export %q of %s is no longer a function", name, b.Name)}
		}
		w.fns[name] = fn
	}
	arg := goja.Undefined()
	if len(input) > 0 {
		v, err := w.decodeInput(input)
		if err != nil {
			if uncatchable(err) {
				return nil, err
			}
			return nil, &Error{Code: CodeInvalidInput, Message: "input is not valid JSON: " + err.Error()}
		}
		arg = v
	}
	ret, err := fn(goja.Undefined(), arg, w.newContext(c))
	if err != nil {
		return nil, err
	}
	if c.uncaught != nil {
		return nil, c.uncaught
	}
	if o, ok := ret.(*goja.Object); ok && o.ExportType() == promiseType {
		if p, ok := o.Export().(*goja.Promise); ok {
			if err := w.run(ctx, p); err != nil {
				return nil, err
			}
			switch p.State() {
			case goja.PromiseStateRejected:
				return nil, w.thrown(p.Result(), "")
			case goja.PromiseStateFulfilled:
				ret = p.Result()
			}
		}
	}
	if c.uncaught != nil {
		return nil, c.uncaught
	}
	return w.serialize(ret)
}

var promiseType = reflect.TypeFor[*goja.Promise]()

// serialize turns the handler's result into JSON inside the VM with goja's
// JSON.stringify: the captured original for primitives, and for objects the
// same algorithm through Object.MarshalJSON, which skips a call and a copy.
func (w *worker) serialize(v goja.Value) ([]byte, error) {
	if why := notJSON(v); why != "" {
		return nil, &Error{Code: CodeNotSerializable, Message: "the handler's result is not JSON-serializable: it " + why +
			"; return an object, array, string, number, boolean or null"}
	}
	var out []byte
	var err error
	if o, ok := v.(*goja.Object); ok {
		out, err = marshalObject(o)
	} else {
		var s goja.Value
		if s, err = w.stringify(goja.Undefined(), v); err == nil && !goja.IsUndefined(s) {
			out = []byte(s.String())
		}
	}
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) && !uncatchable(err) {
			te := w.thrown(ex.Value(), "")
			return nil, &Error{Code: CodeNotSerializable, Name: te.Name,
				Message: "the handler's result is not JSON-serializable: " + explainStringify(te.Message)}
		}
		return nil, err
	}
	if out == nil { // (an object whose toJSON returns undefined comes out as null)
		return nil, &Error{Code: CodeNotSerializable, Message: "the handler's result is not JSON-serializable"}
	}
	if len(out) > w.rt.opts.MaxResultSize {
		return nil, &Error{Code: CodeResultTooLarge, Message: fmt.Sprintf(
			"the handler's result is %s as JSON, over the %s limit; return less data (store bulk data with context.broker)",
			bundle.FormatSize(int64(len(out))), bundle.FormatSize(int64(w.rt.opts.MaxResultSize)))}
	}
	return out, nil
}

// marshalObject runs JSON.stringify's algorithm on o. goja lets an
// interrupt or a stack overflow raised by a toJSON method escape
// MarshalJSON as a panic: it is returned as the error it is.
func marshalObject(o *goja.Object) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			switch e := r.(type) {
			case *goja.InterruptedError:
				err = e
			case *goja.StackOverflowError:
				err = e
			default:
				panic(r)
			}
		}
	}()
	return o.MarshalJSON()
}

// notJSON says why a top-level value has no JSON form, or "".
func notJSON(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) {
		return "is undefined (did the handler forget to return?)"
	}
	if _, ok := v.(*goja.Symbol); ok {
		return "is a symbol"
	}
	if _, ok := goja.AssertFunction(v); ok {
		return "is a function"
	}
	return ""
}

func explainStringify(msg string) string {
	switch {
	case strings.Contains(strings.ToLower(msg), "circular"):
		return "it contains a cycle (" + msg + ")"
	case strings.Contains(msg, "BigInt"):
		return "it contains a BigInt (" + msg + "); convert it to a string or number"
	}
	return msg
}

// uncatchable reports whether err is a goja error JS cannot catch.
func uncatchable(err error) bool {
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	return errors.As(err, &ie) || errors.As(err, &so)
}

// uncaught turns an error a timer or microtask callback threw into the
// invocation's failure; uncatchable errors pass through.
func (w *worker) uncaught(err error, where string) error {
	var ex *goja.Exception
	if errors.As(err, &ex) && !uncatchable(err) {
		return w.thrown(ex.Value(), "uncaught error in "+where+": ")
	}
	return err
}

func (w *worker) hostUncaught(call goja.FunctionCall) goja.Value {
	c := w.cur
	if c == nil || c.uncaught != nil {
		return goja.Undefined()
	}
	c.uncaught = w.thrown(call.Argument(0), "uncaught error in "+call.Argument(1).String()+": ")
	return goja.Undefined()
}

func (w *worker) hostLog(call goja.FunctionCall) goja.Value {
	if c := w.cur; c != nil {
		c.log(call.Argument(0).String(), call.Argument(1).String())
	}
	return goja.Undefined()
}

func (w *worker) hostLogFull(goja.FunctionCall) goja.Value {
	c := w.cur
	return w.vm.ToValue(c == nil || c.logFull())
}

// recordCost implements context.recordCost({tokensInput, tokensOutput, costUsd}).
func (w *worker) recordCost(c *call, call goja.FunctionCall) goja.Value {
	w.bound(c, "context.recordCost")
	o, ok := call.Argument(0).(*goja.Object)
	if !ok || o.ClassName() == "Array" {
		w.throwType("context.recordCost expects an object { tokensInput, tokensOutput, costUsd }")
	}
	for _, k := range o.Keys() {
		switch k {
		case "tokensInput", "tokensOutput", "costUsd":
		default:
			w.throwType("context.recordCost: unknown field %q; the fields are tokensInput, tokensOutput and costUsd", k)
		}
	}
	ti := w.costNumber(o.Get("tokensInput"), "tokensInput", true)
	to := w.costNumber(o.Get("tokensOutput"), "tokensOutput", true)
	usd := w.costNumber(o.Get("costUsd"), "costUsd", false)
	c.addCost(int64(ti), int64(to), usd)
	return goja.Undefined()
}

func (w *worker) costNumber(v goja.Value, field string, integer bool) float64 {
	if v == nil || goja.IsUndefined(v) {
		return 0
	}
	f, ok := number(v)
	if !ok {
		w.throwType("context.recordCost: %s must be a number, got %s", field, typeOf(v))
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		w.throwType("context.recordCost: %s must be a finite number, got %v", field, f)
	case f < 0:
		w.throwType("context.recordCost: %s must not be negative, got %v", field, f)
	case integer && (f != math.Trunc(f) || f > 1<<53):
		w.throwType("context.recordCost: %s must be a whole number of tokens, got %v", field, f)
	}
	return f
}

// typeOf names the type of v for error messages.
func typeOf(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if o, ok := v.(*goja.Object); ok {
		if _, ok := goja.AssertFunction(o); ok {
			return "a function"
		}
		if o.ClassName() == "Array" {
			return "an array"
		}
		return "an object"
	}
	if _, ok := primitiveString(v); ok {
		return "a string"
	}
	if _, ok := number(v); ok {
		return "a number"
	}
	if _, ok := v.(*goja.Symbol); ok {
		return "a symbol"
	}
	if _, ok := v.Export().(bool); ok {
		return "a boolean"
	}
	return "a bigint"
}

// primitiveString returns v as a Go string when it is a string primitive.
func primitiveString(v goja.Value) (string, bool) {
	if s, ok := v.(goja.String); ok {
		return s.String(), true
	}
	return "", false
}

// markUntrusted implements context.markUntrusted(origin).
func (w *worker) markUntrusted(c *call, call goja.FunctionCall) goja.Value {
	w.bound(c, "context.markUntrusted")
	v := call.Argument(0)
	s, ok := primitiveString(v)
	if !ok || strings.TrimSpace(s) == "" {
		w.throwType("context.markUntrusted(origin): origin must be a non-empty string naming where the untrusted content came from, got %s", typeOf(v))
	}
	if len(s) > maxOriginLength {
		w.throwType("context.markUntrusted(origin): origin is %d bytes, over the %d-byte limit", len(s), maxOriginLength)
	}
	c.markUntrusted(s)
	return goja.Undefined()
}
