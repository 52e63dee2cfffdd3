package awsstack_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"stead/functions/awsstack"
	"stead/runtime/agent"
	"stead/store/dynamostore"
)

// The template's functions and what each one is.
var templateFunctions = map[string]awsstack.Function{
	"ApiFunction":     awsstack.APIFunction,
	"RunnerFunction":  awsstack.RunnerFunction,
	"SweeperFunction": awsstack.SweeperFunction,
}

// loadTemplate parses template.yaml into plain values. CloudFormation's
// short forms become their long forms: !Ref X → {"Ref": X}, !GetAtt A.B →
// {"Fn::GetAtt": "A.B"}, !Sub s → {"Fn::Sub": s}.
func loadTemplate(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	v, err := plain(&doc)
	if err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatal("template.yaml is not a mapping")
	}
	return m
}

func plain(n *yaml.Node) (any, error) {
	if n.Tag != "" && strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") {
		fn := strings.TrimPrefix(n.Tag, "!")
		inner := *n
		inner.Tag = ""
		v, err := plain(&inner)
		if err != nil {
			return nil, err
		}
		if fn == "Ref" {
			return map[string]any{"Ref": v}, nil
		}
		return map[string]any{"Fn::" + fn: v}, nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		return plain(n.Content[0])
	case yaml.AliasNode:
		return plain(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			v, err := plain(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := plain(c)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
}

// at walks a path of keys and indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	cur := v
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("template: %v is not a mapping", path[:i])
			}
			if cur, ok = m[k]; !ok {
				t.Fatalf("template: %v has no %q", path[:i], k)
			}
		case int:
			s, ok := cur.([]any)
			if !ok || k >= len(s) {
				t.Fatalf("template: %v has no item %d", path[:i], k)
			}
			cur = s[k]
		}
	}
	return cur
}

func str(t *testing.T, v any, path ...any) string {
	t.Helper()
	s, ok := at(t, v, path...).(string)
	if !ok {
		t.Fatalf("template: %v is not a string", path)
	}
	return s
}

