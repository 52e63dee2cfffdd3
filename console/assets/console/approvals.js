// Approvals: the pending queue (live countdowns, approve, approve and
// allow again for a while, deny, edit the input, bulk approve, quorum
// progress and votes), the decided and expired tabs, and one approval.

import { h, replace, alertBox, showError, showMessage, idText } from "./dom.js";
import { get, post, enc, call } from "./api.js";
import { ago, stamp, when, offset, countdown, pretty, who } from "./format.js";
import { eventTitle } from "./trace.js";
import { hasQuorum, chips, isEligible, hasVoted, voteNoteText, progressLine, detail as quorumDetail } from "./quorum.js";
import { rememberable, rememberForm, rememberedNote, isRememberError } from "./remember.js";

const POLL_MS = 3000;
const RUN_POLL_MS = 1000;

const TABS = [
  { id: "pending", label: "Pending" },
  { id: "decided", label: "Decided" },
  { id: "expired", label: "Expired" },
];

export function approvalsView(ctx) {
  const tab = TABS.some((t) => t.id === ctx.query.get("tab")) ? ctx.query.get("tab") : "pending";
  const tabs = h("nav", { class: "tabs", attrs: { "aria-label": "Approval lists" } },
    TABS.map((t) => h("a", {
      href: t.id === "pending" ? "#/approvals" : `#/approvals?tab=${t.id}`,
      class: "tab", text: t.label, attrs: { "aria-current": t.id === tab ? "page" : null },
    })));
  const body = h("div");
  replace(ctx.main, h("h1", { text: "Approvals" }), tabs, body);
  if (tab === "pending") return pendingQueue(ctx, body);
  return settledList(ctx, body, tab);
}

// approvalView shows one approval: actionable while pending.
export function approvalView(ctx, id) {
  const err = alertBox();
  const slot = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  replace(ctx.main, h("p", {}, h("a", { href: "#/approvals", text: "← Approvals" })), h("h1", { class: "run-title" }, "Approval ", idText(id)), err, slot);
  const live = liveRuns();
  let card = null, stopped = false, inflight = false;
  const ticker = setInterval(() => card && card.tick && card.tick(), 1000);
  get(`/v1/approvals/${enc(id)}`).then((a) => {
    if (stopped) return;
    card = a.status === "pending" ? pendingCard(a, { me: ctx.me, live, selectable: false, detail: true }) : settledCard(a, ctx.me);
    replace(slot, card.el);
  }).catch((e) => {
    slot.replaceChildren();
    showError(err, e);
  });
  // While it waits, follow its votes (and edits) as the queue does.
  const poll = setInterval(async () => {
    if (stopped || inflight || document.hidden || !card || !card.pending || !card.pending()) return;
    inflight = true;
    try {
      const a = await get(`/v1/approvals/${enc(id)}`);
      if (stopped || !card.pending()) return;
      if (a.status === "pending") card.update(a);
      else card.setStale(true);
    } catch { /* the next poll tries again; a decision gets the API's answer */ } finally {
      inflight = false;
    }
  }, POLL_MS);
  return () => {
    stopped = true;
    clearInterval(ticker);
    clearInterval(poll);
    live.stop();
  };
}

// AGES are the age filter's choices: how long an approval has waited.
const AGES = [
  { id: "", label: "Any age", test: () => true },
  { id: "new", label: "Requested in the last 5 minutes", test: (ms) => ms < 5 * 60_000 },
  { id: "5m", label: "Waiting over 5 minutes", test: (ms) => ms >= 5 * 60_000 },
  { id: "1h", label: "Waiting over 1 hour", test: (ms) => ms >= 3600_000 },
];

