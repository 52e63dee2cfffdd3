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
