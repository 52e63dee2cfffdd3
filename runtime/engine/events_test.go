package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"stead/approvals"
	"stead/internal/eventschema"
	"stead/store"
)

// Every event an engine test writes is checked against the event kinds of
// the OpenAPI document (api/openapi.json, read as a file: the engine may
// not import package api): setup wraps each harness store in checkedEvents,
// so a field, a type or a kind the document lacks fails the test that wrote
// it. TestMain then fails the run when a documented kind was written by no
// test (checkKindsWritten), so the document cannot list kinds the engine
// no longer writes.
var (
	eventSchemas = sync.OnceValues(func() (*eventschema.Schemas, error) {
		doc, err := os.ReadFile("../../api/openapi.json")
		if err != nil {
			return nil, err
		}
		return eventschema.Load(doc)
	})
	kindsWritten sync.Map // event type → true
)

type checkedEvents struct {
	store.Store
	t testing.TB
}

func (c checkedEvents) check(events []store.Event) {
	c.t.Helper()
	s, err := eventSchemas()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, e := range events {
		kindsWritten.Store(e.Type, true)
		if err := s.CheckData(e.Type, e.Data); err != nil {
			c.t.Errorf("the engine wrote an event the OpenAPI document does not describe: %v", err)
		}
	}
}

func (c checkedEvents) CreateRun(ctx context.Context, r store.Run, events []store.Event) (store.Run, error) {
	c.check(events)
	return c.Store.CreateRun(ctx, r, events)
}

func (c checkedEvents) CommitRun(ctx context.Context, cm store.RunCommit) (store.Run, error) {
	c.check(cm.Events)
	return c.Store.CommitRun(ctx, cm)
}

func (c checkedEvents) DecideApproval(ctx context.Context, p store.DecideParams) (approvals.Approval, store.Run, error) {
	c.check(p.Events)
	return c.Store.DecideApproval(ctx, p)
}

// checkKindsWritten fails a full run of the package (not one narrowed by
// -run or -skip) in which some documented event kind was never written.
func checkKindsWritten() error {
	if narrowed() {
		return nil
	}
	s, err := eventSchemas()
	if err != nil {
		return err
	}
	var missing []string
	for _, k := range s.Kinds() {
		if _, ok := kindsWritten.Load(k); !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("openapi.json documents event kinds no engine test wrote (test them, or remove them from the document): %s", strings.Join(missing, ", "))
	}
	return nil
}
