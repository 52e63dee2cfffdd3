package awsstack

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestModelKeyLookup(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"OPENAI_API_KEY": "sk-1", "AWS_SECRET_ACCESS_KEY": "role-secret", "AWS_SESSION_TOKEN": "tok",
		"aws_secret_access_key": "x", "_X_AMZN_TRACE_ID": "t", "LAMBDA_TASK_ROOT": "/var/task", "STEAD_TABLE": "t",
	}
	var logs bytes.Buffer
	lookup := modelKeyLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, slog.New(slog.NewJSONHandler(&logs, nil)))
	if v, ok := lookup("OPENAI_API_KEY"); !ok || v != "sk-1" {
		t.Errorf("OPENAI_API_KEY: %q %v", v, ok)
	}
	for _, name := range []string{"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "aws_secret_access_key", "_X_AMZN_TRACE_ID", "LAMBDA_TASK_ROOT", "STEAD_TABLE"} {
		if v, ok := lookup(name); ok || v != "" {
			t.Errorf("%s was handed out: %q", name, v)
		}
	}
	if !strings.Contains(logs.String(), `"variable":"AWS_SECRET_ACCESS_KEY"`) {
		t.Errorf("a refusal is not logged: %s", logs.String())
	}
}
