package bundle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"
)

// Options configure a Compiler.
type Options struct {
	// MaxSize bounds an accepted bundle; DefaultMaxSize when zero.
	MaxSize int
	// CacheSize is how many compiled bundles stay cached; 64 when zero.
	CacheSize int
	// Setup prepares the throwaway runtime that evaluates a bundle's top
	// level to list its exports, so that top-level code sees the globals
	// handlers get. Nil leaves a bare (hardened) runtime.
	Setup func(vm *goja.Runtime) error
	// EvalTimeout bounds that evaluation; 5s when zero.
	EvalTimeout time.Duration
	// ListExports, when set, converts, compiles and evaluates a bundle in
	// another process and lists its exports (a sandbox's worker), so that
	// nothing of a hostile bundle runs — or is parsed — in this one; Setup
	// is then unused, and the Bundles returned have Name, Digest, Source
	// and Exports but no Program (only such a process can run them). It
	// returns *Error for a bad bundle, and another error for a failure that
	// is not the bundle's (which the Compiler does not cache).
	ListExports func(ctx context.Context, b *Bundle) ([]Export, error)
}

// Compiler compiles ESM bundles once per digest and caches the result.
// It is safe for concurrent use.
type Compiler struct {
	opts  Options
	cache *lru.Cache[string, *Bundle]
	group singleflight.Group
}

// NewCompiler returns a Compiler.
func NewCompiler(o Options) *Compiler {
	if o.CacheSize <= 0 {
		o.CacheSize = 64
	}
	if o.EvalTimeout <= 0 {
		o.EvalTimeout = 5 * time.Second
	}
	cache, err := lru.New[string, *Bundle](o.CacheSize)
	if err != nil {
		panic(err) // only for a non-positive size, excluded above
	}
	return &Compiler{opts: o, cache: cache}
}

// Get returns the compiled bundle with that digest if it is cached.
func (c *Compiler) Get(digest string) (*Bundle, bool) {
	return c.cache.Get(digest)
}

// Load compiles an ESM bundle (or returns the cached compilation of the same
// bytes). name is the bundle's file name, used in errors and stacks. Errors
// are *Error for a bad bundle.
func (c *Compiler) Load(ctx context.Context, name string, esm []byte) (*Bundle, error) {
	if err := checkSize(name, len(esm), c.opts.MaxSize); err != nil {
		return nil, err
	}
	digest := Digest(esm)
	if b, ok := c.cache.Get(digest); ok {
		return b, nil
	}
	v, err, _ := c.group.Do(digest, func() (any, error) {
		if b, ok := c.cache.Get(digest); ok {
			return b, nil
		}
		b, err := c.compile(ctx, name, digest, esm)
		if err != nil {
			return nil, err
		}
		c.cache.Add(digest, b)
		return b, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Bundle), nil
}

// sourceMapURL is the only source map the parser may load: the one esbuild
// made for this bundle. Anything else a bundle names is refused, so no file
// is ever read from disk.
const sourceMapURL = "stead-bundle.js.map"

func (c *Compiler) compile(ctx context.Context, name, digest string, esm []byte) (b *Bundle, err error) {
	if c.opts.ListExports != nil {
		// Converted, compiled and evaluated elsewhere: this process only
		// hashes the bytes (esbuild's and goja's parsers recurse natively,
		// and a deeply nested bundle would overflow this process's stack).
		b = &Bundle{Name: name, Digest: digest, Source: esm}
		b.Exports, err = c.opts.ListExports(ctx, b)
	} else if b, err = build(name, digest, esm); err == nil {
		b.Exports, err = c.exports(ctx, b)
	}
	if err != nil {
		return nil, err
	}
	if len(b.Exports) == 0 {
		return nil, errNoExports(b.Name)
	}
	slices.SortFunc(b.Exports, func(a, b Export) int { return strings.Compare(a.Name, b.Name) })
	return b, nil
}

func errNoExports(file string) *Error {
	return &Error{Code: CodeNoExports, File: file,
		Message: "the bundle has no exports; export each tool handler by name (export async function refundOrder(input, context) {…})"}
}

// ListExports evaluates b's top level in a throwaway runtime prepared by
// setup (nil for a bare one), within timeout, and lists its exports: what a
// Compiler does without Options.ListExports. Errors are *Error.
func ListExports(ctx context.Context, b *Bundle, setup func(*goja.Runtime) error, timeout time.Duration) ([]Export, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	c := Compiler{opts: Options{Setup: setup, EvalTimeout: timeout}}
	return c.exports(ctx, b)
}

// Compile compiles an ESM bundle whose exports are already known (listed by
// a Compiler at deploy) without evaluating its top level: for a process that
// runs a bundle another process checked. Errors are *Error.
func Compile(name string, esm []byte, exports []Export) (*Bundle, error) {
	b, err := build(name, Digest(esm), esm)
	if err != nil {
		return nil, err
	}
	b.Exports = slices.Clone(exports)
	slices.SortFunc(b.Exports, func(a, b Export) int { return strings.Compare(a.Name, b.Name) })
	return b, nil
}

// build converts and compiles esm, leaving Exports empty.
func build(name, digest string, esm []byte) (*Bundle, error) {
	code, sm, err := toScript(name, esm)
	if err != nil {
		return nil, err
	}
	// goja would report mapped positions with zero-based columns.
	sm = oneBasedColumns(sm)
	src := wrapperHead + string(code) + "\n//# sourceMappingURL=" + sourceMapURL + "\n})"
	ast, err := goja.Parse(name, src, parser.WithSourceMapLoader(func(path string) ([]byte, error) {
		if path == sourceMapURL && sm != nil {
			return sm, nil
		}
		return nil, fmt.Errorf("source map %q is not loaded", path)
	}))
	if err != nil {
		return nil, &Error{Code: CodeSyntax, File: name, Message: err.Error()}
	}
	prog, err := goja.CompileAST(ast, true)
	if err != nil {
		return nil, &Error{Code: CodeSyntax, File: name, Message: err.Error()}
	}
	return &Bundle{Name: name, Digest: digest, Source: esm, Program: prog}, nil
}

// wrapperHead opens the function the script evaluates to. It stays on the
// script's first line so that lines keep their numbers.
const wrapperHead = "(function(module, exports, require){"

// exports evaluates the bundle's top level in a throwaway runtime.
func (c *Compiler) exports(ctx context.Context, b *Bundle) (list []Export, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.EvalTimeout)
	defer cancel()
	vm := NewRuntime()
	if c.opts.Setup != nil {
		if err := c.opts.Setup(vm); err != nil {
			return nil, fmt.Errorf("prepare runtime: %w", err)
		}
	}
	stop := context.AfterFunc(ctx, func() { vm.Interrupt(ctx.Err()) })
	defer stop()
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Code: CodeEvaluation, File: b.Name, Message: fmt.Sprintf("top-level code panicked: %v", r)}
		}
	}()
	obj, err := Instantiate(vm, b)
	if err != nil {
		e := &Error{Code: CodeEvaluation, File: b.Name, Message: "top-level code failed: " + err.Error()}
		var ex *goja.Exception
		if errors.As(err, &ex) {
			e.File, e.Line, e.Column = thrownAt(ex, b.Name)
		}
		return nil, e
	}
	for _, k := range obj.Keys() {
		_, isFn := goja.AssertFunction(obj.Get(k))
		list = append(list, Export{Name: k, Function: isFn})
	}
	if len(list) == 0 {
		return nil, errNoExports(b.Name)
	}
	slices.SortFunc(list, func(a, b Export) int { return strings.Compare(a.Name, b.Name) })
	return list, nil
}

