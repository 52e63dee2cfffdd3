package awsstack_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"stead/functions/awsstack"
)

// fnEnv is a complete environment of fn, with extra on top.
func fnEnv(fn awsstack.Function, extra map[string]string) map[string]string {
	m := map[string]string{"AWS_REGION": "us-east-1", awsstack.EnvTable: "t", awsstack.EnvBucket: "b"}
	if fn != awsstack.RunnerFunction {
		m[awsstack.EnvRunnerFunction] = "stead-runner"
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

var (
	smtpEnv = map[string]string{
		awsstack.EnvSMTPURL:   "smtp://stead:pw-not-shown@mail.example.com:587?from=stead@example.com",
		awsstack.EnvPublicURL: "https://stead.example.com",
	}
	slackEnv = map[string]string{
		awsstack.EnvSlackBotToken: "xoxb-1-aws", awsstack.EnvSlackSigningSecret: "signing-secret",
		awsstack.EnvSlackChannel: "C0APPROVALS", awsstack.EnvSlackProject: "prj_01AWS",
	}
)

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestOpenChannels: what each function's Notifier tells beside webhooks,
// by environment. The runner and the sweeper mail when STEAD_SMTP_URL is
// set; the API never does. Every function has Slack when STEAD_SLACK_* are
// set, and the API takes clicks at /slack/interactivity (an unsigned one
// is a 401; without Slack the route is a 404 saying what to set).
func TestOpenChannels(t *testing.T) {
	t.Parallel()
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	for _, c := range []struct {
		name string
		env  map[string]string
		want map[awsstack.Function][]string
	}{
		{"none", nil, map[awsstack.Function][]string{}},
		{"email", smtpEnv, map[awsstack.Function][]string{
			awsstack.RunnerFunction: {"email"}, awsstack.SweeperFunction: {"email"},
		}},
		{"slack", slackEnv, map[awsstack.Function][]string{
			awsstack.APIFunction: {"slack"}, awsstack.RunnerFunction: {"slack"}, awsstack.SweeperFunction: {"slack"},
		}},
		{"both", merge(smtpEnv, slackEnv), map[awsstack.Function][]string{
			awsstack.APIFunction: {"slack"}, awsstack.RunnerFunction: {"slack", "email"}, awsstack.SweeperFunction: {"slack", "email"},
		}},
	} {
		for _, fn := range []awsstack.Function{awsstack.APIFunction, awsstack.RunnerFunction, awsstack.SweeperFunction} {
			t.Run(c.name+"/"+string(fn), func(t *testing.T) {
				t.Parallel()
				cfg, err := awsstack.FromEnv(fn, env(fnEnv(fn, c.env)))
				if err != nil {
					t.Fatal(err)
				}
				st, err := awsstack.Open(t.Context(), cfg, awsstack.Options{AWS: &awsCfg})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(st.Close)
				var got []string
				for _, ch := range st.Channels {
					got = append(got, ch.Name())
				}
				if want := c.want[fn]; !slices.Equal(got, want) {
					t.Errorf("channels %q, want %q", got, want)
				}
				if fn != awsstack.APIFunction {
					return
				}
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodPost, "/slack/interactivity", strings.NewReader("payload=%7B%7D"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				st.API.ServeHTTP(rec, req)
				want := http.StatusNotFound
				if c.env[awsstack.EnvSlackBotToken] != "" {
					want = http.StatusUnauthorized // Slack is there, and checks the signature
				}
				if rec.Code != want {
					t.Errorf("unsigned POST /slack/interactivity: %d %s, want %d", rec.Code, rec.Body, want)
				}
				if want == http.StatusNotFound && !strings.Contains(rec.Body.String(), awsstack.EnvSlackProject) {
					t.Errorf("the 404 does not say to set %s: %s", awsstack.EnvSlackProject, rec.Body)
				}
			})
		}
	}
}

// TestFromEnvChannelProblems: a bad email or Slack setting is a
// ConfigError naming the variable and the fix, and never echoing a
// password.
func TestFromEnvChannelProblems(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		fn   awsstack.Function
		env  map[string]string
		says []string
	}{
		{"smtp not a URL", awsstack.RunnerFunction, map[string]string{awsstack.EnvSMTPURL: "http://u:hunter2@mail.example.com", awsstack.EnvPublicURL: "https://s.example"},
			[]string{awsstack.EnvSMTPURL, "smtp://"}},
		{"smtp without from", awsstack.SweeperFunction, map[string]string{awsstack.EnvSMTPURL: "smtp://u:hunter2@mail.example.com", awsstack.EnvPublicURL: "https://s.example"},
			[]string{awsstack.EnvSMTPURL, "from"}},
		{"smtp without a public URL", awsstack.RunnerFunction, map[string]string{awsstack.EnvSMTPURL: smtpEnv[awsstack.EnvSMTPURL]},
			[]string{awsstack.EnvSMTPURL, awsstack.EnvPublicURL, "review links"}},
		{"slack half set", awsstack.APIFunction, map[string]string{awsstack.EnvSlackBotToken: "xoxb-1"},
			[]string{awsstack.EnvSlackSigningSecret, awsstack.EnvSlackChannel}},
		{"slack without a project", awsstack.SweeperFunction, merge(slackEnv, map[string]string{awsstack.EnvSlackProject: ""}),
			[]string{awsstack.EnvSlackProject}},
		{"slack a user token", awsstack.RunnerFunction, merge(slackEnv, map[string]string{awsstack.EnvSlackBotToken: "xoxp-user"}),
			[]string{awsstack.EnvSlackBotToken, "xoxb-"}},
		{"slack a bad API URL", awsstack.APIFunction, merge(slackEnv, map[string]string{awsstack.EnvSlackAPIURL: "slack.test"}),
			[]string{awsstack.EnvSlackAPIURL}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := awsstack.FromEnv(c.fn, env(fnEnv(c.fn, c.env)))
			var ce *awsstack.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%v does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%v shows the password", err)
			}
		})
	}
	// The API mails nobody, so it does not read STEAD_SMTP_URL at all.
	cfg, err := awsstack.FromEnv(awsstack.APIFunction, env(fnEnv(awsstack.APIFunction, map[string]string{awsstack.EnvSMTPURL: "not a url"})))
	if err != nil || cfg.SMTP != nil {
		t.Errorf("the API with %s set: %+v %v; want it ignored", awsstack.EnvSMTPURL, cfg.SMTP, err)
	}
	cfg, err = awsstack.FromEnv(awsstack.RunnerFunction, env(fnEnv(awsstack.RunnerFunction, merge(smtpEnv, slackEnv))))
	if err != nil || cfg.SMTP == nil || cfg.SMTP.Host != "mail.example.com" || cfg.Slack == nil || cfg.Slack.Project != "prj_01AWS" {
		t.Errorf("runner with email and Slack: SMTP %+v Slack %+v %v", cfg.SMTP, cfg.Slack, err)
	}
}
