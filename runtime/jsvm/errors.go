package jsvm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dop251/goja"

	"stead/runtime/bundle"
)

// Error codes, stable for the engine, the API and the CLI.
const (
	// CodeHandlerError: the handler threw, or its promise rejected.
	CodeHandlerError = "handler-error"
	// CodeTimeout: the invocation's deadline passed first.
	CodeTimeout = "timeout"
	// CodeCancelled: the invocation's context was cancelled (not by its deadline).
	CodeCancelled = "cancelled"
	// CodeMemory: the invocation went over Options.MemoryLimit.
	CodeMemory = "memory-limit"
	// CodeStackOverflow: the call stack went past bundle.MaxCallStackSize.
	CodeStackOverflow = "stack-overflow"
	// CodeNotSerializable: the handler's result is not JSON (undefined,
	// a function, a cycle, a BigInt…).
	CodeNotSerializable = "result-not-serializable"
	// CodeResultTooLarge: the serialized result is over Options.MaxResultSize.
	CodeResultTooLarge = "result-too-large"
	// CodeExportNotFound: the bundle has no export of that name.
	CodeExportNotFound = "export-not-found"
	// CodeNotFunction: the export exists but is not a function.
	CodeNotFunction = "export-not-function"
	// CodeNeverSettles: the handler's promise is pending with nothing left
	// that could settle it (no host call in flight, no timer).
	CodeNeverSettles = "never-settles"
	// CodeInternal: a fault in Stead itself (a Go panic in a host function,
	// a closed Runtime); the VM is discarded.
	CodeInternal = "internal-error"
	// CodeInvalidInput: Invocation.Input is not JSON or is too large.
	CodeInvalidInput = "invalid-input"
	// CodeSandboxCrashed: the sandbox worker running the call died another
	// way than by its time or memory limit (Go's fatal stack overflow, a
	// signal, a protocol violation). Not necessarily the call's own doing:
	// such errors are Retryable.
	CodeSandboxCrashed = "sandbox-crashed"
	// CodeBusy: no sandbox worker was free for the call by
	// Invocation.StartBy. The call did not start; it may be tried again.
	CodeBusy = "sandbox-busy"
)

// NewError returns an *Error with code and message; for CodeTimeout and
// CodeCancelled it unwraps to context.DeadlineExceeded or context.Canceled,
// as the Runtime's own do. For code that reports a call across a boundary.
func NewError(code, message string) *Error {
	e := &Error{Code: code, Message: message}
	switch code {
	case CodeTimeout:
		e.cause = context.DeadlineExceeded
	case CodeCancelled:
		e.cause = context.Canceled
	}
	return e
}

// Error is a failed invocation. Message, Name and Stack are redacted of the
// invocation's secrets. Code is one of the Code constants.
type Error struct {
	// Code is the stable machine-readable code.
	Code string
	// Message says what happened (and, where Stead knows, what to do).
	Message string
	// Name is the JS error's name ("TypeError") when the handler threw one.
	Name string
	// Stack is the JS stack, with file:line:column in the bundle's sources
	// when it carries their map (a bundle stead deploy made), else in the
	// bundle, when known.
	Stack string
	// File, Line and Column are where the error was thrown: the first frame
	// of Stack in the handler's own code (StackPosition). Line is 0 when
	// unknown.
	File   string
	Line   int
	Column int
	// Retryable: the failure may not be this invocation's doing (the heap
	// went over the limit while other invocations ran too); trying again is
	// reasonable.
	Retryable bool

	cause error
}

// Error returns "Name: Message", or Message alone when there is no Name.
func (e *Error) Error() string {
	if e.Name != "" && !strings.HasPrefix(e.Message, e.Name+":") {
		return e.Name + ": " + e.Message
	}
	return e.Message
}

// Unwrap returns context.DeadlineExceeded or context.Canceled for
// CodeTimeout and CodeCancelled, and nil otherwise.
func (e *Error) Unwrap() error { return e.cause }

// AsError returns err as an *Error if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Interrupt reasons, passed to goja's Interrupt and recognised afterwards.
var (
	errInterruptTimeout = errors.New("jsvm: deadline")
	errInterruptMemory  = errors.New("jsvm: memory limit")
	errWaitDone         = errors.New("jsvm: context done while waiting")
	errNeverSettles     = errors.New("jsvm: never settles")
)

// hostPanic is a Go panic recovered from host code.
type hostPanic struct{ value any }

func (p *hostPanic) Error() string { return fmt.Sprintf("%v", p.value) }

// stackFrame is one line of a stack: "at name (file:line:col)" or
// "at file:line:col", as cleanStack leaves goja's.
var stackFrame = regexp.MustCompile(`^\s*at (?:.*? \()?(.+):(\d+):(\d+)(?:\(\d+\))?\)?\s*$`)

// framePC is the program counter goja writes after a frame's position
// ("handlers.ts:12:5(34)"), meaningless to the handler's author.
var framePC = regexp.MustCompile(`(:\d+:\d+)\(\d+\)`)

