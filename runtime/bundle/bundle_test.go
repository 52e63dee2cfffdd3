package bundle_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dop251/goja"

	"stead/runtime/bundle"
)

func load(t *testing.T, c *bundle.Compiler, src string) (*bundle.Bundle, error) {
	t.Helper()
	return c.Load(context.Background(), "handlers.mjs", []byte(src))
}

func mustLoad(t *testing.T, c *bundle.Compiler, src string) *bundle.Bundle {
	t.Helper()
	b, err := load(t, c, src)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return b
}

// wantError asserts err is a *bundle.Error with the code and that its text
// names file:line and contains the fragment.
func wantError(t *testing.T, err error, code, at, fragment string) {
	t.Helper()
	be, ok := bundle.AsError(err)
	if !ok {
		t.Fatalf("error = %v (%T), want *bundle.Error %s", err, err, code)
	}
	if be.Code != code {
		t.Errorf("code = %q, want %q (%v)", be.Code, code, err)
	}
	if !strings.Contains(err.Error(), at) {
		t.Errorf("error %q does not name %q", err, at)
	}
	if !strings.Contains(err.Error(), fragment) {
		t.Errorf("error %q does not say %q", err, fragment)
	}
}

func TestLoadListsExports(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{})
	b := mustLoad(t, c, `
export async function refundOrder(input, context) { return { ok: true } }
export function listOrders() { return [] }
export const version = "1.0.0";
export default function main() {}
`)
	want := []bundle.Export{{"default", true}, {"listOrders", true}, {"refundOrder", true}, {"version", false}}
	if fmt.Sprint(b.Exports) != fmt.Sprint(want) {
		t.Errorf("exports = %v, want %v", b.Exports, want)
	}
	if got := strings.Join(b.Functions(), ","); got != "default,listOrders,refundOrder" {
		t.Errorf("functions = %s", got)
	}
	if e, ok := b.Export("version"); !ok || e.Function {
		t.Errorf("Export(version) = %v, %v", e, ok)
	}
	if _, ok := b.Export("nope"); ok {
		t.Error("Export(nope) found")
	}
	if b.Digest != bundle.Digest(b.Source) || len(b.Digest) != 64 {
		t.Errorf("digest %q is not the sha256 of the source", b.Digest)
	}
}

func TestLoadCachesByDigest(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{})
	src := `export function a() { return 1 }`
	var wg sync.WaitGroup
	got := make([]*bundle.Bundle, 10)
	for i := range got {
		wg.Go(func() { got[i] = mustLoad(t, c, src) })
	}
	wg.Wait()
	for i, b := range got {
		if b != got[0] {
			t.Fatalf("load %d returned a different compilation", i)
		}
	}
	if b, ok := c.Get(got[0].Digest); !ok || b != got[0] {
		t.Error("Get(digest) misses a loaded bundle")
	}
	if _, ok := c.Get(bundle.Digest([]byte("other"))); ok {
		t.Error("Get finds a bundle never loaded")
	}
	other := mustLoad(t, c, src+"\n")
	if other == got[0] || other.Digest == got[0].Digest {
		t.Error("different bytes share a compilation")
	}
}

func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{CacheSize: 2})
	first := mustLoad(t, c, `export const a = 1`)
	mustLoad(t, c, `export const b = 1`)
	mustLoad(t, c, `export const c = 1`)
	if _, ok := c.Get(first.Digest); ok {
		t.Error("the least recently used bundle is still cached past the bound")
	}
}

