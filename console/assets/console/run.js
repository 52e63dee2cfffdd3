// One run: its state and its trace as a live timeline (Server-Sent Events).

import { h, replace, alertBox, showError } from "./dom.js";
import { get, post, enc, streamEvents } from "./api.js";
import { ago, stamp, clockMs, countdown, pretty, hasCosts, costsText, who } from "./format.js";
import { statusBadge } from "./approvals.js";
import { ruleLink } from "./rules.js";

const TERMINAL = ["succeeded", "failed", "cancelled"];

export function runView(ctx, id) {
  const err = alertBox();
  const summary = h("section", { class: "card run-summary", attrs: { "aria-label": "Run" } }, h("p", { class: "muted", text: "Loading…" }));
  const timeline = h("ol", { class: "timeline", attrs: { "aria-live": "polite", "aria-relevant": "additions" } });
  const streamState = h("p", { class: "muted small", attrs: { role: "status" } });
  replace(ctx.main,
    h("p", {}, h("a", { href: "#/runs", text: "← Runs" })),
    h("h1", {}, "Run ", h("span", { class: "mono", text: id })),
    err, summary,
    h("h2", { text: "Trace" }), streamState, timeline);

  const ctrl = new AbortController();
  let run = null, fetching = false, again = false, countdownEl = null;
  const ticker = setInterval(tick, 1000);

  function tick() {
    if (!countdownEl || !run || !run.approval) return;
    const left = new Date(run.approval.expiresAt).getTime() - Date.now();
    countdownEl.textContent = left > 0 ? `Expires in ${countdown(left)}.` : "Past its deadline.";
  }

  async function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    try {
      run = await get(`/v1/runs/${enc(id)}`, undefined, { signal: ctrl.signal });
      renderSummary();
    } catch (e) {
      if (!ctrl.signal.aborted) showError(err, e);
    } finally {
      fetching = false;
      if (again && !ctrl.signal.aborted) { again = false; refresh(); }
    }
  }

  function renderSummary() {
    const r = run;
    const rows = [
      ["Status", statusBadge(r.status)],
      ["Agent", r.agent],
      r.tool ? ["Call", `one call of ${r.tool}`] : null,
      r.via ? ["Via", r.via.startsWith("mcp:") ? `MCP key ${r.via.slice(4)}` : r.via] : null,
      ["End user", r.endUserId],
      ["Deployment", String(r.deployment)],
      ["Trust", r.trust === "untrusted" ? [h("span", { class: "badge badge--untrusted", text: "untrusted" }), r.trustOrigin ? ` (from ${r.trustOrigin})` : ""] : r.trust],
      ["Costs", costsText(r.costs)],
      ["Created", h("time", { attrs: { datetime: r.createdAt }, text: `${stamp(r.createdAt)} (${ago(r.createdAt)})` })],
      ["Updated", stamp(r.updatedAt)],
      r.finishedAt ? ["Finished", stamp(r.finishedAt)] : null,
    ].filter(Boolean);
    const parts = [
      h("dl", { class: "facts", data: { runStatus: r.status } }, rows.map(([k, v]) => h("div", {}, h("dt", { text: k }), h("dd", {}, v)))),
    ];
    countdownEl = null;
    if (r.approval) {
      countdownEl = h("span", { attrs: { role: "timer" } });
      parts.push(h("div", { class: "msg msg--warn" },
        h("p", {}, h("strong", { text: `Waiting for approval of ${r.approval.tool}` }), ` — ${r.approval.reason}. `, countdownEl),
        h("p", {}, h("a", { href: `#/approvals/${enc(r.approval.id)}`, class: "btn btn--primary", text: "Review the approval" }))));
    }
    if (r.error) {
      parts.push(h("div", { class: "msg msg--error run-error" },
        h("p", {}, h("strong", { text: r.status === "cancelled" ? "Cancelled: " : "Failed: " }), h("code", { text: r.error.code }), r.error.step ? ` at step ${r.error.step}` : ""),
        h("p", { class: "run-error__message", text: r.error.message })));
    }
    parts.push(h("h3", { text: "Input" }), h("pre", { class: "json", text: pretty(r.input) }));
    if (r.status === "succeeded") parts.push(h("h3", { text: "Output" }), h("pre", { class: "json", text: pretty(r.output) }));
    if (!TERMINAL.includes(r.status)) {
      const cancel = h("button", { type: "button", class: "btn btn--danger", text: "Cancel run" });
      const cancelErr = alertBox();
      cancel.addEventListener("click", async () => {
        cancel.disabled = true;
        try {
          run = await post(`/v1/runs/${enc(id)}/cancel`, {});
          renderSummary();
        } catch (e) {
          showError(cancelErr, e);
          cancel.disabled = false;
        }
      });
      parts.push(h("div", { class: "actions" }, cancel), cancelErr);
    }
    const focused = summary.contains(document.activeElement);
    replace(summary, ...parts);
    tick();
    if (focused) summary.focus();
  }
  summary.tabIndex = -1;

  async function follow() {
    streamState.textContent = "Following the trace live…";
    try {
      await streamEvents(id, {
        signal: ctrl.signal,
        onEvent: (ev) => {
          timeline.append(eventItem(ev, ctx.me));
          refresh();
        },
      });
      if (ctrl.signal.aborted) return;
      streamState.textContent = "The run has ended; this is its whole trace.";
      refresh();
    } catch (e) {
      if (ctrl.signal.aborted) return;
      streamState.textContent = "";
      showError(err, e);
    }
  }

  refresh();
  follow();
  return () => {
    ctrl.abort();
    clearInterval(ticker);
  };
}


