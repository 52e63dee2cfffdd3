// Webhooks: the project's endpoints, where Stead POSTs its events signed
// per the Standard Webhooks spec (README "Webhooks"), and each one's
// delivery log. Owners only (the manage-webhooks permission): an endpoint
// decides where the project's events, and with includeInput tools'
// inputs, are sent. Add an endpoint (its secret shown this once), ping,
// rotate the secret, enable a disabled one, delete; in the log
// (#/webhooks/{id}) every delivery with its attempts and, on demand, its
// body; retry one delivery or a time range.

import { h, replace, alertBox, showError, showMessage, showFieldErrors } from "./dom.js";
import { get, post, patch, del, enc } from "./api.js";
import { ago, stamp, pretty } from "./format.js";
import { mayManageWebhooks } from "./access.js";

// EVENT_TYPES are the types an endpoint may ask for, in notify.Types'
// order (webhook.ping is sent by Ping only). The browser test checks them
// against the API's list.
export const EVENT_TYPES = [
  "approval.requested", "approval.vote", "approval.reminder", "approval.expiring", "approval.escalated",
  "approval.approved", "approval.denied", "approval.expired", "approval.cancelled",
  "run.succeeded", "run.failed", "run.cancelled",
  "webhook.disabled",
];

// ROTATION_OVERLAP_WORDS words notify.RotationOverlap.
const ROTATION_OVERLAP_WORDS = "24 hours";
// FAILING_LIMIT_WORDS words notify.FailingLimit.
const FAILING_LIMIT_WORDS = "5 days";

const PAGE = 25;
const POLL_MS = 3000;
const FAST_POLL_MS = 1000;
// CATCH_UP_PAGES bounds the pages a poll reads to reach the deliveries
// shown (past it, the log is read again from the top).
const CATCH_UP_PAGES = 5;

// http.StatusText's words for the statuses a receiver is likely to send.
const STATUS_TEXT = {
  200: "OK", 201: "Created", 202: "Accepted", 204: "No Content",
  301: "Moved Permanently", 302: "Found", 303: "See Other", 307: "Temporary Redirect", 308: "Permanent Redirect",
  400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
  408: "Request Timeout", 409: "Conflict", 410: "Gone", 413: "Request Entity Too Large",
  415: "Unsupported Media Type", 422: "Unprocessable Entity", 429: "Too Many Requests",
  500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout",
};

// A notice the list shows once, after the log's page deleted its endpoint.
let flash = null;

const ok = (status) => status >= 200 && status < 300;

// attemptWords: "500 Internal Server Error in 3 ms", or "no response: …".
function attemptWords(a) {
  if (!a.status) return `no response: ${a.error || "—"}`;
  const text = STATUS_TEXT[a.status];
  return `${a.status}${text ? " " + text : ""} in ${a.latencyMs} ms`;
}

function timeEl(iso, cls) {
  return h("time", { class: cls, attrs: { datetime: iso }, title: ago(iso), text: stamp(iso) });
}

function timeAgo(iso) {
  return h("time", { attrs: { datetime: iso }, title: stamp(iso), text: ago(iso) });
}

