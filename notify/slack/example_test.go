package slack_test

import (
	"fmt"

	"stead/notify/slack"
)

// FromEnv reads the settings, all or none; a half-set one is refused,
// naming what is missing.
func ExampleFromEnv() {
	env := map[string]string{slack.EnvBotToken: "xoxb-1-example", slack.EnvSigningSecret: "secret"}
	_, err := slack.FromEnv(func(k string) string { return env[k] })
	fmt.Println(err)
	env[slack.EnvChannel] = "C0123ABCD"
	_, err = slack.FromEnv(func(k string) string { return env[k] })
	fmt.Println(err)
	cfg, err := slack.FromEnv(func(string) string { return "" })
	fmt.Println(cfg == nil, err)
	// Output:
	// slack: STEAD_SLACK_CHANNEL not set; set all of STEAD_SLACK_BOT_TOKEN, STEAD_SLACK_SIGNING_SECRET and STEAD_SLACK_CHANNEL to post approvals to Slack, or none
	// slack: the project (STEAD_SLACK_PROJECT) is required: the id of the one project (prj_…) whose approvals are posted to C0123ABCD and decided from it; other projects' approvals are not posted
	// true <nil>
}

// ActorID is how a Slack decision is named in traces and in an approval's
// decidedBy.
func ExampleActorID() {
	fmt.Println(slack.ActorID("T0123ABCD", "U0456EFGH"))
	// Output: slack:T0123ABCD/U0456EFGH
}
