package jsvm

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"

	"stead/store"
)

// settle is the part of a host operation that runs back on the VM's
// goroutine: it returns the value to resolve with, or a rejection, or an
// uncatchable error that ends the invocation.
type settle func() (value, rejection goja.Value, err error)

// async runs do on a host goroutine and returns a promise that the event
// loop settles, on the VM's goroutine, with what do's continuation returns.
// do must not touch the VM; it gets the invocation's host context.
func (w *worker) async(c *call, do func(ctx context.Context) settle) goja.Value {
	p, resolve, reject := w.vm.NewPromise()
	r := w.rt
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		_ = reject(w.jsError("Error", "the jsvm runtime is closed"))
		return w.vm.ToValue(p)
	}
	r.host.Add(1)
	r.mu.Unlock()
	enqueue := w.loop.reserve()
	ctx := c.host()
	go func() {
		defer r.host.Done()
		var (
			then     settle
			panicked any
		)
		func() {
			defer func() { panicked = recover() }()
			then = do(ctx)
		}()
		enqueue(func() error {
			if panicked != nil {
				return &hostPanic{panicked}
			}
			v, rej, err := then()
			switch {
			case err != nil:
				return err
			case rej != nil:
				return reject(rej)
			}
			return resolve(v)
		})
	}()
	return w.vm.ToValue(p)
}

// rejected returns a promise already rejected with reason.
func (w *worker) rejected(reason goja.Value) goja.Value {
	p, _, reject := w.vm.NewPromise()
	_ = reject(reason) // nothing is attached yet: no job can run
	return w.vm.ToValue(p)
}

// jsError makes a fresh JS Error or TypeError (never a GoError, which would
// expose the Go error value).
func (w *worker) jsError(kind, message string) goja.Value {
	v, err := w.makeError(goja.Undefined(), w.vm.ToValue(kind), w.vm.ToValue(message))
	if err != nil {
		panic(err)
	}
	return v
}

// ---- timers ---------------------------------------------------------------

const maxTimers = 10000

func (w *worker) setTimeout(call goja.FunctionCall) goja.Value {
	w.active("setTimeout")
	fn, ok := goja.AssertFunction(call.Argument(0))
	if !ok {
		w.throwType("setTimeout: the callback must be a function (strings are not evaluated)")
	}
	if len(w.loop.timers) >= maxTimers {
		w.throwType("setTimeout: more than %d timers pending", maxTimers)
	}
	ms := call.Argument(1).ToFloat()
	if math.IsNaN(ms) || ms < 0 {
		ms = 0
	}
	ms = min(ms, math.MaxInt32)
	var args []goja.Value
	if len(call.Arguments) > 2 {
		args = append(args, call.Arguments[2:]...)
	}
	id := w.loop.addTimer(fn, time.Duration(ms*float64(time.Millisecond)), args)
	return w.vm.ToValue(id)
}

func (w *worker) clearTimeout(call goja.FunctionCall) goja.Value {
	if w.cur == nil {
		return goja.Undefined()
	}
	if id, ok := number(call.Argument(0)); ok {
		w.loop.clearTimer(int64(id))
	}
	return goja.Undefined()
}

// ---- encoding ---------------------------------------------------------------

func (w *worker) utf8Encode(call goja.FunctionCall) goja.Value {
	return w.vm.ToValue(w.vm.NewArrayBuffer([]byte(call.Argument(0).String())))
}

func (w *worker) utf8Decode(call goja.FunctionCall) goja.Value {
	var b []byte
	if err := w.vm.ExportTo(call.Argument(0), &b); err != nil {
		w.throwType("TextDecoder.decode: expected bytes")
	}
	fatal, ignoreBOM := call.Argument(1).ToBoolean(), call.Argument(2).ToBoolean()
	if !ignoreBOM && len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		b = b[3:]
	}
	if utf8.Valid(b) {
		return w.vm.ToValue(string(b))
	}
	if fatal {
		w.throwType("TextDecoder.decode: the data is not valid utf-8")
	}
	var s strings.Builder
	s.Grow(len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		s.WriteRune(r) // utf8.RuneError is U+FFFD
		b = b[n:]
	}
	return w.vm.ToValue(s.String())
}

