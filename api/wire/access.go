package wire

import "time"

// Group is a group of the project's members, as the API shows it:
// stead.json's approvers name it ("approvers": {"group": "finance",
// "min": 2}).
type Group struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Members are the group's members, by name.
	Members   []GroupMember `json:"members"`
	Version   int64         `json:"version"`
	CreatedAt time.Time     `json:"createdAt"`
	UpdatedAt time.Time     `json:"updatedAt"`
}

// GroupMember is a member of a group as groups show them: who, never
// their email. Removed: removed from the project since they joined the
// group; they cannot vote.
type GroupMember struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Role    string `json:"role"`
	Removed bool   `json:"removed,omitempty"`
}

// GroupList is GET /v1/groups.
type GroupList struct {
	Groups []Group `json:"groups"`
}

// Member is a person of the project, as the API shows them.
type Member struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Email     string    `json:"email,omitempty"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	RemovedAt time.Time `json:"removedAt,omitzero"`
	// Chat are the member's linked chat accounts (Slack: team and user
	// id), shown to those who manage members.
	Chat []ChatIdentity `json:"chat,omitempty"`
	// Notify are the member's notification settings, shown to those who
	// manage members (and to the member, in GET /v1/me).
	Notify *NotifySettings `json:"notify,omitempty"`
	// Keys are the member's keys (never their secrets), in GET
	// /v1/members/{id}.
	Keys []APIKey `json:"keys,omitempty"`
	// Key is the key created with the member (POST /v1/members with
	// "key": true), its secret shown this once.
	Key *APIKey `json:"key,omitempty"`
}

// ChatIdentity links a member to a chat account by the ids the service
// gives the workspace and the user: {"kind": "slack", "team": "T…", "user":
// "U…"}. A Slack click decides as the member linked to its user.
type ChatIdentity struct {
	Kind string `json:"kind"`
	Team string `json:"team"`
	User string `json:"user"`
}

// NotifySettings are a member's notification settings: {"email": "all"}.
// Email is which approval mail the member gets: "all" (every approval they
// may decide, with its reminders, escalations and expiry warnings; the
// default), "requests" (each approval's request only) or "none". Slack
// messages go to a channel and are not affected.
type NotifySettings struct {
	Email string `json:"email"`
}

// MemberList is GET /v1/members.
type MemberList struct {
	Members []Member `json:"members"`
}

// CustomerTokenRevocation is what POST /v1/customer-tokens/revoke revoked:
// one token (TokenID, until ExpiresAt) or every token of the end user
// issued before IssuedBefore.
type CustomerTokenRevocation struct {
	EndUserID string `json:"endUserId"`
	TokenID   string `json:"tokenId,omitempty"`
	// ExpiresAt is when the revoked token expires anyway; in the past, the
	// token had expired already and nothing was recorded.
	ExpiresAt    time.Time `json:"expiresAt,omitzero"`
	IssuedBefore time.Time `json:"issuedBefore,omitzero"`
}

// APIKey is a key as listed; Key, the secret, is set only in the response
// that creates it.
type APIKey struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// MemberID and MemberName: the member the key belongs to.
	MemberID   string    `json:"memberId"`
	MemberName string    `json:"memberName"`
	Role       string    `json:"role"`
	Prefix     string    `json:"prefix"`
	CreatedAt  time.Time `json:"createdAt"`
	RevokedAt  time.Time `json:"revokedAt,omitzero"`
	Key        string    `json:"key,omitempty"`
}

// MCPKey is an MCP key: one MCP client's credential for one agent's tools
// and one end user. Key, the secret, is set only in the answer that
// creates it.
type MCPKey struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Agent     string `json:"agent"`
	EndUserID string `json:"endUserId"`
	Prefix    string `json:"prefix"`
	// CreatedBy is the key id of the owner who created it, CreatedByName
	// its member.
	CreatedBy     string    `json:"createdBy"`
	CreatedByName string    `json:"createdByName,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	RevokedAt     time.Time `json:"revokedAt,omitzero"`
	Key           string    `json:"key,omitempty"`
}

// MCPKeyList is the project's MCP keys, oldest first.
type MCPKeyList struct {
	Keys []MCPKey `json:"keys"`
}

// CustomerToken is a freshly issued customer token.
type CustomerToken struct {
	Token string `json:"token"`
	// TokenID names the token in logs and revocations; it is not secret.
	TokenID   string    `json:"tokenId"`
	EndUserID string    `json:"endUserId"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// KeyList is a project's keys, oldest first.
type KeyList struct {
	Keys []APIKey `json:"keys"`
}