function json(v, label) {
  return h("pre", { class: "json", text: pretty(v), attrs: label ? { "aria-label": label } : {} });
}

function kv(k, v) {
  return h("p", { class: "ev__kv small" }, h("span", { class: "muted", text: k + " " }), v);
}

// tallies: an approval event's progress, "1 of 2 from finance — waiting
// on Bo Li" (the engine's words; older traces hold the tallies).
function tallies(progress) {
  if (typeof progress === "string") return progress;
  if (!Array.isArray(progress)) return "—";
  return progress.map((t) => `${(t.counted || []).length} of ${t.min} from ${t.group}`).join("; ");
}

// policyText is a step's policy decision: who approved it, or the
// decision and its reason — a remembered decision's rule named and linked.
function policyText(p, me) {
  if (p.decision === "approved") return `approved by ${who(p.by, me, p.byName)} (approval ${p.approvalId})`;
  if (!p.remembered) return `${p.decision}${p.reason ? " — " + p.reason : ""}`;
  // The reason names the rule ("allowed by remembered decision rul_… (Ana
  // Diaz, from approval apr_…, until …)"): it becomes the link.
  const reason = p.reason || "";
  const at = reason.indexOf(p.remembered);
  const linked = at < 0
    ? [reason, reason ? " " : "", "(remembered decision ", ruleLink(p.remembered), ")"]
    : [reason.slice(0, at), ruleLink(p.remembered), reason.slice(at + p.remembered.length)];
  return h("span", { class: "policy--remembered", data: { ruleId: p.remembered } }, `${p.decision} — `, linked);
}

function idemKey(d) {
  return d.idempotencyKey ? kv("idempotency key", h("code", { class: "idem", text: d.idempotencyKey })) : null;
}

