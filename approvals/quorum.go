package approvals

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Requirement is one share of an approval's quorum: Min approvals from
// members of Group. Eligible is who may vote for it, fixed when the
// approval is requested (the group's members whose role may decide, less
// the member the approval is separated from): later changes to the group
// do not change who may vote on an approval already asked for.
type Requirement struct {
	Group    string  `json:"group"`
	Min      int     `json:"min"`
	Eligible []Voter `json:"eligible"`
}

// Voter is a member who may vote, named as when the approval was
// requested.
type Voter struct {
	Member string `json:"member"`
	Name   string `json:"name"`
}

// Vote is one member's approval of an approval with requirements.
type Vote struct {
	Member string `json:"member"`
	Name   string `json:"name,omitempty"`
	// By is the key the member voted with.
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// More sentinel errors, for votes (see Decision.Check).
var (
	// ErrNotEligible: the decider is not among the members who may vote on
	// an approval with requirements.
	ErrNotEligible = errors.New("not among the approvers of this approval")
	// ErrAlreadyVoted: the member has already approved this input.
	ErrAlreadyVoted = errors.New("already voted on this approval")
	// ErrChanged: the approval took another vote or an edit since the
	// decider read it (Decision.VoteVersion), or its input is no longer the
	// one the decider saw (Decision.Seen). Read it again and decide on what
	// it is now.
	ErrChanged = errors.New("the approval changed since it was read")
)

// HasQuorum reports whether the approval collects votes: it has
// requirements.
func (a Approval) HasQuorum() bool { return len(a.Requirements) > 0 }

// Eligible reports whether member may vote on a: it is an eligible voter of
// one of a's requirements.
func (a Approval) Eligible(member string) bool {
	if member == "" {
		return false
	}
	for _, r := range a.Requirements {
		if slices.ContainsFunc(r.Eligible, func(v Voter) bool { return v.Member == member }) {
			return true
		}
	}
	return false
}

// Voted reports whether member has voted on a's current input.
func (a Approval) Voted(member string) bool {
	return slices.ContainsFunc(a.Votes, func(v Vote) bool { return v.Member == member })
}

// Tally is where one requirement stands.
type Tally struct {
	Group string `json:"group"`
	Min   int    `json:"min"`
	// Counted are the votes counted toward this requirement; Waiting the
	// eligible members who have not voted (each may count here or toward
	// another requirement they are eligible for).
	Counted []Voter `json:"counted"`
	Waiting []Voter `json:"waiting"`
	// Short: fewer members are eligible than Min, so the requirement can
	// never be met; the approval can only be denied, expire or be
	// cancelled.
	Short bool `json:"short,omitempty"`
}

// Met reports whether the requirement has its Min votes.
func (t Tally) Met() bool { return len(t.Counted) >= t.Min }

// String reads "1 of 2 from finance — waiting on Bo Li, Cy Ng".
func (t Tally) String() string {
	s := fmt.Sprintf("%d of %d from %s", len(t.Counted), t.Min, t.Group)
	switch {
	case t.Met():
	case t.Short:
		s += fmt.Sprintf(" — cannot be met: only %d eligible", len(t.Counted)+len(t.Waiting))
	case len(t.Waiting) > 0:
		names := make([]string, len(t.Waiting))
		for i, v := range t.Waiting {
			names[i] = v.Name
		}
		s += " — waiting on " + strings.Join(names, ", ")
	}
	return s
}

// Progress is the tally of each of a's requirements, in order (none for an
// approval without requirements). Each vote counts once, toward one
// requirement: votes are assigned to requirements so that as many count as
// can (a bipartite matching, earlier votes first), so that a member of two
// groups cannot meet "one of finance and one of legal" alone.
func (a Approval) Progress() []Tally {
	assign := a.assign()
	out := make([]Tally, len(a.Requirements))
	for i, r := range a.Requirements {
		t := Tally{Group: r.Group, Min: r.Min, Counted: []Voter{}, Waiting: []Voter{}}
		for v, ri := range assign {
			if ri == i {
				t.Counted = append(t.Counted, Voter{Member: a.Votes[v].Member, Name: a.Votes[v].Name})
			}
		}
		for _, e := range r.Eligible {
			if !a.Voted(e.Member) {
				t.Waiting = append(t.Waiting, e)
			}
		}
		t.Short = !t.Met() && len(t.Counted)+len(t.Waiting) < t.Min
		out[i] = t
	}
	return out
}

// QuorumMet reports whether every requirement of a has its votes.
func (a Approval) QuorumMet() bool {
	for _, t := range a.Progress() {
		if !t.Met() {
			return false
		}
	}
	return true
}

// ProgressText is every requirement's tally, joined: "1 of 2 from finance
// — waiting on Bo Li, Cy Ng; 0 of 1 from legal — waiting on Di Wu".
func (a Approval) ProgressText() string {
	ts := a.Progress()
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, "; ")
}

