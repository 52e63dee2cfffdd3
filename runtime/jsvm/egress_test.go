package jsvm

import (
	"net/netip"

	"stead/runtime/egress"
)

// egressPolicy keeps TestEgressPolicy, written when the policy lived here,
// testing the policy fetch uses (package egress) under its old names.
type egressPolicy struct{ allow []netip.Prefix }

func (p egressPolicy) check(addr netip.Addr) error { return egress.Policy{Allow: p.allow}.Check(addr) }