// pendingQueue: the inbox. A compact list (one row per approval) with
// filters, and a detail pane with the current approval's card and history;
// keyboard: j/k move, a approve, d deny, e edit, x select; bulk approval
// of the selected rows.
function pendingQueue(ctx, body) {
  const order = ctx.query.get("order") === "expiring" ? "expiring" : "newest";
  const filters = { agent: ctx.query.get("agent") || "", tool: ctx.query.get("tool") || "", age: AGES.some((x) => x.id === ctx.query.get("age")) ? ctx.query.get("age") : "" };
  const err = alertBox();
  const orderSelect = h("select", { id: "order", on: { change: () => ctx.navigate(hashWith({ order: orderSelect.value === "expiring" ? "expiring" : "" }), { replace: true }) } },
    h("option", { value: "newest", text: "Newest first" }),
    h("option", { value: "expiring", text: "Soonest to expire first" }));
  orderSelect.value = order;
  const agentSelect = h("select", { id: "filter-agent", on: { change: () => setFilter("agent", agentSelect.value) } }, h("option", { value: "", text: "All agents" }));
  const toolSelect = h("select", { id: "filter-tool", on: { change: () => setFilter("tool", toolSelect.value) } }, h("option", { value: "", text: "All tools" }));
  const ageSelect = h("select", { id: "filter-age", on: { change: () => setFilter("age", ageSelect.value) } }, AGES.map((x) => h("option", { value: x.id, text: x.label })));
  ageSelect.value = filters.age;
  const selectAll = h("input", { type: "checkbox", id: "select-all", on: { change: onSelectAll } });
  const bulkButton = h("button", { type: "button", class: "btn btn--primary", disabled: true, on: { click: openBulk } });
  const refreshButton = h("button", { type: "button", class: "btn", text: "Refresh", on: { click: () => refresh() } });
  const updated = h("span", { class: "muted small", attrs: { "aria-live": "off" } });
  const list = h("ul", { class: "inbox__list", id: "inbox-list", attrs: { "aria-label": "Pending approvals", "aria-live": "polite", "aria-relevant": "additions" } });
  const shownCount = h("p", { class: "small muted inbox__count", attrs: { "aria-live": "polite" } });
  const detail = h("section", { class: "inbox__detail", id: "inbox-detail", attrs: { tabindex: -1, "aria-label": "Selected approval" } });
  const empty = h("div", { class: "empty", hidden: true },
    h("p", { class: "empty__title", text: "No approvals are waiting." }),
    h("p", {}, "When a run reaches a tool that needs a person's approval, it shows up here. Try ",
      h("code", { text: "stead run refunds --input '{\"orderId\":\"o-1001\",\"reason\":\"damaged\"}' --end-user demo-user" }), "."));
  const noMatch = h("div", { class: "empty", hidden: true }, h("p", { class: "empty__title", text: "No pending approval matches these filters." }));
  const dialog = h("dialog", { class: "bulk", attrs: { "aria-labelledby": "bulk-title" } });
  const keys = h("p", { class: "keys small muted", id: "inbox-keys" }, "Keys: ",
    [["j", "k", "next, previous"], ["a", "approve"], ["d", "deny"], ["e", "edit the input"], ["x", "select for bulk approval"]].map((k, i) => [
      i ? " · " : null, ...k.slice(0, -1).flatMap((key, j) => [j ? "/" : null, h("kbd", { text: key })]), " ", k.at(-1)]));

  replace(body,
    h("form", { class: "toolbar", attrs: { "aria-label": "Filter approvals" }, on: { submit: (e) => e.preventDefault() } },
      h("span", { class: "field field--inline" }, h("label", { for: "filter-agent", text: "Agent" }), agentSelect),
      h("span", { class: "field field--inline" }, h("label", { for: "filter-tool", text: "Tool" }), toolSelect),
      h("span", { class: "field field--inline" }, h("label", { for: "filter-age", text: "Age" }), ageSelect),
      h("span", { class: "field field--inline" }, h("label", { for: "order", text: "Order" }), orderSelect)),
    h("div", { class: "toolbar" },
      h("span", { class: "check" }, selectAll, h("label", { for: "select-all", text: "Select all" })),
      bulkButton, refreshButton, updated),
    keys, err, empty,
    h("div", { class: "inbox" },
      h("div", { class: "inbox__pane" }, shownCount, list, noMatch),
      detail),
    dialog);

  const cards = new Map(); // approval id → card (with .row, its list row)
  const selected = new Set();
  const live = liveRuns();
  let stopped = false, inflight = false, current = null; // current: the card in the detail pane

  function hashWith(change) {
    const q = new URLSearchParams();
    const next = { order: order === "expiring" ? "expiring" : "", ...filters, ...change };
    for (const k of ["order", "agent", "tool", "age"]) if (next[k]) q.set(k, next[k]);
    const s = q.toString();
    return "#/approvals" + (s ? "?" + s : "");
  }

  // setFilter applies a filter at once, keeping the address in step
  // without reloading the view.
  function setFilter(k, v) {
    filters[k] = v;
    history.replaceState(null, "", hashWith({}));
    applyFilters();
  }

  function matches(c) {
    const a = c.approval;
    if (filters.agent && a.agent !== filters.agent) return false;
    if (filters.tool && a.tool !== filters.tool) return false;
    const age = AGES.find((x) => x.id === filters.age) || AGES[0];
    return age.test(Date.now() - new Date(a.requestedAt).getTime());
  }

  function visibleCards() {
    return [...list.children].map((li) => cards.get(li.dataset.approvalId)).filter((c) => c && !c.row.hidden);
  }

  function applyFilters() {
    for (const c of cards.values()) {
      c.row.hidden = !matches(c);
      if (c.row.hidden && selected.has(c.id)) {
        c.setSelected(false);
        selected.delete(c.id);
      }
    }
    const shown = visibleCards();
    noMatch.hidden = cards.size === 0 || shown.length > 0;
    shownCount.textContent = cards.size === 0 ? "" : shown.length === cards.size
      ? `${cards.size} ${cards.size === 1 ? "approval" : "approvals"}`
      : `${shown.length} of ${cards.size} approvals match the filters`;
    if ((!current || current.row.hidden) && shown.length) show(shown[0], { focus: false });
    if (shown.length === 0 && current) show(null);
    updateBulk();
  }

  function updateBulk() {
    for (const id of selected) {
      const c = cards.get(id);
      if (!c || !c.selectable()) selected.delete(id);
    }
    bulkButton.textContent = `Approve selected (${selected.size})`;
    bulkButton.disabled = selected.size === 0;
    // A card whose input is being edited is decided on its own: bulk
    // approval would run the original input, not the edit on screen. Nor
    // does it take approvals the member may not vote on, or has voted on.
    const selectable = visibleCards().filter((c) => c.selectable());
    selectAll.checked = selectable.length > 0 && selectable.every((c) => selected.has(c.id));
    selectAll.disabled = selectable.length === 0;
  }

  function onSelect(id, on) {
    if (on) selected.add(id);
    else selected.delete(id);
    const c = cards.get(id);
    if (c) c.row.classList.toggle("inbox-row--selected", on);
    updateBulk();
  }

  function onSelectAll() {
    for (const c of visibleCards()) {
      if (!c.selectable()) continue;
      c.setSelected(selectAll.checked);
      onSelect(c.id, selectAll.checked);
    }
  }

  // show puts a card in the detail pane and marks its row current.
  function show(c, { focus = false, scroll = false } = {}) {
    if (current) current.row.removeAttribute("aria-current");
    current = c;
    if (!c) {
      replace(detail, h("p", { class: "muted", text: "Choose an approval to see its input, reason and history." }));
      return;
    }
    c.row.setAttribute("aria-current", "true");
    replace(detail, c.el, c.history.el);
    c.history.load();
    if (focus) c.row.querySelector(".inbox-row__open").focus();
    if (scroll && matchMedia("(max-width: 800px)").matches) detail.scrollIntoView({ block: "start" });
  }

  function move(step) {
    const shown = visibleCards();
    if (shown.length === 0) return;
    let i = shown.indexOf(current);
    i = i < 0 ? 0 : Math.min(shown.length - 1, Math.max(0, i + step));
    show(shown[i], { focus: true });
  }

  function rowFor(c) {
    const a = c.approval;
    const open = h("button", { type: "button", class: "inbox-row__open", attrs: { "aria-controls": "inbox-detail" } });
    const li = h("li", { class: "inbox-row", data: { approvalId: c.id, runId: a.runId, status: "pending" } },
      c.check ? h("span", { class: "inbox-row__check" }, c.check, h("label", { for: c.check.id, class: "sr-only", text: `Select ${a.tool} for run ${a.runId}` })) : null,
      open);
    open.addEventListener("click", () => show(c, { scroll: true }));
    li.addEventListener("click", (ev) => { if (ev.target === li) show(c, { scroll: true }); });
    return li;
  }

  // paintRow writes a row from its card: tool, agent, end user, age,
  // expires-in (or what became of it), quorum progress.
  function paintRow(c) {
    const a = c.approval;
    const st = c.status();
    c.row.dataset.status = st;
    c.row.classList.toggle("inbox-row--stale", c.stale());
    const left = new Date(a.expiresAt).getTime() - Date.now();
    const fate = st === "pending"
      ? (left > 0 ? h("span", { class: "inbox-row__expires" + (left < 60_000 ? " countdown--soon" : ""), title: stamp(a.expiresAt) }, h("span", { class: "sr-only", text: "expires " }), "in " + countdown(left))
        : h("span", { class: "badge badge--expired", text: "expired" }))
      : h("span", { class: `badge badge--${st}`, text: st });
    replace(c.row.querySelector(".inbox-row__open"),
      h("span", { class: "inbox-row__tool", text: a.tool }),
      h("span", { class: "inbox-row__agent" }, h("span", { class: "sr-only", text: "agent " }), a.agent),
      h("span", { class: "inbox-row__user" }, h("span", { class: "sr-only", text: "end user " }), a.endUserId),
      h("span", { class: "inbox-row__age", title: stamp(a.requestedAt) }, h("span", { class: "sr-only", text: "requested " }), ago(a.requestedAt)),
      h("span", { class: "inbox-row__fate" }, fate),
      hasQuorum(a) ? h("span", { class: "inbox-row__quorum" }, chips(a)) : h("span", { class: "inbox-row__quorum muted", attrs: { "aria-hidden": "true" }, text: "" }));
  }

  async function refresh() {
    if (inflight || stopped) return;
    inflight = true;
    try {
      const page = await get("/v1/approvals", { status: "pending", order, limit: 100 });
      if (stopped) return;
      showError(err, null);
      const ids = new Set(page.approvals.map((a) => a.id));
      const desired = [];
      for (const a of page.approvals) {
        let c = cards.get(a.id);
        if (!c) {
          c = pendingCard(a, { me: ctx.me, live, selectable: true, onSelect, onDecided: () => { updateBulk(); paintRow(c); } });
          c.row = rowFor(c);
          c.history = historyPane(a, ctx.me);
          cards.set(a.id, c);
        } else {
          c.update(a); // new votes, or an input another approver edited
        }
        c.setStale(false);
        paintRow(c);
        desired.push(c.row);
      }
      // A row that left the queue stays where it is, marked, until
      // dismissed: nothing moves under the reader's pointer, and a decision
      // tried on it gets the API's own answer.
      for (const c of cards.values()) {
        if (!ids.has(c.id) && c.pending()) c.setStale(true);
        paintRow(c);
      }
      placeInOrder(list, desired);
      const all = [...cards.values()].map((c) => c.approval);
      optionsOf(agentSelect, all.map((a) => a.agent), filters.agent);
      optionsOf(toolSelect, all.map((a) => a.tool), filters.tool);
      empty.hidden = cards.size > 0;
      updated.textContent = "Updated " + stamp(new Date().toISOString());
      applyFilters();
    } catch (e) {
      if (!stopped) showError(err, e);
    } finally {
      inflight = false;
    }
  }

  // Removing a dismissed card.
  detail.addEventListener("approval-dismiss", (ev) => {
    const c = cards.get(ev.detail);
    if (!c) return;
    const shown = visibleCards();
    const next = shown[shown.indexOf(c) + 1] || shown[shown.indexOf(c) - 1] || null;
    c.row.remove();
    cards.delete(c.id);
    selected.delete(c.id);
    empty.hidden = cards.size > 0;
    show(next);
    applyFilters();
  });

  // The keyboard: only when no field, dialog or modifier is in play.
  function onKey(ev) {
    if (ev.defaultPrevented || ev.altKey || ev.ctrlKey || ev.metaKey || dialog.open) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    const c = current;
    switch (ev.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "a": if (c) c.keyDecide(true); break;
      case "d": if (c) c.keyDecide(false); break;
      case "e": if (c) c.keyEdit(); break;
      case "x":
        if (c && c.check && !c.check.disabled) {
          c.check.checked = !c.check.checked;
          onSelect(c.id, c.check.checked);
        }
        break;
      default: return;
    }
    ev.preventDefault();
  }
  document.addEventListener("keydown", onKey);

  function openBulk() {
    const chosen = [...selected].map((id) => cards.get(id)).filter((c) => c && c.selectable());
    if (chosen.length === 0) return;
    const note = h("textarea", { id: "bulk-note", rows: 2 });
    const results = new Map();
    // Each approval is approved as the dialog shows it: should its input
    // change meanwhile, the API refuses (approval_changed) and its card
    // shows the new input.
    const seen = new Map(chosen.map((c) => [c.id, c.approval.inputDigest]));
    const confirm = h("button", { type: "button", class: "btn btn--primary", text: `Approve ${chosen.length} ${chosen.length === 1 ? "call" : "calls"}` });
    const cancel = h("button", { type: "button", class: "btn", text: "Cancel", on: { click: () => dialog.close() } });
    const summary = h("p", { class: "msg msg--info", hidden: true, attrs: { role: "status" } });
    replace(dialog,
      h("h2", { id: "bulk-title", text: `Approve ${chosen.length} ${chosen.length === 1 ? "call" : "calls"}?` }),
      h("p", { text: "Each call runs with exactly the input shown. Check every one before you confirm." }),
      h("ol", { class: "bulk__list" }, chosen.map((c) => {
        const a = c.approval;
        const res = h("div", { class: "bulk__result", attrs: { "aria-live": "polite" } });
        results.set(a.id, res);
        return h("li", { class: "bulk__item", data: { approvalId: a.id } },
          h("p", { class: "bulk__title" }, h("strong", { text: a.tool }), " · ", a.agent, " · end user ", h("span", { text: a.endUserId })),
          h("p", { class: "small" }, "Run ", h("code", { class: "nowrap", text: a.runId }), " · ", a.reason, " · requested ", ago(a.requestedAt)),
          hasQuorum(a) ? h("p", { class: "small" }, "Approvers: ", a.progress) : null,
          h("pre", { class: "json", text: pretty(a.input), attrs: { tabindex: 0, "aria-label": `Input of ${a.tool} for run ${a.runId}` } }),
          res);
      })),
      h("label", { for: "bulk-note", text: "Note for all (optional)" }), note,
      summary,
      h("div", { class: "actions" }, confirm, cancel));
    confirm.addEventListener("click", async () => {
      confirm.disabled = true;
      cancel.disabled = true;
      let ok = 0, votes = 0;
      for (const c of chosen) {
        const res = results.get(c.id);
        showMessage(res, "info", "Approving…");
        const out = await c.decide(true, { note: note.value, seen: seen.get(c.id) });
        if (out.ok && out.vote) {
          votes++;
          showMessage(res, "ok", `Your vote is counted: ${out.approval.progress}.`);
        } else if (out.ok) {
          ok++;
          showMessage(res, "ok", "Approved.");
        } else {
          showError(res, out.error);
        }
        paintRow(c);
      }
      selected.clear();
      for (const c of cards.values()) c.row.classList.remove("inbox-row--selected");
      updateBulk();
      showMessage(summary, ok + votes === chosen.length ? "ok" : "error",
        `${ok} of ${chosen.length} approved.` + (votes ? ` ${votes} counted as your vote, still waiting on other approvers.` : ""));
      cancel.textContent = "Close";
      cancel.disabled = false;
      confirm.hidden = true;
      cancel.focus();
    });
    dialog.showModal();
    confirm.focus();
  }

  show(null);
  updateBulk();
  refresh();
  const poll = setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
  const ticker = setInterval(() => {
    for (const c of cards.values()) {
      c.tick();
      paintRow(c);
    }
  }, 1000);
  return () => {
    stopped = true;
    clearInterval(poll);
    clearInterval(ticker);
    document.removeEventListener("keydown", onKey);
    live.stop();
    if (dialog.open) dialog.close();
  };
}

