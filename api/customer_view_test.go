package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"stead/api"
	"stead/api/wire"
)

// An edited input is checked as approve would check it, and nothing is
// decided; a viewer may not check.
func TestCheckInput(t *testing.T) {
	t.Parallel()
	w := setup(t)
	run := w.awaiting("alice")
	path := "/v1/approvals/" + run.Approval.ID + "/check-input"

	var ok map[string]bool
	w.must(w.do("POST", path, w.owner, map[string]any{"input": map[string]any{"orderId": "o-1", "amount": 3}}), 200).decode(&ok)
	if !ok["ok"] {
		t.Errorf("a valid edit: %v, want ok", ok)
	}
	bad := w.must(w.do("POST", path, w.owner, map[string]any{"input": map[string]any{"orderId": 1, "amount": 3}}), 400).apiErr()
	if bad.Code != api.CodeInvalidArgument || !strings.Contains(bad.Message, "orderId") {
		t.Errorf("a bad edit: %+v, want invalid_argument naming orderId", bad)
	}
	w.must(w.do("POST", path, w.owner, map[string]any{}), 400)
	w.must(w.do("POST", "/v1/approvals/apr_nosuch/check-input", w.owner, map[string]any{"input": map[string]any{}}), 404)
	w.must(w.do("POST", path, w.newKey("viewer").Key, map[string]any{"input": map[string]any{"orderId": "o-1", "amount": 3}}), 403)

	var a wire.Approval
	w.must(w.do("GET", "/v1/approvals/"+run.Approval.ID, w.owner, nil), 200).decode(&a)
	if a.Status != "pending" {
		t.Errorf("after checks the approval is %s, want pending", a.Status)
	}
}

// A customer token reads the project's branding and the pending tool's
// label with its run; API keys read neither.
func TestCustomerRunBrandingAndLabel(t *testing.T) {
	t.Parallel()
	w := setup(t)
	var cfg map[string]any
	if err := json.Unmarshal([]byte(testConfig), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["branding"] = map[string]any{"name": "Acme Shop", "logoUrl": "https://shop.example/logo.svg", "accentColor": "#0a7d5a"}
	cfg["agents"].(map[string]any)["refunds"].(map[string]any)["tools"].(map[string]any)["refundOrder"].(map[string]any)["label"] = "Refund"
	w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": cfg}), 201)
	run := w.awaiting("alice")

	var seen wire.Run
	w.must(w.do("GET", "/v1/runs/"+run.ID, w.customerToken("alice", 60), nil), 200).decode(&seen)
	want := wire.Branding{Name: "Acme Shop", LogoURL: "https://shop.example/logo.svg", AccentColor: "#0a7d5a"}
	if seen.Branding == nil || *seen.Branding != want {
		t.Errorf("customer branding = %+v, want %+v", seen.Branding, want)
	}
	if seen.Approval == nil || seen.Approval.Label != "Refund" || seen.Approval.Tool != "refundOrder" {
		t.Errorf("customer approval = %+v, want tool refundOrder labelled Refund", seen.Approval)
	}
	var owner wire.Run
	w.must(w.do("GET", "/v1/runs/"+run.ID, w.owner, nil), 200).decode(&owner)
	if owner.Branding != nil || owner.Approval == nil || owner.Approval.Label != "" {
		t.Errorf("owner view: branding %+v, approval %+v; want neither label nor branding", owner.Branding, owner.Approval)
	}

	// A bad branding value is refused at deploy, naming the key.
	cfg["branding"] = map[string]any{"accentColor": "green"}
	bad := w.must(w.do("POST", "/v1/deployments", w.owner, map[string]any{"bundle": testHandlers, "config": cfg}), 400)
	if !strings.Contains(string(bad.body), "/branding/accentColor") || !strings.Contains(string(bad.body), "#rrggbb") {
		t.Errorf("bad accent: %s", bad.body)
	}
}
