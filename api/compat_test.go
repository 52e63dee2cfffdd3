package api_test

import (
	"os"
	"strings"
	"testing"

	"stead/api/openapicompat"
)

// TestOpenAPICompatible: api/openapi.json breaks no client of the last
// release's document (api/openapi.released.json), except for changes the
// CHANGELOG's Unreleased section lists, each in openapicompat's words.
func TestOpenAPICompatible(t *testing.T) {
	t.Parallel()
	released, err := os.ReadFile("openapi.released.json")
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	changes, err := openapicompat.Breaking(released, current)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	unreleased, ok := section(string(log), "## Unreleased")
	if !ok {
		t.Fatal("CHANGELOG.md has no \"## Unreleased\" section")
	}
	for _, c := range changes {
		if !strings.Contains(unreleased, c) {
			t.Errorf("a breaking change to the API that CHANGELOG.md's Unreleased section does not list: %s", c)
		}
	}
}

// section is the text under heading, up to the next heading of its level.
func section(doc, heading string) (string, bool) {
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		return "", false
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}
