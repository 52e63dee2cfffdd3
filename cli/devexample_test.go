package cli

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"stead/approvals"
	"stead/examples/refunds"
	"stead/runtime/engine"
)

// TestExampleKeepsTheProjectsOwnDeployment: `stead dev --example` deploys
// the example when it is missing or an earlier version of it is the
// latest, and leaves a deployment of the project's own in place.
func TestExampleKeepsTheProjectsOwnDeployment(t *testing.T) {
	s := newTestStack(t) // deploys the example: version 1
	ctx := context.Background()
	latest := func() (int, string) {
		t.Helper()
		d, err := s.stack.Store.LatestDeployment(ctx, s.project)
		if err != nil {
			t.Fatal(err)
		}
		return d.Version, d.CreatedBy
	}
	again := func() (kept int) {
		t.Helper()
		k, err := deployExample(ctx, s.stack, s.project, s.stack.log)
		if err != nil {
			t.Fatal(err)
		}
		if k != nil {
			return k.Version
		}
		return 0
	}
	deployAs := func(actor string) {
		t.Helper()
		src, err := packExample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cfg := strings.Replace(string(refunds.Config), `"requiresApproval": true,`, `"requiresApproval": true, "approvals": { "timeout": "1s" },`, 1)
		if _, err := s.stack.Engine.Deploy(ctx, approvals.Actor{ProjectID: s.project, Role: approvals.RoleOwner, ID: actor},
			engine.DeployParams{Bundle: src, Config: []byte(cfg)}); err != nil {
			t.Fatal(err)
		}
	}

	if kept := again(); kept != 0 {
		t.Errorf("the example as the latest deployment was reported kept (%d)", kept)
	}
	if v, by := latest(); v != 1 || by != exampleActor {
		t.Fatalf("the example deployed again unchanged: latest is %d by %s, want 1 by %s", v, by, exampleActor)
	}

	deployAs(exampleActor) // an earlier version of the example: replaced
	if kept := again(); kept != 0 {
		t.Errorf("an earlier example was reported kept (%d)", kept)
	}
	if v, by := latest(); v != 3 || by != exampleActor {
		t.Errorf("an earlier example as the latest: latest is %d by %s, want 3 by %s", v, by, exampleActor)
	}

	deployAs("key_mine") // the project's own: kept
	if kept := again(); kept != 4 {
		t.Errorf("kept %d, want the project's own deployment 4", kept)
	}
	if v, by := latest(); v != 4 || by != "key_mine" {
		t.Errorf("the project's own deployment was replaced: latest is %d by %s", v, by)
	}
}

// TestDevRefusesABadAddr: a --addr that is not HOST:PORT is a usage error
// (exit 2) that shows the form, before anything is opened.
func TestDevRefusesABadAddr(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"nonsense", ":99999", "127.0.0.1:abc", "127.0.0.1:"} {
		data := filepath.Join(t.TempDir(), "data")
		var out bytes.Buffer
		code := Run(context.Background(), Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }},
			[]string{"dev", "--addr", addr, "--data", data})
		if code != 2 || !strings.Contains(out.String(), "--addr must be HOST:PORT, e.g. 127.0.0.1:8720") {
			t.Errorf("stead dev --addr %q: exit %d, want 2 with the form:\n%s", addr, code, out.String())
		}
		if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("stead dev --addr %q made its data folder: %v", addr, err)
		}
	}
}
