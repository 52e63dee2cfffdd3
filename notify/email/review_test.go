package email_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"stead/notify/email"
	"stead/store"
)

func TestReviewToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keyA, keyB := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	keys := map[string][]byte{"prj_a": keyA, "prj_b": keyB}
	keyOf := func(_ context.Context, id string) ([]byte, error) {
		if k, ok := keys[id]; ok {
			return k, nil
		}
		return nil, fmt.Errorf("get project %s: %w", id, store.ErrNotFound)
	}
	exp := time.Date(2026, 11, 29, 12, 15, 0, 0, time.UTC)
	r := email.Review{ProjectID: "prj_a", ApprovalID: "apr_1", MemberID: "mem_ana", InputDigest: strings.Repeat("ab", 32), ExpiresAt: exp}
	token, err := email.SignReview(keyA, r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, email.ReviewPrefix) || strings.ContainsAny(token, "/?#%+= ") {
		t.Fatalf("token %q is not URL-path safe", token)
	}
	got, err := email.OpenReview(ctx, token, keyOf)
	if err != nil || got != r {
		t.Fatalf("OpenReview = %+v, %v; want %+v", got, err, r)
	}
	if got.Expired(exp.Add(-time.Second)) || !got.Expired(exp) {
		t.Error("Expired: a link is valid before the approval's deadline and not from it")
	}

	// The same claims signed by another project's key, a claim changed
	// under the MAC, a MAC changed, shapes that are not tokens: refused.
	other, err := email.SignReview(keyB, r) // claims say prj_a, signed by prj_b
	if err != nil {
		t.Fatal(err)
	}
	payload, mac, _ := strings.Cut(strings.TrimPrefix(token, email.ReviewPrefix), ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	forged := email.ReviewPrefix + base64.RawURLEncoding.EncodeToString(bytes.Replace(raw, []byte("mem_ana"), []byte("mem_bob"), 1)) + "." + mac
	flipped := token[:len(token)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(token, "AA")]
	unknown, _ := email.SignReview(keyA, email.Review{ProjectID: "prj_gone", ApprovalID: "apr_1", MemberID: "m", InputDigest: "d", ExpiresAt: exp})
	for name, tok := range map[string]string{
		"another project's key": other, "a claim changed": forged, "the MAC changed": flipped, "an unknown project": unknown,
		"no prefix": strings.TrimPrefix(token, email.ReviewPrefix), "no MAC": email.ReviewPrefix + payload, "empty": "",
		"a customer token": "stc_" + payload + "." + mac, "too long": token + strings.Repeat("A", 3000),
	} {
		if _, err := email.OpenReview(ctx, tok, keyOf); !errors.Is(err, email.ErrReviewToken) {
			t.Errorf("%s: OpenReview = %v, want ErrReviewToken", name, err)
		}
	}
	// A store failure is not a bad token: it is reported as it is.
	boom := errors.New("store down")
	if _, err := email.OpenReview(ctx, token, func(context.Context, string) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("a store error: %v", err)
	}
	if _, err := email.SignReview(keyA[:16], r); err == nil {
		t.Error("a short key signs")
	}
	if _, err := email.SignReview(keyA, email.Review{ProjectID: "prj_a"}); err == nil {
		t.Error("a review without approval, member, digest and expiry signs")
	}
	if got := email.ReviewURL("https://stead.example.com/", token); got != "https://stead.example.com/review/"+token {
		t.Errorf("ReviewURL = %q", got)
	}
}