// thrownAt is where in the bundle's code (its sources, through its map) an
// exception was thrown: its innermost frame there; the bundle, without a
// line, when no frame is.
func thrownAt(ex *goja.Exception, name string) (file string, line, col int) {
	for _, f := range ex.Stack() {
		if p := f.Position(); p.Filename != "" && p.Line > 0 && f.SrcName() != "stead:prelude" {
			return p.Filename, p.Line, p.Column
		}
	}
	return name, 0, 0
}

// NewRuntime returns a goja runtime with the hardening every runtime that
// runs bundle code needs: no source maps are ever read (goja would read any
// file a sourceMappingURL names, also for eval and Function), and a bounded
// call stack (unbounded recursion through a built-in kills the process).
func NewRuntime() *goja.Runtime {
	vm := goja.New()
	vm.SetParserOptions(parser.WithDisableSourceMaps)
	vm.SetMaxCallStackSize(MaxCallStackSize)
	vm.SetFieldNameMapper(goja.TagFieldNameMapper("json", true))
	return vm
}

// MaxCallStackSize is the call depth past which a runtime throws a stack
// overflow error.
const MaxCallStackSize = 1000

// Instantiate evaluates the bundle's top level on vm and returns its exports
// object. Call it once per runtime.
func Instantiate(vm *goja.Runtime, b *Bundle) (*goja.Object, error) {
	fnv, err := vm.RunProgram(b.Program)
	if err != nil {
		return nil, err
	}
	fn, ok := goja.AssertFunction(fnv)
	if !ok {
		return nil, errors.New("bundle program did not evaluate to a function")
	}
	module, exports := vm.NewObject(), vm.NewObject()
	if err := module.Set("exports", exports); err != nil {
		return nil, err
	}
	require := vm.ToValue(func(call goja.FunctionCall) goja.Value {
		panic(vm.NewTypeError("require(%q) is not available: Stead handlers run a self-contained bundle; bundle the dependency with `stead deploy`", call.Argument(0).String()))
	}).ToObject(vm)
	// goja names a Go function after its Go symbol; show JS its own name.
	if err := require.DefineDataProperty("name", vm.ToValue("require"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return nil, err
	}
	if _, err := fn(goja.Undefined(), module, exports, require); err != nil {
		return nil, err
	}
	return module.Get("exports").ToObject(vm), nil
}
