// The trace: one event as words (eventTitle, for an approval's history)
// or as an item of the run page's trace (eventItem), with collapsible JSON
// and, for a failure, where it was thrown.

import { h, idText } from "./dom.js";
import { enc } from "./api.js";
import { stamp, when, offset, duration, pretty, hasCosts, costsText, who } from "./format.js";
import { ruleLink } from "./rules.js";

// json is a collapsible JSON block: open when short, folded (its first
// line in the summary) when long.
export function json(v, label) {
  const text = pretty(v);
  const lines = text.split("\n").length;
  // Focusable: a long block scrolls, and a keyboard must reach it.
  const pre = h("pre", { class: "json", text, attrs: { tabindex: 0, "aria-label": label || "JSON" } });
  return h("details", { class: "json-fold", open: lines <= FOLD_LINES },
    h("summary", { class: "small" }, label || "JSON", h("span", { class: "muted", text: ` · ${lines} ${lines === 1 ? "line" : "lines"}` })),
    pre);
}

// FOLD_LINES: JSON longer than this starts folded.
const FOLD_LINES = 16;

// thrown shows where an error came from, as the trace carries it: the
// source position (file:line:column) and the stack, when present.
export function thrown(d) {
  if (!d) return null;
  const pos = d.file ? `${d.file}${d.line ? ":" + d.line : ""}${d.line && d.column ? ":" + d.column : ""}` : "";
  return [
    pos ? h("p", { class: "ev__kv small source-pos" }, h("span", { class: "muted", text: "at " }), h("code", { text: pos })) : null,
    d.stack ? h("details", { class: "stack", open: true }, h("summary", { class: "small", text: "Stack" }), h("pre", { class: "json stack__text", text: d.stack, attrs: { tabindex: 0, "aria-label": "Stack" } })) : null,
  ];
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
  return d.idempotencyKey ? kv("idempotency key", idText(d.idempotencyKey, { cls: "idem" })) : null;
}

// eventTitle is one trace event in a line of words (null for a log line).
export function eventTitle(ev, me) {
  return describe(ev, me).title;
}

// eventItem renders one trace event; start is the run's first moment
// (times show as offsets from it, the moment itself in the title).
export function eventItem(ev, me, start) {
  const { kind, title, body } = describe(ev, me);
  return h("li", { class: `ev ev--${kind}`, data: { type: ev.type, seq: ev.seq, step: ev.step } },
    h("div", { class: "ev__head" },
      h("time", { class: "ev__time mono small", attrs: { datetime: ev.at }, title: stamp(ev.at), text: start ? offset(ev.at, start) : stamp(ev.at) }),
      h("span", { class: "ev__type small", text: ev.type }),
      ev.step ? h("span", { class: "ev__step small" }, "step ", h("strong", { text: ev.step })) : null),
    title ? h("p", { class: "ev__title", text: title }) : null,
    body);
}

// describe is an event's kind (ok, bad, warn, expired, log, info), title
// and body.
function describe(ev, me) {
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
      title = `Step ${ev.step}: ${d.tool} completed${d.durationMs !== undefined ? ` in ${duration(d.durationMs)}` : ""}`;
      body = [
        idemKey(d),
        hasCosts(d.costs) ? kv("costs", costsText(d.costs)) : null,
        h("p", { class: "ev__label small", text: "Output" }), json(d.output, `Output of step ${ev.step}`),
      ];
      break;
    case "step.failed":
      kind = "bad";
      title = `Step ${ev.step} failed: ${d.code}${d.durationMs !== undefined ? ` after ${duration(d.durationMs)}` : ""}`;
      body = [h("p", { class: "ev__message", text: d.message }), thrown(d)];
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
        kv("approval", idText(d.approvalId, { link: `#/approvals/${enc(d.approvalId)}` })),
        kv("expires", when(d.expiresAt)),
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
      title = `Run failed: ${d.code}${d.step ? ` at step ${d.step}` : ""}`;
      body = [h("p", { class: "ev__message", text: d.message }), thrown(d)];
      break;
    case "run.cancelled":
      kind = "bad";
      title = `Run cancelled by ${who(d.by, me, d.byName)}`;
      break;
    default:
      title = ev.type;
      body = [json(d)];
  }
  return { kind, title, body };
}