func TestTemplateFunctions(t *testing.T) {
	tpl := loadTemplate(t)
	g := at(t, tpl, "Globals", "Function")
	for _, c := range []struct {
		path []any
		want string
	}{
		{[]any{"Runtime"}, "provided.al2023"},
		{[]any{"Handler"}, "bootstrap"},
		{[]any{"Architectures", 0}, "arm64"},
		{[]any{"LoggingConfig", "LogFormat"}, "JSON"},
	} {
		if got := str(t, g, c.path...); got != c.want {
			t.Errorf("Globals.Function %v = %q, want %q", c.path, got, c.want)
		}
	}
	if n := len(at(t, g, "Architectures").([]any)); n != 1 {
		t.Errorf("Globals.Function.Architectures has %d entries, want [arm64]", n)
	}
	globalEnv := at(t, g, "Environment", "Variables").(map[string]any)

	resources := at(t, tpl, "Resources").(map[string]any)
	var found []string
	for name, r := range resources {
		if at(t, r, "Type") == "AWS::Serverless::Function" {
			found = append(found, name)
		}
	}
	sort.Strings(found)
	if want := []string{"ApiFunction", "RunnerFunction", "SweeperFunction"}; !slices.Equal(found, want) {
		t.Fatalf("functions %v, want %v", found, want)
	}
	for name, fn := range templateFunctions {
		t.Run(name, func(t *testing.T) {
			r := resources[name]
			if got := str(t, r, "Metadata", "BuildMethod"); got != "makefile" {
				t.Errorf("Metadata.BuildMethod = %q, want makefile (the Makefile's build-%s target)", got, name)
			}
			props := at(t, r, "Properties").(map[string]any)
			for _, k := range []string{"Runtime", "Handler", "Architectures"} {
				if _, ok := props[k]; ok {
					t.Errorf("sets %s itself; it comes from Globals", k)
				}
			}
			env := map[string]any{}
			for k, v := range globalEnv {
				env[k] = v
			}
			if fe, ok := props["Environment"]; ok {
				for k, v := range at(t, fe, "Variables").(map[string]any) {
					env[k] = v
				}
			}
			known := awsstack.EnvVars()
			for k := range env {
				switch {
				case slices.Contains(known, k):
				case fn == awsstack.RunnerFunction && !agent.ReservedEnv(k):
					// A model API key (a model's apiKeyEnv): the runner alone
					// calls models.
				case fn == awsstack.APIFunction && k == "MCP_AUTH":
					// An MCP server's header (headersFromEnv): deploys list
					// its tools (TestTemplateMCPHeaders).
				default:
					t.Errorf("sets %s, which no function reads (awsstack.EnvVars: %v)", k, known)
				}
			}
			for _, k := range awsstack.Required(fn) {
				if _, ok := env[k]; !ok {
					t.Errorf("does not set %s, which the %s function requires", k, fn)
				}
			}
			if _, ok := env[awsstack.EnvRunnerFunction]; ok && fn == awsstack.RunnerFunction {
				t.Errorf("the runner sets %s; it never dispatches", awsstack.EnvRunnerFunction)
			}
			if _, ok := env[awsstack.EnvS3PathStyle]; ok {
				t.Errorf("sets %s, which is for emulators only", awsstack.EnvS3PathStyle)
			}
		})
	}

	runner := at(t, resources, "RunnerFunction", "Properties")
	if got := at(t, runner, "EventInvokeConfig", "MaximumRetryAttempts"); got != 2 {
		t.Errorf("runner MaximumRetryAttempts = %v, want 2", got)
	}
	if got := str(t, runner, "EventInvokeConfig", "DestinationConfig", "OnFailure", "Type"); got != "SQS" {
		t.Errorf("runner on-failure destination %q, want SQS", got)
	}
	sweeper := at(t, resources, "SweeperFunction", "Properties")
	if got := at(t, sweeper, "ReservedConcurrentExecutions"); got != 1 {
		t.Errorf("sweeper ReservedConcurrentExecutions = %v, want 1", got)
	}
	sched := at(t, sweeper, "Events", "EveryMinute")
	if str(t, sched, "Type") != "ScheduleV2" || str(t, sched, "Properties", "ScheduleExpression") != "rate(1 minute)" {
		t.Errorf("sweeper schedule %v, want ScheduleV2 rate(1 minute)", sched)
	}
	for _, ev := range at(t, resources, "ApiFunction", "Properties", "Events").(map[string]any) {
		if str(t, ev, "Type") != "HttpApi" || str(t, ev, "Properties", "PayloadFormatVersion") != "2.0" {
			t.Errorf("api event %v, want HttpApi with PayloadFormatVersion 2.0", ev)
		}
	}
}

