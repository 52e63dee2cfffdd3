package email_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
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

// mint makes a token by the construction review.go documents, with MAC
// domain domain, over claims as given.
func mint(key []byte, domain, claims string) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(claims))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(domain + payload))
	return email.ReviewPrefix + payload + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestReviewTokenConstruction: links already in people's mailboxes keep
// opening, so the construction is pinned: claims made by hand and MAC'd
// with the review domain open. Claims that SignReview would never sign
// (another version, a missing member or expiry) are refused though their
// MAC verifies, and so is the customer tokens' domain and a token past
// the length bound.
func TestReviewTokenConstruction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := bytes.Repeat([]byte{1}, 32)
	keyOf := func(context.Context, string) ([]byte, error) { return key, nil }
	const review = "stead/review-token\x00"
	exp := time.Date(2026, 11, 29, 12, 15, 0, 0, time.UTC)
	claims := fmt.Sprintf(`{"v":1,"prj":"prj_a","apr":"apr_1","mem":"mem_ana","dig":"d","exp":%d}`, exp.Unix())
	got, err := email.OpenReview(ctx, mint(key, review, claims), keyOf)
	if want := (email.Review{ProjectID: "prj_a", ApprovalID: "apr_1", MemberID: "mem_ana", InputDigest: "d", ExpiresAt: exp}); err != nil || got != want {
		t.Errorf("a token made by the documented construction opens as %+v, %v; want %+v", got, err, want)
	}
	long, err := email.SignReview(key, email.Review{ProjectID: "prj_a", ApprovalID: "apr_1", MemberID: strings.Repeat("m", 2000), InputDigest: "d", ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"the customer tokens' domain": mint(key, "stead/customer-token\x00", claims),
		"no domain":                   mint(key, "", claims),
		"version 2":                   mint(key, review, strings.Replace(claims, `"v":1`, `"v":2`, 1)),
		"no member":                   mint(key, review, strings.Replace(claims, `"mem_ana"`, `""`, 1)),
		"no expiry":                   mint(key, review, `{"v":1,"prj":"prj_a","apr":"apr_1","mem":"mem_ana","dig":"d","exp":0}`),
		"signed, but over 2048 bytes": long,
	} {
		if _, err := email.OpenReview(ctx, tok, keyOf); !errors.Is(err, email.ErrReviewToken) {
			t.Errorf("%s: OpenReview = %v, want ErrReviewToken", name, err)
		}
	}
}

// TestSignReviewRefuses: a link binds a project, an approval, a member, an
// input and an expiry, each one required on its own, and is signed only
// with a key of 32 bytes or more.
func TestSignReviewRefuses(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{1}, 32)
	full := email.Review{ProjectID: "prj_a", ApprovalID: "apr_1", MemberID: "mem_ana", InputDigest: "d", ExpiresAt: time.Date(2026, 11, 29, 12, 15, 0, 0, time.UTC)}
	if _, err := email.SignReview(key, full); err != nil {
		t.Fatalf("a full review with a 32-byte key: %v", err)
	}
	if _, err := email.SignReview(key[:31], full); err == nil || !strings.Contains(err.Error(), "at least 32 bytes") {
		t.Errorf("a 31-byte key: %v, want it refused", err)
	}
	for name, drop := range map[string]func(*email.Review){
		"project":      func(r *email.Review) { r.ProjectID = "" },
		"approval":     func(r *email.Review) { r.ApprovalID = "" },
		"member":       func(r *email.Review) { r.MemberID = "" },
		"input digest": func(r *email.Review) { r.InputDigest = "" },
		"expiry":       func(r *email.Review) { r.ExpiresAt = time.Time{} },
	} {
		r := full
		drop(&r)
		if tok, err := email.SignReview(key, r); err == nil {
			t.Errorf("a review without its %s signs: %s", name, tok)
		}
	}
}