// cleanStack returns a stack as people read one: trimmed to maxStackLines,
// without goja's program counters.
func cleanStack(s string) string {
	return framePC.ReplaceAllString(trimStack(s), "$1")
}

// StackPosition returns where a JS stack says its error was thrown: the
// first frame in the handler's code, skipping built-ins ("native") and
// Stead's own prelude. ok is false when no frame is the handler's. It is
// only ever called for a failed call.
func StackPosition(stack string) (file string, line, column int, ok bool) {
	for l := range strings.Lines(stack) {
		m := stackFrame.FindStringSubmatch(l)
		if m == nil || m[1] == "stead:prelude" || m[1] == "<eval>" {
			continue
		}
		line, err1 := strconv.Atoi(m[2])
		column, err2 := strconv.Atoi(m[3])
		if err1 != nil || err2 != nil || line <= 0 {
			continue
		}
		return m[1], line, column, true
	}
	return "", 0, 0, false
}

// SetPosition sets e's File, Line and Column from its Stack.
func (e *Error) SetPosition() {
	e.File, e.Line, e.Column, _ = StackPosition(e.Stack)
}

// maxStackLines bounds Error.Stack (a stack overflow has 1000 frames).
const maxStackLines = 30

func trimStack(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			n++
			if n == maxStackLines {
				return s[:i] + "\n\t…"
			}
		}
	}
	return s
}

// classify turns what a goja call returned into an *Error, retiring the
// worker when the VM can no longer be trusted.
func (w *worker) classify(err error) *Error {
	c := w.cur
	var (
		ie *goja.InterruptedError
		so *goja.StackOverflowError
		ex *goja.Exception
		hp *hostPanic
		e  *Error
	)
	switch {
	case c.memBreach != "":
		w.broken = true
		return &Error{Code: CodeMemory, Message: c.memBreach}
	case errors.As(err, &e):
		return e
	case errors.As(err, &hp):
		w.broken = true
		return &Error{Code: CodeInternal, Message: "internal error in a host function: " + hp.Error()}
	case errors.Is(err, errInterruptMemory):
		w.broken = true
		return w.memoryError()
	case errors.As(err, &ie), errors.Is(err, errWaitDone):
		w.broken = true
		return contextError(c.ctx, c.start)
	case errors.As(err, &so):
		w.broken = true
		e = &Error{Code: CodeStackOverflow, Name: "RangeError",
			Message: fmt.Sprintf("stack overflow: the call stack went past %d frames; look for unbounded recursion", maxCallDepth),
			Stack:   cleanStack(so.String())}
		e.SetPosition()
		return e
	case errors.Is(err, errNeverSettles):
		return &Error{Code: CodeNeverSettles,
			Message: "the handler's promise can never settle: it awaits a promise that nothing will resolve (no host call in flight, no timer pending)"}
	case errors.As(err, &ex):
		return w.thrown(ex.Value(), "")
	}
	w.broken = true
	return &Error{Code: CodeInternal, Message: "internal error: " + err.Error()}
}

func (w *worker) memoryError() *Error {
	return &Error{Code: CodeMemory, Message: fmt.Sprintf(
		"memory limit exceeded: the handler grew the heap by more than %s; process less data per call", bundle.FormatSize(w.rt.opts.MemoryLimit))}
}

func (w *worker) sharedMemoryError() *Error {
	return &Error{Code: CodeMemory, Retryable: true, Message: fmt.Sprintf(
		"memory limit exceeded: the heap grew by more than %s while other handlers ran too, so this one may not be the cause", bundle.FormatSize(w.rt.opts.MemoryLimit))}
}

// contextError reports an invocation stopped by its context.
func contextError(ctx context.Context, start time.Time) *Error {
	elapsed := time.Since(start).Round(time.Millisecond)
	if errors.Is(ctx.Err(), context.Canceled) {
		return &Error{Code: CodeCancelled, cause: context.Canceled,
			Message: fmt.Sprintf("invocation cancelled after %s", elapsed)}
	}
	return &Error{Code: CodeTimeout, cause: context.DeadlineExceeded,
		Message: fmt.Sprintf("handler did not finish before its deadline (ran %s); make it faster or raise the step timeout", elapsed)}
}

// thrown describes a thrown or rejected JS value as a handler error.
func (w *worker) thrown(v goja.Value, prefix string) *Error {
	e := &Error{Code: CodeHandlerError}
	if v == nil {
		v = goja.Undefined()
	}
	parts, err := w.describeError(goja.Undefined(), v)
	if err != nil {
		// describeError catches what it can; an uncatchable error means the
		// VM is done for.
		return w.classify(err)
	}
	if o, ok := parts.(*goja.Object); ok {
		e.Name = o.Get("0").String()
		e.Message = o.Get("1").String()
		e.Stack = cleanStack(o.Get("2").String())
	}
	e.Message = prefix + e.Message
	e.SetPosition()
	return e
}
