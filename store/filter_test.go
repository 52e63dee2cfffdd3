package store_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"stead/approvals"
	"stead/store"
)

func TestParseFilters(t *testing.T) {
	t.Parallel()
	type parsed struct {
		got any
		err error
	}
	p := func(v any, err error) parsed { return parsed{v, err} }
	cases := []struct {
		name    string
		parse   parsed
		want    any
		wantErr string // the *store.FilterError's text; "" for none
	}{
		{"approval status default", p(store.ParseApprovalStatus("")), approvals.Pending, ""},
		{"approval status all", p(store.ParseApprovalStatus("all")), approvals.Status(""), ""},
		{"approval status denied", p(store.ParseApprovalStatus("denied")), approvals.Denied, ""},
		{"approval status unknown", p(store.ParseApprovalStatus("open")), approvals.Status(""),
			`status must be one of ` + store.Choices(store.ApprovalStatusChoices()...) + ` (got "open")`},
		{"order default", p(store.ParseApprovalOrder("")), store.NewestFirst, ""},
		{"order expiring", p(store.ParseApprovalOrder("expiring")), store.ExpiringFirst, ""},
		{"order unknown", p(store.ParseApprovalOrder("oldest")), store.ApprovalOrder(""), `order must be newest or expiring (got "oldest")`},
		{"run status any", p(store.ParseRunStatus("")), store.RunStatus(""), ""},
		{"run status awaiting", p(store.ParseRunStatus("awaiting-approval")), store.RunAwaitingApproval, ""},
		{"run status unknown", p(store.ParseRunStatus("done")), store.RunStatus(""),
			`status must be one of ` + store.Choices(store.RunStatuses...) + ` (got "done")`},
		{"limit absent", p(store.ParseLimit("")), 0, ""},
		{"limit 1", p(store.ParseLimit("1")), 1, ""},
		{"limit max", p(store.ParseLimit("500")), 500, ""},
		{"limit 0", p(store.ParseLimit("0")), 0, `limit must be a whole number from 1 to 500 (got "0")`},
		{"limit past max", p(store.ParseLimit("501")), 0, `limit must be a whole number from 1 to 500 (got "501")`},
		{"limit not a number", p(store.ParseLimit("x")), 0, `limit must be a whole number from 1 to 500 (got "x")`},
	}
	for _, c := range cases {
		if c.parse.got != c.want {
			t.Errorf("%s: got %#v, want %#v", c.name, c.parse.got, c.want)
		}
		var fe *store.FilterError
		switch {
		case c.wantErr == "" && c.parse.err != nil:
			t.Errorf("%s: %v", c.name, c.parse.err)
		case c.wantErr != "" && (!errors.As(c.parse.err, &fe) || !errors.Is(c.parse.err, store.ErrInvalidFilter) || fe.Error() != c.wantErr):
			t.Errorf("%s: got error %v, want %s", c.name, c.parse.err, c.wantErr)
		}
	}
}

func TestClampLimit(t *testing.T) {
	t.Parallel()
	for in, want := range map[int]int{-1: store.DefaultLimit, 0: store.DefaultLimit, 1: 1, 500: 500, 501: store.MaxLimit} {
		if got := store.ClampLimit(in); got != want {
			t.Errorf("ClampLimit(%d) = %d, want %d", in, got, want)
		}
	}
	if err := store.CheckLimit(0); err == nil || err.Error() != `limit must be from 1 to 500 (got "0")` {
		t.Errorf("CheckLimit(0): %v", err)
	}
	if store.CheckLimit(store.MaxLimit+1) == nil || store.CheckLimit(1) != nil || store.CheckLimit(store.MaxLimit) != nil {
		t.Error("CheckLimit takes exactly 1 to MaxLimit")
	}
}

func TestNormalize(t *testing.T) {
	t.Parallel()
	f, err := store.ApprovalFilter{ProjectID: "p1", Status: approvals.Expired, Limit: 9999}.Normalize()
	if err != nil || f.Order != store.NewestFirst || f.Limit != store.MaxLimit || f.Status != approvals.Expired {
		t.Errorf("approval filter: %+v, %v", f, err)
	}
	for _, bad := range []store.ApprovalFilter{
		{ProjectID: "p1", Status: "all"},
		{ProjectID: "p1", Order: "oldest"},
		{},
	} {
		if _, err := bad.Normalize(); err == nil {
			t.Errorf("approval filter %+v accepted", bad)
		}
	}
	r, err := store.RunFilter{ProjectID: "p1", Status: store.RunFailed}.Normalize()
	if err != nil || r.Limit != store.DefaultLimit || r.Status != store.RunFailed {
		t.Errorf("run filter: %+v, %v", r, err)
	}
	if _, err := (store.RunFilter{ProjectID: "p1", Status: "done"}).Normalize(); !errors.Is(err, store.ErrInvalidFilter) {
		t.Errorf("run filter with status done: %v", err)
	}
}

