package awsstack_test

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"stead/functions/awsstack"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// base is a complete environment of the api function.
func base() map[string]string {
	return map[string]string{
		"AWS_REGION":                    "eu-west-1",
		"AWS_LAMBDA_FUNCTION_NAME":      "stead-ApiFunction-x1",
		"AWS_LAMBDA_LOG_STREAM_NAME":    "2026/11/29/[$LATEST]abc",
		awsstack.EnvTable:               "stead-Table-1",
		awsstack.EnvBucket:              "stead-bucket-1",
		awsstack.EnvRunnerFunction:      "stead-RunnerFunction-1",
		awsstack.EnvBundlePrefix:        "bundles/",
		awsstack.EnvSpillPrefix:         "spill/",
		awsstack.EnvMaxBundleBytes:      "1048576",
		awsstack.EnvDispatchGrace:       "45s",
		awsstack.EnvS3PathStyle:         "false",
		awsstack.EnvPublicURL:           "https://stead.example.com/",
		"STEAD_SOMETHING_ELSE_ENTIRELY": "ignored",
	}
}

func TestFromEnv(t *testing.T) {
	t.Parallel()
	c, err := awsstack.FromEnv(awsstack.APIFunction, env(base()))
	if err != nil {
		t.Fatal(err)
	}
	want := awsstack.Config{
		Function: awsstack.APIFunction, Region: "eu-west-1", Table: "stead-Table-1", Bucket: "stead-bucket-1",
		BundlePrefix: "bundles/", SpillPrefix: "spill/", RunnerFunction: "stead-RunnerFunction-1",
		MaxBundleBytes: 1 << 20, DispatchGrace: 45 * time.Second, PublicURL: "https://stead.example.com",
		WorkerID: "stead-ApiFunction-x1/2026/11/29/[$LATEST]abc",
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("config\n got %+v\nwant %+v", c, want)
	}

	// Defaults.
	m := map[string]string{"AWS_REGION": "us-east-1", awsstack.EnvTable: "t", awsstack.EnvBucket: "b"}
	c, err = awsstack.FromEnv(awsstack.RunnerFunction, env(m))
	if err != nil {
		t.Fatal(err)
	}
	if c.BundlePrefix != awsstack.DefaultBundlePrefix || c.SpillPrefix != awsstack.DefaultSpillPrefix ||
		c.MaxBundleBytes != awsstack.DefaultMaxBundleBytes || c.DispatchGrace != awsstack.DefaultDispatchGrace ||
		c.S3PathStyle || c.WorkerID != "runner" || c.RunnerFunction != "" || c.EgressAllow != nil || c.PublicURL != "" {
		t.Fatalf("defaults: %+v", c)
	}
	// The owner's egress allowlist, parsed.
	m[awsstack.EnvEgressAllow] = " 10.20.0.0/16, fd00::/8 "
	c, err = awsstack.FromEnv(awsstack.RunnerFunction, env(m))
	if want := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00::/8")}; err != nil || !slices.Equal(c.EgressAllow, want) {
		t.Errorf("%s: %v, %v; want %v", awsstack.EnvEgressAllow, c.EgressAllow, err, want)
	}
	delete(m, awsstack.EnvEgressAllow)
	// The bounds of the numeric settings are themselves accepted.
	for _, c := range []struct {
		name, value string
		got         func(awsstack.Config) any
		want        any
	}{
		{awsstack.EnvMaxBundleBytes, "1024", func(c awsstack.Config) any { return c.MaxBundleBytes }, int64(1024)},
		{awsstack.EnvMaxBundleBytes, fmt.Sprint(awsstack.MaxBundleBytesLimit), func(c awsstack.Config) any { return c.MaxBundleBytes }, int64(awsstack.MaxBundleBytesLimit)},
		{awsstack.EnvDispatchGrace, "1s", func(c awsstack.Config) any { return c.DispatchGrace }, time.Second},
		{awsstack.EnvDispatchGrace, "1h", func(c awsstack.Config) any { return c.DispatchGrace }, time.Hour},
		{awsstack.EnvMCPWait, "1s", func(c awsstack.Config) any { return c.MCPWait }, time.Second},
		{awsstack.EnvMCPWait, "25s", func(c awsstack.Config) any { return c.MCPWait }, 25 * time.Second},
	} {
		m[c.name] = c.value
		cfg, err := awsstack.FromEnv(awsstack.RunnerFunction, env(m))
		if err != nil || c.got(cfg) != c.want {
			t.Errorf("%s=%s: %v, %v; want %v", c.name, c.value, c.got(cfg), err, c.want)
		}
		delete(m, c.name)
	}
	// The runner ignores a runner function name: it never dispatches.
	m[awsstack.EnvRunnerFunction] = "self"
	if c, _ := awsstack.FromEnv(awsstack.RunnerFunction, env(m)); c.RunnerFunction != "" {
		t.Errorf("runner config keeps RunnerFunction %q", c.RunnerFunction)
	}
}

