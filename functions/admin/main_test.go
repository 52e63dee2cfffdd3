package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Everything that fails before reaching AWS; bootstrapping itself runs in
// the end-to-end test (functions/e2e), against moto_server.
func TestUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
		code int
		want string
	}{
		{nil, nil, 2, "usage: admin bootstrap"},
		{[]string{"create-project"}, nil, 2, "usage: admin bootstrap"},
		{[]string{"bootstrap", "-nope"}, nil, 2, "flag provided but not defined: -nope"},
		{[]string{"bootstrap", "-table", "t"}, nil, 1, "-name is required"},
		{[]string{"bootstrap", "-name", "  "}, map[string]string{"STEAD_TABLE": "t"}, 1, "-name is required"},
		{[]string{"bootstrap", "-name", "Acme"}, nil, 1, "-table is required (or set STEAD_TABLE)"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, func(k string) string { return c.env[k] }, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want exit %d mentioning %q", c.args, code, stderr.String(), stdout.String(), c.code, c.want)
		}
	}
}

// TestNoRegion: without a region anywhere, bootstrap says to set one
// before it tries the table.
func TestNoRegion(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_REGION": "", "AWS_DEFAULT_REGION": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
	} {
		t.Setenv(k, v)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bootstrap", "-name", "Acme", "-table", "t"}, func(string) string { return "" }, &stdout, &stderr)
	if want := "admin bootstrap: no AWS region: set AWS_REGION (or a region in your AWS profile) to the stack's region\n"; code != 1 || stderr.String() != want || stdout.Len() != 0 {
		t.Errorf("exit %d, stderr %q, stdout %q", code, stderr.String(), stdout.String())
	}
}
