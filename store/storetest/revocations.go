package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"stead/store"
)

var revocationTests = []test{
	{"Revocation/Token", testRevokeToken},
	{"Revocation/EndUser", testRevokeEndUser},
	{"Revocation/Expiry", testRevocationExpiry},
	{"Revocation/Limit", testRevocationLimit},
	{"Revocation/Invalid", testRevocationInvalid},
	{"Revocation/Concurrent", testRevocationConcurrent},
}

func revokeToken(p, user, id string, until, now time.Time) store.CustomerRevocation {
	return store.CustomerRevocation{ProjectID: p, EndUserID: user, TokenID: id, Until: until, Now: now}
}

func revokeBefore(p, user string, before, until time.Time) store.CustomerRevocation {
	return store.CustomerRevocation{ProjectID: p, EndUserID: user, IssuedBefore: before, Until: until, Now: before}
}

func revocations(t testing.TB, s store.Store, p, user string, now time.Time) store.CustomerRevocations {
	t.Helper()
	r, err := s.GetCustomerRevocations(t.Context(), p, user, now)
	noErr(t, err, "get revocations of "+p+"/"+user)
	return r
}

// tokenIDs lists the revoked token ids and their expiries, sorted.
func tokenIDs(r store.CustomerRevocations) string {
	ids := make([]string, 0, len(r.Tokens))
	for id, exp := range r.Tokens {
		ids = append(ids, id+"@"+exp.UTC().Format(time.RFC3339Nano))
	}
	slices.Sort(ids)
	return fmt.Sprint(ids)
}

func testRevokeToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	none := revocations(t, s, "p1", "u1", t0)
	eq(t, tokenIDs(none), "[]", "revoked tokens before any revocation")
	eq(t, none.IssuedBefore.IsZero(), true, "issuedBefore before any revocation")

	exp := at(time.Hour + 500*time.Millisecond)
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "ct1", exp, t0)), "revoke ct1")
	r := revocations(t, s, "p1", "u1", at(time.Minute))
	eq(t, tokenIDs(r), "[ct1@"+exp.Format(time.RFC3339Nano)+"]", "revoked tokens of u1")
	eq(t, r.Revoked("ct1", t0), true, "ct1 is revoked")
	eq(t, r.Revoked("ct2", t0), false, "ct2 is revoked")
	eq(t, r.Revoked("", t0), false, "a token without an id is revoked")

	// Other end users and projects are not touched: "u1" is not "u10".
	eq(t, tokenIDs(revocations(t, s, "p1", "u10", t0)), "[]", "revoked tokens of u10")
	eq(t, tokenIDs(revocations(t, s, "p2", "u1", t0)), "[]", "revoked tokens of u1 in p2")

	// Again, with a later expiry and then an earlier one: the later stays.
	later := at(2 * time.Hour)
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "ct1", later, at(time.Minute))), "revoke ct1 again, later")
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "ct1", exp, at(time.Minute))), "revoke ct1 again, earlier")
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "ct2", exp, at(time.Minute))), "revoke ct2")
	r = revocations(t, s, "p1", "u1", at(2*time.Minute))
	eq(t, tokenIDs(r), "[ct1@"+later.Format(time.RFC3339Nano)+" ct2@"+exp.Format(time.RFC3339Nano)+"]", "revoked tokens after revoking again")
	eq(t, r.IssuedBefore.IsZero(), true, "issuedBefore after token revocations")
}

func testRevokeEndUser(t *testing.T, s store.Store) {
	ctx := t.Context()
	before := at(time.Minute + 250*time.Millisecond)
	noErr(t, s.RevokeCustomerTokens(ctx, revokeBefore("p1", "u1", before, at(25*time.Hour))), "revoke u1's tokens")
	r := revocations(t, s, "p1", "u1", at(2*time.Minute))
	eq(t, r.IssuedBefore.Equal(before), true, fmt.Sprintf("issuedBefore %v, want %v", r.IssuedBefore, before))
	eq(t, r.Revoked("any", at(time.Minute)), true, "a token issued before the cutoff is revoked")
	eq(t, r.Revoked("any", before), false, "a token issued at the cutoff is revoked")
	eq(t, r.Revoked("any", at(2*time.Minute)), false, "a token issued after the cutoff is revoked")
	eq(t, revocations(t, s, "p1", "u2", at(2*time.Minute)).IssuedBefore.IsZero(), true, "u2 has a cutoff")
	eq(t, revocations(t, s, "p2", "u1", at(2*time.Minute)).IssuedBefore.IsZero(), true, "u1 of p2 has a cutoff")

	// An earlier cutoff does not move it back; a later one moves it on.
	noErr(t, s.RevokeCustomerTokens(ctx, revokeBefore("p1", "u1", at(30*time.Second), at(25*time.Hour))), "revoke with an earlier cutoff")
	eq(t, revocations(t, s, "p1", "u1", at(2*time.Minute)).IssuedBefore.Equal(before), true, "cutoff after an earlier one")
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "ct1", at(time.Hour), at(3*time.Minute))), "revoke ct1 too")
	noErr(t, s.RevokeCustomerTokens(ctx, revokeBefore("p1", "u1", at(5*time.Minute), at(29*time.Hour))), "revoke with a later cutoff")
	r = revocations(t, s, "p1", "u1", at(6*time.Minute))
	eq(t, r.IssuedBefore.Equal(at(5*time.Minute)), true, "cutoff after a later one")
	eq(t, tokenIDs(r), "[ct1@"+at(time.Hour).Format(time.RFC3339Nano)+"]", "token revocations beside the cutoff")

	// The cutoff lasts until the latest Until it was given.
	eq(t, revocations(t, s, "p1", "u1", at(28*time.Hour)).IssuedBefore.Equal(at(5*time.Minute)), true, "cutoff before its end")
	end := revocations(t, s, "p1", "u1", at(29*time.Hour))
	eq(t, end.IssuedBefore.IsZero(), true, "cutoff after its end")
	eq(t, tokenIDs(end), "[]", "tokens after their expiry")
}

func testRevocationExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "short", at(time.Minute), t0)), "revoke short")
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "long", at(time.Hour), t0)), "revoke long")
	eq(t, tokenIDs(revocations(t, s, "p1", "u1", at(59*time.Second))), "[long@"+at(time.Hour).Format(time.RFC3339Nano)+" short@"+at(time.Minute).Format(time.RFC3339Nano)+"]", "both before the first expiry")
	// Until is the token's expiry: at it, the token no longer works anyway.
	eq(t, tokenIDs(revocations(t, s, "p1", "u1", at(time.Minute))), "[long@"+at(time.Hour).Format(time.RFC3339Nano)+"]", "at the first expiry")
	// A write after the expiry drops what expired; reads agree.
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "third", at(time.Hour), at(2*time.Minute))), "revoke third")
	eq(t, tokenIDs(revocations(t, s, "p1", "u1", at(2*time.Minute))), "[long@"+at(time.Hour).Format(time.RFC3339Nano)+" third@"+at(time.Hour).Format(time.RFC3339Nano)+"]", "after a write past the first expiry")
	eq(t, tokenIDs(revocations(t, s, "p1", "u1", at(time.Hour))), "[]", "after every expiry")

	// A revocation that ended already records nothing.
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u2", "old", at(time.Minute), at(time.Minute))), "revoke an expired token")
	noErr(t, s.RevokeCustomerTokens(ctx, revokeBefore("p1", "u2", at(time.Minute), at(time.Minute))), "revoke with a cutoff that ended")
	r := revocations(t, s, "p1", "u2", t0)
	eq(t, tokenIDs(r), "[]", "tokens of u2 after ended revocations")
	eq(t, r.IssuedBefore.IsZero(), true, "cutoff of u2 after an ended revocation")
}

func testRevocationLimit(t *testing.T, s store.Store) {
	ctx := t.Context()
	n := store.MaxRevokedTokens
	for i := range n {
		until := at(time.Hour)
		if i < 10 {
			until = at(time.Minute)
		}
		noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", fmt.Sprintf("ct%03d", i), until, t0)), fmt.Sprintf("revoke token %d", i))
	}
	err := s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "one-too-many", at(time.Hour), t0))
	wantErr(t, err, store.ErrTooManyRevocations, "revoke one token past the limit")
	r := revocations(t, s, "p1", "u1", t0)
	eq(t, len(r.Tokens), n, "revoked tokens after a refused revocation")
	eq(t, r.Revoked("one-too-many", t0), false, "the refused token is revoked")

	// Revoking a revoked token again, and a cutoff, are still allowed; other
	// end users have their own limit.
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "ct050", at(2*time.Hour), t0)), "revoke a revoked token again at the limit")
	noErr(t, s.RevokeCustomerTokens(ctx, revokeBefore("p1", "u1", t0, at(24*time.Hour))), "revoke every token at the limit")
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u2", "ct000", at(time.Hour), t0)), "revoke a token of another end user")

	// Once some expired, there is room again.
	noErr(t, s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", "after-expiry", at(time.Hour), at(2*time.Minute))), "revoke a token once ten expired")
	r = revocations(t, s, "p1", "u1", at(2*time.Minute))
	eq(t, len(r.Tokens), n-10+1, "revoked tokens once ten expired")
	eq(t, r.Revoked("after-expiry", t0), true, "the token revoked once ten expired")
}

func testRevocationInvalid(t *testing.T, s store.Store) {
	ctx := t.Context()
	bad := []store.CustomerRevocation{
		{ProjectID: "p1", EndUserID: "u1", Until: at(time.Hour), Now: t0},
		{ProjectID: "p1", EndUserID: "u1", TokenID: "ct1", IssuedBefore: t0, Until: at(time.Hour), Now: t0},
		{ProjectID: "p1", TokenID: "ct1", Until: at(time.Hour), Now: t0},
		{EndUserID: "u1", TokenID: "ct1", Until: at(time.Hour), Now: t0},
		{ProjectID: "p1", EndUserID: "u1", TokenID: "ct1", Now: t0},
	}
	for i, r := range bad {
		err := s.RevokeCustomerTokens(ctx, r)
		if err == nil || errors.Is(err, store.ErrTooManyRevocations) {
			t.Fatalf("revocation %d (%+v): got %v, want a validation error", i, r, err)
		}
	}
	got := revocations(t, s, "p1", "u1", t0)
	eq(t, tokenIDs(got), "[]", "tokens after refused revocations")
	eq(t, got.IssuedBefore.IsZero(), true, "cutoff after refused revocations")
}

// Revocations of one end user at the same moment are all kept: none is lost
// to another's write.
func testRevocationConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 8
	errs := race(n, func(i int) error {
		if i == 0 {
			return s.RevokeCustomerTokens(ctx, revokeBefore("p1", "u1", at(time.Minute), at(25*time.Hour)))
		}
		return s.RevokeCustomerTokens(ctx, revokeToken("p1", "u1", fmt.Sprintf("ct%d", i), at(time.Hour), t0))
	})
	eq(t, len(winners(t, errs)), n, "revocations that succeeded")
	r := revocations(t, s, "p1", "u1", t0)
	eq(t, len(r.Tokens), n-1, "revoked tokens after concurrent revocations")
	eq(t, r.IssuedBefore.Equal(at(time.Minute)), true, "cutoff after concurrent revocations")
}