// nextTry: "next try now", "next try in 4 s", "next try in 5 minutes".
function nextTry(iso) {
  const ms = new Date(iso).getTime() - Date.now();
  if (ms <= 1000) return "next try now";
  if (ms < 10_000) return `next try in ${Math.ceil(ms / 1000)} s`;
  return `next try ${ago(iso)}`;
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

function stateBadge(e) {
  if (e.state === "disabled") return h("span", { class: "badge badge--wh-disabled", data: { state: "disabled" }, text: "disabled" });
  if (e.failingSince) return h("span", { class: "badge badge--wh-failing", data: { state: "failing" }, text: "failing" });
  return h("span", { class: "badge badge--wh-enabled", data: { state: "enabled" }, text: "enabled" });
}

function deliveryBadge(status) {
  return h("span", { class: `badge badge--delivery-${status}`, data: { status }, text: status });
}

// ping sends a webhook.ping now and words how it went in box.
async function ping(e, box, button) {
  button.disabled = true;
  showMessage(box, "info", h("p", { text: `Pinging ${e.url}…` }));
  try {
    const d = await post(`/v1/webhooks/${enc(e.id)}/ping`);
    const a = d.attempts[d.attempts.length - 1];
    if (!a) {
      showMessage(box, "error", h("p", {}, h("strong", { text: "Ping made no attempt:" }), ` delivery ${d.id} is ${d.status}.`));
    } else if (d.status === "delivered") {
      showMessage(box, "ok", h("p", {}, h("strong", { text: "Ping delivered:" }), ` ${attemptWords(a)} `, h("span", { class: "small" }, "(webhook-id ", h("code", { text: d.id }), ")")));
    } else {
      showMessage(box, "error",
        h("p", {}, h("strong", { text: "Ping failed:" }), ` ${attemptWords(a)} `, h("span", { class: "small" }, "(webhook-id ", h("code", { text: d.id }), ")")),
        a.response ? [h("p", { class: "small", text: "The receiver answered:" }), h("pre", { class: "json attempt__response", text: a.response })] : null,
        h("p", { class: "small" }, "It is in the delivery log, where it can be retried under the same webhook-id."));
    }
    return d;
  } catch (err) {
    showError(box, err);
    box.className = "msg msg--error";
    return null;
  } finally {
    button.disabled = false;
  }
}

// secretOnce shows a secret the API returns this once (on create and
// rotate), with Copy and a warning; Hide takes it off the page.
function secretOnce(e, { rotated }) {
  const id = `secret-${e.id}`;
  const input = h("input", { type: "text", id, class: "mono secret", value: e.secret, spellcheck: false, autocomplete: "off", attrs: { readonly: true } });
  const copied = h("span", { class: "small", attrs: { "aria-live": "polite" } });
  const copy = h("button", { type: "button", class: "btn", text: "Copy" });
  copy.addEventListener("click", async () => {
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      copied.textContent = "Copied.";
    } catch {
      copied.textContent = "Selected: copy it with Ctrl+C (⌘C).";
    }
  });
  const hide = h("button", { type: "button", class: "btn btn--quiet", text: "Hide it" });
  const box = h("div", { class: "secret-once", data: { webhookId: e.id } },
    h("label", { for: id, text: `${rotated ? "New signing secret" : "Signing secret"} of ${e.id} — shown this once` }),
    h("span", { class: "field--inline new-key__row" }, input, copy, copied),
    h("div", { class: "msg msg--warn", attrs: { role: "note" } },
      h("p", {}, h("strong", { text: "Copy it now" }), " and give it to the receiver, through a secret manager: it is not shown again, and Stead cannot show it later. The receiver checks each delivery's ",
        h("code", { text: "webhook-signature" }), " with it."),
      rotated
        ? h("p", { text: `The previous secret keeps signing beside it until ${stamp(e.previousSecretUntil)}: deploy this one to the receiver before then.` })
        : h("p", { text: "Lost it? Rotate the secret: the new one is shown once, too." })),
    h("div", { class: "actions" }, hide));
  hide.addEventListener("click", () => box.remove());
  return box;
}

