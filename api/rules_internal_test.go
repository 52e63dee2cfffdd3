package api

import (
	"fmt"
	"net/http"
	"testing"

	"stead/api/wire"
	"stead/runtime/engine"
)

// TestRememberErrors: a decision that cannot be remembered reads as a 400
// naming the part of "remember" to fix, or a 409 when the caller did not
// approve the approval, however the engine's error was wrapped.
func TestRememberErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    *engine.RememberError
		status int
		code   string
		field  string
	}{
		{&engine.RememberError{Field: "for", Reason: engine.RememberTooLong, Message: "48h is longer than refundOrder allows"}, http.StatusBadRequest, CodeInvalidArgument, "remember.for"},
		{&engine.RememberError{Reason: engine.RememberNotAllowed, Message: "refundOrder does not allow remembered decisions"}, http.StatusBadRequest, CodeInvalidArgument, "remember"},
		{&engine.RememberError{Reason: engine.RememberNotDecider, Message: "approval apr_1 is pending"}, http.StatusConflict, CodeConflict, "remember"},
	} {
		e := translate(fmt.Errorf("approve: %w", c.err))
		fields, _ := e.Details["fields"].([]wire.FieldProblem)
		if e.Status != c.status || e.Code != c.code || len(fields) != 1 || fields[0].Field != c.field ||
			fields[0].Message != c.err.Message || e.Details["code"] != c.err.Reason {
			t.Errorf("%s: translated to %d %s %+v", c.err.Reason, e.Status, e.Code, e.Details)
		}
	}
}
