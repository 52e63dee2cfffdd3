package jsvm

import (
	"strings"
	"testing"

	"github.com/dop251/goja"

	"stead/runtime/bundle"
)

var inputCorpus = []string{
	`{"n":42}`, `42`, `-0`, `0.5e-3`, `1E+2`, `-12.75`, `9007199254740993`, `1e308`, `5e-324`,
	`"plain"`, `"esc\"aped\\\/\b\f\n\r\t"`, `"\u00e9\u20ac\ud83d\ude00"`, `"héllo € 😀"`, `"\ud800"`, `"\udc00x"`,
	`true`, `false`, `null`, `[]`, `{}`, ` [ 1 , "a" , null , true , { } , [ ] ] `,
	`{"a":{"b":{"c":[1,[2,[3]]]}}}`, `{"dup":1,"x":2,"dup":3}`, `{"__proto__":{"polluted":true},"k":1}`,
	`{"2":"b","1":"a","z":0,"a":1}`, `{"":""}`, `{"constructor":1,"toString":2,"hasOwnProperty":3}`,
	strings.Repeat("[", 250) + strings.Repeat("]", 250),
	// invalid: both must fail
	``, ` `, `{`, `[1,]`, `{"a":1,}`, `{'a':1}`, `01`, `1.`, `.5`, `-`, `+1`, `1e`, `NaN`, `Infinity`, `tru`,
	`"unterminated`, "\"ctl\x01\"", `"\x"`, `{"a" 1}`, `[1 2]`, `1 2`, `1e400`, "\"\xff\"", `nul`, `{"a":1}x`,
}

// decodeInput must produce what JSON.parse produces, and fail where it fails.
func TestDecodeInputMatchesJSONParse(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, Options{})
	w, err := r.install(bundle.NewRuntime())
	if err != nil {
		t.Fatal(err)
	}
	fast := 0
	for _, in := range inputCorpus {
		compareDecode(t, w, in)
		if _, ok := fastDecode(w.vm, []byte(in)); ok {
			fast++
		}
	}
	// Every valid input but the one nested past maxInputDepth takes the fast path.
	if fast != 27 {
		t.Errorf("the fast path decoded %d inputs, want 27", fast)
	}
}

func FuzzDecodeInput(f *testing.F) {
	for _, in := range inputCorpus {
		f.Add(in)
	}
	r := New(Options{})
	defer r.Close()
	w, err := r.install(bundle.NewRuntime())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) { compareDecode(t, w, in) })
}

const sameJS = `(function same(a, b) {
  if (typeof a !== typeof b) return false;
  if (a === null || typeof a !== "object") return Object.is(a, b);
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  const ka = Reflect.ownKeys(a), kb = Reflect.ownKeys(b);
  if (ka.length !== kb.length) return false;
  for (let i = 0; i < ka.length; i++) {
    if (ka[i] !== kb[i]) return false;
    const da = Object.getOwnPropertyDescriptor(a, ka[i]), db = Object.getOwnPropertyDescriptor(b, kb[i]);
    if (da.writable !== db.writable || da.enumerable !== db.enumerable || da.configurable !== db.configurable) return false;
    if (!same(da.value, db.value)) return false;
  }
  return true;
})`

func compareDecode(t *testing.T, w *worker, in string) {
	t.Helper()
	vm := w.vm
	fast, fastErr := w.decodeInput([]byte(in))
	ref, refErr := w.parse(goja.Undefined(), vm.ToValue(in))
	if (fastErr == nil) != (refErr == nil) {
		t.Fatalf("%q: decodeInput error %v, JSON.parse error %v", in, fastErr, refErr)
	}
	if refErr != nil {
		return
	}
	same, ok := goja.AssertFunction(vm.Get("__same"))
	if !ok {
		sameV, err := vm.RunString(sameJS)
		if err != nil {
			t.Fatal(err)
		}
		_ = vm.Set("__same", sameV)
		same, _ = goja.AssertFunction(sameV)
	}
	eq, err := same(goja.Undefined(), fast, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !eq.ToBoolean() {
		a, _ := w.stringify(goja.Undefined(), fast)
		b, _ := w.stringify(goja.Undefined(), ref)
		t.Fatalf("%q: decodeInput gives %v, JSON.parse gives %v", in, a, b)
	}
}
