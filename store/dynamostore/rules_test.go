package dynamostore_test

import (
	"encoding/json"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"stead/approvals"
	"stead/store/dynamostore"
)

// rule is a rule of p1 for (refunds, refundOrder, endUser), made at
// created and lasting d, with a When schema of some size.
func rule(endUser string, created time.Time, d time.Duration) approvals.Rule {
	u := ulid.MustNew(ulid.Timestamp(created), ulid.DefaultEntropy()).String()
	return approvals.Rule{
		ID: approvals.NewRuleID(u, "refunds", "refundOrder", endUser), ProjectID: "p1",
		Agent: "refunds", Tool: "refundOrder", EndUserID: endUser,
		When:       json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number","maximum":50},"orderId":{"type":"string"}},"required":["amount"]}`),
		ApprovalID: "apr_" + u + "_abcdefgh", RunID: "run_" + u, Deployment: 12,
		PostureDigest: "8f14e45fceea167a5a36dedd4bea2543b2fd3e0e9c8a4b8ed2c9fbbd4f3b2a10",
		CreatedBy:     "key_01JDX8Q6W3Z5V2N9K4M7P0R1S", CreatedByMember: "mem_ab12cd34ef56gh78ij90", CreatedByName: "Ana Maria Diaz Fernandez",
		CreatedAt: created, ExpiresAt: created.Add(d),
	}
}

// TestRuleRequests: what each rule operation sends and what it costs — the
// figures the package documentation gives (rules.go): MatchingRules one
// Query of one read unit however many older rules the scope has, CreateRule
// one PutItem of 2 write units (item and byProject entry), RevokeRule a
// GetItem and an UpdateItem of 1 unit that moves no index entry.
func TestRuleRequests(t *testing.T) {
	t.Parallel()
	plain := fresh(t, dynamostore.Options{})
	m := newMeter(aws.Get(t).DynamoDB(), plain.Table())
	s, err := dynamostore.New(aws.Get(t).DynamoDB(m.Option), dynamostore.Options{Table: plain.Table()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	now := t0.Add(60 * day)
	// Two months of daily rules in the scope, all ended, and two in force.
	for i := range 60 {
		if err := plain.CreateRule(ctx, rule("alice", t0.Add(time.Duration(i)*day), 12*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	r := rule("alice", now.Add(-time.Hour), 24*time.Hour)
	older := rule("alice", now.Add(-approvals.MaxRemember+time.Minute), approvals.MaxRemember)
	if err := plain.CreateRule(ctx, older); err != nil {
		t.Fatal(err)
	}
	check := func(name string, want map[string]int, wantWU, maxRU float64) {
		t.Helper()
		m.mu.Lock()
		got := maps.Clone(m.requests)
		m.mu.Unlock()
		if !maps.Equal(got, want) {
			t.Errorf("%s: requests %v, want %v", name, got, want)
		}
		_, wu, ru := m.Totals()
		if wu != wantWU || ru > maxRU {
			t.Errorf("%s: %.1f write units and %.1f read units, want %.1f and at most %.1f (%s)", name, wu, ru, wantWU, maxRU, m.Breakdown(1))
		}
		m.Reset()
	}

	m.Reset()
	if err := s.CreateRule(ctx, r); err != nil {
		t.Fatal(err)
	}
	check("CreateRule", map[string]int{"PutItem": 1}, 2, 0)

	rs, err := s.MatchingRules(ctx, "p1", "refunds", "refundOrder", "alice", now)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].ID != r.ID || rs[1].ID != older.ID {
		t.Fatalf("matching rules %v, want [%s %s]", rs, r.ID, older.ID)
	}
	// The Query reads the scope's rules made since the floor (the last 7
	// days: 7 daily ones that ended and the 2 in force), never the older 53.
	var recent, all int
	for _, it := range newRawTable(t, plain).partition(ruleItemPK(r), "rul_") {
		all += itemSize(it)
		if str(it, dynamostore.AttrSK) > approvals.RuleIDFloor(now) {
			recent += itemSize(it)
		}
	}
	t.Logf("rules read by MatchingRules: %d bytes (%d bytes in the partition)", recent, all)
	check("MatchingRules", map[string]int{"Query": 1}, 0, units(recent, 4096))
	if units(recent, 4096) >= units(all, 4096) || units(recent, 4096) > 2 {
		t.Errorf("MatchingRules reads %d bytes of rules, %d in all", recent, all)
	}

	if _, err := s.GetRule(ctx, "p1", r.ID); err != nil {
		t.Fatal(err)
	}
	check("GetRule", map[string]int{"GetItem": 1}, 0, 1)

	if _, err := s.RevokeRule(ctx, "p1", r.ID, approvals.Actor{ID: "key_bo", Name: "Bo Li"}, now); err != nil {
		t.Fatal(err)
	}
	check("RevokeRule", map[string]int{"GetItem": 1, "UpdateItem": 1}, 1, 1)

	if size := itemSize(newRawTable(t, plain).get(ruleItemPK(r), r.ID)); size > 1024 {
		t.Errorf("a rule's item is %d bytes, want at most 1 KB (CreateRule's cost rests on it)", size)
	}
}

// ruleItemPK is the partition of r's scope, as rules.go spells it.
func ruleItemPK(r approvals.Rule) string {
	return "RL#" + strconv.Itoa(len(r.ProjectID)) + ":" + r.ProjectID + approvals.RuleScope(r.Agent, r.Tool, r.EndUserID)
}

// TestRuleTTL: a rule's item may go Retention after the rule expired, and
// carries no ttl when the store writes none.
func TestRuleTTL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	r := rule("alice", t0, 6*time.Hour)
	s := fresh(t, dynamostore.Options{Retention: 10 * day})
	if err := s.CreateRule(ctx, r); err != nil {
		t.Fatal(err)
	}
	it := newRawTable(t, s).get(ruleItemPK(r), r.ID)
	if got, _ := num(it, dynamostore.AttrTTL); got != r.ExpiresAt.Add(10*day).Unix() {
		want := r.ExpiresAt.Add(10 * day).Unix()
		t.Errorf("ttl %d, want %d (expiry + Retention)", got, want)
	}
	none := fresh(t, dynamostore.Options{Retention: -1})
	if err := none.CreateRule(ctx, r); err != nil {
		t.Fatal(err)
	}
	if it := newRawTable(t, none).get(ruleItemPK(r), r.ID); it[dynamostore.AttrTTL] != nil {
		t.Errorf("a store without Retention wrote ttl %v", it[dynamostore.AttrTTL])
	}
}
