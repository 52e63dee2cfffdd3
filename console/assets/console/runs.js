// Runs: the list, filtered by status and agent, refreshed live.

import { h, replace, alertBox, showError } from "./dom.js";
import { get, enc } from "./api.js";
import { ago, stamp } from "./format.js";
import { statusBadge } from "./approvals.js";

const POLL_MS = 2000;
const STATUSES = ["queued", "running", "awaiting-approval", "succeeded", "failed", "cancelled"];

export function runsView(ctx) {
  const status = STATUSES.includes(ctx.query.get("status")) ? ctx.query.get("status") : "";
  const agent = ctx.query.get("agent") || "";
  let limit = 50;

  const statusSelect = h("select", { id: "filter-status", on: { change: applyFilters } },
    h("option", { value: "", text: "All statuses" }),
    STATUSES.map((s) => h("option", { value: s, text: s })));
  statusSelect.value = status;
  const agentSelect = h("select", { id: "filter-agent", on: { change: applyFilters } },
    h("option", { value: "", text: "All agents" }),
    agent ? h("option", { value: agent, text: agent }) : null);
  agentSelect.value = agent;
  const err = alertBox();
  const list = h("ul", { class: "runs", attrs: { "aria-live": "polite", "aria-relevant": "additions" } });
  const empty = h("div", { class: "empty", hidden: true });
  const more = h("button", { type: "button", class: "btn", text: "Show more", hidden: true, on: { click: () => { limit = Math.min(limit * 2, 500); refresh(); } } });
  const updated = h("span", { class: "muted small" });

  replace(ctx.main,
    h("h1", { text: "Runs" }),
    h("form", { class: "toolbar", on: { submit: (e) => e.preventDefault() }, attrs: { "aria-label": "Filter runs" } },
      h("span", { class: "field field--inline" }, h("label", { for: "filter-status", text: "Status" }), statusSelect),
      h("span", { class: "field field--inline" }, h("label", { for: "filter-agent", text: "Agent" }), agentSelect),
      updated),
    err, list, empty, more);

  function applyFilters() {
    const q = new URLSearchParams();
    if (statusSelect.value) q.set("status", statusSelect.value);
    if (agentSelect.value) q.set("agent", agentSelect.value);
    const s = q.toString();
    ctx.navigate("#/runs" + (s ? "?" + s : ""), { replace: true });
  }

  // The agent filter offers the latest deployment's agents.
  get("/v1/agents").then((res) => {
    for (const a of res.agents) {
      if (a.name !== agent) agentSelect.append(h("option", { value: a.name, text: a.name }));
    }
  }).catch(() => { /* the list still works without the choices */ });

  const rows = new Map(); // run id → {el, key}
  let stopped = false, inflight = false;

  async function refresh() {
    if (inflight || stopped) return;
    inflight = true;
    try {
      const page = await get("/v1/runs", { status, agent, limit });
      if (stopped) return;
      showError(err, null);
      const seen = new Set();
      let cursor = list.firstElementChild;
      for (const run of page.runs) {
        seen.add(run.id);
        const key = `${run.status}|${run.updatedAt}`;
        let row = rows.get(run.id);
        if (!row || row.key !== key) {
          const el = runRow(run);
          if (row) {
            if (cursor === row.el) cursor = el;
            row.el.replaceWith(el);
          }
          row = { el, key };
          rows.set(run.id, row);
        }
        if (row.el !== cursor) list.insertBefore(row.el, cursor);
        else cursor = cursor.nextElementSibling;
      }
      for (const [id, row] of rows) {
        if (!seen.has(id)) {
          row.el.remove();
          rows.delete(id);
        }
      }
      more.hidden = !page.nextCursor || limit >= 500;
      if (page.runs.length === 0) {
        replace(empty, h("p", { class: "empty__title", text: status || agent ? "No runs match these filters." : "No runs yet." }),
          h("p", {}, "Start one with ", h("code", { text: "stead run AGENT --end-user ID --input '{…}'" }), " or POST /v1/agents/{agent}/runs."));
      }
      empty.hidden = page.runs.length > 0;
      updated.textContent = "Updated " + stamp(new Date().toISOString());
    } catch (e) {
      if (!stopped) showError(err, e);
    } finally {
      inflight = false;
    }
  }

  refresh();
  const poll = setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
  return () => {
    stopped = true;
    clearInterval(poll);
  };
}

function runRow(run) {
  return h("li", { class: "run-row", data: { runId: run.id, status: run.status } },
    h("div", { class: "run-row__main" },
      statusBadge(run.status),
      h("a", { href: `#/runs/${enc(run.id)}`, class: "mono", text: run.id })),
    h("div", { class: "run-row__meta small" },
      h("span", {}, "agent ", h("strong", { text: run.agent })),
      run.tool ? h("span", {}, "one call of ", h("strong", { text: run.tool })) : null,
      run.via ? h("span", { class: "badge", text: run.via.startsWith("mcp:") ? "via MCP" : run.via, title: run.via }) : null,
      h("span", {}, "end user ", h("strong", { text: run.endUserId })),
      h("span", {}, "deployment ", String(run.deployment)),
      h("span", { title: stamp(run.createdAt) }, "started ", ago(run.createdAt)),
      run.approval ? h("span", {}, "waiting for approval of ", h("strong", { text: run.approval.tool })) : null,
      run.error ? h("span", { class: "run-row__error" }, h("code", { text: run.error.code })) : null,
      run.trust === "untrusted" ? h("span", { class: "badge badge--untrusted", text: "untrusted" }) : null));
}