// endpointCard is one endpoint with its actions. update(e) redraws its
// state and facts and keeps what the card shows besides (a secret shown
// once, a ping's result, a confirmation).
function endpointCard(first, { detail = false, onDeleted, onPinged } = {}) {
  let e = first;
  const err = alertBox();
  const titleId = `webhook-${e.id}`;
  const title = h(detail ? "h2" : "h3", { class: "card__title webhook__url", id: titleId, text: e.url });
  const badge = h("span");
  // showMessage sets a box's class: the webhook__ classes are on wrappers.
  const disabledBox = h("div", { class: "msg msg--error", hidden: true, attrs: { role: "status" } });
  const facts = h("dl", { class: "facts" });
  const secretSlot = h("div");
  const pingBox = h("div", { class: "msg msg--info", hidden: true, attrs: { role: "status" } });
  const actions = h("div", { class: "actions" });
  const el = h("article", { class: "card webhook", attrs: { "aria-labelledby": titleId, tabindex: -1 } },
    h("div", { class: "card__head" }, title, badge),
    h("p", { class: "small muted mono webhook__id", text: e.id }),
    h("div", { class: "webhook__disabled" }, disabledBox), facts, secretSlot, h("div", { class: "webhook__ping" }, pingBox), err, actions);

  const pingBtn = h("button", { type: "button", class: "btn", text: "Ping", attrs: { "aria-label": `Ping ${e.url}` } });
  pingBtn.addEventListener("click", async () => {
    showError(err, null);
    const d = await ping(e, pingBox, pingBtn);
    if (d && onPinged) onPinged(d);
  });
  const enableBtn = h("button", { type: "button", class: "btn btn--primary", text: "Enable", attrs: { "aria-label": `Enable ${e.url}` } });
  enableBtn.addEventListener("click", async () => {
    enableBtn.disabled = true;
    showError(err, null);
    try {
      update(await patch(`/v1/webhooks/${enc(e.id)}`, { enabled: true }));
    } catch (x) {
      showError(err, x);
    } finally {
      enableBtn.disabled = false;
    }
  });
  const rotateBtn = h("button", { type: "button", class: "btn", text: "Rotate secret", attrs: { "aria-label": `Rotate the secret of ${e.url}` } });
  rotateBtn.addEventListener("click", () => confirmIn(actions, {
    label: `Confirm rotating the secret of ${e.id}`,
    text: `Make a new signing secret for ${e.url}? The current one keeps signing beside it for ${ROTATION_OVERLAP_WORDS}: deploy the new one to the receiver within that time.`,
    yes: "Make a new secret", danger: false,
    back: () => drawActions(rotateBtn),
    act: async () => {
      const r = await post(`/v1/webhooks/${enc(e.id)}/rotate`);
      update(r);
      replace(secretSlot, secretOnce(r, { rotated: true }));
      drawActions();
      secretSlot.querySelector("input").focus();
    },
  }));
  const deleteBtn = h("button", { type: "button", class: "btn btn--danger btn--quiet", text: "Delete", attrs: { "aria-label": `Delete ${e.url}` } });
  deleteBtn.addEventListener("click", () => confirmIn(actions, {
    label: `Confirm deleting ${e.id}`,
    text: `Delete the endpoint ${e.url}? It gets no more events, and its delivery log is deleted with it. A receiver that still expects events hears nothing.`,
    yes: "Delete endpoint", danger: true,
    back: () => drawActions(deleteBtn),
    act: async () => {
      await del(`/v1/webhooks/${enc(e.id)}`);
      if (onDeleted) onDeleted(e);
    },
  }));
  const logLink = h("a", { class: "btn", href: `#/webhooks/${enc(e.id)}`, text: "Delivery log", attrs: { "aria-label": `Delivery log of ${e.url}` } });

  function drawActions(focus) {
    replace(actions, pingBtn, e.state === "disabled" ? enableBtn : null, rotateBtn, detail ? null : logLink, deleteBtn);
    if (focus) focus.focus();
  }

  function update(next) {
    e = next;
    el.dataset.webhookId = e.id;
    el.dataset.state = e.state;
    el.classList.toggle("webhook--disabled", e.state === "disabled");
    el.classList.toggle("webhook--failing", e.state !== "disabled" && !!e.failingSince);
    title.textContent = e.url;
    replace(badge, stateBadge(e));
    if (e.state === "disabled") {
      showMessage(disabledBox, "error",
        h("p", {}, h("strong", { text: "Disabled" }), " ", timeEl(e.disabledAt), ` (${ago(e.disabledAt)}): `, h("span", { class: "webhook__reason", text: e.disabledReason || "no reason recorded" }), "."),
        h("p", { class: "small", text: "It gets no new events, and its pending deliveries fail. Ping it to check that it answers, then enable it." }));
    } else {
      disabledBox.hidden = true;
    }
    const rows = [
      ["Events", e.events && e.events.length ? e.events.map((t) => h("code", { class: "tag", text: t })) : "every event"],
      ["Agents", e.agents && e.agents.length ? e.agents.join(", ") : "every agent"],
      ["Tool input", e.includeInput ? "included in approval events" : "not sent"],
      ["State", e.state === "disabled"
        ? [h("span", { text: "disabled " }), timeAgo(e.disabledAt)]
        : e.failingSince ? "enabled, failing" : "enabled"],
      e.failingSince ? ["Failing since", [timeEl(e.failingSince), ` (${ago(e.failingSince)})`,
        h("div", { class: "small" }, `Every delivery since has failed; it is disabled after ${FAILING_LIMIT_WORDS} of that.`)]] : null,
      e.previousSecretUntil ? ["Previous secret", h("span", { class: "webhook__previous" }, `signs beside the current one until ${stamp(e.previousSecretUntil)} (${ago(e.previousSecretUntil)})`)] : null,
      ["Added", [timeEl(e.createdAt), ` (${ago(e.createdAt)})`]],
    ].filter(Boolean);
    replace(facts, rows.map(([k, v]) => h("div", { data: { fact: k } }, h("dt", { text: k }), h("dd", {}, v))));
    if (!actions.querySelector(".confirm")) drawActions();
  }

  update(e);
  return {
    el, update,
    showSecret(withSecret) { replace(secretSlot, secretOnce(withSecret, { rotated: false })); },
  };
}

// confirmIn asks in place of slot's buttons; act() runs on yes, and its
// refusal is shown in the box.
function confirmIn(slot, { label, text, yes: yesText, danger, back, act }) {
  const err = alertBox();
  const yes = h("button", { type: "button", class: danger ? "btn btn--danger" : "btn btn--primary", text: yesText });
  const no = h("button", { type: "button", class: "btn", text: "Cancel" });
  replace(slot, h("div", { class: "confirm", attrs: { role: "group", "aria-label": label } },
    h("p", { class: "small", text }), h("div", { class: "actions" }, yes, no), err));
  no.addEventListener("click", back);
  yes.addEventListener("click", async () => {
    yes.disabled = no.disabled = true;
    showError(err, null);
    try {
      await act();
    } catch (x) {
      showError(err, x);
      yes.disabled = no.disabled = false;
    }
  });
  no.focus();
}

