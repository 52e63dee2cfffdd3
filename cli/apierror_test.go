package cli

import (
	"testing"
)

// TestAPIErrorsInText: an invalid request's every problem on its own line;
// a refused key's advice once, for where the key came from.
func TestAPIErrorsInText(t *testing.T) {
	t.Parallel()
	s := newTestStack(t)
	r := s.cli("run", "refunds", "--end-user", "u", "--input", `{"orderId":1}`)
	want := "error: the request is not valid (2 problems):\n  input.orderId: must be a string\n  input.reason: is required\n"
	if r.code != ExitError || r.stderr != want {
		t.Errorf("run with a bad input: want stderr %q: %s", want, r)
	}
	// No --input: the error says the input was {}.
	r = s.cli("run", "refunds", "--end-user", "u")
	want = "error: the request is not valid (2 problems):\n  input.orderId: is required\n  input.reason: is required\n" +
		"the input was {}, as no --input was given: pass the agent's input with --input JSON (or @file)\n"
	if r.code != ExitError || r.stderr != want {
		t.Errorf("run without --input: want stderr %q: %s", want, r)
	}
	// --json keeps the API's own document.
	r = s.cli("run", "refunds", "--end-user", "u", "--input", `{"orderId":1}`, "--json")
	if got := jsonField(t, r.stdout, "error.message"); got != "input.orderId: must be a string (and 1 more problem)" {
		t.Errorf("run --json with a bad input: message %q", got)
	}

	const badKey = "stk_THISKEYDOESNOTEXISTANYWHEREATALLXXXXXXXXXXXXXXXXXXXXXXX"
	if err := writeConfig(s.config, FileConfig{URL: s.srv.URL, Key: badKey}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    result
		want string
	}{
		{"--key", s.cli("runs", "--key", badKey), "the key comes from --key; check it, or ask an owner for one (`stead keys create`)"},
		{"STEAD_KEY", s.run(cliEnv{EnvKey: badKey}, "runs"), "the key comes from $STEAD_KEY; check it, or ask an owner for one (`stead keys create`)"},
		{"config file", s.run(cliEnv{EnvKey: ""}, "runs"), "the key comes from " + s.config + "; run `stead login` (or `stead dev`) to write a new one"},
	} {
		if want := "error: the API key is not valid; " + c.want + "\n"; c.r.code != ExitError || c.r.stderr != want {
			t.Errorf("%s: want stderr %q: %s", c.name, want, c.r)
		}
	}
}