// store.ApprovalStatuses lists exactly the Status constants that package
// approvals declares, so that a new status cannot be missed by filters.
func TestApprovalStatusesComplete(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../approvals/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				if typ, ok := v.Type.(*ast.Ident); ok && typ.Name == "Status" {
					for _, val := range v.Values {
						if lit, ok := val.(*ast.BasicLit); ok {
							s, _ := strconv.Unquote(lit.Value)
							declared = append(declared, s)
						}
					}
				}
			}
		}
	}
	var listed []string
	for _, st := range store.ApprovalStatuses {
		if !st.Valid() {
			t.Errorf("store.ApprovalStatuses offers %q, which approvals.Status.Valid refuses", st)
		}
		listed = append(listed, string(st))
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if !slices.Equal(declared, listed) {
		t.Errorf("package approvals declares the statuses %v; store.ApprovalStatuses (store/filter.go) lists %v", declared, listed)
	}
}

func ExampleChoices() {
	fmt.Println(store.Choices(store.ApprovalOrders...))
	fmt.Println(store.Choices("pending", "approved", "denied", "all"))
	// Output:
	// newest or expiring
	// pending, approved, denied or all
}

func TestChoices(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{"all"}, "all"},
		{[]string{"active", "all"}, "active or all"},
		{[]string{"a", "b", "c"}, "a, b or c"},
	} {
		if got := store.Choices(c.values...); got != c.want {
			t.Errorf("Choices(%q) = %q, want %q", c.values, got, c.want)
		}
	}
}

// The approval statuses offered to users are exactly those that parse:
// every status, then "all".
func TestApprovalStatusChoicesParse(t *testing.T) {
	t.Parallel()
	choices := store.ApprovalStatusChoices()
	var want []string
	for _, st := range store.ApprovalStatuses {
		want = append(want, string(st))
	}
	want = append(want, store.AnyStatus)
	if !slices.Equal(choices, want) {
		t.Errorf("ApprovalStatusChoices() = %v, want the statuses then %q", choices, store.AnyStatus)
	}
	for _, c := range choices {
		if _, err := store.ParseApprovalStatus(c); err != nil {
			t.Errorf("offered status %q does not parse: %v", c, err)
		}
	}
}

func TestParseRuleStatus(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"": false, "active": false, "all": true} {
		if all, err := store.ParseRuleStatus(s); err != nil || all != want {
			t.Errorf("ParseRuleStatus(%q) = %v, %v; want %v", s, all, err, want)
		}
	}
	_, err := store.ParseRuleStatus("expired")
	if !errors.Is(err, store.ErrInvalidFilter) || err.Error() != `status must be active or all (got "expired")` {
		t.Errorf("ParseRuleStatus(expired): %v", err)
	}
}

func TestNormalizeRequiresProject(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if _, err := (store.RunFilter{}).Normalize(); err == nil {
		t.Error("run filter without a project accepted")
	}
	if _, err := (store.RuleFilter{All: true}).Normalize(); err == nil {
		t.Error("rule filter without a project accepted")
	}
	if _, err := (store.RuleFilter{ProjectID: "p1"}).Normalize(); err == nil {
		t.Error("a list of the rules in force without now accepted")
	}
	f, err := store.RuleFilter{ProjectID: "p1", All: true, Limit: 9999}.Normalize()
	if err != nil || f.Limit != store.MaxLimit {
		t.Errorf("rule filter of every rule: %+v, %v", f, err)
	}
	if f, err := (store.RuleFilter{ProjectID: "p1", Now: now}).Normalize(); err != nil || f.Limit != store.DefaultLimit {
		t.Errorf("rule filter of the rules in force: %+v, %v", f, err)
	}
}

func TestRuleFilterKeep(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	r := approvals.Rule{ProjectID: "p1", Agent: "support", Tool: "refund", EndUserID: "u1", ExpiresAt: now.Add(time.Hour)}
	expired := r
	expired.ExpiresAt = now
	for _, c := range []struct {
		name string
		f    store.RuleFilter
		r    approvals.Rule
		want bool
	}{
		{"the project's", store.RuleFilter{ProjectID: "p1", Now: now}, r, true},
		{"another project's", store.RuleFilter{ProjectID: "p2", Now: now}, r, false},
		{"its agent", store.RuleFilter{ProjectID: "p1", Agent: "support", Now: now}, r, true},
		{"another agent", store.RuleFilter{ProjectID: "p1", Agent: "billing", Now: now}, r, false},
		{"another tool", store.RuleFilter{ProjectID: "p1", Tool: "cancel", Now: now}, r, false},
		{"another end user", store.RuleFilter{ProjectID: "p1", EndUserID: "u2", Now: now}, r, false},
		{"expired, in force only", store.RuleFilter{ProjectID: "p1", Now: now}, expired, false},
		{"expired, every rule", store.RuleFilter{ProjectID: "p1", All: true}, expired, true},
	} {
		if got := c.f.Keep(c.r); got != c.want {
			t.Errorf("%s: Keep = %v, want %v", c.name, got, c.want)
		}
	}
	if !(store.RuleFilter{Agent: "a", Tool: "t", EndUserID: "u"}).Scoped() || (store.RuleFilter{Agent: "a", Tool: "t"}).Scoped() {
		t.Error("Scoped is true exactly when agent, tool and end user are named")
	}
}
