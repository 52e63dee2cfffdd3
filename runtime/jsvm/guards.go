package jsvm

import (
	"fmt"
	"math"
	"reflect"

	"github.com/dop251/goja"

	"stead/runtime/bundle"
)

// The heap watchdog interrupts JS code, but a built-in that makes one huge
// allocation runs in Go and cannot be interrupted: 'x'.repeat(2**29)
// allocates 512 MiB before the next JS instruction. These built-ins are
// replaced by versions that estimate the allocation first and fail with a
// memory-limit error when it would not fit the invocation's remaining
// budget.

// elemBytes is what one array element costs goja (an interface value).
const elemBytes = 16

// minChecked is the size under which no estimate is made: small
// allocations are left to the watchdog.
const minChecked = 1 << 16

var typedArrays = []struct {
	name string
	size int64
}{
	{"Int8Array", 1}, {"Uint8Array", 1}, {"Uint8ClampedArray", 1},
	{"Int16Array", 2}, {"Uint16Array", 2},
	{"Int32Array", 4}, {"Uint32Array", 4}, {"Float32Array", 4},
	{"Float64Array", 8}, {"BigInt64Array", 8}, {"BigUint64Array", 8},
}

func (w *worker) guardBuiltins() error {
	vm := w.vm
	w.rangeError = vm.Get("RangeError").ToObject(vm)
	str := vm.Get("String").ToObject(vm).Get("prototype").ToObject(vm)
	arr := vm.Get("Array").ToObject(vm).Get("prototype").ToObject(vm)

	stringLen := func(this goja.Value) float64 {
		if s, ok := this.(goja.String); ok {
			return float64(s.Length())
		}
		return 0 // an object: the original converts it and computes; rare
	}
	guards := []struct {
		proto    *goja.Object
		name     string
		length   int
		estimate func(this goja.Value, args []goja.Value) float64
	}{
		{str, "repeat", 1, func(this goja.Value, args []goja.Value) float64 {
			return stringLen(this) * finiteArg(args, 0)
		}},
		{str, "padStart", 2, func(_ goja.Value, args []goja.Value) float64 { return finiteArg(args, 0) }},
		{str, "padEnd", 2, func(_ goja.Value, args []goja.Value) float64 { return finiteArg(args, 0) }},
		{arr, "fill", 1, func(this goja.Value, _ []goja.Value) float64 {
			if o, ok := this.(*goja.Object); ok && o.ClassName() == "Array" {
				return lengthOf(o) * elemBytes
			}
			return 0
		}},
	}
	for _, g := range guards {
		if err := w.guardMethod(g.proto, g.name, g.length, g.estimate); err != nil {
			return err
		}
	}
	if err := w.guardConstructor("Array", func(args []goja.Value) float64 {
		if len(args) == 1 {
			// Only a valid length: the original throws its RangeError for the rest.
			if n, ok := number(args[0]); ok && n >= 0 && n < 1<<32 && n == math.Trunc(n) {
				return n * elemBytes
			}
		}
		return 0
	}); err != nil {
		return err
	}
	if err := w.guardConstructor("ArrayBuffer", func(args []goja.Value) float64 {
		if len(args) > 0 {
			if n, ok := number(args[0]); ok {
				return n
			}
		}
		return 0
	}); err != nil {
		return err
	}
	for _, ta := range typedArrays {
		per := float64(ta.size)
		if err := w.guardConstructor(ta.name, func(args []goja.Value) float64 {
			if len(args) == 0 {
				return 0
			}
			if n, ok := number(args[0]); ok {
				return n * per
			}
			if o, ok := args[0].(*goja.Object); ok && o.ExportType() != arrayBufferType {
				// a copy of an array-like or another typed array
				return lengthOf(o) * per
			}
			return 0
		}); err != nil {
			return err
		}
	}
	return nil
}

var arrayBufferType = reflect.TypeFor[goja.ArrayBuffer]()

// lengthOf returns o.length as a number (0 when it has none).
func lengthOf(o *goja.Object) float64 {
	if v := o.Get("length"); v != nil {
		return v.ToFloat()
	}
	return 0
}

