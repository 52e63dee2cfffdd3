package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"stead/api/wire"
	"stead/store"
	"stead/strictjson"
)

// writeJSON writes v as the response body with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error: the response could not be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// readBody reads a JSON request body of at most limit bytes into v (a
// pointer to a struct). An empty body decodes as {}; a non-empty one must be
// declared application/json and hold one JSON object, nothing after it, read
// strictly (strictjson): only v's fields, names matched exactly (a case
// variant is an unknown field), no name twice in any object, valid UTF-8,
// at most strictjson.MaxDepth levels deep, raw values (an input, a broker
// value) included. A refused body is a 400 naming the field, before anything
// is done with it.
func readBody(r *http.Request, limit int64, v any) error {
	data, err := readAll(r, limit)
	if err != nil {
		return err
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		data = []byte("{}")
	} else {
		ct := r.Header.Get("Content-Type")
		mt, _, perr := mime.ParseMediaType(ct)
		if ct == "" || perr != nil || mt != "application/json" {
			got := ct
			if got == "" {
				got = "none"
			}
			return &Error{
				Status: http.StatusUnsupportedMediaType, Code: CodeUnsupportedMediaType,
				Message: fmt.Sprintf("the body must be JSON with Content-Type: application/json (got %s)", got),
			}
		}
		if trimmed[0] != '{' {
			return invalidField("", "the body must be a JSON object")
		}
	}
	if err := strictjson.Unmarshal(data, v); err != nil {
		return decodeError(err)
	}
	return nil
}

// readAll reads a request body of at most limit bytes.
func readAll(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge("request body is %s; the limit is %s", size(r.ContentLength), size(limit))
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge("request body is larger than %s", size(limit))
		}
		return nil, &Error{Status: http.StatusBadRequest, Code: CodeInvalidArgument, Message: "the request body could not be read: " + err.Error()}
	}
	return data, nil
}

// decodeError names the field a JSON decode failed on.
func decodeError(err error) error {
	var e *strictjson.Error
	if !errors.As(err, &e) {
		return invalidField("", "the body is not valid JSON: %s", err.Error())
	}
	switch e.Reason {
	case strictjson.Trailing:
		return invalidField("", "the body has data after its JSON object; send exactly one object")
	case strictjson.Syntax:
		return invalidField("", "the body %s", e.Message)
	}
	if e.Path() == "" {
		return invalidField("", "the body %s", e.Message)
	}
	return invalidField(e.Path(), "%s", e.Message)
}

// size renders a byte count the way the limits are stated.
func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// query reads query parameters, collecting every problem.
type query struct {
	v        url.Values
	problems []wire.FieldProblem
}

func newQuery(r *http.Request) *query { return &query{v: r.URL.Query()} }

func (q *query) bad(field, format string, args ...any) {
	q.problems = append(q.problems, wire.FieldProblem{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (q *query) str(name string) string { return q.v.Get(name) }

// limit reads ?limit= (store.ParseLimit: 1..store.MaxLimit); 0 when absent.
func (q *query) limit() int {
	n, err := store.ParseLimit(q.v.Get("limit"))
	q.check(err)
	return n
}

// check records a list filter that package store refused (a
// *store.FilterError, or nil) as a problem of its field.
func (q *query) check(err error) {
	if fe := (*store.FilterError)(nil); errors.As(err, &fe) {
		q.bad(fe.Field, "%s", fe.Problem())
	} else if err != nil {
		q.bad("", "%s", err.Error())
	}
}

// wait reads ?wait= as a Go duration ("30s") or whole seconds ("30"), at
// most MaxWait; 0 when absent.
func (q *query) wait() time.Duration {
	s := q.v.Get("wait")
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.Atoi(s)
		if nerr != nil {
			q.bad("wait", `must be a duration such as "30s" (got %q)`, s)
			return 0
		}
		d = time.Duration(n) * time.Second
	}
	if d < 0 || d > MaxWait {
		q.bad("wait", "must be from 0s to %s (got %q)", MaxWait, s)
		return 0
	}
	return d
}

func (q *query) err() error {
	if len(q.problems) > 0 {
		return invalid(q.problems...)
	}
	return nil
}

// textProblem says why s cannot be an identifier-like text field (an end
// user id, a name): empty when required, too long, or with control
// characters. "" means it is fine.
func textProblem(s string, required bool, maxLen int) string {
	switch {
	case s == "" && required:
		return "is required"
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case utf8.RuneCountInString(s) > maxLen:
		return fmt.Sprintf("must be at most %d characters long", maxLen)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "must not contain control characters"
	}
	return ""
}