// TestTemplatePolicies pins least privilege: who may write bundles, who
// may invoke the runner, and that every bucket path is one the code uses.
func TestTemplatePolicies(t *testing.T) {
	tpl := loadTemplate(t)
	globalEnv := at(t, tpl, "Globals", "Function", "Environment", "Variables")
	if got := str(t, globalEnv, awsstack.EnvBundlePrefix); got != awsstack.DefaultBundlePrefix {
		t.Errorf("%s = %q, want %q", awsstack.EnvBundlePrefix, got, awsstack.DefaultBundlePrefix)
	}
	if got := str(t, globalEnv, awsstack.EnvSpillPrefix); got != awsstack.DefaultSpillPrefix {
		t.Errorf("%s = %q, want %q", awsstack.EnvSpillPrefix, got, awsstack.DefaultSpillPrefix)
	}
	objectARN := regexp.MustCompile(`^\$\{Bucket\.Arn\}/([a-z]+/)\*$`)
	resources := at(t, tpl, "Resources").(map[string]any)

	// grants[function][action] = object prefixes (or "*" for a whole resource).
	grants := map[string]map[string][]string{}
	for name := range templateFunctions {
		grants[name] = map[string][]string{}
		for _, p := range at(t, resources, name, "Properties", "Policies").([]any) {
			pm := p.(map[string]any)
			if _, ok := pm["DynamoDBCrudPolicy"]; ok {
				grants[name]["dynamodb:DeleteItem"] = append(grants[name]["dynamodb:DeleteItem"], "*")
				continue
			}
			stmts, ok := pm["Statement"].([]any)
			if !ok {
				t.Errorf("%s: policy %v is neither DynamoDBCrudPolicy nor an inline statement list", name, pm)
				continue
			}
			for _, s := range stmts {
				if str(t, s, "Effect") != "Allow" {
					continue
				}
				var actions []string
				switch a := at(t, s, "Action").(type) {
				case string:
					actions = []string{a}
				case []any:
					for _, x := range a {
						actions = append(actions, x.(string))
					}
				}
				var res []any
				switch r := at(t, s, "Resource").(type) {
				case []any:
					res = r
				default:
					res = []any{r}
				}
				for _, a := range actions {
					if strings.Contains(a, "*") {
						t.Errorf("%s: wildcard action %s", name, a)
					}
					for _, r := range res {
						target := "*"
						if sub, ok := r.(map[string]any)["Fn::Sub"].(string); ok && strings.HasPrefix(sub, "${Bucket.Arn}/") {
							m := objectARN.FindStringSubmatch(sub)
							if m == nil || (m[1] != awsstack.DefaultBundlePrefix && m[1] != awsstack.DefaultSpillPrefix) {
								t.Errorf("%s: %s on %s, which is neither the bundle nor the spill prefix", name, a, sub)
								continue
							}
							target = m[1]
						}
						grants[name][a] = append(grants[name][a], target)
					}
				}
			}
		}
	}
	for _, c := range []struct {
		fn, action, target string
		want               bool
	}{
		{"ApiFunction", "s3:PutObject", awsstack.DefaultBundlePrefix, true},
		{"RunnerFunction", "s3:PutObject", awsstack.DefaultBundlePrefix, false},
		{"SweeperFunction", "s3:PutObject", awsstack.DefaultBundlePrefix, false},
		{"SweeperFunction", "s3:PutObject", awsstack.DefaultSpillPrefix, true}, // deliveries it fans out may spill
		{"RunnerFunction", "s3:GetObject", awsstack.DefaultBundlePrefix, true},
		{"ApiFunction", "lambda:InvokeFunction", "*", true},
		{"SweeperFunction", "lambda:InvokeFunction", "*", true},
		{"RunnerFunction", "lambda:InvokeFunction", "*", false},
		{"SweeperFunction", "dynamodb:DeleteItem", "*", false},
	} {
		if got := slices.Contains(grants[c.fn][c.action], c.target); got != c.want {
			t.Errorf("%s may %s on %s: %v, want %v", c.fn, c.action, c.target, got, c.want)
		}
	}
}

// TestTemplateNotifications: the functions that deliver notifications (the
// runner and the sweeper; see awsstack.Notifications) have the public URL
// for their links, from the API's URL unless the PublicUrl parameter names
// a custom domain; every function sends through the owner's egress
// allowlist (the API its pings); and the API names the runner by hand, so
// that the runner may refer to the API without a dependency cycle.
func TestTemplateNotifications(t *testing.T) {
	tpl := loadTemplate(t)
	resources := at(t, tpl, "Resources").(map[string]any)
	globalEnv := at(t, tpl, "Globals", "Function", "Environment", "Variables").(map[string]any)
	if got := fmt.Sprint(globalEnv[awsstack.EnvEgressAllow]); got != "map[Ref:EgressAllow]" {
		t.Errorf("Globals set %s to %s, want !Ref EgressAllow for every function", awsstack.EnvEgressAllow, got)
	}
	apiURL := str(t, tpl, "Outputs", "ApiUrl", "Value", "Fn::Sub")
	for _, name := range []string{"RunnerFunction", "SweeperFunction"} {
		v := at(t, resources, name, "Properties", "Environment", "Variables", awsstack.EnvPublicURL)
		cond := at(t, v, "Fn::If").([]any)
		if len(cond) != 3 || cond[0] != "HasPublicUrl" || fmt.Sprint(cond[1]) != "map[Ref:PublicUrl]" {
			t.Errorf("%s %s = %v, want !If [HasPublicUrl, !Ref PublicUrl, the API's URL]", name, awsstack.EnvPublicURL, v)
			continue
		}
		if got := str(t, cond[2], "Fn::Sub"); got+"/" != apiURL {
			t.Errorf("%s %s defaults to %q, want the ApiUrl output without its slash (%q)", name, awsstack.EnvPublicURL, got, apiURL)
		}
	}
	if got := str(t, tpl, "Conditions", "HasPublicUrl", "Fn::Not", 0, "Fn::Equals", 1); got != "" {
		t.Errorf("HasPublicUrl compares PublicUrl with %q, want ''", got)
	}

	runnerName := str(t, resources, "RunnerFunction", "Properties", "FunctionName", "Fn::Sub")
	api := at(t, resources, "ApiFunction", "Properties")
	if got := str(t, api, "Environment", "Variables", awsstack.EnvRunnerFunction, "Fn::Sub"); got != runnerName {
		t.Errorf("the API's %s is %q, want the runner's FunctionName %q", awsstack.EnvRunnerFunction, got, runnerName)
	}
	var dispatch string
	for _, st := range at(t, api, "Policies", 0, "Statement").([]any) {
		if at(t, st, "Sid") == "DispatchRuns" {
			dispatch = str(t, st, "Resource", "Fn::Sub")
		}
	}
	if !strings.HasSuffix(dispatch, ":function:"+runnerName) {
		t.Errorf("the API may invoke %q, want the function named %q", dispatch, runnerName)
	}
	if got := refsTo(api); slices.Contains(got, "RunnerFunction") {
		t.Errorf("ApiFunction refers to RunnerFunction (%v): with the runner's reference to HttpApi that is a dependency cycle", got)
	}
	if got := refsTo(at(t, resources, "RunnerFunction", "Properties")); !slices.Contains(got, "HttpApi") {
		t.Errorf("RunnerFunction refers to %v; its public URL should come from HttpApi", got)
	}
}