// hasInstance is OrdinaryHasInstance(this, v): whether this.prototype is on
// v's prototype chain.
func (w *worker) hasInstance(call goja.FunctionCall) goja.Value {
	c, ok := call.This.(*goja.Object)
	if !ok {
		return w.vm.ToValue(false)
	}
	o, ok := call.Argument(0).(*goja.Object)
	if !ok {
		return w.vm.ToValue(false)
	}
	proto, ok := c.Get("prototype").(*goja.Object)
	if !ok {
		w.throwType("Function has non-object prototype in instanceof check")
	}
	for p := o.Prototype(); p != nil; p = p.Prototype() {
		if p.SameAs(proto) {
			return w.vm.ToValue(true)
		}
	}
	return w.vm.ToValue(false)
}

// number returns v as a float64 when it is a number primitive. (Export of
// an object would copy it into a Go map, running its getters.)
func number(v goja.Value) (float64, bool) {
	if _, ok := v.(*goja.Object); ok || v == nil {
		return 0, false
	}
	switch n := v.Export().(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// finiteArg returns args[i] as a non-negative finite number, or 0 (and
// leaves odd values to the original built-in's own errors).
func finiteArg(args []goja.Value, i int) float64 {
	if i >= len(args) {
		return 0
	}
	f, ok := number(args[i])
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0
	}
	return f
}

// reserve fails the invocation with a memory-limit error when an
// allocation of about n bytes would not fit what is left of its budget.
// The VM is interrupted too, so that catching the error does not help.
func (w *worker) reserve(n float64, what string) {
	if n < minChecked || math.IsNaN(n) {
		return
	}
	limit := w.rt.opts.MemoryLimit
	used := w.watch.used.Load()
	if n+float64(used) <= float64(limit) {
		return
	}
	msg := fmt.Sprintf("memory limit exceeded: %s would allocate about %s, over what is left of the %s per-invocation limit",
		what, bundle.FormatSize(int64(min(n, math.MaxInt64/2))), bundle.FormatSize(limit))
	if c := w.cur; c != nil && c.memBreach == "" {
		c.memBreach = msg
	}
	w.vm.Interrupt(errInterruptMemory)
	e, err := w.vm.New(w.rangeError, w.vm.ToValue(msg))
	if err != nil {
		panic(err)
	}
	panic(e)
}

func (w *worker) guardMethod(proto *goja.Object, name string, length int, estimate func(goja.Value, []goja.Value) float64) error {
	orig, ok := goja.AssertFunction(proto.Get(name))
	if !ok {
		return fmt.Errorf("%s is not a function", name)
	}
	what := proto.Get("constructor").ToObject(w.vm).Get("name").String() + ".prototype." + name
	f := w.fn(name, length, func(call goja.FunctionCall) goja.Value {
		w.reserve(estimate(call.This, call.Arguments), what)
		v, err := orig(call.This, call.Arguments...)
		if err != nil {
			panic(err) // a JS exception or an uncatchable error: rethrown as is
		}
		return v
	})
	return proto.DefineDataProperty(name, f, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

// guardConstructor replaces the global constructor name by a proxy that
// checks the allocation its arguments ask for. The proxy also becomes
// prototype.constructor, so identity checks and species lookups see it.
func (w *worker) guardConstructor(name string, estimate func(args []goja.Value) float64) error {
	vm := w.vm
	target, ok := vm.Get(name).(*goja.Object)
	if !ok {
		return fmt.Errorf("%s is not an object", name)
	}
	ctor, ok := goja.AssertConstructor(target)
	if !ok {
		return fmt.Errorf("%s is not a constructor", name)
	}
	callable, _ := goja.AssertFunction(target)
	what := "new " + name
	proxy := vm.NewProxy(target, &goja.ProxyTrapConfig{
		Construct: func(_ *goja.Object, args []goja.Value, newTarget *goja.Object) *goja.Object {
			w.reserve(estimate(args), what)
			o, err := ctor(newTarget, args...)
			if err != nil {
				panic(err)
			}
			return o
		},
		Apply: func(_ *goja.Object, this goja.Value, args []goja.Value) goja.Value {
			w.reserve(estimate(args), name)
			v, err := callable(this, args...)
			if err != nil {
				panic(err)
			}
			return v
		},
	})
	// goja's Function.prototype[Symbol.hasInstance] does not handle proxies
	// ([] instanceof Array would throw): give the constructor its own.
	if err := target.DefineDataPropertySymbol(goja.SymHasInstance, w.fn("[Symbol.hasInstance]", 1, w.hasInstance),
		goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
		return err
	}
	pv := vm.ToValue(proxy)
	if err := vm.GlobalObject().DefineDataProperty(name, pv, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return err
	}
	proto := target.Get("prototype").ToObject(vm)
	return proto.DefineDataProperty("constructor", pv, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}