// assign matches votes to requirements: assign[v] is the requirement vote
// v counts toward, or -1. Requirement i takes at most Min votes; a vote
// may go to any requirement it is eligible for. Kuhn's augmenting paths,
// votes in order: a later vote may move an earlier one to another
// requirement, never push it out.
func (a Approval) assign() []int {
	assign := make([]int, len(a.Votes))
	held := make([][]int, len(a.Requirements))
	eligible := func(v, r int) bool {
		return slices.ContainsFunc(a.Requirements[r].Eligible, func(e Voter) bool { return e.Member == a.Votes[v].Member })
	}
	var augment func(v int, seen []bool) bool
	augment = func(v int, seen []bool) bool {
		for r := range a.Requirements {
			if seen[r] || !eligible(v, r) {
				continue
			}
			seen[r] = true
			if len(held[r]) < a.Requirements[r].Min {
				held[r] = append(held[r], v)
				assign[v] = r
				return true
			}
			for j, u := range held[r] {
				if augment(u, seen) {
					held[r][j] = v
					assign[v] = r
					return true
				}
			}
		}
		return false
	}
	for v := range a.Votes {
		assign[v] = -1
		augment(v, make([]bool, len(a.Requirements)))
	}
	return assign
}

// checkVote is Check's part for a decision on an approval with
// requirements (approve or deny): only an eligible member decides, on the
// approval as it read it, and votes once per input.
func (d Decision) checkVote(a Approval) error {
	if !a.Eligible(d.ByMember) {
		return ErrNotEligible
	}
	if d.Status != Approved {
		return nil
	}
	if d.VoteVersion != a.VoteVersion {
		return ErrChanged
	}
	if a.Voted(d.ByMember) && !d.edits(a) {
		return ErrAlreadyVoted
	}
	return nil
}

// edits reports whether d, an approve, replaces a's input.
func (d Decision) edits(a Approval) bool {
	return d.Status == Approved && d.Input != nil && d.InputDigest != a.InputDigest
}

// applyVote returns a with d's vote: an edit first replaces the input and
// clears the votes on the old one (the editor's vote counts for the new
// input); the vote that meets every requirement settles a as approved.
func (d Decision) applyVote(a Approval) Approval {
	if d.edits(a) {
		if a.OriginalInput == nil {
			a.OriginalInput = a.Input
		}
		a.Input = d.Input
		a.InputDigest = d.InputDigest
		a.Votes = nil
	}
	a.Votes = append(slices.Clip(a.Votes), Vote{Member: d.ByMember, Name: d.ByName, By: d.By, At: d.At})
	a.VoteVersion++
	if !a.QuorumMet() {
		return a
	}
	return Decision{Status: Approved, By: d.By, ByName: d.ByName, ByMember: d.ByMember, Note: d.Note, At: d.At}.Settle(a)
}

// VoteMessage is the words for a refused vote; verb is what was attempted
// ("approved", "denied").
func VoteMessage(a Approval, err error, verb string) string {
	switch {
	case errors.Is(err, ErrNotEligible):
		return fmt.Sprintf("approval %s can be %s only by its approvers (%s); ask one of them, or an owner to add you to the group before the next approval",
			a.ID, verb, a.ProgressText())
	case errors.Is(err, ErrAlreadyVoted):
		return fmt.Sprintf("you have already approved %s; it stands at %s", a.ID, a.ProgressText())
	case errors.Is(err, ErrChanged):
		return fmt.Sprintf("approval %s changed since you read it: its input was edited by another approver; read it again (stead approval %s) and decide on what it is now", a.ID, a.ID)
	}
	return err.Error()
}
