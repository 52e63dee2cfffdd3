// Rules: remembered decisions. A member who approved a call may allow it
// again for a while ("Approve and allow again for…"): a rule scoped to the
// agent, the tool and the end user (and optionally the exact input) that
// lets matching calls run without asking until it expires or is revoked.
// The list (those in force by default, every rule with a toggle) and one
// rule; whoever may decide revokes them, for the next call on.

import { h, replace, alertBox, showError, showMessage } from "./dom.js";
import { get, del, enc } from "./api.js";
import { ago, stamp, pretty, who } from "./format.js";
import { mayDecide } from "./access.js";

const PAGE = 50;

// ruleLink links to rule id's page.
export function ruleLink(id) {
  return h("a", { href: `#/rules/${enc(id)}`, class: "mono", text: id });
}

function approvalLink(id) {
  return h("a", { href: `#/approvals/${enc(id)}`, class: "mono", text: id });
}

// scopeWords: which inputs a rule lets through, in words.
export function scopeWords(r) {
  switch (r.scope) {
    case "exact": return "only the approved input";
    case "schema": return "inputs that match a schema";
    default: return "any input";
  }
}

function scopeCell(r) {
  if (r.scope === "exact") {
    return [scopeWords(r), h("div", { class: "small muted mono", title: "The approved input's digest", text: r.inputDigest })];
  }
  if (r.scope === "schema") {
    return h("details", {}, h("summary", { text: scopeWords(r) }), h("pre", { class: "json", text: pretty(r.when) }));
  }
  return scopeWords(r);
}

const STATES = {
  active: "in force",
  expired: "expired",
  revoked: "revoked",
  ended: "ended",
};

function stateBadge(r) {
  return h("span", { class: `badge badge--rule-${r.state}`, data: { state: r.state }, text: STATES[r.state] || r.state });
}

// stateDetail says who revoked a rule, or what ended it.
function stateDetail(r, me) {
  if (r.state === "revoked") {
    return h("div", { class: "small" }, `by ${who(r.revokedBy, me, r.revokedByName)} `, timeAgo(r.revokedAt));
  }
  if (r.state === "ended") {
    return h("div", { class: "small" }, r.endedBy ? `by deployment ${r.endedBy}: ` : "", r.ended || "a deployment changed what it was made under");
  }
  return null;
}

function timeAgo(iso) {
  return h("time", { attrs: { datetime: iso }, title: stamp(iso), text: ago(iso) });
}

// expiry: "in 23 hours" over "2026-11-30 10:00:00" ("expired 3 minutes
// ago" once past).
function expiry(r) {
  const past = new Date(r.expiresAt).getTime() <= Date.now();
  return [
    h("time", { class: "rule__expires", attrs: { datetime: r.expiresAt }, title: stamp(r.expiresAt), text: past ? `expired ${ago(r.expiresAt)}` : ago(r.expiresAt) }),
    h("div", { class: "small muted", text: stamp(r.expiresAt) }),
  ];
}

function maker(r, me) {
  return [
    h("span", { class: "rule__maker", text: r.createdByName || r.createdBy }), me && r.createdBy === me.id ? " (you)" : null,
    h("div", { class: "small" }, "from approval ", approvalLink(r.approvalId)),
    h("div", { class: "small muted" }, "made ", timeAgo(r.createdAt)),
  ];
}

// revocable: a rule that could still let a call through (an ended one may
// apply again after a deployment that restores what it was made under).
const revocable = (r) => r.state === "active" || r.state === "ended";

// revokeControl is a Revoke button that asks first, in place; done(rule)
// gets the revoked rule.
function revokeControl(r, done) {
  const slot = h("div", { class: "revoke" });
  const err = alertBox();
  const button = h("button", {
    type: "button", class: "btn btn--danger btn--quiet", text: "Revoke",
    attrs: { "aria-label": `Revoke ${r.tool} for ${r.endUserId} (${r.id})` }, on: { click: confirm },
  });
  replace(slot, button, err);

  function confirm() {
    const yes = h("button", { type: "button", class: "btn btn--danger", text: "Revoke rule" });
    const no = h("button", { type: "button", class: "btn", text: "Keep it" });
    const box = h("div", { class: "confirm", attrs: { role: "group", "aria-label": `Confirm revoking ${r.id}` } },
      h("p", { class: "small" }, `Revoke it? From the next call on, ${r.tool} for ${r.endUserId} asks for approval again. Runs it already let through are not changed.`),
      h("div", { class: "actions" }, yes, no), err);
    no.addEventListener("click", () => {
      showError(err, null);
      replace(slot, button, err);
      button.focus();
    });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      no.disabled = true;
      showError(err, null);
      try {
        done(await del(`/v1/rules/${enc(r.id)}`));
      } catch (e) {
        showError(err, e);
        yes.disabled = false;
        no.disabled = false;
      }
    });
    replace(slot, box);
    yes.focus();
  }
  return slot;
}