// ownersOnly stands in for the pages for any other role.
function ownersOnly(ctx) {
  if (mayManageWebhooks(ctx.me)) return false;
  replace(ctx.main, h("h1", { text: "Webhooks" }),
    h("div", { class: "msg msg--info", attrs: { role: "status" } },
      h("p", {}, h("strong", { text: "Owners only." }), ` Webhook endpoints choose where the project's events, and tools' inputs, are sent, so only owners add, read and change them; this key is a ${ctx.me.role}'s.`)));
  return true;
}

// webhooksView lists the endpoints, with a form that adds one.
export function webhooksView(ctx) {
  if (ownersOnly(ctx)) return () => {};
  const err = alertBox();
  const done = h("div", { class: "msg msg--ok", hidden: true, attrs: { role: "status" } });
  const formSlot = h("div");
  const count = h("span");
  const list = h("div", { class: "cards webhooks" }, h("p", { class: "muted", text: "Loading…" }));
  const cards = new Map(); // id → card
  let stopped = false;

  replace(ctx.main,
    h("h1", { text: "Webhooks" }),
    h("p", { class: "muted" },
      "Stead POSTs the project's events — approvals asked for, voted on and decided, runs finished — to these endpoints, signed per the ",
      h("a", { href: "https://www.standardwebhooks.com/", text: "Standard Webhooks", attrs: { rel: "noreferrer", target: "_blank" } }),
      " spec and delivered at least once. Each delivery's webhook-id stays the same on every retry: receivers dedupe by it."),
    err, done, formSlot,
    h("div", { class: "toolbar" }, h("h2", { id: "webhooks-title" }, "Endpoints", count),
      h("button", { type: "button", class: "btn", text: "Refresh", on: { click: () => load() } })),
    list);
  if (flash) {
    showMessage(done, "ok", h("p", { text: flash }));
    flash = null;
  }

  function showEmpty() {
    count.textContent = cards.size ? ` (${cards.size})` : "";
    const empty = list.querySelector(".empty");
    if (cards.size === 0 && !empty) {
      list.append(h("div", { class: "empty" }, h("p", { class: "empty__title", text: "No endpoints yet." }),
        h("p", {}, "Add one above, or with ", h("code", { text: "stead webhooks add URL" }), ": Stead POSTs each event to it, signed.")));
    } else if (cards.size > 0 && empty) {
      empty.remove();
    }
  }

  function card(e) {
    const c = endpointCard(e, {
      onDeleted(gone) {
        c.el.remove();
        cards.delete(gone.id);
        showEmpty();
        showMessage(done, "ok", h("p", {}, "Deleted the endpoint ", h("span", { class: "mono", text: gone.url }), " and its delivery log."));
      },
    });
    cards.set(e.id, c);
    return c;
  }

  async function load() {
    try {
      const { webhooks } = await get("/v1/webhooks");
      if (stopped) return;
      showError(err, null);
      const seen = new Set();
      for (const e of webhooks) {
        seen.add(e.id);
        const c = cards.get(e.id);
        if (c) c.update(e);
      }
      for (const [id, c] of cards) {
        if (!seen.has(id)) {
          c.el.remove();
          cards.delete(id);
        }
      }
      if (!list.querySelector(".webhook")) list.replaceChildren();
      // Newest first (the API lists them oldest first); a card shown
      // already is moved, keeping what it shows.
      for (const e of [...webhooks].reverse()) list.append((cards.get(e.id) || card(e)).el);
      showEmpty();
      return true;
    } catch (x) {
      if (stopped) return false;
      list.replaceChildren();
      showError(err, x);
      return false;
    }
  }

  load().then((loaded) => {
    if (!loaded || stopped) return;
    get("/v1/agents").then((ag) => ag.agents.map((a) => a.name), () => null).then((agents) => {
      if (stopped) return;
      replace(formSlot, addForm(agents, (e) => {
        const c = card(e);
        list.prepend(c.el);
        c.showSecret(e);
        showEmpty();
        c.el.querySelector(".secret-once input").focus();
      }));
    });
  });
  return () => { stopped = true; };
}