// subRef is a ${Name} or ${Name.Attr} in a !Sub string.
var subRef = regexp.MustCompile(`\$\{([A-Za-z0-9]+)[.}]`)

// refsTo lists the resources and parameters v refers to (Ref, GetAtt,
// Sub), the pseudo parameters (AWS::…) left out.
func refsTo(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				switch s, _ := c.(string); k {
				case "Ref":
					out = append(out, s)
				case "Fn::GetAtt":
					out = append(out, strings.SplitN(s, ".", 2)[0])
				case "Fn::Sub":
					for _, m := range subRef.FindAllStringSubmatch(s, -1) {
						out = append(out, m[1])
					}
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

// TestTemplateTable checks the table against dynamostore's own definition.
func TestTemplateTable(t *testing.T) {
	tpl := loadTemplate(t)
	table := at(t, tpl, "Resources", "Table")
	for _, k := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
		if got := str(t, table, k); got != "Retain" {
			t.Errorf("Table %s = %q, want Retain", k, got)
		}
	}
	p := at(t, table, "Properties")
	if got := str(t, p, "BillingMode"); got != "PAY_PER_REQUEST" {
		t.Errorf("BillingMode %q, want PAY_PER_REQUEST (on-demand)", got)
	}
	if at(t, p, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled") != true {
		t.Error("point-in-time recovery is off")
	}
	if at(t, p, "SSESpecification", "SSEEnabled") != true {
		t.Error("SSESpecification.SSEEnabled is not true")
	}

	// What dynamostore creates (CreateTable): pk and sk, and its indexes,
	// every key a string.
	wantAttrs := []string{dynamostore.AttrPK + ":S", dynamostore.AttrSK + ":S"}
	wantGSI := map[string]string{}
	var projected []string
	for _, ix := range dynamostore.Indexes() {
		wantAttrs = append(wantAttrs, ix.PK+":S", ix.SK+":S")
		typ := "KEYS_ONLY"
		if len(ix.Projected) > 0 {
			typ = "INCLUDE"
		}
		nonKey := slices.Clone(ix.Projected)
		sort.Strings(nonKey)
		projected = append(projected, nonKey...)
		wantGSI[ix.Name] = fmt.Sprintf("%s:HASH,%s:RANGE %s %v", ix.PK, ix.SK, typ, nonKey)
	}
	for _, name := range []string{dynamostore.IndexByProject, dynamostore.IndexPending, dynamostore.IndexDue, dynamostore.IndexStall, dynamostore.IndexOutbox} {
		if _, ok := wantGSI[name]; !ok {
			t.Errorf("dynamostore.Indexes lacks %s", name)
		}
	}

	var gotAttrs []string
	for _, a := range at(t, p, "AttributeDefinitions").([]any) {
		gotAttrs = append(gotAttrs, str(t, a, "AttributeName")+":"+str(t, a, "AttributeType"))
	}
	sort.Strings(gotAttrs)
	sort.Strings(wantAttrs)
	if !slices.Equal(gotAttrs, wantAttrs) {
		t.Errorf("AttributeDefinitions %v, want %v", gotAttrs, wantAttrs)
	}
	if got, w := keySchema(t, at(t, p, "KeySchema")), dynamostore.AttrPK+":HASH,"+dynamostore.AttrSK+":RANGE"; got != w {
		t.Errorf("KeySchema %s, want %s", got, w)
	}
	gotGSI := map[string]string{}
	for _, g := range at(t, p, "GlobalSecondaryIndexes").([]any) {
		var nonKey []string
		if nk, ok := at(t, g, "Projection").(map[string]any)["NonKeyAttributes"]; ok {
			for _, a := range nk.([]any) {
				nonKey = append(nonKey, a.(string))
			}
		}
		sort.Strings(nonKey)
		gotGSI[str(t, g, "IndexName")] = fmt.Sprintf("%s %s %v", keySchema(t, at(t, g, "KeySchema")), str(t, g, "Projection", "ProjectionType"), nonKey)
	}
	if fmt.Sprint(gotGSI) != fmt.Sprint(wantGSI) {
		t.Errorf("GlobalSecondaryIndexes\n got %v\nwant %v", gotGSI, wantGSI)
	}

	// TTL garbage-collects finished runs; it must not be an attribute the
	// store keys or indexes by (approvals never expire through TTL).
	if at(t, p, "TimeToLiveSpecification", "Enabled") != true {
		t.Error("TTL is not enabled")
	}
	ttl := str(t, p, "TimeToLiveSpecification", "AttributeName")
	if ttl != dynamostore.AttrTTL {
		t.Errorf("TimeToLiveSpecification.AttributeName %q, want %q (dynamostore.AttrTTL, the attribute the store writes)", ttl, dynamostore.AttrTTL)
	}
	for _, a := range wantAttrs {
		if strings.HasPrefix(a, ttl+":") {
			t.Errorf("the TTL attribute %q is a key attribute", ttl)
		}
	}
	if slices.Contains(projected, ttl) {
		t.Errorf("the TTL attribute %q is projected into an index", ttl)
	}
}

func TestTemplateBucketAndOutputs(t *testing.T) {
	tpl := loadTemplate(t)
	p := at(t, tpl, "Resources", "Bucket", "Properties")
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if at(t, p, "PublicAccessBlockConfiguration", k) != true {
			t.Errorf("bucket PublicAccessBlockConfiguration.%s is not true", k)
		}
	}
	if got := str(t, p, "BucketEncryption", "ServerSideEncryptionConfiguration", 0, "ServerSideEncryptionByDefault", "SSEAlgorithm"); got == "" {
		t.Error("bucket encryption is not set")
	}
	for _, k := range []string{"ApiUrl", "TableName", "BucketName"} {
		at(t, tpl, "Outputs", k, "Value")
	}
}