// historyPane is an approval's history: its run's trace so far (the run
// started, the steps before it, the request, votes and edits), loaded when
// shown and again on each load().
function historyPane(a, me) {
  const list = h("ol", { class: "history" });
  const box = h("section", { class: "history-box", attrs: { "aria-label": `History of run ${a.runId}` } },
    h("h3", {}, "History of run ", idText(a.runId, { link: `#/runs/${enc(a.runId)}` })), list);
  let loading = false;
  return {
    el: box,
    async load() {
      if (loading) return;
      loading = true;
      try {
        const page = await get(`/v1/runs/${enc(a.runId)}/events`, { limit: 200 });
        const start = page.events.length ? page.events[0].at : a.requestedAt;
        replace(list, page.events.filter((ev) => ev.type !== "log").map((ev) => h("li", { class: "history__item", data: { type: ev.type } },
          h("time", { class: "history__at mono small", attrs: { datetime: ev.at }, title: stamp(ev.at), text: offset(ev.at, start) }), " ",
          h("span", { text: eventTitle(ev, me) || ev.type }))));
      } catch (e) {
        replace(list, h("li", { class: "muted small", text: `The history could not be read: ${e.message}` }));
      } finally {
        loading = false;
      }
    },
  };
}

// placeInOrder puts the desired nodes in order without moving nodes that
// are already in place or that are not desired (left-over stale cards).
function placeInOrder(list, desired) {
  const want = new Set(desired);
  let cursor = list.firstElementChild;
  for (const node of desired) {
    while (cursor && !want.has(cursor)) cursor = cursor.nextElementSibling;
    if (node === cursor) {
      cursor = cursor.nextElementSibling;
      continue;
    }
    list.insertBefore(node, cursor);
  }
}


