package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"stead/api/wire"
	"stead/approvals"
	"stead/runtime/agent"
	"stead/runtime/bundle"
	"stead/runtime/engine"
	"stead/store"
)

// Error codes. Each goes with one HTTP status; clients switch on the code.
const (
	CodeInvalidArgument      = "invalid_argument"       // 400
	CodeUnauthenticated      = "unauthenticated"        // 401
	CodeForbidden            = "forbidden"              // 403
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeConflict             = "conflict"               // 409
	CodeApprovalNotPending   = "approval_not_pending"   // 409
	CodeApprovalExpired      = "approval_expired"       // 409
	CodeNotAnApprover        = "not_an_approver"        // 403
	CodeAlreadyVoted         = "already_voted"          // 409
	CodeApprovalChanged      = "approval_changed"       // 409
	CodeMemberExists         = "member_exists"          // 409
	CodePayloadTooLarge      = "payload_too_large"      // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415
	CodeIdempotencyKeyReused = "idempotency_key_reused" // 422
	CodeRateLimited          = "rate_limited"           // 429
	CodeInternal             = "internal"               // 500
	CodeUnavailable          = "unavailable"            // 503
)

// Error is the body of every failed response, under "error":
//
//	{"error": {"code": "invalid_argument", "message": "…", "details": {"fields": [{"field": "input.orderId", "message": "is required"}]}}}
//
// Clients can decode it into ErrorBody.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	// Details carries data for the code: "fields" (a list of FieldProblem)
	// for invalid_argument, "problems" for a refused config or bundle, the
	// approval's state for approval_not_pending / approval_expired.
	Details map[string]any `json:"details,omitempty"`

	cause error // logged for internal errors, never sent
	// retryAfter, when set, is sent as the Retry-After header.
	retryAfter time.Duration
}