func TestLoadRefusesBadBundles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.js")
	if err := os.WriteFile(secret, []byte("export default 'top secret'"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, src, code, at, fragment string
	}{
		{"top-level await", "export const a = 1;\nexport const b = await Promise.resolve(2);\n",
			bundle.CodeTopLevelAwait, "handlers.mjs:2:", "top-level await is not supported"},
		{"node builtin", "\nimport fs from 'fs';\nexport function f() { return fs }\n",
			bundle.CodeUnresolvedImport, "handlers.mjs:2:", `: unresolved import "fs"; a deployed bundle must be self-contained`},
		{"file on the server", "import s from " + fmt.Sprintf("%q", secret) + ";\nexport const leak = s;\n",
			bundle.CodeUnresolvedImport, "handlers.mjs:1:", "self-contained"},
		{"dynamic import", "export async function f() { return import('./x.js') }\n",
			bundle.CodeUnresolvedImport, "handlers.mjs:1:", `"./x.js"`},
		{"require call", "export function f() {\n  return require('child_process')\n}\n",
			bundle.CodeUnresolvedImport, "handlers.mjs:2:", `"child_process"`},
		{"syntax", "export function f( {\n", bundle.CodeSyntax, "handlers.mjs:", "Expected"},
		{"no exports", "const a = 1;\n", bundle.CodeNoExports, "handlers.mjs", "has no exports"},
		{"top-level throw", "export const a = 1;\nthrow new TypeError('boot failed');\n",
			bundle.CodeEvaluation, "handlers.mjs", "boot failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, bundle.NewCompiler(bundle.Options{}), tc.src)
			wantError(t, err, tc.code, tc.at, tc.fragment)
		})
	}
}

func TestLoadRefusesOversizedBundle(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{MaxSize: 1024})
	_, err := load(t, c, "export const s = '"+strings.Repeat("x", 2000)+"';")
	wantError(t, err, bundle.CodeTooLarge, "handlers.mjs", "over the 1.0 KiB limit")
}

func TestTopLevelLoopIsStopped(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{EvalTimeout: 50 * time.Millisecond})
	_, err := load(t, c, "export const a = 1;\nwhile (true) {}\n")
	wantError(t, err, bundle.CodeEvaluation, "handlers.mjs", "deadline exceeded")
}

// TestLoadStopsTheTopLevelWhenCancelled: a deploy cancelled while its
// bundle's top level runs stops it then, not at EvalTimeout.
func TestLoadStopsTheTopLevelWhenCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := bundle.NewCompiler(bundle.Options{EvalTimeout: 10 * time.Second})
	_, err := c.Load(ctx, "handlers.mjs", []byte("export const a = 1;\nwhile (true) {}\n"))
	wantError(t, err, bundle.CodeEvaluation, "handlers.mjs", "context canceled")
}

func TestSetupPreparesTheEvaluatingRuntime(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{Setup: func(vm *goja.Runtime) error {
		return vm.Set("hostGreeting", "hello")
	}})
	b := mustLoad(t, c, "const g = hostGreeting;\nexport function greet() { return g }\n")
	if _, ok := b.Export("greet"); !ok {
		t.Fatal("greet not exported")
	}
	bare := bundle.NewCompiler(bundle.Options{})
	_, err := load(t, bare, "const g = hostGreeting;\nexport function greet() { return g }\n")
	wantError(t, err, bundle.CodeEvaluation, "handlers.mjs", "hostGreeting is not defined")
}

// run instantiates b on a fresh runtime and returns the settled value of
// calling export name, or the thrown error.
func run(t *testing.T, b *bundle.Bundle, name string) (goja.Value, *goja.Runtime, error) {
	t.Helper()
	vm := bundle.NewRuntime()
	exports, err := bundle.Instantiate(vm, b)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	fn, ok := goja.AssertFunction(exports.Get(name))
	if !ok {
		t.Fatalf("%s is not a function", name)
	}
	v, err := fn(goja.Undefined())
	if err != nil {
		return nil, vm, err
	}
	if p, ok := v.Export().(*goja.Promise); ok {
		switch p.State() {
		case goja.PromiseStateFulfilled:
			return p.Result(), vm, nil
		case goja.PromiseStateRejected:
			return nil, vm, fmt.Errorf("rejected: %s", p.Result().ToObject(vm).Get("stack"))
		default:
			t.Fatal("promise still pending")
		}
	}
	return v, vm, nil
}

