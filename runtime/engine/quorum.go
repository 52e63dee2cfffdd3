package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"stead/approvals"
	"stead/runtime/agent"
	"stead/store"
)

// requirements resolves who may vote on an approval asked for under v: for
// each of v's approvers, the group's members as they are now — not
// removed, with a role that may decide, and not the member the approval is
// separated from. The lists are fixed in the approval: later changes to a
// group do not change who may vote on it. A group with fewer such members
// than its min is kept as it is (its tally says it cannot be met); a group
// that no longer exists has none.
func (x *execution) requirements(ctx context.Context, v agent.Verdict, separateFrom string) ([]approvals.Requirement, error) {
	if len(v.Approvers) == 0 {
		return nil, nil
	}
	members, err := x.e.store.ListMembers(ctx, x.run.ProjectID, false)
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	byID := make(map[string]store.Member, len(members))
	for _, m := range members {
		byID[m.ID] = m
	}
	out := make([]approvals.Requirement, len(v.Approvers))
	for i, r := range v.Approvers {
		out[i] = approvals.Requirement{Group: r.Group, Min: r.Min, Eligible: []approvals.Voter{}}
		g, err := x.e.store.GetGroup(ctx, x.run.ProjectID, r.Group)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get group %s: %w", r.Group, err)
		}
		for _, id := range g.Members {
			m, ok := byID[id]
			if ok && !m.Removed() && m.Role.May(approvals.Decide) && id != separateFrom {
				out[i].Eligible = append(out[i].Eligible, approvals.Voter{Member: m.ID, Name: m.Name})
			}
		}
		// By name, as people look for themselves in a list.
		slices.SortFunc(out[i].Eligible, func(a, b approvals.Voter) int {
			return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Member, b.Member))
		})
	}
	return out, nil
}
