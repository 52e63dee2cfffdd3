package jsvm

import (
	"slices"

	"github.com/dop251/goja"
)

// The handler's context argument is built fresh for every invocation, as
// objects implemented in Go (goja DynamicObjects, not reflected structs: no
// Go field or method is reachable). Their values are made on first access,
// so a handler pays only for the parts it uses, and the functions on them
// are bound to their invocation: a callback that outlives its invocation
// and calls context.broker.get gets an error, never another invocation's
// broker.
//
// They behave as ordinary extensible objects — a handler may add, replace
// or delete properties of its own context — except that they cannot be
// frozen or given accessor properties.

type recordKind uint8

const (
	kindContext recordKind = iota
	kindRun
	kindStep
	kindBroker
)

// recordKeys are the properties of each kind, in Object.keys order.
var recordKeys = [...][]string{
	kindContext: {"run", "step", "endUserId", "idempotencyKey", "broker", "recordCost", "markUntrusted", "deadline"},
	kindRun:     {"id"},
	kindStep:    {"id", "index"},
	kindBroker:  {"token", "get", "put", "delete", "list"},
}

// ContextKeys lists the properties of the context argument, in order.
func ContextKeys() []string { return slices.Clone(recordKeys[kindContext]) }

// record is one object of the context tree.
type record struct {
	cx    *contextTree
	kind  recordKind
	made  uint8 // bit i: vals[i] is set
	gone  uint8 // bit i: key i was deleted
	vals  [8]goja.Value
	extra map[string]goja.Value
	order []string // keys of extra, in insertion order
}

// contextTree is the state shared by one invocation's context objects.
type contextTree struct {
	w *worker
	c *call
}

func (w *worker) newContext(c *call) goja.Value {
	cx := &contextTree{w: w, c: c}
	return cx.object(kindContext)
}

func (cx *contextTree) object(kind recordKind) *goja.Object {
	return cx.w.vm.NewDynamicObject(&record{cx: cx, kind: kind})
}

func (r *record) index(key string) int {
	for i, k := range recordKeys[r.kind] {
		if k == key {
			return i
		}
	}
	return -1
}

// Get implements goja.DynamicObject.
func (r *record) Get(key string) goja.Value {
	i := r.index(key)
	if i < 0 {
		return r.extra[key]
	}
	if r.gone&(1<<i) != 0 {
		return nil
	}
	if r.made&(1<<i) == 0 {
		r.vals[i] = r.cx.value(r.kind, i)
		r.made |= 1 << i
	}
	return r.vals[i]
}

// Set implements goja.DynamicObject.
func (r *record) Set(key string, v goja.Value) bool {
	if i := r.index(key); i >= 0 {
		r.vals[i] = v
		r.made |= 1 << i
		r.gone &^= 1 << i
		return true
	}
	if r.extra == nil {
		r.extra = make(map[string]goja.Value)
	}
	if _, ok := r.extra[key]; !ok {
		r.order = append(r.order, key)
	}
	r.extra[key] = v
	return true
}

// Has implements goja.DynamicObject.
func (r *record) Has(key string) bool {
	if i := r.index(key); i >= 0 {
		return r.gone&(1<<i) == 0
	}
	_, ok := r.extra[key]
	return ok
}

// Delete implements goja.DynamicObject.
func (r *record) Delete(key string) bool {
	if i := r.index(key); i >= 0 {
		r.gone |= 1 << i
		r.vals[i] = nil
		r.made &^= 1 << i
		return true
	}
	if _, ok := r.extra[key]; ok {
		delete(r.extra, key)
		r.order = slices.DeleteFunc(r.order, func(k string) bool { return k == key })
	}
	return true
}

// Keys implements goja.DynamicObject.
func (r *record) Keys() []string {
	keys := make([]string, 0, len(recordKeys[r.kind])+len(r.order))
	for i, k := range recordKeys[r.kind] {
		if r.gone&(1<<i) == 0 {
			keys = append(keys, k)
		}
	}
	return append(keys, r.order...)
}

// value builds property i of a record of kind.
func (cx *contextTree) value(kind recordKind, i int) goja.Value {
	w, c := cx.w, cx.c
	vm := w.vm
	inv := c.inv
	switch kind {
	case kindContext:
		switch i {
		case 0:
			return cx.object(kindRun)
		case 1:
			return cx.object(kindStep)
		case 2:
			return vm.ToValue(inv.EndUserID)
		case 3:
			return vm.ToValue(inv.IdempotencyKey)
		case 4:
			return cx.object(kindBroker)
		case 5:
			return w.fn("recordCost", 1, func(call goja.FunctionCall) goja.Value { return w.recordCost(c, call) })
		case 6:
			return w.fn("markUntrusted", 1, func(call goja.FunctionCall) goja.Value { return w.markUntrusted(c, call) })
		case 7:
			if d, ok := c.ctx.Deadline(); ok {
				return vm.ToValue(d.UnixMilli())
			}
			return goja.Null()
		}
	case kindRun:
		return vm.ToValue(inv.RunID)
	case kindStep:
		if i == 0 {
			return vm.ToValue(inv.StepID)
		}
		return vm.ToValue(inv.StepIndex)
	case kindBroker:
		switch i {
		case 0:
			return vm.ToValue(inv.BrokerToken)
		case 1:
			return w.fn("get", 2, func(call goja.FunctionCall) goja.Value { return w.brokerGet(c, call) })
		case 2:
			return w.fn("put", 3, func(call goja.FunctionCall) goja.Value { return w.brokerPut(c, call) })
		case 3:
			return w.fn("delete", 2, func(call goja.FunctionCall) goja.Value { return w.brokerDelete(c, call) })
		case 4:
			return w.fn("list", 1, func(call goja.FunctionCall) goja.Value { return w.brokerList(c, call) })
		}
	}
	return goja.Undefined()
}