function facts(rows) {
  return h("dl", { class: "facts" }, rows.filter(Boolean).map(([k, v]) => h("div", {}, h("dt", { text: k }), h("dd", {}, v))));
}

function runLink(id) {
  return idText(id, { link: `#/runs/${enc(id)}` });
}

function timeEl(iso, text) {
  return h("time", { attrs: { datetime: iso }, title: stamp(iso), text: text || stamp(iso) });
}

// liveRuns polls the runs of decided approvals until they end, and reports
// each change. One timer for all, so no connection is held per card.
function liveRuns() {
  const watched = new Map(); // run id → callback
  let busy = false;
  const timer = setInterval(async () => {
    if (busy || watched.size === 0) return;
    busy = true;
    try {
      for (const [id, fn] of [...watched]) {
        try {
          const run = await get(`/v1/runs/${enc(id)}`);
          fn(run, null);
          if (["succeeded", "failed", "cancelled"].includes(run.status)) watched.delete(id);
        } catch (e) {
          fn(null, e);
          watched.delete(id);
        }
      }
    } finally {
      busy = false;
    }
  }, RUN_POLL_MS);
  return {
    watch(id, fn) { watched.set(id, fn); },
    stop() { clearInterval(timer); watched.clear(); },
  };
}

// runStatusLine renders a run's status for a decided card.
function runStatusLine(run) {
  const parts = ["Run ", runLink(run.id), " ", statusBadge(run.status)];
  if (run.error) parts.push(" ", h("code", { text: run.error.code }), " ", run.error.message);
  return parts;
}

export function statusBadge(status) {
  return h("span", { class: `badge badge--${status}`, data: { status }, text: status });
}

