// What the signed-in key's role may do in the console. The API decides
// (approvals/access.go, the one authorization matrix); this mirrors its
// grants so that the console offers only what the API would allow. Should
// they ever differ, the API's refusal is shown where the action was tried.

// SECTIONS are the sections each role may open (an approver lists
// approvals and remembered decisions, reads a run from its approval, and
// reads members and groups). Rules are read by whoever reads approvals;
// webhooks are the owners' (mayManageWebhooks).
export const SECTIONS = {
  owner: ["approvals", "rules", "runs", "deployments", "members", "groups", "webhooks"],
  developer: ["approvals", "rules", "runs", "deployments", "members", "groups"],
  viewer: ["approvals", "rules", "runs", "deployments", "members", "groups"],
  approver: ["approvals", "rules", "members", "groups"],
};

// mayManageMembers: add, change and remove members, and manage groups
// (the manage-keys permission: owners only).
export function mayManageMembers(me) {
  return !!me && me.role === "owner";
}

// mayManageWebhooks: add, read, ping, rotate, enable and delete webhook
// endpoints and read and retry their deliveries (the manage-webhooks
// permission: owners only — an endpoint chooses where the project's
// events, and tools' inputs, are sent).
export function mayManageWebhooks(me) {
  return !!me && me.role === "owner";
}

// ROLES are the roles a member may have, with what each may do.
export const ROLES = [
  { id: "owner", text: "owner — everything, members and keys included" },
  { id: "developer", text: "developer — deploy, start runs, read, decide" },
  { id: "approver", text: "approver — read and decide approvals, nothing else" },
  { id: "viewer", text: "viewer — read only" },
];

// DECIDING_ROLES are the roles whose members may vote on approvals.
export const DECIDING_ROLES = ["owner", "developer", "approver"];

// mayDecide: approve and deny, and revoke remembered decisions (the
// decide permission).
export function mayDecide(me) {
  return !!me && DECIDING_ROLES.includes(me.role);
}
