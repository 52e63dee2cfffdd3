// Package refunds is the starter example: three tool handlers (listOrders,
// refundOrder, fetchReviews), a stead.json with refundOrder gated by an
// approval, and demo orders for a demo end user. `stead dev --example`
// deploys it from these embedded files.
package refunds

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

// Handlers is handlers.js, the bundle's source entry.
//
//go:embed handlers.js
var Handlers []byte

// Config is stead.json.
//
//go:embed stead.json
var Config []byte

//go:embed seed.json
var seedJSON []byte

// Seed is the demo data: broker records of one end user.
type Seed struct {
	EndUserID string `json:"endUserId"`
	// Records maps collection → key → value.
	Records map[string]map[string]json.RawMessage `json:"records"`
}

// DemoSeed returns the demo data.
func DemoSeed() (Seed, error) {
	var s Seed
	if err := json.Unmarshal(seedJSON, &s); err != nil {
		return Seed{}, fmt.Errorf("parse seed.json: %w", err)
	}
	return s, nil
}