func (w *worker) throwNamed(name, message string) {
	e := w.jsError("Error", message).(*goja.Object)
	_ = e.Set("name", name)
	panic(e)
}

// atob implements the forgiving-base64 decode of the HTML spec.
func (w *worker) atob(call goja.FunctionCall) goja.Value {
	if len(call.Arguments) == 0 {
		w.throwType("atob: 1 argument required")
	}
	s := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\f', '\r':
			return -1
		}
		return r
	}, call.Argument(0).String())
	if len(s)%4 == 0 {
		s = strings.TrimSuffix(s, "=")
		s = strings.TrimSuffix(s, "=")
	}
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil || len(s)%4 == 1 {
		w.throwNamed("InvalidCharacterError", "atob: the string to be decoded is not correctly encoded")
	}
	var out strings.Builder
	out.Grow(len(b))
	for _, c := range b {
		out.WriteRune(rune(c))
	}
	return w.vm.ToValue(out.String())
}

func (w *worker) btoa(call goja.FunctionCall) goja.Value {
	if len(call.Arguments) == 0 {
		w.throwType("btoa: 1 argument required")
	}
	s := call.Argument(0).String()
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if r > 0xFF {
			w.throwNamed("InvalidCharacterError", "btoa: the string contains characters outside of the Latin1 range")
		}
		b = append(b, byte(r))
	}
	return w.vm.ToValue(base64.StdEncoding.EncodeToString(b))
}

// ---- crypto -------------------------------------------------------------------

func (w *worker) randomUUID(goja.FunctionCall) goja.Value {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return w.vm.ToValue(string(s[:]))
}

func (w *worker) getRandomValues(call goja.FunctionCall) goja.Value {
	a := call.Argument(0)
	o, ok := a.(*goja.Object)
	if !ok {
		w.throwNamed("TypeMismatchError", "crypto.getRandomValues: expected an integer typed array")
	}
	switch o.Export().(type) {
	case []int8, []uint8, []int16, []uint16, []int32, []uint32, []int64, []uint64:
	default:
		w.throwNamed("TypeMismatchError", "crypto.getRandomValues: expected an integer typed array")
	}
	var b []byte
	if err := w.vm.ExportTo(a, &b); err != nil {
		w.throwNamed("TypeMismatchError", "crypto.getRandomValues: expected an integer typed array")
	}
	if len(b) > 65536 {
		w.throwNamed("QuotaExceededError", fmt.Sprintf("crypto.getRandomValues: %d bytes requested, over the 65536-byte limit", len(b)))
	}
	_, _ = rand.Read(b)
	return a
}

// ---- broker -------------------------------------------------------------------

// brokerCall validates the (collection[, key]) arguments and the broker.
// It returns a rejected promise when something is wrong.
func (w *worker) brokerCall(c *call, call goja.FunctionCall, method string, withKey bool) (coll, key string, fail goja.Value) {
	name := "context.broker." + method
	w.bound(c, name)
	str := func(i int, what string, check func(string) error) string {
		v := call.Argument(i)
		s, ok := primitiveString(v)
		if fail != nil {
			return s
		}
		if !ok || s == "" {
			fail = w.jsError("TypeError", fmt.Sprintf("%s: %s must be a non-empty string, got %s", name, what, typeOf(v)))
		} else if err := check(s); err != nil {
			fail = w.jsError("TypeError", fmt.Sprintf("%s: %s", name, err))
		}
		return s
	}
	// The same rules as the HTTP API's broker routes, so that whatever a
	// handler stores can be read and removed there too.
	coll = str(0, "collection", store.CheckBrokerCollection)
	if withKey {
		key = str(1, "key", store.CheckBrokerKey)
	}
	if fail == nil && c.inv.Broker == nil {
		fail = w.jsError("Error", name+": the broker is not available for this invocation (no broker is configured)")
	}
	return coll, key, fail
}