// ErrorBody is the JSON document of an error response.
type ErrorBody struct {
	Error Error `json:"error"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// invalid is a 400 naming each bad field.
func invalid(problems ...wire.FieldProblem) *Error {
	msg := "the request is not valid"
	if len(problems) > 0 {
		msg = problems[0].Field + ": " + problems[0].Message
		if problems[0].Field == "" {
			msg = problems[0].Message
		}
		if n := len(problems) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more %s)", n, plural(n, "problem", "problems"))
		}
	}
	return &Error{
		Status: http.StatusBadRequest, Code: CodeInvalidArgument, Message: msg,
		Details: map[string]any{"fields": problems},
	}
}

func invalidField(field, format string, args ...any) *Error {
	return invalid(wire.FieldProblem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func unauthenticated(format string, args ...any) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: CodeUnauthenticated, Message: fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Code: CodeForbidden, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: fmt.Sprintf(format, args...)}
}

// rateLimited is a 429 for a source address or credential (by) that
// failed authentication too often; wait is how long it stays refused.
func rateLimited(wait time.Duration, by string) *Error {
	secs := int64((wait + time.Second - 1) / time.Second)
	return &Error{
		Status: http.StatusTooManyRequests, Code: CodeRateLimited,
		Message:    fmt.Sprintf("too many failed authentications from %s; the credential was not checked; try again in %ds", by, secs),
		Details:    map[string]any{"retryAfterSeconds": secs},
		retryAfter: time.Duration(secs) * time.Second,
	}
}

func tooLarge(format string, args ...any) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodePayloadTooLarge, Message: fmt.Sprintf(format, args...)}
}

func internal(err error) *Error {
	return &Error{
		Status: http.StatusInternalServerError, Code: CodeInternal,
		Message: "internal error; the server log has the details", cause: err,
	}
}

// translate turns an error from the engine, the store or a handler into
// the response it stands for. Handlers that know more (which run, which
// approval) translate the sentinels themselves first.
func translate(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var inputErr *engine.InputError
	var editErr *engine.EditError
	var cfgErr *agent.ConfigError
	var filterErr *store.FilterError
	var rememberErr *engine.RememberError
	switch {
	case errors.As(err, &filterErr):
		return invalidField(filterErr.Field, "%s", filterErr.Problem())
	case errors.As(err, &inputErr):
		return invalid(inputProblems("input", inputErr.Err)...)
	case errors.As(err, &editErr):
		return invalid(inputProblems("input", editErr.Err)...)
	case errors.As(err, &cfgErr):
		return configInvalid(cfgErr)
	case errors.As(err, &rememberErr):
		return rememberInvalid(rememberErr)
	}
	if be, ok := bundle.AsError(err); ok {
		return bundleInvalid(be)
	}
	switch {
	case errors.Is(err, engine.ErrForbidden):
		return forbidden("this credential may not do that")
	case errors.Is(err, engine.ErrBrokerToken):
		return unauthenticated("%s", engine.ErrBrokerToken.Error())
	case errors.Is(err, engine.ErrIdempotencyKeyReused):
		return &Error{
			Status: http.StatusUnprocessableEntity, Code: CodeIdempotencyKeyReused,
			Message: "this Idempotency-Key was already used with a different request; use a new key for a new run",
		}
	case errors.Is(err, engine.ErrNoDeployment):
		return notFound("%s", engine.ErrNoDeployment.Error())
	case errors.Is(err, engine.ErrRunFinished):
		return conflict("the run has already finished")
	case errors.Is(err, approvals.ErrExpired):
		return &Error{Status: http.StatusConflict, Code: CodeApprovalExpired, Message: "the approval has expired; it can no longer be decided"}
	case errors.Is(err, approvals.ErrNotPending):
		return &Error{Status: http.StatusConflict, Code: CodeApprovalNotPending, Message: "the approval is no longer pending; check the run trace"}
	case errors.Is(err, store.ErrNotFound):
		return notFound("not found")
	case errors.Is(err, store.ErrConflict):
		return conflict("the record changed while the request was handled; read it again and retry")
	case errors.Is(err, store.ErrInvalidCursor):
		return invalidField("cursor", "is not a cursor this list handed out; start again without it")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Code: CodeUnavailable, Message: "the request was cancelled before it finished; retry it", cause: err}
	}
	return internal(err)
}

// inputProblems lists a schema failure as fields under root ("input" →
// "input.orderId"); anything else is one problem at root.
func inputProblems(root string, err error) []wire.FieldProblem {
	var ie *agent.InputError
	if !errors.As(err, &ie) || len(ie.Problems) == 0 {
		return []wire.FieldProblem{{Field: root, Message: err.Error()}}
	}
	out := make([]wire.FieldProblem, len(ie.Problems))
	for i, p := range ie.Problems {
		f := root
		switch {
		case p.Path == "":
		case p.Path[0] == '[':
			f += p.Path
		default:
			f += "." + p.Path
		}
		out[i] = wire.FieldProblem{Field: f, Message: p.Message}
	}
	return out
}

func configProblems(ps []agent.Problem) []wire.ConfigProblem {
	out := make([]wire.ConfigProblem, len(ps))
	for i, p := range ps {
		out[i] = wire.ConfigProblem{Pointer: p.Pointer, Message: p.Message, Line: p.Line, Column: p.Column}
	}
	return out
}

func configInvalid(e *agent.ConfigError) *Error {
	msg := "config is not valid"
	if len(e.Problems) > 0 {
		msg = "config is not valid: " + e.Problems[0].String()
		if n := len(e.Problems) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more %s)", n, plural(n, "problem", "problems"))
		}
	}
	return &Error{
		Status: http.StatusBadRequest, Code: CodeInvalidArgument, Message: msg,
		Details: map[string]any{"field": "config", "code": e.Code(), "problems": configProblems(e.Problems)},
	}
}

func bundleInvalid(e *bundle.Error) *Error {
	all := append([]*bundle.Error{e}, e.More...)
	ps := make([]wire.BundleProblem, len(all))
	for i, b := range all {
		ps[i] = wire.BundleProblem{Code: b.Code, File: b.File, Line: b.Line, Column: b.Column, Message: b.Message}
	}
	first := *e
	first.More = nil
	status, code := http.StatusBadRequest, CodeInvalidArgument
	if e.Code == bundle.CodeTooLarge {
		status, code = http.StatusRequestEntityTooLarge, CodePayloadTooLarge
	}
	return &Error{
		Status: status, Code: code, Message: "bundle is not valid: " + firstLine(first.Error()),
		Details: map[string]any{"field": "bundle", "code": e.Code, "problems": ps},
	}
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// writeError writes err as a JSON error. Internal errors are logged with
// their cause and answered without it.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := translate(err)
	if e.Status >= 500 {
		attrs := []slog.Attr{
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", e.Status), slog.Any("error", e.cause),
		}
		if info := infoOf(r.Context()); info != nil {
			attrs = append(attrs, slog.String("request", info.id))
			e.Message += " (request " + info.id + ")"
		}
		s.log.LogAttrs(r.Context(), slog.LevelError, "request failed", attrs...)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(int64(e.retryAfter/time.Second), 10))
	}
	if e.Status == http.StatusUnauthorized {
		// RFC 9110: a 401 names its scheme. An OAuth resource server for
		// MCP clients would add resource_metadata here (RFC 9728).
		w.Header().Set("WWW-Authenticate", `Bearer realm="stead"`)
	}
	writeJSON(w, e.Status, ErrorBody{Error: *e})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