// pickerField is a fieldset of checkboxes, one per item, as a field of
// showFieldErrors (a problem with "events[2]" goes to the field "events").
function pickerField(name, legend, items, { help, empty, labelClass } = {}) {
  const id = `webhook-${name}`;
  const boxes = items.map((it) => h("input", { type: "checkbox", id: `${id}-${it}`, value: it }));
  const slot = h("p", { id: `${id}-error`, class: "field__error", hidden: true });
  const helpEl = help ? h("p", { id: `${id}-help`, class: "help", text: help }) : null;
  const control = h("fieldset", { class: "picker", id, attrs: { "aria-describedby": [helpEl && helpEl.id, slot.id].filter(Boolean).join(" ") } },
    h("legend", { text: legend }),
    items.length
      ? items.map((it, i) => h("span", { class: "check" }, boxes[i], h("label", { for: boxes[i].id, class: labelClass, text: it })))
      : h("p", { class: "muted small", text: empty }));
  return {
    name, control, slot, boxes,
    el: h("div", { class: "field", data: { field: name } }, control, helpEl, slot),
    picked: () => boxes.filter((b) => b.checked).map((b) => b.value),
  };
}

// addForm adds an endpoint; agents are the deployed agents' names (null
// when they could not be read); added(e) gets it with its secret.
function addForm(agents, added) {
  const urlInput = h("input", { type: "url", id: "webhook-url", autocomplete: "off", spellcheck: false, placeholder: "https://hooks.example.com/stead", attrs: { inputmode: "url", maxlength: 2000 } });
  const urlSlot = h("p", { id: "webhook-url-error", class: "field__error", hidden: true });
  urlInput.setAttribute("aria-describedby", "webhook-url-help webhook-url-error");
  const url = {
    name: "url", control: urlInput, slot: urlSlot,
    el: h("div", { class: "field", data: { field: "url" } },
      h("label", { for: "webhook-url", text: "URL" }), urlInput,
      h("p", { id: "webhook-url-help", class: "help", text: "Where deliveries are POSTed: an absolute http or https URL, without a user name or password. Stead's egress policy applies to every delivery (stead dev allows loopback)." }),
      urlSlot),
  };
  const events = pickerField("events", "Events", EVENT_TYPES, { labelClass: "mono", help: "None ticked: every event type, including types added later." });
  const agentPicker = pickerField("agents", "Agents", agents || [], {
    help: "None ticked: every agent's events, including agents deployed later.",
    empty: agents
      ? "No agent is deployed yet: the endpoint gets every agent's events."
      : "The deployed agents could not be read (refresh to try again): the endpoint gets every agent's events.",
  });
  const inputBox = h("input", { type: "checkbox", id: "webhook-include-input" });
  const inputSlot = h("p", { id: "webhook-include-input-error", class: "field__error", hidden: true });
  inputBox.setAttribute("aria-describedby", "webhook-include-input-help webhook-include-input-error");
  const includeInput = {
    name: "includeInput", control: inputBox, slot: inputSlot,
    el: h("div", { class: "field", data: { field: "includeInput" } },
      h("span", { class: "check" }, inputBox, h("label", { for: "webhook-include-input", text: "Include the tool's input in approval events" })),
      h("p", { id: "webhook-include-input-help", class: "help", text: "Inputs can hold personal data: send them only to a receiver that may keep them." }),
      inputSlot),
  };
  const fields = [url, events, agentPicker, includeInput];
  const err = alertBox();
  const done = h("div", { class: "msg msg--ok", hidden: true, attrs: { role: "status" } });
  const submit = h("button", { type: "submit", class: "btn btn--primary", text: "Add endpoint" });
  const form = h("form", { class: "card form", attrs: { "aria-labelledby": "add-webhook-title", novalidate: true }, on: { submit: onSubmit } },
    h("h2", { id: "add-webhook-title", class: "form__title", text: "Add an endpoint" }),
    url.el, events.el, agentPicker.el, includeInput.el,
    err, h("div", { class: "actions" }, submit), done);

  async function onSubmit(ev) {
    ev.preventDefault();
    submit.disabled = true;
    done.hidden = true;
    showFieldErrors(err, fields, null);
    const body = { url: urlInput.value.trim(), includeInput: inputBox.checked };
    if (events.picked().length) body.events = events.picked();
    if (agentPicker.picked().length) body.agents = agentPicker.picked();
    try {
      const e = await post("/v1/webhooks", body);
      form.reset();
      showMessage(done, "ok", h("p", {}, "Added ", h("span", { class: "mono", text: e.id }), ". Copy its secret below now, then ping it."));
      added(e);
    } catch (x) {
      showFieldErrors(err, fields, x);
    } finally {
      submit.disabled = false;
    }
  }
  return form;
}

