package egress_test

import (
	"fmt"
	"net/netip"

	"stead/runtime/egress"
)

func ExamplePolicy_Check() {
	allow, err := egress.ParseAllow("10.20.0.0/16")
	if err != nil {
		panic(err)
	}
	p := egress.Policy{Allow: allow}
	fmt.Println(p.Check(netip.MustParseAddr("10.20.1.5")))
	fmt.Println(p.Check(netip.MustParseAddr("10.30.1.5")))
	fmt.Println(p.Check(netip.MustParseAddr("169.254.169.254")))
	// Output:
	// <nil>
	// destination 10.30.1.5 is refused: it is a private address
	// destination 169.254.169.254 is refused: it is a link-local address (this includes cloud metadata services such as 169.254.169.254)
}