func TestLowersSyntaxGojaLacks(t *testing.T) {
	t.Parallel()
	b := mustLoad(t, bundle.NewCompiler(bundle.Options{}), `
async function* numbers() { yield 1; yield 2; yield 3 }
export async function sum() {
  let s = 0;
  for await (const n of numbers()) s += n;
  return s;
}
`)
	v, _, err := run(t, b, "sum")
	if err != nil {
		t.Fatal(err)
	}
	if v.ToInteger() != 6 {
		t.Errorf("sum = %v, want 6", v)
	}
	// A regular expression flag goja lacks fails the function using it,
	// when called, not the whole bundle at load.
	b = mustLoad(t, bundle.NewCompiler(bundle.Options{}), "export function one() { return 1 }\nexport function at() { return /b/d }\n")
	if v, _, err := run(t, b, "one"); err != nil || v.ToInteger() != 1 {
		t.Errorf("one() = %v, %v", v, err)
	}
	if _, _, err := run(t, b, "at"); err == nil || !strings.Contains(err.Error(), "Invalid flags") {
		t.Errorf("at() = %v, want goja's invalid flags error", err)
	}
}

func TestStacksNameBundleLines(t *testing.T) {
	t.Parallel()
	b := mustLoad(t, bundle.NewCompiler(bundle.Options{}), `export const a = 1;

export async function boom() {
  await null;
  throw new Error("card declined");
}
`)
	_, _, err := run(t, b, "boom")
	if err == nil || !strings.Contains(err.Error(), "card declined") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "handlers.mjs:5:") {
		t.Errorf("stack %q does not point at handlers.mjs:5", err)
	}
}

func TestBundleCodeIsStrict(t *testing.T) {
	t.Parallel()
	b := mustLoad(t, bundle.NewCompiler(bundle.Options{}), `export function leak() { undeclared = 1; return 1 }`)
	_, _, err := run(t, b, "leak")
	if err == nil || !strings.Contains(err.Error(), "undeclared") {
		t.Errorf("assigning an undeclared variable did not throw in strict mode: %v", err)
	}
}

func TestRequireAtRunTimeSaysWhy(t *testing.T) {
	t.Parallel()
	b := mustLoad(t, bundle.NewCompiler(bundle.Options{}), "export function f() { const r = require; return r(\"os\") }\nexport function name() { return require.name }")
	if v, _, err := run(t, b, "name"); err != nil || v.String() != "require" {
		t.Errorf("require.name = %v, %v", v, err)
	}
	_, _, err := run(t, b, "f")
	if err == nil || !strings.Contains(err.Error(), `require("os") is not available`) {
		t.Errorf("err = %v", err)
	}
}

// TestRuntimeIsHardened: recursion through a built-in ends in goja's stack
// overflow. (That eval'd code cannot make the parser read a source map
// file is TestEvalReadsNoSourceMapFile.)
func TestRuntimeIsHardened(t *testing.T) {
	t.Parallel()
	_, err := bundle.NewRuntime().RunString("function f() { return [1].map(f) }; f()")
	var so *goja.StackOverflowError
	if !errors.As(err, &so) {
		t.Errorf("unbounded recursion through a built-in: err = %v, want a stack overflow", err)
	}
}

func TestPackBundlesASourceEntry(t *testing.T) {
	t.Parallel()
	esm, err := bundle.Pack(context.Background(), "testdata/src/index.ts", bundle.PackOptions{})
	if err != nil {
		t.Fatalf("pack: %v", err)
	}
	if strings.Contains(string(esm), "import ") && strings.Contains(string(esm), "from \"") {
		t.Errorf("packed bundle still imports:\n%s", esm)
	}
	b := mustLoad(t, bundle.NewCompiler(bundle.Options{}), string(esm))
	if got := strings.Join(b.Functions(), ","); got != "listOrders,refundOrder" {
		t.Errorf("functions = %s", got)
	}
	vm := bundle.NewRuntime()
	exports, err := bundle.Instantiate(vm, b)
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := goja.AssertFunction(exports.Get("refundOrder"))
	in, _ := vm.RunString(`({ item: { id: "o1", amount: 1250 } })`)
	pv, err := fn(goja.Undefined(), in)
	if err != nil {
		t.Fatal(err)
	}
	got := pv.Export().(*goja.Promise).Result().ToObject(vm).Get("refunded").String()
	if got != "$12.50" {
		t.Errorf("refundOrder through the bundled dependency = %q, want $12.50", got)
	}
}