// eventItem renders one trace event.
function eventItem(ev, me) {
  const d = ev.data || {};
  let kind = "info", title, body = [];
  switch (ev.type) {
    case "run.created":
      title = `Run created by ${who(d.by, me, d.byName)} for end user ${d.endUserId} (deployment ${d.deployment})`;
      body = [json(d.input, "Run input")];
      break;
    case "run.started":
      title = `Worker ${d.worker} picked up the run (attempt ${d.attempt}, from step ${Number(d.cursor) + 1})`;
      break;
    case "step.started": {
      title = `Step ${ev.step}: ${d.tool} started`;
      body = [
        d.policy ? kv("policy", policyText(d.policy, me)) : null,
        idemKey(d),
        d.attempt > 1 ? kv("attempt", String(d.attempt)) : null,
        h("p", { class: "ev__label small", text: "Input" }), json(d.input, `Input of step ${ev.step}`),
      ];
      break;
    }
    case "step.completed":
      kind = "ok";
      title = `Step ${ev.step}: ${d.tool} completed${d.durationMs !== undefined ? ` in ${d.durationMs} ms` : ""}`;
      body = [
        idemKey(d),
        hasCosts(d.costs) ? kv("costs", costsText(d.costs)) : null,
        h("p", { class: "ev__label small", text: "Output" }), json(d.output, `Output of step ${ev.step}`),
      ];
      break;
    case "step.failed":
      kind = "bad";
      title = `Step ${ev.step} failed: ${d.code}`;
      body = [h("p", { class: "ev__message", text: d.message })];
      break;
    case "log":
      kind = d.level === "error" ? "bad" : d.level === "warn" ? "warn" : "log";
      title = null;
      body = [h("p", { class: "ev__log" }, h("span", { class: "ev__level", text: d.level }), " ", h("span", { text: d.message }))];
      break;
    case "cost.recorded":
      title = `Cost recorded: ${costsText(d.costs)}`;
      body = d.runCosts ? [kv("run total", costsText(d.runCosts))] : [];
      break;
    case "trust.lowered":
      kind = "warn";
      title = `Trust lowered: the run is untrusted from here on (origin: ${d.origin})`;
      body = [h("p", { class: "small", text: "Every later write asks for approval." })];
      break;
    case "approval.requested":
      kind = "warn";
      title = `Approval requested for ${d.tool}: ${d.reason}`;
      body = [
        kv("approval", h("a", { href: `#/approvals/${enc(d.approvalId)}`, class: "mono", text: d.approvalId })),
        kv("expires", stamp(d.expiresAt)),
        d.progress ? kv("approvers", tallies(d.progress)) : null,
        idemKey(d),
        h("p", { class: "ev__label small", text: "Input to review" }), json(d.input, "Input to review"),
      ];
      break;
    case "approval.vote":
      title = `Vote to approve by ${who(d.by, me, d.byName)} at ${stamp(ev.at)}`;
      body = [
        kv("approvers", tallies(d.progress)),
        d.note ? kv("note", h("q", { text: d.note })) : null,
        d.edited ? h("p", { class: "ev__label small", text: "Input edited with this vote; earlier votes were reset. The new input:" }) : null,
        d.edited ? json(d.input, "Edited input") : null,
      ];
      break;
    case "approval.approved":
      kind = "ok";
      title = `Approved by ${who(d.by, me, d.byName)} at ${stamp(ev.at)}`;
      body = [
        d.progress ? kv("approvers", tallies(d.progress)) : null,
        d.note ? kv("note", h("q", { text: d.note })) : null,
        d.edited ? h("p", { class: "ev__label small", text: "Input edited before approval; it runs with:" }) : null,
        d.edited ? json(d.input, "Edited input") : null,
        d.edited ? h("p", { class: "ev__label small", text: "Input as requested:" }) : null,
        d.edited ? json(d.originalInput, "Original input") : null,
      ];
      break;
    case "approval.denied":
      kind = "bad";
      title = `Denied by ${who(d.by, me, d.byName)} at ${stamp(ev.at)}`;
      body = [d.note ? kv("note", h("q", { text: d.note })) : h("p", { class: "small muted", text: "No note." })];
      break;
    case "approval.expired":
      kind = "expired";
      title = `Approval expired: nobody decided by ${stamp(d.expiresAt)}`;
      break;
    case "approval.cancelled":
      title = `Approval cancelled with the run by ${who(d.by, me, d.byName)}`;
      break;
    case "run.succeeded":
      kind = "ok";
      title = "Run succeeded";
      body = [hasCosts(d.costs) ? kv("costs", costsText(d.costs)) : null, json(d.output, "Run output")];
      break;
    case "run.failed":
      kind = "bad";
      title = `Run failed: ${d.code}`;
      body = [h("p", { class: "ev__message", text: d.message })];
      break;
    case "run.cancelled":
      kind = "bad";
      title = `Run cancelled by ${who(d.by, me, d.byName)}`;
      break;
    default:
      title = ev.type;
      body = [json(d)];
  }
  return h("li", { class: `ev ev--${kind}`, data: { type: ev.type, seq: ev.seq, step: ev.step } },
    h("div", { class: "ev__head" },
      h("time", { class: "ev__time mono small", attrs: { datetime: ev.at }, title: stamp(ev.at), text: clockMs(ev.at) }),
      h("span", { class: "ev__type small", text: ev.type }),
      ev.step ? h("span", { class: "ev__step small" }, "step ", h("strong", { text: ev.step })) : null),
    title ? h("p", { class: "ev__title", text: title }) : null,
    body);
}
