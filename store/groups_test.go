package store_test

import (
	"errors"
	"strings"
	"testing"

	"stead/store"
)

func TestGroupDescriptionLimits(t *testing.T) {
	t.Parallel()
	g := store.Group{ProjectID: "p1", Name: "finance"}
	for _, c := range []struct {
		name string
		desc string
		ok   bool
	}{
		{"at the limit in characters", strings.Repeat("é", store.MaxGroupDescription), true},
		{"past the limit", strings.Repeat("a", store.MaxGroupDescription+1), false},
		{"invalid UTF-8", "refunds \xff", false},
		{"a control character first", "\tpays refunds", false},
	} {
		g.Description = c.desc
		err := g.Validate()
		var ge *store.GroupError
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.ok && (!errors.As(err, &ge) || ge.Field != "description"):
			t.Errorf("%s: %v, want a *GroupError on the description", c.name, err)
		}
	}
}

func TestGroupErrorText(t *testing.T) {
	t.Parallel()
	err := store.CheckGroupName("Finance")
	if err == nil || !strings.HasPrefix(err.Error(), `group name must start with a lowercase letter`) {
		t.Errorf("CheckGroupName(Finance) = %v", err)
	}
	err = store.Group{ProjectID: "p1", Name: "finance", Members: []string{""}}.Validate()
	if err == nil || !strings.HasPrefix(err.Error(), "group finance: members has an empty member id") {
		t.Errorf("a group with an empty member id: %v", err)
	}
}

func TestCheckGroupMember(t *testing.T) {
	t.Parallel()
	failed := errors.New("read failed")
	if err := store.CheckGroupMember("finance", "mem_ana", store.Member{}, failed); !errors.Is(err, failed) {
		t.Errorf("a failed read: %v, want it passed on", err)
	}
	var gm *store.GroupMemberError
	if err := store.CheckGroupMember("finance", "mem_x", store.Member{}, store.ErrNotFound); !errors.As(err, &gm) || gm.Removed {
		t.Errorf("a missing member: %v", err)
	}
	if err := store.CheckGroupMember("finance", "mem_ana", store.Member{ID: "mem_ana"}, nil); err != nil {
		t.Errorf("a current member: %v", err)
	}
}