export function rulesView(ctx) {
  const all = ctx.query.get("status") === "all";
  const decide = mayDecide(ctx.me);
  const err = alertBox();
  const done = h("p", { class: "msg msg--ok", hidden: true, attrs: { role: "status" } });
  const toggle = h("input", {
    type: "checkbox", id: "rules-all", checked: all,
    on: { change: () => ctx.navigate(toggle.checked ? "#/rules?status=all" : "#/rules", { replace: true }) },
  });
  const refreshButton = h("button", { type: "button", class: "btn", text: "Refresh", on: { click: () => load() } });
  const list = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  const more = h("button", { type: "button", class: "btn", text: "Show more", hidden: true, on: { click: () => load(cursor) } });
  let stopped = false, cursor = "", rows = null;

  replace(ctx.main,
    h("h1", { text: "Rules" }),
    h("p", { class: "muted" },
      "Remembered decisions: a reviewer approved a call and allowed it again for a while. Until a rule expires or is revoked, matching calls of its tool for its end user run without asking; the run's trace names the rule. ",
      decide ? "Revoke one to make the next call ask again." : "Members who may decide revoke them."),
    h("div", { class: "toolbar" },
      h("span", { class: "check" }, toggle, h("label", { for: "rules-all", text: "Show all (expired and revoked too)" })),
      refreshButton),
    err, done, list, more);

  async function load(after = "") {
    try {
      const page = await get("/v1/rules", { status: all ? "all" : "active", cursor: after, limit: PAGE });
      if (stopped) return;
      showError(err, null);
      if (!after) {
        rows = null;
        list.replaceChildren();
      }
      cursor = page.nextCursor || "";
      more.hidden = !cursor;
      if (!rows && page.rules.length === 0) {
        replace(list, h("div", { class: "empty" },
          h("p", { class: "empty__title", text: all ? "No rule has been made yet." : "No rule is in force." }),
          h("p", {}, "On a pending approval, “Approve and allow again for…” makes one, where the tool allows it (",
            h("code", { text: '"approvals": {"remember": {"max": "24h"}}' }), " in stead.json).")));
        return;
      }
      if (!rows) {
        const cols = ["Tool", "Agent", "End user", "Inputs", "Made by", "Expires", "State", decide ? "Actions" : null].filter(Boolean);
        rows = h("tbody");
        replace(list, h("div", { class: "table-wrap", attrs: { tabindex: 0, role: "region", "aria-label": "Rules" } },
          h("table", { class: "table rules" },
            h("thead", {}, h("tr", {}, cols.map((c) => h("th", { attrs: { scope: "col" }, text: c })))),
            rows)));
      }
      for (const r of page.rules) rows.append(ruleRow(r));
    } catch (e) {
      if (!stopped) showError(err, e);
    }
  }

  function ruleRow(r) {
    const row = h("tr", { class: "rule", data: { ruleId: r.id, state: r.state } },
      h("th", { attrs: { scope: "row" } }, h("span", { class: "mono", text: r.tool }), h("div", { class: "small" }, ruleLink(r.id))),
      h("td", { data: { label: "Agent" }, text: r.agent }),
      h("td", { class: "rule__end-user", data: { label: "End user" }, text: r.endUserId }),
      h("td", { data: { label: "Inputs" } }, scopeCell(r)),
      h("td", { data: { label: "Made by" } }, maker(r, ctx.me)),
      h("td", { data: { label: "Expires" } }, expiry(r)),
      h("td", { data: { label: "State" } }, stateBadge(r), stateDetail(r, ctx.me)));
    if (decide) {
      row.append(h("td", {}, revocable(r) ? revokeControl(r, (revoked) => {
        showMessage(done, "ok", `Revoked ${revoked.id}: the next call of ${revoked.tool} for ${revoked.endUserId} asks for approval again.`);
        row.replaceWith(ruleRow(revoked));
      }) : "—"));
    }
    return row;
  }

  load();
  return () => { stopped = true; };
}

// ruleView shows one rule, revocable for those who may decide.
export function ruleView(ctx, id) {
  const err = alertBox();
  const slot = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  const done = h("p", { class: "msg msg--ok", hidden: true, attrs: { role: "status" } });
  replace(ctx.main, h("p", {}, h("a", { href: "#/rules", text: "← Rules" })), h("h1", {}, "Rule ", h("span", { class: "mono", text: id })), err, done, slot);
  let stopped = false;

  function render(r) {
    const rows = [
      ["State", [stateBadge(r), stateDetail(r, ctx.me)]],
      ["Tool", h("span", { class: "mono", text: r.tool })],
      ["Agent", r.agent],
      ["End user", r.endUserId],
      ["Inputs", scopeCell(r)],
      ["Expires", expiry(r)],
      ["Made by", who(r.createdBy, ctx.me, r.createdByName)],
      ["Made", h("time", { attrs: { datetime: r.createdAt }, text: `${stamp(r.createdAt)} (${ago(r.createdAt)})` })],
      ["From approval", approvalLink(r.approvalId)],
      ["Run", h("a", { href: `#/runs/${enc(r.runId)}`, class: "mono", text: r.runId })],
      ["Deployment", String(r.deployment)],
    ];
    replace(slot, h("article", { class: "card rule-card", data: { ruleId: r.id, state: r.state } },
      h("p", {}, `Calls of ${r.tool} by agent ${r.agent} for end user ${r.endUserId} with ${scopeWords(r)} `,
        r.state === "active" ? "run without asking until it expires or is revoked." : "ask for approval again."),
      h("dl", { class: "facts" }, rows.map(([k, v]) => h("div", {}, h("dt", { text: k }), h("dd", {}, v)))),
      mayDecide(ctx.me) && revocable(r) ? revokeControl(r, (revoked) => {
        showMessage(done, "ok", `Revoked: the next call of ${revoked.tool} for ${revoked.endUserId} asks for approval again.`);
        render(revoked);
      }) : null));
  }

  get(`/v1/rules/${enc(id)}`).then((r) => { if (!stopped) render(r); }).catch((e) => {
    if (stopped) return;
    slot.replaceChildren();
    showError(err, e);
  });
  return () => { stopped = true; };
}
