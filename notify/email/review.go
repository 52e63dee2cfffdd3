package email

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"stead/store"
)

// Review links
//
// A review link is <publicUrl>/review/<token>. The token is "rvw_" +
// base64url(claims JSON) + "." + base64url(HMAC-SHA256(project signing
// key, "stead/review-token\x00" + the encoded claims)): the construction
// of customer tokens (package api), with its own domain string so that a
// MAC made with the same key for a customer or broker token never verifies
// as a review token, and back. The claims bind one approval, one member
// and the digest of the input the mail showed, and expire with the
// approval.
//
// The link is the member's authority to decide that one approval, so it
// is a secret like a key: the review page sends Referrer-Policy
// no-referrer and the API's request log leaves it out. What it may do is
// still checked when it is used: the member is read again (removed, or a
// role that can no longer decide, is refused), the approval must still be
// pending with that input, and the decision goes through the engine's one
// decision path.

// ReviewPrefix starts every review token.
const ReviewPrefix = "rvw_"

const reviewDomain = "stead/review-token\x00"

// Review is what a review token asserts.
type Review struct {
	ProjectID  string
	ApprovalID string
	MemberID   string
	// InputDigest is the approval's input digest as the mail showed it.
	InputDigest string
	// ExpiresAt is the approval's deadline.
	ExpiresAt time.Time
}

type reviewClaims struct {
	Version    int    `json:"v"`
	ProjectID  string `json:"prj"`
	ApprovalID string `json:"apr"`
	MemberID   string `json:"mem"`
	Digest     string `json:"dig"`
	ExpiresAt  int64  `json:"exp"`
}

// ErrReviewToken: the token is not a review token of its project: not
// shaped like one, or its MAC does not verify.
var ErrReviewToken = errors.New("not a valid review link")

// SignReview makes the token of r, signed with the project's key.
func SignReview(key []byte, r Review) (string, error) {
	if len(key) < 32 {
		return "", fmt.Errorf("sign review link: project %s has no usable signing key (it must be at least 32 bytes)", r.ProjectID)
	}
	if r.ProjectID == "" || r.ApprovalID == "" || r.MemberID == "" || r.InputDigest == "" || r.ExpiresAt.IsZero() {
		return "", errors.New("sign review link: project, approval, member, input digest and expiry are required")
	}
	b, err := json.Marshal(reviewClaims{
		Version: 1, ProjectID: r.ProjectID, ApprovalID: r.ApprovalID, MemberID: r.MemberID,
		Digest: r.InputDigest, ExpiresAt: r.ExpiresAt.Unix(),
	})
	if err != nil {
		return "", fmt.Errorf("sign review link: %w", err)
	}
	payload := base64.RawURLEncoding.EncodeToString(b)
	return ReviewPrefix + payload + "." + reviewMAC(key, payload), nil
}

func reviewMAC(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(reviewDomain))
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// maxReviewToken bounds a token read from a URL.
const maxReviewToken = 2048

// OpenReview checks a token and returns what it asserts. keyOf returns a
// project's signing key; a project it reports missing (store.ErrNotFound)
// makes the token ErrReviewToken, any other error is returned. It does not
// look at expiry: see Review.Expired.
func OpenReview(ctx context.Context, token string, keyOf func(ctx context.Context, projectID string) ([]byte, error)) (Review, error) {
	rest, ok := strings.CutPrefix(token, ReviewPrefix)
	if !ok || len(token) > maxReviewToken {
		return Review{}, ErrReviewToken
	}
	payload, mac, ok := strings.Cut(rest, ".")
	if !ok {
		return Review{}, ErrReviewToken
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Review{}, ErrReviewToken
	}
	var cl reviewClaims
	if err := json.Unmarshal(raw, &cl); err != nil || cl.Version != 1 || cl.ProjectID == "" || cl.ApprovalID == "" ||
		cl.MemberID == "" || cl.Digest == "" || cl.ExpiresAt == 0 {
		return Review{}, ErrReviewToken
	}
	key, err := keyOf(ctx, cl.ProjectID)
	if errors.Is(err, store.ErrNotFound) {
		return Review{}, ErrReviewToken
	}
	if err != nil {
		return Review{}, err
	}
	if !hmac.Equal([]byte(mac), []byte(reviewMAC(key, payload))) {
		return Review{}, ErrReviewToken
	}
	return Review{
		ProjectID: cl.ProjectID, ApprovalID: cl.ApprovalID, MemberID: cl.MemberID,
		InputDigest: cl.Digest, ExpiresAt: time.Unix(cl.ExpiresAt, 0).UTC(),
	}, nil
}

// Expired reports whether the link has expired at now.
func (r Review) Expired(now time.Time) bool { return !now.Before(r.ExpiresAt) }

// ReviewURL is the link of token under publicURL.
func ReviewURL(publicURL, token string) string {
	return strings.TrimSuffix(publicURL, "/") + "/review/" + token
}

// ReviewActorID is the actor id ("by" in the trace, an approval's
// DecidedBy) of a decision made from a review link by a member:
// "review:<memberId>". The member's name is DecidedByName as for a key.
func ReviewActorID(memberID string) string { return "review:" + memberID }