// pendingCard is an approval waiting for a decision. opts: me, live,
// selectable, detail (the approval's own page: the whole quorum),
// onSelect(id, on), onDecided().
//
// Every decision carries the inputDigest of the approval as shown, so it
// lands only on the input the reviewer sees; when the input changed
// (another approver's edit), the card shows the new one and says so.
function pendingCard(initial, opts) {
  let a = initial; // the approval as shown
  const id = a.id;
  const me = opts.me || {};
  let state = "pending"; // pending | deciding | decided | refused
  let stale = false;
  let syntaxOk = true;
  const badge = h("span", { class: "badge badge--pending", text: "Pending" });
  const timer = h("span", { class: "countdown", attrs: { role: "timer", "aria-live": "off" } });
  const chipsEl = h("span", { class: "chips" });
  const quorumBox = h("div");
  const staleNote = h("p", { class: "msg msg--warn", hidden: true, attrs: { role: "status" } },
    "No longer in the pending queue: it was decided or expired elsewhere. A decision now gets the server's answer. ",
    h("button", { type: "button", class: "btn btn--quiet", text: "Dismiss", on: { click: () => el.parentElement && el.parentElement.dispatchEvent(new CustomEvent("approval-dismiss", { detail: id })) } }));
  const changedNote = h("div", { class: "msg msg--warn changed", hidden: true, attrs: { role: "status" } });
  const voteNote = h("p", { class: "msg msg--ok vote-note", hidden: true, attrs: { role: "status" } });
  const ineligibleNote = h("p", { class: "msg msg--info", hidden: true });
  const noteId = `note-${id}`;
  const note = h("textarea", { id: noteId, rows: 2, attrs: { maxlength: 2000 } });
  const approveBtn = h("button", { type: "button", class: "btn btn--primary", text: "Approve", on: { click: () => decide(true) } });
  const denyBtn = h("button", { type: "button", class: "btn btn--danger", text: "Deny", on: { click: () => decide(false) } });
  const editBtn = h("button", { type: "button", class: "btn", text: "Edit input", attrs: { "aria-expanded": "false", "aria-controls": `editor-${id}` }, on: { click: toggleEditor } });
  // Approve and remember: offered on approvals without approvers; whether
  // the tool allows it, and for how long, the API says.
  const rememberBtn = h("button", {
    type: "button", class: "btn", text: "Approve and allow again for…", hidden: !rememberable(a),
    attrs: { "aria-expanded": "false", "aria-controls": `remember-${id}` }, on: { click: toggleRemember },
  });
  const remember = rememberForm(a, { onConfirm: approveRemember, onCancel: toggleRemember });
  const err = alertBox();
  const result = h("div", { class: "result", hidden: true, attrs: { role: "status" } });

  // The input editor.
  const editorId = `input-${id}`;
  const editor = h("textarea", { id: editorId, class: "json-editor", rows: 8, spellcheck: false, value: pretty(a.input), attrs: { "aria-describedby": `syntax-${id}` } });
  const syntax = h("p", { id: `syntax-${id}`, class: "syntax small", attrs: { "aria-live": "polite" } });
  const editErr = alertBox();
  const approveEdited = h("button", { type: "button", class: "btn btn--primary", text: "Approve with this input", on: { click: approveEdit } });
  const cancelEdit = h("button", { type: "button", class: "btn", text: "Cancel edit", on: { click: toggleEditor } });
  const editorBox = h("div", { class: "editor", id: `editor-${id}`, hidden: true },
    h("label", { for: editorId, text: `Input for ${a.tool} (JSON)` }), editor, syntax, editErr,
    h("div", { class: "actions" }, approveEdited, cancelEdit));
  editor.addEventListener("input", checkSyntax);

  const check = opts.selectable
    ? h("input", { type: "checkbox", id: `select-${id}`, on: { change: () => opts.onSelect(id, check.checked) } })
    : null;
  const actions = h("div", { class: "actions" }, approveBtn, rememberBtn, denyBtn, editBtn);
  // Whether a deny note reaches the customer is the tool's setting
  // (approvals.noteToCustomer); the label says which.
  const noteLabel = a.noteToCustomer
    ? "Note (optional, recorded in the trace; on a deny the customer sees it)"
    : "Note (optional, recorded in the trace)";
  const decisionBox = h("div", { class: "decision" }, h("label", { for: noteId, text: noteLabel }), note, actions, remember.el, editorBox);
  const inputPre = h("pre", { class: "json", text: pretty(a.input), attrs: { tabindex: 0, "aria-label": `Input of ${a.tool}` } });

  const el = h("article", { class: "card approval", data: { approvalId: id, runId: a.runId, status: "pending" }, attrs: { "aria-labelledby": `title-${id}` } },
    h("div", { class: "card__head" },
      h("h2", { class: "card__title", id: `title-${id}`, text: a.tool }),
      badge, chipsEl, timer),
    facts([
      ["Agent", a.agent],
      ["End user", a.endUserId],
      ["Run", runLink(a.runId)],
      ["Step", a.stepId],
      ["Reason", a.reason],
      ["Requested", timeEl(a.requestedAt, when(a.requestedAt))],
      ["Expires", timeEl(a.expiresAt, when(a.expiresAt))],
      ["Approval", opts.detail ? idText(id) : idText(id, { link: `#/approvals/${enc(id)}` })],
    ]),
    quorumBox,
    changedNote,
    h("div", { class: "input" }, h("h3", { text: "Input" }), inputPre),
    staleNote, voteNote, ineligibleNote, decisionBox, err, result);

  // mayVote: whether the signed-in member is among the approvers (always,
  // without approvers); voted: whether their approval of this input counts.
  const mayVote = () => isEligible(a, me.memberId);
  const voted = () => hasVoted(a, me.memberId);

  // sync sets every control from the state: nothing is offered that the
  // card knows the API would refuse.
  function sync() {
    const busy = state === "deciding";
    const editing = !editorBox.hidden;
    const remembering = !remember.el.hidden;
    approveBtn.disabled = busy || editing || remembering || !mayVote() || voted();
    rememberBtn.disabled = busy || editing || !mayVote() || voted();
    rememberBtn.hidden = !rememberable(a);
    remember.setBusy(busy);
    denyBtn.disabled = busy || !mayVote();
    editBtn.disabled = busy || remembering || !mayVote();
    approveEdited.disabled = busy || !syntaxOk;
    cancelEdit.disabled = busy;
    if (check) {
      check.disabled = busy || !selectable();
      if (check.disabled && check.checked) {
        check.checked = false;
        opts.onSelect(id, false);
      }
    }
  }

  function selectable() {
    return state === "pending" && editorBox.hidden && remember.el.hidden && mayVote() && !voted();
  }

  // renderQuorum shows where the votes stand and what the reviewer may do.
  function renderQuorum() {
    if (!hasQuorum(a)) return;
    replace(chipsEl, chips(a));
    replace(quorumBox, opts.detail ? quorumDetail(a, me) : progressLine(a));
    const open = state === "pending" || state === "deciding";
    voteNote.hidden = !open || !voted();
    if (!voteNote.hidden) voteNote.textContent = voteNoteText(a);
    ineligibleNote.hidden = !open || mayVote();
    if (!ineligibleNote.hidden) {
      ineligibleNote.textContent = "You are not among the approvers of this approval: only the members it waits on may approve or deny it.";
    }
  }

  // show replaces what the card shows with next, the approval as it is
  // now; it reports whether the input changed.
  function show(next) {
    const changed = next.inputDigest !== a.inputDigest;
    a = next;
    if (changed) {
      inputPre.textContent = pretty(a.input);
      editor.value = pretty(a.input);
      if (!editorBox.hidden) checkSyntax();
    }
    renderQuorum();
    sync();
    return changed;
  }

  // tellChanged says that another approver edited the input.
  function tellChanged(refused) {
    const by = hasQuorum(a) && a.votes && a.votes.length ? a.votes[0].name : "";
    changedNote.hidden = false;
    replace(changedNote,
      h("p", {}, h("strong", { text: `The input was edited by another approver${by ? ` (${by})` : ""}; review it again.` })),
      h("p", { text: refused
        ? "Nothing was decided: your decision was for the input shown before. The input below is the one it has now."
        : "The input below is the one it has now." + (hasQuorum(a) ? " Earlier votes were reset; the editor's vote counts for the new input." : "") }),
      refused ? h("p", { class: "msg__code" }, "code ", h("code", { text: "approval_changed" })) : null);
  }

  function toggleEditor() {
    const open = editorBox.hidden;
    editorBox.hidden = !open;
    editBtn.setAttribute("aria-expanded", String(open));
    // While the input is edited, the card leaves the bulk selection (sync):
    // bulk approval would run the original input, not the edit.
    sync();
    if (open) {
      checkSyntax();
      editor.focus();
    } else {
      showError(editErr, null);
      editBtn.focus();
    }
  }

  // toggleRemember opens and closes "Approve and allow again for…". While
  // it is open the card leaves the bulk selection, and Approve alone waits:
  // the decision made is the one the open form says.
  function toggleRemember() {
    const open = remember.el.hidden;
    remember.el.hidden = !open;
    rememberBtn.setAttribute("aria-expanded", String(open));
    sync();
    if (open) {
      remember.focus();
    } else {
      remember.show(null);
      rememberBtn.focus();
    }
  }

  async function approveRemember() {
    const r = remember.read();
    if (r) await decide(true, { remember: r });
  }

  // checkSyntax checks the edit as it is typed: JSON at once, then (a
  // moment after the last key) the tool's input schema and policy, by the
  // API's own check of an edit (POST …/check-input), which decides nothing.
  let schemaTimer = null, schemaSeq = 0;
  function checkSyntax() {
    clearTimeout(schemaTimer);
    const seq = ++schemaSeq;
    let value;
    try {
      value = JSON.parse(editor.value);
      syntax.textContent = "Valid JSON; checking it against the tool's input schema…";
      syntax.className = "syntax small";
      syntaxOk = true;
    } catch (e) {
      syntax.textContent = "Not valid JSON: " + e.message;
      syntax.className = "syntax small bad";
      syntaxOk = false;
    }
    approveEdited.disabled = !syntaxOk || state === "deciding";
    if (syntaxOk) {
      schemaTimer = setTimeout(async () => {
        try {
          await call("POST", `/v1/approvals/${enc(id)}/check-input`, { body: { input: value } });
          if (seq !== schemaSeq) return;
          syntax.textContent = `Matches the input schema of ${a.tool}.`;
          syntax.className = "syntax small ok";
          editor.removeAttribute("aria-invalid");
        } catch (e) {
          if (seq !== schemaSeq) return;
          if (e.code === "invalid_argument") {
            syntax.textContent = "Does not match the tool's input schema: " + e.message;
            syntax.className = "syntax small bad";
            editor.setAttribute("aria-invalid", "true");
          } else {
            syntax.textContent = "Valid JSON. The tool's input schema is checked when you approve.";
            syntax.className = "syntax small";
          }
        }
      }, 300);
    } else {
      editor.setAttribute("aria-invalid", "true");
    }
    return syntaxOk;
  }

  async function approveEdit() {
    if (!checkSyntax()) return;
    const out = await decide(true, { input: JSON.parse(editor.value) });
    if (!out.ok && out.error.code === "invalid_argument") editor.focus();
  }

  // decide sends the decision and updates the card. Resolves {ok, error,
  // approval, vote}: vote when it was a vote that did not settle it.
  // seen is the inputDigest of the input the reviewer saw where that was
  // not this card (the bulk dialog); by default the card's. remember, with
  // an approve, is the request's "remember" (the approval and the rule in
  // one request; a refused remember decides nothing).
  async function decide(approve, { note: noteText, input, seen, remember: rememberIt } = {}) {
    if (state === "deciding" || state === "decided") return { ok: false, error: { message: "already decided here" } };
    const body = { note: noteText !== undefined ? noteText : note.value, inputDigest: seen || a.inputDigest };
    if (input !== undefined) body.input = input;
    if (approve && rememberIt) body.remember = rememberIt;
    state = "deciding";
    sync();
    showError(err, null);
    showError(editErr, null);
    remember.show(null);
    changedNote.hidden = true;
    try {
      const decided = await post(`/v1/approvals/${enc(id)}/${approve ? "approve" : "deny"}`, body);
      if (decided.status === "pending") {
        // A vote, counted; the quorum is not met yet.
        state = "pending";
        if (!editorBox.hidden) toggleEditor();
        note.value = "";
        show(decided);
        if (opts.onDecided) opts.onDecided();
        return { ok: true, approval: decided, vote: true };
      }
      markDecided(decided);
      return { ok: true, approval: decided };
    } catch (e) {
      if (body.remember && isRememberError(e)) {
        // The rule cannot be made (the tool does not allow it, too long):
        // nothing was decided; said next to what the API names.
        state = "pending";
        sync();
        remember.show(e);
      } else if (e.code === "invalid_argument" && input !== undefined) {
        // The edit broke the tool's schema: nothing was decided.
        state = "pending";
        sync();
        showError(editErr, e);
      } else if (e.code === "approval_changed" || e.code === "already_voted") {
        // Still pending: read it again and show what it is now.
        state = "pending";
        await reload(e);
      } else if (e.status === 409) {
        refused(e, (e.details && e.details.status) || "");
      } else {
        state = "pending";
        sync();
        showError(err, e);
      }
      return { ok: false, error: e };
    }
  }

  // reload reads the approval after a refusal that left it pending.
  async function reload(e) {
    let fresh;
    try {
      fresh = await get(`/v1/approvals/${enc(id)}`);
    } catch {
      sync();
      showError(err, e);
      return;
    }
    if (fresh.status !== "pending") {
      refused(e, fresh.status);
      return;
    }
    const changed = show(fresh);
    if (e.code === "approval_changed" && changed) tellChanged(true);
    else showError(err, e);
  }

  // refused settles the card after the API said it is no longer pending.
  function refused(e, st) {
    state = "refused";
    const known = ["approved", "denied", "expired", "cancelled"].includes(st);
    setBadge(known ? st : "settled", known ? st[0].toUpperCase() + st.slice(1) : "Not pending");
    timer.textContent = st === "expired" ? `expired ${ago(a.expiresAt)} — nobody decided in time` : "";
    staleNote.hidden = true;
    decisionBox.hidden = true;
    voteNote.hidden = true;
    ineligibleNote.hidden = true;
    el.dataset.status = st || "refused";
    showError(err, e);
    if (check) { check.checked = false; check.disabled = true; }
    if (opts.onDecided) opts.onDecided();
  }

  function setBadge(kind, text) {
    badge.className = "badge badge--" + kind;
    badge.textContent = text;
  }

  function markDecided(d) {
    state = "decided";
    a = d;
    el.dataset.status = d.status;
    setBadge(d.status, d.status === "approved" ? "Approved" : "Denied");
    timer.textContent = "";
    decisionBox.hidden = true;
    staleNote.hidden = true;
    renderQuorum();
    if (check) { check.checked = false; check.disabled = true; }
    const line = h("p", { class: "run-line" }, "Run ", runLink(d.runId), " ", h("span", { class: "muted", text: "updating…" }));
    replace(result,
      h("p", {}, h("strong", { text: d.status === "approved" ? "Approved" : "Denied" }), ` by ${who(d.decidedBy, opts.me, d.decidedByName)} at ${stamp(d.decidedAt)}`,
        d.note ? [" — note: ", h("q", { text: d.note })] : null),
      d.rememberedRule ? rememberedNote(d.rememberedRule) : null,
      hasQuorum(d) && d.status === "approved" ? h("p", { class: "small", text: `Quorum met: ${d.progress}.` }) : null,
      d.originalInput ? h("p", { class: "small", text: "Approved with an edited input:" }) : null,
      d.originalInput ? h("pre", { class: "json", text: pretty(d.input) }) : null,
      line);
    result.hidden = false;
    opts.live.watch(d.runId, (run, e) => {
      if (e) replace(line, "Run ", runLink(d.runId), ": ", e.message);
      else replace(line, ...runStatusLine(run));
    });
    if (opts.onDecided) opts.onDecided();
  }

  function tick() {
    if (state !== "pending" && state !== "deciding") return;
    const left = new Date(a.expiresAt).getTime() - Date.now();
    if (left > 0) {
      timer.textContent = "expires in " + countdown(left);
      timer.classList.toggle("countdown--soon", left < 60000);
    } else {
      setBadge("expired", "Expired");
      el.dataset.expired = "true";
      timer.textContent = `expired ${ago(a.expiresAt)} — nobody decided in time`;
    }
  }
  renderQuorum();
  sync();
  tick();

  return {
    id, el, tick, decide, selectable, check,
    get approval() { return a; },
    pending: () => state === "pending",
    stale: () => stale,
    // status: pending, deciding, or what became of it (approved, denied,
    // expired, …) as this card knows it.
    status() {
      if (state === "decided") return a.status;
      if (state === "refused") return el.dataset.status || "settled";
      if (new Date(a.expiresAt).getTime() <= Date.now()) return "expired";
      return state;
    },
    // keyDecide and keyEdit are the keyboard's a, d and e: what the
    // buttons do, only when they are offered.
    keyDecide(approve) {
      const b = approve ? approveBtn : denyBtn;
      if (!b.disabled && !b.hidden && decisionBox.hidden === false) b.click();
    },
    keyEdit() {
      if (!editBtn.disabled && decisionBox.hidden === false) toggleEditor();
    },
    editing: () => !editorBox.hidden,
    setSelected(on) { if (check && !check.disabled) check.checked = on; },
    // update shows the approval as a later read found it, while the card
    // waits for a decision: new votes, or a new input (said so).
    update(next) {
      if (state !== "pending" || next.status !== "pending") return;
      if (next.inputDigest === a.inputDigest && (next.votes || []).length === (a.votes || []).length && next.progress === a.progress) return;
      if (show(next)) tellChanged(false);
    },
    setStale(on) {
      if (stale === on || state !== "pending") return;
      stale = on;
      staleNote.hidden = !on;
      voteNote.hidden = on || !voted();
      el.classList.toggle("card--stale", on);
    },
  };
}