func TestPackRefusesWhatCannotBeBundled(t *testing.T) {
	t.Parallel()
	_, err := bundle.Pack(context.Background(), "testdata/uses-fs.js", bundle.PackOptions{})
	wantError(t, err, bundle.CodeUnresolvedImport, "uses-fs.js:1:", `"fs"`)
	_, err = bundle.Pack(context.Background(), "testdata/missing-dep.js", bundle.PackOptions{})
	wantError(t, err, bundle.CodeUnresolvedImport, "missing-dep.js:1:", "npm install")
	_, err = bundle.Pack(context.Background(), "testdata/src/index.ts", bundle.PackOptions{MaxSize: 100})
	wantError(t, err, bundle.CodeTooLarge, "index.ts", "over the 100 bytes limit")
}

// TestSizeLimitIsTheLastByteAllowed: a bundle of exactly MaxSize bytes is
// loaded, one byte more is refused; the default is the 5 MiB of
// docs/http-api.md.
func TestSizeLimitIsTheLastByteAllowed(t *testing.T) {
	t.Parallel()
	src := "export const s = '" + strings.Repeat("x", 1000) + "';"
	if _, err := load(t, bundle.NewCompiler(bundle.Options{MaxSize: len(src)}), src); err != nil {
		t.Errorf("a bundle of exactly MaxSize: %v", err)
	}
	_, err := load(t, bundle.NewCompiler(bundle.Options{MaxSize: len(src) - 1}), src)
	wantError(t, err, bundle.CodeTooLarge, "handlers.mjs", "over the")
	big := "export const s = '" + strings.Repeat("x", 5<<20) + "';"
	_, err = load(t, bundle.NewCompiler(bundle.Options{}), big)
	wantError(t, err, bundle.CodeTooLarge, "handlers.mjs", "over the 5.0 MiB limit")
}

// TestErrorNamesWhatItKnows: file:line:column when the line is known, the
// file alone when not, and one line per further problem.
func TestErrorNamesWhatItKnows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  bundle.Error
		want string
	}{
		{bundle.Error{File: "handlers.mjs", Line: 3, Column: 5, Message: "bad"}, "handlers.mjs:3:5: bad"},
		{bundle.Error{File: "handlers.mjs", Message: "bad"}, "handlers.mjs: bad"},
		{bundle.Error{Message: "bad"}, "bad"},
		{bundle.Error{File: "a.ts", Line: 1, Column: 1, Message: "one", More: []*bundle.Error{{File: "b.ts", Message: "two"}}}, "a.ts:1:1: one\nb.ts: two"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	_, err := load(t, bundle.NewCompiler(bundle.Options{}), "const a = 1;\n")
	if !strings.HasPrefix(fmt.Sprint(err), "handlers.mjs: the bundle has no exports") {
		t.Errorf("no exports: %v", err)
	}
}

// TestLoadReportsEveryUnresolvedImport: each import is named at its line,
// not only the first.
func TestLoadReportsEveryUnresolvedImport(t *testing.T) {
	t.Parallel()
	_, err := load(t, bundle.NewCompiler(bundle.Options{}), "import fs from 'fs';\nimport os from 'os';\nexport const x = [fs, os];\n")
	wantError(t, err, bundle.CodeUnresolvedImport, "handlers.mjs:1:", `"fs"`)
	wantError(t, err, bundle.CodeUnresolvedImport, "handlers.mjs:2:", `"os"`)
	if be, _ := bundle.AsError(err); len(be.More) != 1 || be.More[0].Line != 2 {
		t.Errorf("further errors = %v, want the import of os on line 2", be.More)
	}
}

// TestExportsListedInAnotherProcess: with Options.ListExports, the
// exports it lists are sorted (Export finds them), an empty list is
// refused, and a failure that is not the bundle's is returned and not
// cached.
func TestExportsListedInAnotherProcess(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		calls int
		list  []bundle.Export
		fail  error
	)
	c := bundle.NewCompiler(bundle.Options{ListExports: func(_ context.Context, b *bundle.Bundle) ([]bundle.Export, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if b.Program != nil || b.Digest != bundle.Digest(b.Source) {
			t.Errorf("bundle handed to ListExports: program %v, digest %s", b.Program, b.Digest)
		}
		return slices.Clone(list), fail
	}})
	list = []bundle.Export{{Name: "refundOrder", Function: true}, {Name: "listOrders", Function: true}, {Name: "VERSION"}}
	b := mustLoad(t, c, "export const VERSION = 1;\n")
	if want := []bundle.Export{{"VERSION", false}, {"listOrders", true}, {"refundOrder", true}}; !slices.Equal(b.Exports, want) {
		t.Errorf("exports = %v, want %v", b.Exports, want)
	}
	if _, ok := b.Export("listOrders"); !ok {
		t.Error("Export(listOrders) not found")
	}
	list = nil
	_, err := load(t, c, "export const a = 1;\n")
	wantError(t, err, bundle.CodeNoExports, "handlers.mjs", "has no exports")

	fail = errors.New("worker crashed")
	if _, err := load(t, c, "export const b = 1;\n"); !errors.Is(err, fail) {
		t.Errorf("err = %v, want the worker's", err)
	}
	fail, list = nil, []bundle.Export{{Name: "b"}}
	before := calls
	if _, err := load(t, c, "export const b = 1;\n"); err != nil || calls != before+1 {
		t.Errorf("after a worker failure: %v, %d calls (want one more than %d)", err, calls, before)
	}
}

