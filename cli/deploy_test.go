package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeployPlacesConfigProblems: a stead.json problem is printed where it
// is, as CONFIG.md shows — stead.json:line:column: pointer: message — for a
// syntax error the CLI finds before bundling as for what the server refuses
// (testdata/deploy_config_*.golden).
func TestDeployPlacesConfigProblems(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	dir := writeExample(t, func(c string) string {
		return strings.Replace(c, `"listOrders": { "effect": "read",`, `"listOrders": { "effect": "reed",`, 1)
	})
	r := s.cli("deploy", dir)
	if r.code != 1 {
		t.Fatalf("bad effect: %s", r)
	}
	golden(t, "deploy_config_refused", r.stderr)

	dir = writeExample(t, func(c string) string {
		return strings.Replace(c, `"reason": { "type": "string" }`, `"reason": { "type": "string" },`, 1)
	})
	r = s.cli("deploy", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "stead.json:10:") {
		t.Fatalf("trailing comma: %s", r)
	}
	golden(t, "deploy_config_syntax", r.stderr)

	if err := os.WriteFile(filepath.Join(dir, "stead.json"), []byte(`{ "handlers": "handlers.js", "agents": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := s.cli("deploy", dir); r.code != 1 || !strings.Contains(r.stderr, "  stead.json:1:41: invalid JSON at line 1, column 41: unexpected end of file") {
		t.Errorf("unclosed brace: %s", r)
	}
}

// TestDeployNamesAMissingFile: a typo'd relative import is "no such file"
// with the nearest name, not the Node builtins hint
// (testdata/deploy_import_typo.golden).
func TestDeployNamesAMissingFile(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	files := map[string]string{}
	for k, v := range thrownHandlers {
		files[k] = v
	}
	files["handlers.ts"] = strings.Replace(files["handlers.ts"], `"./money"`, `"./mony"`, 1)
	r := s.cli("deploy", writeFiles(t, files))
	if r.code != 1 || strings.Contains(r.stderr, "Node builtins") {
		t.Fatalf("typo'd import: %s", r)
	}
	golden(t, "deploy_import_typo", r.stderr)
}
