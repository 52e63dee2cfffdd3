// Package bundle turns a developer's handler code into a program goja can
// run: an ESM bundle as deployed (or a source entry point bundled here with
// esbuild's Go API, so users need no Node toolchain) becomes a strict-mode
// CommonJS function compiled once per digest, with the list of its exports.
//
// goja cannot parse import/export, so the ESM is converted with esbuild
// (which also lowers the syntax goja lacks: async generators, for-await).
// Anything that would only fail at run time and can be found now is refused
// here, naming file:line: top-level await, imports left unresolved (a Node
// builtin such as fs), a bundle over the size limit.
//
// A bundle Pack makes carries its sources' map on its last line (see
// sourcemap.go), so that stacks and these errors name the developer's files
// ("src/handlers.ts:12:5") rather than the bundle; a bundle deployed
// without one keeps positions in the bundle ("handlers.mjs:40:3").
package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dop251/goja"
)

// DefaultMaxSize is the largest bundle accepted unless configured otherwise.
const DefaultMaxSize = 5 << 20

// Export is one named export of a bundle.
type Export struct {
	Name     string `json:"name"`
	Function bool   `json:"function"`
}

// Bundle is a compiled handler bundle. It is immutable and shared: its
// Program may run on many goja runtimes at once.
type Bundle struct {
	// Name is the bundle's file name, used in stacks ("handlers.mjs:12:5")
	// where its source map does not name a source.
	Name string
	// Digest is the hex sha256 of Source, the artifact as deployed.
	Digest string
	// Source is the ESM bundle as deployed.
	Source []byte
	// Program is the compiled script. Running it yields a function
	// (module, exports, require) that evaluates the bundle's top level.
	Program *goja.Program
	// Exports lists the bundle's named exports in name order.
	Exports []Export
}

// Export looks up an export by name.
func (b *Bundle) Export(name string) (Export, bool) {
	i, ok := slices.BinarySearchFunc(b.Exports, name, func(e Export, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return Export{}, false
	}
	return b.Exports[i], true
}

// Functions lists the names of the exports that are functions.
func (b *Bundle) Functions() []string {
	var names []string
	for _, e := range b.Exports {
		if e.Function {
			names = append(names, e.Name)
		}
	}
	return names
}

// Digest returns the hex sha256 of an artifact.
func Digest(artifact []byte) string {
	sum := sha256.Sum256(artifact)
	return hex.EncodeToString(sum[:])
}

// Error codes, stable for the API and CLI.
const (
	CodeTooLarge         = "bundle-too-large"
	CodeSyntax           = "bundle-syntax"
	CodeTopLevelAwait    = "bundle-top-level-await"
	CodeUnresolvedImport = "bundle-unresolved-import"
	CodeEvaluation       = "bundle-evaluation"
	CodeNoExports        = "bundle-no-exports"
)

// Error is a bundle refused at build or load time. File and Line point at the
// offending code when known.
type Error struct {
	Code    string
	File    string
	Line    int // 1-based; 0 when unknown
	Column  int // 1-based; 0 when unknown
	Message string
	// More holds further problems of the same build, if any.
	More []*Error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.one())
	for _, m := range e.More {
		b.WriteString("\n")
		b.WriteString(m.one())
	}
	return b.String()
}

func (e *Error) one() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Message)
	case e.File != "":
		return e.File + ": " + e.Message
	}
	return e.Message
}

// AsError returns err as a *Error if it is one.
func AsError(err error) (*Error, bool) {
	var be *Error
	ok := errors.As(err, &be)
	return be, ok
}