func TestFromEnvProblems(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		fn     awsstack.Function
		change map[string]string
		want   []string
	}{
		{awsstack.APIFunction, map[string]string{"AWS_REGION": "", awsstack.EnvTable: "", awsstack.EnvBucket: " ", awsstack.EnvRunnerFunction: ""},
			[]string{"AWS_REGION is not set", "STEAD_TABLE is not set: set it to the DynamoDB table's name", "STEAD_BUCKET is not set", "STEAD_RUNNER_FUNCTION is not set"}},
		{awsstack.SweeperFunction, map[string]string{awsstack.EnvRunnerFunction: ""}, []string{"STEAD_RUNNER_FUNCTION is not set"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvBundlePrefix: "/bundles/"}, []string{`STEAD_BUNDLE_PREFIX must be a key prefix`}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvSpillPrefix: "spill"}, []string{`STEAD_SPILL_PREFIX must be a key prefix`}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvSpillPrefix: "bundles/spill/"}, []string{"must not overlap"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvMaxBundleBytes: "5MB"}, []string{`STEAD_MAX_BUNDLE_BYTES must be a number of bytes (got "5MB")`}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvMaxBundleBytes: "7340032"}, []string{"STEAD_MAX_BUNDLE_BYTES must be between 1024 and"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvDispatchGrace: "30"}, []string{`STEAD_DISPATCH_GRACE must be a duration such as "30s" (got "30")`}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvDispatchGrace: "10ms"}, []string{"STEAD_DISPATCH_GRACE must be between 1s and 1h"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvBundlePrefix: "spill/bundles/"}, []string{"must not overlap"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvMaxBundleBytes: "1023"}, []string{"STEAD_MAX_BUNDLE_BYTES must be between 1024 and"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvDispatchGrace: "61m"}, []string{"STEAD_DISPATCH_GRACE must be between 1s and 1h"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvMCPWait: "20"}, []string{`STEAD_MCP_WAIT must be a duration such as "20s" (got "20")`}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvMCPWait: "26s"}, []string{"STEAD_MCP_WAIT must be between 1s and 25s, inside API Gateway's 29 s"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvMCPWait: "500ms"}, []string{"STEAD_MCP_WAIT must be between 1s and 25s"}},
		{awsstack.APIFunction, map[string]string{awsstack.EnvS3PathStyle: "yes please"}, []string{"STEAD_S3_PATH_STYLE must be true or false"}},
		{awsstack.RunnerFunction, map[string]string{awsstack.EnvEgressAllow: "10.0.0.0/8,vpc"}, []string{`STEAD_EGRESS_ALLOW must list address ranges such as 10.0.0.0/8,fd00::/8: "vpc" is not an IP address or CIDR range`}},
		{awsstack.RunnerFunction, map[string]string{awsstack.EnvEgressAllow: "10.0.5.0/16"}, []string{`STEAD_EGRESS_ALLOW must list address ranges such as 10.0.0.0/8,fd00::/8: "10.0.5.0/16" has bits set past its /16; write the range as 10.0.0.0/16`}},
		{awsstack.RunnerFunction, map[string]string{awsstack.EnvPublicURL: "stead.example.com"}, []string{`STEAD_PUBLIC_URL must be where people reach Stead, an absolute http or https URL such as https://stead.example.com: the scheme is not http or https (got "stead.example.com")`}},
		{awsstack.SweeperFunction, map[string]string{awsstack.EnvPublicURL: "https://stead.example.com/?x=1"}, []string{"STEAD_PUBLIC_URL must be where people reach Stead, an absolute http or https URL such as https://stead.example.com: links are built by appending to it, so it takes no query or fragment"}},
		{awsstack.SweeperFunction, map[string]string{awsstack.EnvPublicURL: "https:///console"}, []string{"STEAD_PUBLIC_URL must be where people reach Stead, an absolute http or https URL such as https://stead.example.com: it names no host"}},
		{awsstack.RunnerFunction, map[string]string{awsstack.EnvPublicURL: "https://ops:secret@stead.example.com"}, []string{"STEAD_PUBLIC_URL must be where people reach Stead, an absolute http or https URL such as https://stead.example.com: it carries a user name or password"}},
		{awsstack.RunnerFunction, map[string]string{awsstack.EnvPublicURL: "https://stead.example.com/#/console"}, []string{"links are built by appending to it, so it takes no query or fragment"}},
		{awsstack.RunnerFunction, map[string]string{awsstack.EnvPublicURL: "https://stead.example.com/?"}, []string{"links are built by appending to it, so it takes no query or fragment"}},
		{"worker", nil, []string{`unknown function "worker"`}},
	} {
		m := base()
		for k, v := range c.change {
			m[k] = v
		}
		_, err := awsstack.FromEnv(c.fn, env(m))
		if err == nil {
			t.Errorf("%s %v: no error", c.fn, c.change)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %v: %q lacks %q", c.fn, c.change, err, w)
			}
		}
		var ce *awsstack.ConfigError
		if c.fn != "worker" && (!errors.As(err, &ce) || len(ce.Problems) != len(c.want)) {
			t.Errorf("%s %v: %#v, want a ConfigError with %d problems", c.fn, c.change, err, len(c.want))
		}
	}
}

func TestRequired(t *testing.T) {
	t.Parallel()
	for _, fn := range []awsstack.Function{awsstack.APIFunction, awsstack.RunnerFunction, awsstack.SweeperFunction} {
		for _, name := range awsstack.Required(fn) {
			m := base()
			delete(m, name)
			if _, err := awsstack.FromEnv(fn, env(m)); err == nil || !strings.Contains(err.Error(), name+" is not set") {
				t.Errorf("%s without %s: %v", fn, name, err)
			}
		}
	}
}

func ExampleFromEnv() {
	_, err := awsstack.FromEnv(awsstack.RunnerFunction, func(k string) string {
		return map[string]string{"AWS_REGION": "us-east-1", awsstack.EnvBucket: "stead-bundles"}[k]
	})
	fmt.Println(err)
	// Output: runner function configuration: STEAD_TABLE is not set: set it to the DynamoDB table's name (the stack's TableName output)
}