// settledCard shows a decided, expired or cancelled approval.
function settledCard(a, me) {
  const labels = { approved: "Approved", denied: "Denied", expired: "Expired", cancelled: "Cancelled", pending: "Pending" };
  const rows = [
    ["Agent", a.agent],
    ["End user", a.endUserId],
    ["Run", runLink(a.runId)],
    ["Step", a.stepId],
    ["Reason", a.reason],
    ["Requested", timeEl(a.requestedAt)],
  ];
  let outcome;
  if (a.status === "expired") {
    rows.push(["Expired", timeEl(a.expiresAt)]);
    outcome = h("p", { class: "outcome outcome--expired" }, h("strong", { text: "Expired: nobody decided in time." }), ` It was due by ${stamp(a.expiresAt)}; the run failed with approval-expired.`);
  } else if (a.status === "denied") {
    rows.push(["Denied by", who(a.decidedBy, me, a.decidedByName)], ["Denied at", timeEl(a.decidedAt)]);
    outcome = h("p", { class: "outcome outcome--denied" }, h("strong", { text: "Denied." }), a.note ? [" Note: ", h("q", { text: a.note })] : " No note.");
  } else if (a.status === "approved") {
    rows.push(["Approved by", who(a.decidedBy, me, a.decidedByName)], ["Approved at", timeEl(a.decidedAt)]);
    outcome = h("p", { class: "outcome outcome--approved" }, h("strong", { text: "Approved." }), a.note ? [" Note: ", h("q", { text: a.note })] : null);
  } else if (a.status === "cancelled") {
    rows.push(["Cancelled by", who(a.decidedBy, me, a.decidedByName)], ["Cancelled at", timeEl(a.decidedAt)]);
    outcome = h("p", { class: "outcome" }, "Cancelled with its run.");
  }
  rows.push(["Approval", idText(a.id)]);
  const el = h("article", { class: `card approval approval--${a.status}`, data: { approvalId: a.id, runId: a.runId, status: a.status } },
    h("div", { class: "card__head" },
      h("h2", { class: "card__title", text: a.tool }),
      h("span", { class: `badge badge--${a.status}`, text: labels[a.status] || a.status }),
      hasQuorum(a) ? h("span", { class: "chips" }, chips(a)) : null),
    outcome,
    facts(rows),
    hasQuorum(a) ? quorumDetail(a, me) : null,
    a.originalInput
      ? h("div", { class: "input" },
        h("h3", { text: "Input (edited before approval)" }), h("pre", { class: "json", text: pretty(a.input) }),
        h("h3", { text: "Input as requested" }), h("pre", { class: "json", text: pretty(a.originalInput) }))
      : h("div", { class: "input" }, h("h3", { text: "Input" }), h("pre", { class: "json", text: pretty(a.input) })));
  return { el };
}

