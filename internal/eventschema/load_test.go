package eventschema_test

import (
	"os"
	"strings"
	"testing"

	"stead/internal/eventschema"
)

// TestLoadRefuses documents whose Event is not discriminated on type.
func TestLoadRefuses(t *testing.T) {
	doc, err := os.ReadFile("../../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string][3]string{
		"another discriminator":            {`"propertyName": "type"`, `"propertyName": "kind"`, "the OpenAPI document's Event has no discriminator on type"},
		"a mapping outside the components": {`"run.started": "#/components/schemas/RunStartedEvent"`, `"run.started": "other.json#/RunStartedEvent"`, `event type run.started maps to "other.json#/RunStartedEvent", not a component schema`},
	} {
		bad := strings.Replace(string(doc), edit[0], edit[1], 1)
		if bad == string(doc) {
			t.Fatalf("%s: the edit %q does not apply", name, edit[0])
		}
		if _, err := eventschema.Load([]byte(bad)); err == nil || err.Error() != edit[2] {
			t.Errorf("%s: err = %v, want %q", name, err, edit[2])
		}
	}
}