func keySchema(t *testing.T, v any) string {
	t.Helper()
	var parts []string
	for _, k := range v.([]any) {
		parts = append(parts, str(t, k, "AttributeName")+":"+str(t, k, "KeyType"))
	}
	return strings.Join(parts, ",")
}

// TestTemplateChannels: email and Slack are optional parameters, their
// secrets NoEcho. The SMTP URL goes to the functions that mail (runner and
// sweeper), not the API; the Slack settings go to every function (the API
// takes the clicks); and a project id passes SlackProject's pattern while
// a list of projects does not.
func TestTemplateChannels(t *testing.T) {
	tpl := loadTemplate(t)
	params := at(t, tpl, "Parameters").(map[string]any)
	for name, secret := range map[string]bool{
		"SmtpUrl": true, "SlackBotToken": true, "SlackSigningSecret": true, "SlackChannel": false, "SlackProject": false,
	} {
		p, ok := params[name].(map[string]any)
		if !ok {
			t.Errorf("no parameter %s", name)
			continue
		}
		if p["Type"] != "String" || p["Default"] != "" {
			t.Errorf("parameter %s: Type %v Default %q, want an optional String (Default '')", name, p["Type"], p["Default"])
		}
		if got := p["NoEcho"] == true; got != secret {
			t.Errorf("parameter %s NoEcho = %v, want %v", name, p["NoEcho"], secret)
		}
	}
	pattern := regexp.MustCompile(str(t, params, "SlackProject", "AllowedPattern"))
	for v, ok := range map[string]bool{"": true, "prj_abcdefghijklmnopqrstuvwxyz234567": true, "prj_a,prj_b": false, "acme": false} {
		if pattern.MatchString(v) != ok {
			t.Errorf("SlackProject's pattern matches %q: %v, want %v", v, !ok, ok)
		}
	}

	resources := at(t, tpl, "Resources").(map[string]any)
	globalEnv := at(t, tpl, "Globals", "Function", "Environment", "Variables").(map[string]any)
	for v, p := range map[string]string{
		awsstack.EnvSlackBotToken: "SlackBotToken", awsstack.EnvSlackSigningSecret: "SlackSigningSecret",
		awsstack.EnvSlackChannel: "SlackChannel", awsstack.EnvSlackProject: "SlackProject",
	} {
		if got := fmt.Sprint(globalEnv[v]); got != "map[Ref:"+p+"]" {
			t.Errorf("Globals set %s to %s, want !Ref %s for every function", v, got, p)
		}
	}
	if _, ok := globalEnv[awsstack.EnvSlackAPIURL]; ok {
		t.Errorf("Globals set %s, which is for a Slack stand-in in tests", awsstack.EnvSlackAPIURL)
	}
	for name, mails := range map[string]bool{"ApiFunction": false, "RunnerFunction": true, "SweeperFunction": true} {
		vars := at(t, resources, name, "Properties", "Environment", "Variables").(map[string]any)
		v, ok := vars[awsstack.EnvSMTPURL]
		switch {
		case mails && fmt.Sprint(v) != "map[Ref:SmtpUrl]":
			t.Errorf("%s %s = %v, want !Ref SmtpUrl", name, awsstack.EnvSMTPURL, v)
		case !mails && ok:
			t.Errorf("%s sets %s; it mails nobody", name, awsstack.EnvSMTPURL)
		case mails:
			if _, ok := vars[awsstack.EnvPublicURL]; !ok {
				t.Errorf("%s mails without %s, the base of review links", name, awsstack.EnvPublicURL)
			}
		}
	}
	if _, ok := globalEnv[awsstack.EnvSMTPURL]; ok {
		t.Errorf("Globals set %s; only the runner and the sweeper mail", awsstack.EnvSMTPURL)
	}
}