// webhookView is one endpoint and its delivery log, newest first, paged
// and followed live.
export function webhookView(ctx, id) {
  if (ownersOnly(ctx)) return () => {};
  const limit = Math.min(Math.max(parseInt(ctx.query.get("limit"), 10) || PAGE, 1), 100);
  const err = alertBox();
  const cardSlot = h("div", {}, h("p", { class: "muted", text: "Loading…" }));
  const logErr = alertBox();
  const list = h("ol", { class: "deliveries", attrs: { "aria-label": "Deliveries, newest first" } });
  const empty = h("div", { class: "empty", hidden: true },
    h("p", { class: "empty__title", text: "No deliveries yet." }),
    h("p", { text: "Ping the endpoint, or wait for the project's next event." }));
  const more = h("button", { type: "button", class: "btn", text: "Show more", hidden: true, on: { click: () => loadMore() } });
  const updated = h("span", { class: "small muted", attrs: { "aria-live": "off" } });
  const items = new Map(); // delivery id → item
  let card = null, cursor = "", loaded = false, stopped = false, inflight = false, timer = 0, hurryUntil = 0;

  const range = rangeForm(id, () => hurry());
  replace(ctx.main,
    h("p", {}, h("a", { href: "#/webhooks", text: "← Webhooks" })),
    h("h1", {}, "Webhook ", h("span", { class: "mono", text: id })),
    err, cardSlot,
    h("section", { class: "log", attrs: { "aria-labelledby": "log-title" } },
      h("div", { class: "toolbar" }, h("h2", { id: "log-title", text: "Delivery log" }),
        h("button", { type: "button", class: "btn", text: "Refresh", on: { click: () => poll() } }), updated),
      h("p", { class: "muted small" },
        "Newest first. A delivery is one event to this endpoint; its id is the webhook-id header of every attempt. A failed one is tried again at once, then after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h; the log keeps its first attempt and its latest ones."),
      range.el, logErr, list, empty, more));

  // hurry polls every second for a while: something was just retried or
  // pinged.
  function hurry() {
    hurryUntil = Date.now() + 30_000;
    schedule(0);
  }

  function schedule(ms) {
    clearTimeout(timer);
    if (stopped) return;
    timer = setTimeout(poll, ms);
  }

  function nextPollMs() {
    if (Date.now() < hurryUntil) return FAST_POLL_MS;
    for (const it of items.values()) {
      if (it.d.status === "pending" && new Date(it.d.nextAt).getTime() - Date.now() < 60_000) return FAST_POLL_MS;
    }
    return POLL_MS;
  }

  function item(d) {
    const it = deliveryItem(id, d, { onRetried: hurry });
    items.set(d.id, it);
    return it;
  }

  function put(d, where) {
    const it = items.get(d.id);
    if (it) {
      it.update(d);
      return;
    }
    if (where === "top") list.prepend(item(d).el);
    else list.append(item(d).el);
  }

  async function loadMore() {
    more.disabled = true;
    try {
      const page = await get(`/v1/webhooks/${enc(id)}/deliveries`, { limit, cursor });
      if (stopped) return;
      showError(logErr, null);
      for (const d of page.deliveries) put(d, "bottom");
      cursor = page.nextCursor || "";
      more.hidden = !cursor;
      loaded = true;
      empty.hidden = items.size > 0;
    } catch (x) {
      if (!stopped) showError(logErr, x);
    } finally {
      more.disabled = false;
    }
  }

  // catchUp puts on top the deliveries newer than those shown, reading on
  // from head (the log's first page) until it meets one shown, and
  // updates the shown ones it read; false when it gave up.
  async function catchUp(head) {
    const read = [...head.deliveries];
    let next = head.nextCursor, pages = 1;
    while (!read.some((d) => items.has(d.id)) && next) {
      if (++pages > CATCH_UP_PAGES) return false;
      const p = await get(`/v1/webhooks/${enc(id)}/deliveries`, { limit: 100, cursor: next });
      if (stopped) return true;
      read.push(...p.deliveries);
      next = p.nextCursor;
    }
    for (const d of read) if (items.has(d.id)) items.get(d.id).update(d);
    const fresh = [];
    for (const d of read) {
      if (items.has(d.id)) break;
      fresh.push(d);
    }
    for (const d of fresh.reverse()) put(d, "top");
    return true;
  }

  // poll reads the endpoint and the log's first page: new deliveries go on
  // top, those shown are updated in place.
  async function poll() {
    clearTimeout(timer);
    if (stopped) return;
    if (inflight || document.hidden) {
      schedule(nextPollMs());
      return;
    }
    inflight = true;
    try {
      const [e, page] = await Promise.all([
        get(`/v1/webhooks/${enc(id)}`),
        loaded ? get(`/v1/webhooks/${enc(id)}/deliveries`, { limit }) : null,
      ]);
      if (stopped) return;
      showError(err, null);
      if (!card) {
        card = endpointCard(e, {
          detail: true,
          onDeleted(gone) {
            flash = `Deleted the endpoint ${gone.url} and its delivery log.`;
            ctx.navigate("#/webhooks");
          },
          onPinged: hurry,
        });
        replace(cardSlot, card.el);
      } else {
        card.update(e);
      }
      if (!loaded) {
        await loadMore();
      } else if (items.size === 0) {
        for (const d of page.deliveries) put(d, "bottom");
        cursor = page.nextCursor || "";
        more.hidden = !cursor;
        empty.hidden = items.size > 0;
      } else if (!(await catchUp(page))) {
        // More arrived than it reads at once: read the log again from the top.
        for (const it of items.values()) it.el.remove();
        items.clear();
        cursor = "";
        loaded = false;
        await loadMore();
      }
      updated.textContent = "Updated " + stamp(new Date().toISOString());
    } catch (x) {
      if (stopped) return;
      if (!card) cardSlot.replaceChildren();
      showError(err, x);
      if (x.status === 404 || x.status === 403 || x.status === 401) return; // nothing to follow
    } finally {
      inflight = false;
    }
    schedule(nextPollMs());
  }

  poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

// deliveryItem is one delivery of the log; update(d) redraws it and keeps
// its body and messages.
function deliveryItem(webhookId, first, { onRetried }) {
  let d = first;
  const head = h("div", { class: "delivery__head" });
  const meta = h("p", { class: "small muted delivery__meta" });
  const attempts = h("div", { class: "delivery__attempts" });
  const err = alertBox();
  const note = h("p", { class: "msg msg--info small", hidden: true, attrs: { role: "status" } });
  const bodySlot = h("div", { class: "delivery__body", hidden: true });
  const bodyBtn = h("button", { type: "button", class: "btn btn--quiet", text: "Show body", attrs: { "aria-expanded": "false" } });
  const retryBtn = h("button", { type: "button", class: "btn btn--quiet", text: "Retry" });
  const el = h("li", { class: "card delivery" }, head, meta, attempts,
    h("div", { class: "actions" }, bodyBtn, retryBtn), note, err, bodySlot);

  bodyBtn.addEventListener("click", async () => {
    if (!bodySlot.hidden) {
      bodySlot.hidden = true;
      bodyBtn.textContent = "Show body";
      bodyBtn.setAttribute("aria-expanded", "false");
      return;
    }
    bodyBtn.disabled = true;
    showError(err, null);
    try {
      const full = await get(`/v1/webhooks/${enc(webhookId)}/deliveries/${enc(d.id)}`);
      replace(bodySlot, h("p", { class: "small muted", text: "The payload as signed and sent:" }), h("pre", { class: "json", text: pretty(full.body) }));
      bodySlot.hidden = false;
      bodyBtn.textContent = "Hide body";
      bodyBtn.setAttribute("aria-expanded", "true");
    } catch (x) {
      showError(err, x);
    } finally {
      bodyBtn.disabled = false;
    }
  });

  retryBtn.addEventListener("click", async () => {
    retryBtn.disabled = true;
    showError(err, null);
    note.hidden = true;
    try {
      await post(`/v1/webhooks/${enc(webhookId)}/retry`, { deliveryId: d.id });
      showMessage(note, "info", "Retrying now, under the same webhook-id: a receiver that has it already drops it as a duplicate.");
      note.classList.add("small");
      onRetried();
    } catch (x) {
      showError(err, x);
    } finally {
      retryBtn.disabled = false;
    }
  });

  function update(next) {
    d = next;
    el.dataset.deliveryId = d.id;
    el.dataset.status = d.status;
    el.dataset.type = d.type;
    replace(head,
      timeEl(d.createdAt, "delivery__time"),
      h("span", { class: "mono delivery__type", text: d.type }),
      deliveryBadge(d.status),
      h("span", { class: "small delivery__tries", text: plural(d.tries, "try", "tries") }),
      d.status === "pending" && d.nextAt ? h("span", { class: "small delivery__next", title: stamp(d.nextAt), text: nextTry(d.nextAt) }) : null);
    replace(meta, "webhook-id ", h("code", { text: d.id }),
      d.runId ? [" · run ", h("a", { href: `#/runs/${enc(d.runId)}`, class: "mono", text: d.runId }), d.seq ? ` (event ${d.seq})` : null] : null);
    const shown = d.attempts || [];
    replace(attempts, shown.length === 0
      ? h("p", { class: "small muted", text: "Not tried yet." })
      : [
        h("ol", { class: "attempts", attrs: { "aria-label": `Attempts of ${d.id}` } }, shown.map((a, i) => attemptItem(a, i, shown.length, d.tries))),
        d.tries > shown.length ? h("p", { class: "small muted", text: `The log keeps the first and the latest ${shown.length - 1} of ${d.tries} tries.` }) : null,
      ]);
    if (d.status !== "pending") note.hidden = true;
  }

  update(d);
  return { el, update, get d() { return d; } };
}

// attemptItem is one try: when, its status and latency or why there was
// no response, and the start of the response.
function attemptItem(a, i, shown, tries) {
  const n = i === 0 ? 1 : tries - (shown - 1 - i);
  return h("li", { class: "attempt", data: { status: a.status } },
    h("p", {}, h("span", { class: "muted small", text: `#${n} ` }), timeEl(a.at), " — ",
      h("strong", { class: ok(a.status) ? "attempt__ok" : "attempt__bad", text: attemptWords(a) })),
    a.status && a.error ? h("p", { class: "small attempt__error", text: a.error }) : null,
    a.response ? [h("p", { class: "small muted", text: "Response (its first 1 KiB):" }), h("pre", { class: "json attempt__response", text: a.response })] : null);
}

// localValue: a Date as a datetime-local input's value, to the second.
function localValue(t) {
  const p = (n) => String(n).padStart(2, "0");
  return `${t.getFullYear()}-${p(t.getMonth() + 1)}-${p(t.getDate())}T${p(t.getHours())}:${p(t.getMinutes())}:${p(t.getSeconds())}`;
}

// rangeForm retries every delivery made in a time range (local time).
function rangeForm(webhookId, retried) {
  const mk = (name, label, help) => {
    const control = h("input", { type: "datetime-local", id: `retry-${name}`, attrs: { step: 1 } });
    const slot = h("p", { id: `retry-${name}-error`, class: "field__error", hidden: true });
    const helpEl = h("p", { id: `retry-${name}-help`, class: "help", text: help });
    control.setAttribute("aria-describedby", `${helpEl.id} ${slot.id}`);
    return { name, control, slot, el: h("div", { class: "field", data: { field: name } }, h("label", { for: control.id, text: label }), control, helpEl, slot) };
  };
  const since = mk("since", "Since", "Your local time.");
  const until = mk("until", "Until (optional)", "Empty: now.");
  since.control.value = localValue(new Date(Date.now() - 3600_000));
  const fields = [since, until];
  const err = alertBox();
  const done = h("div", { class: "msg msg--ok", hidden: true, attrs: { role: "status" } });
  const submit = h("button", { type: "submit", class: "btn", text: "Retry the range" });
  const form = h("form", { class: "form range", attrs: { "aria-label": "Retry a time range", novalidate: true }, on: { submit: onSubmit } },
    h("div", { class: "form__grid" }, since.el, until.el), err, h("div", { class: "actions" }, submit), done);
  const el = h("details", { class: "card range-card" },
    h("summary", { text: "Retry a time range" }),
    h("p", { class: "small muted", text: "Every delivery made from Since to Until (at most 1000) is due again now, each under its own webhook-id: a receiver that has one already drops it as a duplicate." }),
    form);

  // iso reads a datetime-local value as an RFC 3339 time; "" when empty.
  function iso(f) {
    const v = f.control.value;
    if (!v) return "";
    const t = new Date(v);
    return Number.isNaN(t.getTime()) ? null : t.toISOString();
  }

  async function onSubmit(ev) {
    ev.preventDefault();
    done.hidden = true;
    showFieldErrors(err, fields, null);
    const body = {};
    const problems = [];
    const s = iso(since), u = iso(until);
    if (!s) problems.push({ field: "since", message: s === null ? "is not a date and time" : "is required: when the range starts" });
    else body.since = s;
    if (u === null) problems.push({ field: "until", message: "is not a date and time" });
    else if (u) body.until = u;
    if (problems.length) {
      showFieldErrors(err, fields, { code: "invalid_argument", message: problems.map((p) => `${p.field}: ${p.message}`).join("; "), details: { fields: problems } });
      return;
    }
    submit.disabled = true;
    try {
      const r = await post(`/v1/webhooks/${enc(webhookId)}/retry`, body);
      showMessage(done, "ok", r.retried === 0
        ? h("p", { text: "Nothing to retry: no delivery was made in that range." })
        : h("p", { text: `Retrying ${plural(r.retried, "delivery", "deliveries")} now, each under its webhook-id.` }));
      if (r.retried) retried();
    } catch (x) {
      showFieldErrors(err, fields, x);
    } finally {
      submit.disabled = false;
    }
  }
  return { el };
}