// TestCompileSortsTheExportsItIsGiven: a bundle compiled with the exports
// another process listed finds each by name, whatever their order.
func TestCompileSortsTheExportsItIsGiven(t *testing.T) {
	t.Parallel()
	given := []bundle.Export{{"b", true}, {"a", true}}
	b, err := bundle.Compile("handlers.mjs", []byte("export function b() {}\nexport function a() {}\n"), given)
	if err != nil {
		t.Fatal(err)
	}
	if given[0].Name != "b" {
		t.Errorf("Compile reordered the caller's exports: %v", given)
	}
	for _, name := range []string{"a", "b"} {
		if _, ok := b.Export(name); !ok {
			t.Errorf("Export(%s) not found in %v", name, b.Exports)
		}
	}
}

// TestListExportsOnACompiledBundle: ListExports with no timeout uses its
// default (the top level below runs for 20 ms), lists the exports, and
// refuses a bundle that has none.
func TestListExportsOnACompiledBundle(t *testing.T) {
	t.Parallel()
	setup := func(vm *goja.Runtime) error {
		return vm.Set("pause", func() { time.Sleep(20 * time.Millisecond) })
	}
	b, err := bundle.Compile("handlers.mjs", []byte("pause();\nexport function f() {}\nexport const v = 1;\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bundle.ListExports(context.Background(), b, setup, 0)
	if want := []bundle.Export{{"f", true}, {"v", false}}; err != nil || !slices.Equal(got, want) {
		t.Errorf("ListExports = %v, %v; want %v", got, err, want)
	}
	none, err := bundle.Compile("handlers.mjs", []byte("const a = 1;\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bundle.ListExports(context.Background(), none, nil, 0)
	wantError(t, err, bundle.CodeNoExports, "handlers.mjs", "has no exports")
}

// TestCacheHoldsSixtyFourByDefault: the 64 most recently loaded bundles
// stay compiled; the 65th evicts the least recently used.
func TestCacheHoldsSixtyFourByDefault(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{})
	var loaded []*bundle.Bundle
	for i := range 65 {
		loaded = append(loaded, mustLoad(t, c, fmt.Sprintf("export const n = %d;\n", i)))
	}
	if _, ok := c.Get(loaded[0].Digest); ok {
		t.Error("65 bundles cached")
	}
	for i, b := range loaded[1:] {
		if _, ok := c.Get(b.Digest); !ok {
			t.Fatalf("bundle %d of the last 64 is no longer cached", i+1)
		}
	}
}

// TestGoPanicAtTheTopLevelIsTheBundlesError: a host function that panics
// while the top level runs fails the load with the panic, not the process.
func TestGoPanicAtTheTopLevelIsTheBundlesError(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{Setup: func(vm *goja.Runtime) error {
		return vm.Set("configure", func() { panic("host bug") })
	}})
	_, err := load(t, c, "configure();\nexport const a = 1;\n")
	wantError(t, err, bundle.CodeEvaluation, "handlers.mjs", "top-level code panicked: host bug")
}

// TestRuntimeNamesGoFieldsByTheirJSONTags: a Go value handed to bundle
// code shows its fields as its JSON does, and its methods lower-cased.
func TestRuntimeNamesGoFieldsByTheirJSONTags(t *testing.T) {
	t.Parallel()
	vm := bundle.NewRuntime()
	if err := vm.Set("order", order{ID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	v, err := vm.RunString("order.orderId + ' ' + order.label() + ' ' + typeof order.ID")
	if err != nil || v.String() != "o-1 order o-1 undefined" {
		t.Errorf("order as JS = %v, %v", v, err)
	}
}

type order struct {
	ID string `json:"orderId"`
}

func (o order) Label() string { return "order " + o.ID }

// TestSetupFailureIsReported: a runtime Setup could not prepare fails the
// load with Setup's error, which is not the bundle's.
func TestSetupFailureIsReported(t *testing.T) {
	t.Parallel()
	broken := errors.New("no globals")
	c := bundle.NewCompiler(bundle.Options{Setup: func(*goja.Runtime) error { return broken }})
	_, err := load(t, c, "export const a = 1;\n")
	if !errors.Is(err, broken) {
		t.Errorf("err = %v, want Setup's", err)
	}
	if _, ok := bundle.AsError(err); ok {
		t.Errorf("a failed Setup is reported as the bundle's: %v", err)
	}
}

// TestTopLevelErrorThrownInThePreludeNamesTheBundle: an exception thrown
// by a prelude function the top level calls is placed at the bundle's
// line that called it, not in the prelude.
func TestTopLevelErrorThrownInThePreludeNamesTheBundle(t *testing.T) {
	t.Parallel()
	c := bundle.NewCompiler(bundle.Options{Setup: func(vm *goja.Runtime) error {
		_, err := vm.RunScript("stead:prelude", "function fail(m) { throw new Error(m) }")
		return err
	}})
	_, err := load(t, c, "export const a = 1;\nfail('boot failed');\n")
	wantError(t, err, bundle.CodeEvaluation, "handlers.mjs:2:", "boot failed")
}

// TestEvalReadsNoSourceMapFile: code a handler evaluates (eval, Function)
// that names a source map by a file:// URL does not make the runtime open
// that file. The map is a fifo: opening it for writing without blocking
// succeeds only while a reader has it open.
func TestEvalReadsNoSourceMapFile(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"eval(%q)", "new Function(%q)()"} {
		fifo := filepath.Join(t.TempDir(), "map")
		if err := mkfifo(fifo); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		vm := bundle.NewRuntime()
		done := make(chan error, 1)
		go func() {
			_, err := vm.RunString(fmt.Sprintf(code, "1\n//# sourceMappingURL=file://"+fifo))
			done <- err
		}()
		for opened := false; !opened; {
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: %v", code, err)
				}
				opened = true
			default:
				if w, err := openWriter(fifo); err == nil {
					_ = w.Close() // unblocks the reader
					t.Errorf("%s: the runtime opened the source map file it names", code)
					if err := <-done; err != nil { // the eval, ended by the writer's close
						t.Logf("%s: %v", code, err)
					}
					opened = true
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}

// TestFormatSizeSwitchesUnitAtEachPowerOfTwo: sizes read in bytes below
// 1 KiB, in KiB from exactly 1024 bytes, in MiB from exactly 1 MiB.
func TestFormatSizeSwitchesUnitAtEachPowerOfTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 bytes"},
		{1023, "1023 bytes"},
		{1024, "1.0 KiB"},
		{1<<20 - 1, "1024.0 KiB"},
		{1 << 20, "1.0 MiB"},
		{5 << 20, "5.0 MiB"},
	} {
		if got := bundle.FormatSize(tc.n); got != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