// TestTemplateMCPHeaders pins that the variable MCP-backed tools' headers
// come from reaches both functions that talk to MCP servers: the API
// (deploys pin the remote definitions) and the runner (runs call them).
func TestTemplateMCPHeaders(t *testing.T) {
	tpl := loadTemplate(t)
	p := at(t, tpl, "Parameters", "McpAuth").(map[string]any)
	if p["Type"] != "String" || p["Default"] != "" || p["NoEcho"] != true {
		t.Errorf("parameter McpAuth = %v, want an optional NoEcho String", p)
	}
	resources := at(t, tpl, "Resources").(map[string]any)
	for name, wants := range map[string]bool{"ApiFunction": true, "RunnerFunction": true, "SweeperFunction": false} {
		vars := at(t, resources, name, "Properties", "Environment", "Variables").(map[string]any)
		v, ok := vars["MCP_AUTH"]
		switch {
		case wants && fmt.Sprint(v) != "map[Ref:McpAuth]":
			t.Errorf("%s MCP_AUTH = %v, want !Ref McpAuth", name, v)
		case !wants && ok:
			t.Errorf("%s sets MCP_AUTH; it talks to no MCP server", name)
		}
	}
	if agent.ReservedEnv("MCP_AUTH") {
		t.Errorf("MCP_AUTH is a reserved variable: headersFromEnv could not name it")
	}
}