// SETTLED_AGES are the settled tabs' age filter: how long ago an approval
// was decided or expired.
const SETTLED_AGES = [
  { id: "", label: "Any age", test: () => true },
  { id: "new", label: "In the last 5 minutes", test: (ms) => ms < 5 * 60_000 },
  { id: "5m", label: "Over 5 minutes ago", test: (ms) => ms >= 5 * 60_000 },
  { id: "1h", label: "Over 1 hour ago", test: (ms) => ms >= 3600_000 },
];

// settledAt is when an approval stopped waiting: its decision (or its
// run's cancellation), else its deadline.
const settledAt = (a) => a.decidedAt || a.expiresAt;

// NOTE_START is how much of a decision's note a row shows.
const NOTE_START = 60;

// settledList: the decided or expired tab, as the inbox shows the pending
// one: a compact list (one row per approval: tool, agent, end user, when it
// was decided or expired, who decided, the note's start, the quorum's
// result), filters by agent, tool and age, and a detail pane with the
// current approval's card (everything it was: input, reason, run,
// decision) and its run's history; j/k move. Nothing is decided here.
function settledList(ctx, body, tab) {
  const filters = { agent: ctx.query.get("agent") || "", tool: ctx.query.get("tool") || "", age: SETTLED_AGES.some((x) => x.id === ctx.query.get("age")) ? ctx.query.get("age") : "" };
  const err = alertBox();
  const agentSelect = h("select", { id: "filter-agent", on: { change: () => setFilter("agent", agentSelect.value) } }, h("option", { value: "", text: "All agents" }));
  const toolSelect = h("select", { id: "filter-tool", on: { change: () => setFilter("tool", toolSelect.value) } }, h("option", { value: "", text: "All tools" }));
  const ageSelect = h("select", { id: "filter-age", on: { change: () => setFilter("age", ageSelect.value) } }, SETTLED_AGES.map((x) => h("option", { value: x.id, text: x.label })));
  ageSelect.value = filters.age;
  const label = tab === "expired" ? "Expired approvals" : "Decided approvals";
  const list = h("ul", { class: "inbox__list", id: "inbox-list", attrs: { "aria-label": label } });
  const shownCount = h("p", { class: "small muted inbox__count", attrs: { "aria-live": "polite" } }, "Loading…");
  const detail = h("section", { class: "inbox__detail", id: "inbox-detail", attrs: { tabindex: -1, "aria-label": "Selected approval" } });
  const empty = h("div", { class: "empty", hidden: true }, h("p", { class: "empty__title", text: tab === "expired" ? "No approval has expired." : "Nothing decided yet." }));
  const noMatch = h("div", { class: "empty", hidden: true }, h("p", { class: "empty__title", text: `No ${tab} approval matches these filters.` }));
  const keys = h("p", { class: "keys small muted", id: "inbox-keys" }, "Keys: ", h("kbd", { text: "j" }), "/", h("kbd", { text: "k" }), " next, previous");
  replace(body,
    h("p", { class: "muted" }, tab === "expired"
      ? "Approvals nobody decided before their deadline. Their runs failed with approval-expired: expired is not denied."
      : "Approvals a person approved or denied (and those cancelled with their run), most recent first."),
    h("form", { class: "toolbar", attrs: { "aria-label": "Filter approvals" }, on: { submit: (e) => e.preventDefault() } },
      h("span", { class: "field field--inline" }, h("label", { for: "filter-agent", text: "Agent" }), agentSelect),
      h("span", { class: "field field--inline" }, h("label", { for: "filter-tool", text: "Tool" }), toolSelect),
      h("span", { class: "field field--inline" }, h("label", { for: "filter-age", text: "Age" }), ageSelect)),
    keys, err, empty,
    h("div", { class: "inbox" },
      h("div", { class: "inbox__pane" }, shownCount, list, noMatch),
      detail));

  const items = []; // {a, row, card, history}, most recent first
  let current = null, stopped = false;

  function hashWith() {
    const q = new URLSearchParams({ tab });
    for (const k of ["agent", "tool", "age"]) if (filters[k]) q.set(k, filters[k]);
    return "#/approvals?" + q.toString();
  }

  function setFilter(k, v) {
    filters[k] = v;
    history.replaceState(null, "", hashWith());
    applyFilters();
  }

  function matches(a) {
    if (filters.agent && a.agent !== filters.agent) return false;
    if (filters.tool && a.tool !== filters.tool) return false;
    const age = SETTLED_AGES.find((x) => x.id === filters.age) || SETTLED_AGES[0];
    return age.test(Date.now() - new Date(settledAt(a)).getTime());
  }

  const visible = () => items.filter((it) => !it.row.hidden);

  function applyFilters() {
    for (const it of items) it.row.hidden = !matches(it.a);
    const shown = visible();
    noMatch.hidden = items.length === 0 || shown.length > 0;
    shownCount.textContent = items.length === 0 ? "" : shown.length === items.length
      ? `${items.length} ${items.length === 1 ? "approval" : "approvals"}`
      : `${shown.length} of ${items.length} approvals match the filters`;
    if ((!current || current.row.hidden) && shown.length) show(shown[0]);
    if (shown.length === 0) show(null);
  }

  function show(it, { focus = false, scroll = false } = {}) {
    if (current) current.row.removeAttribute("aria-current");
    current = it;
    if (!it) {
      replace(detail, h("p", { class: "muted", text: items.length ? "Choose an approval to see its input, reason, decision and history." : "" }));
      return;
    }
    it.row.setAttribute("aria-current", "true");
    // The card is made when first shown: a tab of 100 approvals builds
    // only the ones read.
    if (!it.card) it.card = settledCard(it.a, ctx.me);
    if (!it.history) it.history = historyPane(it.a, ctx.me);
    replace(detail, it.card.el, it.history.el);
    it.history.load();
    if (focus) it.row.querySelector(".inbox-row__open").focus();
    if (scroll && matchMedia("(max-width: 900px)").matches) detail.scrollIntoView({ block: "start" });
  }

  function move(step) {
    const shown = visible();
    if (shown.length === 0) return;
    let i = shown.indexOf(current);
    i = i < 0 ? 0 : Math.min(shown.length - 1, Math.max(0, i + step));
    show(shown[i], { focus: true });
  }

  function onKey(ev) {
    if (ev.defaultPrevented || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    if (ev.key === "j") move(1);
    else if (ev.key === "k") move(-1);
    else return;
    ev.preventDefault();
  }
  document.addEventListener("keydown", onKey);

  const statuses = tab === "expired" ? ["expired"] : ["approved", "denied", "cancelled"];
  Promise.all(statuses.map((status) => get("/v1/approvals", { status, limit: 50 })))
    .then((pages) => {
      if (stopped) return;
      const all = pages.flatMap((p) => p.approvals);
      all.sort((x, y) => new Date(settledAt(y)).getTime() - new Date(settledAt(x)).getTime());
      for (const a of all.slice(0, 50)) {
        const it = { a, row: settledRow(a, ctx.me), card: null, history: null };
        const open = it.row.querySelector(".inbox-row__open");
        open.addEventListener("click", () => show(it, { scroll: true }));
        items.push(it);
      }
      replace(list, items.map((it) => it.row));
      empty.hidden = items.length > 0;
      optionsOf(agentSelect, items.map((it) => it.a.agent), filters.agent);
      optionsOf(toolSelect, items.map((it) => it.a.tool), filters.tool);
      applyFilters();
    })
    .catch((e) => {
      shownCount.textContent = "";
      showError(err, e);
    });
  show(null);
  return () => {
    stopped = true;
    document.removeEventListener("keydown", onKey);
  };
}

// settledRow is a settled approval's row: tool, agent, end user, what
// became of it and when, who decided, the note's start, the quorum's result.
function settledRow(a, me) {
  const labels = { approved: "approved", denied: "denied", expired: "expired", cancelled: "cancelled" };
  const at = settledAt(a);
  const verb = a.status === "expired" ? "expired " : a.status === "cancelled" ? "cancelled " : "decided ";
  const by = a.status === "expired" ? "nobody decided in time" : `by ${who(a.decidedBy, me, a.decidedByName)}`;
  const note = a.note ? (a.note.length > NOTE_START ? a.note.slice(0, NOTE_START).trimEnd() + "…" : a.note) : "";
  const quorum = hasQuorum(a)
    ? h("span", { class: "inbox-row__quorum" }, a.status === "approved" ? h("span", { class: "small", text: "quorum met" }) : null, chips(a))
    : h("span", { class: "inbox-row__quorum muted", attrs: { "aria-hidden": "true" }, text: "" });
  const open = h("button", { type: "button", class: "inbox-row__open", attrs: { "aria-controls": "inbox-detail" } },
    h("span", { class: "inbox-row__tool", text: a.tool }),
    h("span", { class: "inbox-row__agent" }, h("span", { class: "sr-only", text: "agent " }), a.agent),
    h("span", { class: "inbox-row__user" }, h("span", { class: "sr-only", text: "end user " }), a.endUserId),
    h("span", { class: "inbox-row__fate" }, h("span", { class: `badge badge--${a.status}`, text: labels[a.status] || a.status })),
    h("span", { class: "inbox-row__by" }, by),
    h("span", { class: "inbox-row__age", title: stamp(at) }, h("span", { class: "sr-only", text: verb }), ago(at)),
    note ? h("span", { class: "inbox-row__note", title: a.note }, h("span", { class: "sr-only", text: "note: " }), h("q", { text: note })) : null,
    quorum);
  return h("li", { class: "inbox-row inbox-row--settled", data: { approvalId: a.id, runId: a.runId, status: a.status } }, open);
}

// optionsOf adds the agents and tools seen to a filter's choices.
function optionsOf(select, values, chosen) {
  const have = new Set([...select.options].map((o) => o.value));
  for (const v of [...values, chosen].filter(Boolean).sort()) {
    if (!have.has(v)) {
      select.append(h("option", { value: v, text: v }));
      have.add(v);
    }
  }
  select.value = chosen;
}