func (w *worker) brokerFailed(method string, err error) goja.Value {
	return w.jsError("Error", fmt.Sprintf("context.broker.%s failed: %s", method, err.Error()))
}

func (w *worker) brokerGet(c *call, call goja.FunctionCall) goja.Value {
	coll, key, fail := w.brokerCall(c, call, "get", true)
	if fail != nil {
		return w.rejected(fail)
	}
	br := c.inv.Broker
	return w.async(c, func(ctx context.Context) settle {
		v, found, err := br.Get(ctx, coll, key)
		return func() (goja.Value, goja.Value, error) {
			switch {
			case err != nil:
				return nil, w.brokerFailed("get", err), nil
			case !found:
				return goja.Undefined(), nil, nil
			}
			return w.parseJSON(v, "context.broker.get")
		}
	})
}

// parseJSON parses host-provided JSON inside the VM.
func (w *worker) parseJSON(b []byte, what string) (goja.Value, goja.Value, error) {
	v, err := w.parse(goja.Undefined(), w.vm.ToValue(string(b)))
	if err != nil {
		if uncatchable(err) {
			return nil, nil, err
		}
		return nil, w.jsError("Error", what+": the stored value is not valid JSON"), nil
	}
	return v, nil, nil
}

func (w *worker) brokerPut(c *call, call goja.FunctionCall) goja.Value {
	coll, key, fail := w.brokerCall(c, call, "put", true)
	if fail != nil {
		return w.rejected(fail)
	}
	s, err := w.stringify(goja.Undefined(), call.Argument(2))
	if err != nil {
		if uncatchable(err) {
			panic(err)
		}
		return w.rejected(w.jsError("TypeError", "context.broker.put: the value is not JSON-serializable: "+err.Error()))
	}
	if goja.IsUndefined(s) {
		return w.rejected(w.jsError("TypeError", "context.broker.put: the value is not JSON-serializable (undefined, a function or a symbol)"))
	}
	value := json.RawMessage(s.String())
	br := c.inv.Broker
	return w.async(c, func(ctx context.Context) settle {
		err := br.Put(ctx, coll, key, value)
		return func() (goja.Value, goja.Value, error) {
			if err != nil {
				return nil, w.brokerFailed("put", err), nil
			}
			return goja.Undefined(), nil, nil
		}
	})
}

func (w *worker) brokerDelete(c *call, call goja.FunctionCall) goja.Value {
	coll, key, fail := w.brokerCall(c, call, "delete", true)
	if fail != nil {
		return w.rejected(fail)
	}
	br := c.inv.Broker
	return w.async(c, func(ctx context.Context) settle {
		found, err := br.Delete(ctx, coll, key)
		return func() (goja.Value, goja.Value, error) {
			if err != nil {
				return nil, w.brokerFailed("delete", err), nil
			}
			return w.vm.ToValue(found), nil, nil
		}
	})
}

func (w *worker) brokerList(c *call, call goja.FunctionCall) goja.Value {
	coll, _, fail := w.brokerCall(c, call, "list", false)
	if fail != nil {
		return w.rejected(fail)
	}
	br := c.inv.Broker
	return w.async(c, func(ctx context.Context) settle {
		items, err := br.List(ctx, coll)
		return func() (goja.Value, goja.Value, error) {
			if err != nil {
				return nil, w.brokerFailed("list", err), nil
			}
			flat := make([]any, 0, 2*len(items))
			for _, it := range items {
				flat = append(flat, it.Key, string(it.Value))
			}
			v, err := w.brokerItems(goja.Undefined(), w.vm.NewArray(flat...))
			if err != nil {
				if uncatchable(err) {
					return nil, nil, err
				}
				return nil, w.jsError("Error", "context.broker.list: a stored value is not valid JSON"), nil
			}
			return v, nil, nil
		}
	})
}
