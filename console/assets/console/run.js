// One run: its state, a timeline of its steps and approval waits (each a
// bar with its duration and status), and its trace followed live
// (Server-Sent Events).

import { h, replace, alertBox, showError, idText } from "./dom.js";
import { get, post, enc, streamEvents } from "./api.js";
import { when, countdown, duration, hasCosts, costsText, usd } from "./format.js";
import { statusBadge } from "./approvals.js";
import { eventItem, json, thrown } from "./trace.js";

const TERMINAL = ["succeeded", "failed", "cancelled"];
const SVG = "http://www.w3.org/2000/svg";

export function runView(ctx, id) {
  const err = alertBox();
  const summary = h("section", { class: "card run-summary", attrs: { "aria-label": "Run" } }, h("p", { class: "muted", text: "Loading…" }));
  const spans = h("ol", { class: "spans", attrs: { "aria-label": "Steps and approval waits" } });
  const timeline = h("ol", { class: "timeline", attrs: { "aria-live": "polite", "aria-relevant": "additions" } });
  const streamState = h("p", { class: "muted small", attrs: { role: "status" } });
  replace(ctx.main,
    h("p", {}, h("a", { href: "#/runs", text: "← Runs" })),
    h("h1", { class: "run-title" }, "Run ", idText(id)),
    err, summary,
    h("h2", { text: "Timeline" }),
    h("div", { class: "card spans-card" }, spans),
    h("h2", { text: "Trace" }), streamState, timeline);

  const ctrl = new AbortController();
  const events = [];
  let run = null, fetching = false, again = false, countdownEl = null;
  const ticker = setInterval(tick, 1000);

  function tick() {
    if (run && !TERMINAL.includes(run.status)) renderSpans();
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
      renderSpans();
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
      ["Created", h("time", { attrs: { datetime: r.createdAt }, text: when(r.createdAt) })],
      ["Updated", h("time", { attrs: { datetime: r.updatedAt }, text: when(r.updatedAt) })],
      r.finishedAt ? ["Finished", h("time", { attrs: { datetime: r.finishedAt }, text: when(r.finishedAt) })] : null,
      r.finishedAt ? ["Took", duration(new Date(r.finishedAt) - new Date(r.createdAt))] : null,
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
        h("p", { class: "run-error__message", text: r.error.message }),
        thrown(r.error)));
    }
    parts.push(json(r.input, "Input"));
    if (r.status === "succeeded") parts.push(json(r.output, "Output"));
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

  // renderSpans draws each step and approval wait as a bar over the run's
  // whole time, with its duration, status and costs.
  function renderSpans() {
    const list = spansOf(events, run, Date.now());
    if (list.length === 0) {
      replace(spans, h("li", { class: "muted small", text: "No step has started yet." }));
      return;
    }
    const t0 = list.start, total = Math.max(1, list.end - t0);
    replace(spans, list.map((sp) => {
      const x = ((sp.from - t0) / total) * 100;
      const w = Math.max(0.6, ((sp.to - sp.from) / total) * 100);
      const label = sp.kind === "wait" ? `approval of ${sp.tool}` : `${sp.step}: ${sp.tool}`;
      return h("li", { class: `span span--${sp.kind}`, data: { kind: sp.kind, step: sp.step, status: sp.status } },
        h("div", { class: "span__label" },
          h("span", { class: "span__name" }, sp.kind === "wait" ? h("span", { class: "span__wait", text: "waiting · " }) : null, label),
          h("span", { class: `badge badge--${sp.status}`, text: sp.status }),
          h("span", { class: "span__dur", text: (sp.open ? "for " : "") + duration(sp.to - sp.from) }),
          hasCosts(sp.costs) ? h("span", { class: "span__cost small", title: costsText(sp.costs), text: usd(sp.costs.costUsd) }) : null),
        bar(x, Math.min(w, 100 - x), sp));
    }));
  }

  async function follow() {
    streamState.textContent = "Following the trace live…";
    try {
      await streamEvents(id, {
        signal: ctrl.signal,
        onEvent: (ev) => {
          events.push(ev);
          timeline.append(eventItem(ev, ctx.me, events[0].at));
          renderSpans();
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

// bar is a span's bar: an SVG rectangle placed in percent of the run's
// time (attributes, not styles, so the strict CSP holds).
function bar(x, w, sp) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "span__bar");
  svg.setAttribute("viewBox", "0 0 100 8");
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("aria-hidden", "true");
  const rect = document.createElementNS(SVG, "rect");
  rect.setAttribute("x", x.toFixed(3));
  rect.setAttribute("y", "0");
  rect.setAttribute("width", w.toFixed(3));
  rect.setAttribute("height", "8");
  rect.setAttribute("rx", "1");
  rect.setAttribute("class", `span__rect span__rect--${sp.status}`);
  svg.append(rect);
  return svg;
}

// spansOf turns the trace into spans: one per step (step.started to its
// step.completed or step.failed; the last attempt's start) and one per
// approval wait (approval.requested to its decision, expiry or
// cancellation). Open spans run to now, or to the run's end. The list has
// start and end (ms) of the whole run.
export function spansOf(events, run, now) {
  const out = [];
  const open = new Map(); // step or approval id → span
  if (events.length === 0) return Object.assign(out, { start: 0, end: 0 });
  const at = (ev) => new Date(ev.at).getTime();
  let end = at(events.at(-1));
  for (const ev of events) {
    const d = ev.data || {};
    switch (ev.type) {
      case "step.started": {
        const sp = { kind: "step", step: ev.step, tool: d.tool, from: at(ev), to: at(ev), status: "running", open: true };
        const prev = open.get("step:" + ev.step);
        if (prev) out.splice(out.indexOf(prev), 1);
        open.set("step:" + ev.step, sp);
        out.push(sp);
        break;
      }
      case "step.completed": case "step.failed": {
        const sp = open.get("step:" + ev.step);
        if (!sp) break;
        sp.to = d.durationMs !== undefined ? Math.max(sp.from + d.durationMs, sp.from) : at(ev);
        if (sp.to > at(ev)) sp.to = at(ev);
        sp.status = ev.type === "step.completed" ? "succeeded" : "failed";
        sp.costs = d.costs;
        sp.open = false;
        break;
      }
      case "approval.requested": {
        const sp = { kind: "wait", step: ev.step, tool: d.tool, from: at(ev), to: at(ev), status: "pending", open: true };
        open.set("apr:" + d.approvalId, sp);
        out.push(sp);
        break;
      }
      case "approval.approved": case "approval.denied": case "approval.expired": case "approval.cancelled": {
        const sp = open.get("apr:" + d.approvalId);
        if (!sp) break;
        sp.to = at(ev);
        sp.status = ev.type.slice("approval.".length);
        sp.open = false;
        break;
      }
    }
  }
  const finished = run && TERMINAL.includes(run.status);
  if (!finished) end = Math.max(end, now);
  for (const sp of out) {
    if (!sp.open) continue;
    if (finished) {
      // The run ended with the span open: it ends there, as it stood.
      sp.to = end;
      sp.open = false;
      if (sp.status === "running") sp.status = run.status === "cancelled" ? "cancelled" : "failed";
      if (sp.status === "pending") sp.status = "cancelled";
    } else {
      sp.to = now;
    }
  }
  return Object.assign(out, { start: at(events[0]), end });
}
