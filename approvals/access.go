package approvals

import "slices"

// Permission is something an actor may do in its own project. Who may do
// what is decided here, and only here: the API names the permission each
// route needs, the engine the one each operation needs, and both ask
// Role.May.
type Permission string

// The permissions.
const (
	// ManageKeys: create, list and revoke API keys; add, change and remove
	// members; create, change and delete groups of members.
	ManageKeys Permission = "manage-keys"
	// ReadMembers: list and read the project's members (names and roles;
	// emails and keys only with ManageKeys) and its groups.
	ReadMembers Permission = "read-members"
	// Deploy: deploy bundles and configs.
	Deploy Permission = "deploy"
	// ReadDeployments: read deployments and the agents they declare.
	ReadDeployments Permission = "read-deployments"
	// RunAgents: start and cancel runs; issue and revoke customer tokens.
	RunAgents Permission = "run-agents"
	// ReadRuns: read every run of the project and its trace.
	ReadRuns Permission = "read-runs"
	// ReadOwnRuns: read the runs of one's own end user and their traces.
	// Whoever may ReadRuns may do this too.
	ReadOwnRuns Permission = "read-own-runs"
	// ReadApprovalRuns: read the runs that have asked for an approval, and
	// their traces (not list runs).
	ReadApprovalRuns Permission = "read-approval-runs"
	// ReadApprovals: list and read approvals.
	ReadApprovals Permission = "read-approvals"
	// Decide: approve and deny approvals. Customers never may: people do not
	// approve their own actions.
	Decide Permission = "decide"
	// UseBroker: read and write broker data — any end user's, with a key
	// that names it; its own end user's, with a run's broker token.
	UseBroker Permission = "use-broker"
	// ManageWebhooks: add, read, change, rotate, ping and remove the
	// project's webhook endpoints, and read and replay their deliveries.
	// Owners only: an endpoint chooses where the project's events (and,
	// with includeInput, tools' inputs) are sent, and its log holds them.
	ManageWebhooks Permission = "manage-webhooks"
	// ManageOwnSettings: read and change one's own notification settings.
	// Every key role: each key belongs to a member.
	ManageOwnSettings Permission = "manage-own-settings"
	// CallTools: call the tools of one agent for one end user, through the
	// same validation, policy and approval path as a run's tool step. MCP
	// keys only, each confined to its agent and end user (Actor.Agent,
	// Actor.EndUserID); no route grants it yet (POST /mcp will).
	CallTools Permission = "call-tools"
)

// grants is the authorization matrix: what each role may do.
var grants = map[Role][]Permission{
	RoleOwner:     {ManageKeys, ReadMembers, Deploy, ReadDeployments, RunAgents, ReadRuns, ReadOwnRuns, ReadApprovalRuns, ReadApprovals, Decide, UseBroker, ManageWebhooks, ManageOwnSettings},
	RoleDeveloper: {ReadMembers, Deploy, ReadDeployments, RunAgents, ReadRuns, ReadOwnRuns, ReadApprovalRuns, ReadApprovals, Decide, UseBroker, ManageOwnSettings},
	RoleApprover:  {ReadMembers, ReadApprovalRuns, ReadApprovals, Decide, ManageOwnSettings},
	RoleViewer:    {ReadMembers, ReadDeployments, ReadRuns, ReadOwnRuns, ReadApprovalRuns, ReadApprovals, ManageOwnSettings},
	RoleCustomer:  {ReadOwnRuns},
	RoleRun:       {UseBroker},
	RoleSystem:    {ReadRuns, ReadOwnRuns},
	// An MCP key calls its agent's tools and nothing else: it never
	// decides, deploys, manages keys or reads other runs.
	RoleMCP: {CallTools},
}

// May reports whether the role grants p.
func (r Role) May(p Permission) bool { return slices.Contains(grants[r], p) }

// MayAny reports whether the role grants one of ps.
func (r Role) MayAny(ps ...Permission) bool {
	return slices.ContainsFunc(ps, r.May)
}

// KeyRoles are the roles an API key may have.
var KeyRoles = []Role{RoleOwner, RoleDeveloper, RoleApprover, RoleViewer}

// IsKeyRole reports whether an API key may have role r.
func (r Role) IsKeyRole() bool { return slices.Contains(KeyRoles, r) }

// May reports whether the actor may do p in project projectID: its role
// grants p and the project is its own. Callers report a foreign project as
// not found, so that ids of other projects are never revealed.
func (a Actor) May(p Permission, projectID string) bool {
	return a.ProjectID == projectID && a.Role.May(p)
}
