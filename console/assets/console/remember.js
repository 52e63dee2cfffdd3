// Remembering a decision on an approval: "Approve and allow again for…"
// (how long, and for which inputs) and, once approved, the rule it made.
// The API decides whether the tool allows it and for how long (its
// approvals.remember.max, never more than 7 days); a refusal names
// remember.for, remember.when or remember, and is shown next to that part
// of the form. A refused remember decides nothing.

import { h, alertBox, showFieldErrors } from "./dom.js";
import { enc } from "./api.js";
import { ago, stamp } from "./format.js";
import { ruleLink, scopeWords } from "./rules.js";
import { hasQuorum } from "./quorum.js";

// DURATIONS are offered first; any other is typed (Go durations: "90m",
// "2h30m"). The tool's max is not shown by the API, so it is not offered:
// a duration over it gets the API's refusal, which names it.
export const DURATIONS = [
  { value: "1h", text: "1 hour" },
  { value: "8h", text: "8 hours" },
  { value: "24h", text: "24 hours" },
];

// rememberable: whether a may be approved with remember. An approval with
// approvers never is (a remembered decision never stands in for a quorum).
export function rememberable(a) {
  return a.status === "pending" && !hasQuorum(a);
}

// isRememberError: whether e refuses the remember part of a request.
export function isRememberError(e) {
  if (!e || e.code !== "invalid_argument" || !e.details) return false;
  const fields = Array.isArray(e.details.fields) ? e.details.fields : [];
  return fields.some((f) => f.field === "remember" || String(f.field || "").startsWith("remember."));
}

// rememberForm is the form of approval a: read() is the request's
// "remember" (or null after showing what is missing), show(err) puts the
// API's refusal next to what it names.
export function rememberForm(a, { onConfirm, onCancel }) {
  const id = a.id;
  const group = `remember-for-${id}`;
  const presets = DURATIONS.map((d, i) => h("input", { type: "radio", name: group, id: `${group}-${d.value}`, value: d.value, checked: i === 0 }));
  const customRadio = h("input", { type: "radio", name: group, id: `${group}-custom`, value: "custom" });
  const custom = h("input", {
    type: "text", id: `${group}-value`, autocomplete: "off", spellcheck: false, placeholder: "e.g. 90m or 2h30m",
    attrs: { size: 14, maxlength: 32 },
  });
  custom.addEventListener("input", () => { customRadio.checked = true; });
  custom.addEventListener("focus", () => { customRadio.checked = true; });
  customRadio.addEventListener("change", () => custom.focus());

  const forSlot = h("p", { id: `${group}-error`, class: "field__error", hidden: true });
  custom.setAttribute("aria-describedby", forSlot.id);
  const forSet = h("fieldset", { class: "picker remember__for", attrs: { role: "radiogroup", "aria-describedby": forSlot.id } },
    h("legend", { text: "Allow again for" }),
    DURATIONS.map((d, i) => h("span", { class: "check" }, presets[i], h("label", { for: presets[i].id, text: d.text }))),
    h("span", { class: "check" }, customRadio, h("label", { for: customRadio.id, text: "Custom:" }),
      h("label", { for: custom.id, class: "sr-only", text: "Custom duration" }), custom));

  const scopeName = `remember-scope-${id}`;
  const anyInput = h("input", { type: "radio", name: scopeName, id: `${scopeName}-any`, value: "any", checked: true });
  const exactInput = h("input", { type: "radio", name: scopeName, id: `${scopeName}-exact`, value: "exact" });
  const scopeSlot = h("p", { id: `${scopeName}-error`, class: "field__error", hidden: true });
  const scopeSet = h("fieldset", { class: "picker remember__scope", attrs: { role: "radiogroup", "aria-describedby": scopeSlot.id } },
    h("legend", { text: "For which inputs" }),
    h("span", { class: "check" }, anyInput, h("label", { for: anyInput.id, text: "Any input for this end user" })),
    h("span", { class: "check" }, exactInput, h("label", { for: exactInput.id, text: "This exact input only" })));

  const err = alertBox();
  const confirm = h("button", { type: "button", class: "btn btn--primary", text: "Approve and allow again", on: { click: () => onConfirm() } });
  const cancel = h("button", { type: "button", class: "btn", text: "Cancel", on: { click: () => onCancel() } });
  const el = h("div", { class: "remember", id: `remember-${id}`, hidden: true, attrs: { role: "group", "aria-label": `Approve ${a.tool} and allow it again` } },
    h("p", { class: "help" }, `Approves this call, and lets later calls of ${a.tool} by agent ${a.agent} for this end user run without asking until then — listed on the `,
      h("a", { href: "#/rules", text: "Rules" }), " page, where it can be revoked. Only where stead.json allows it (the tool's approvals.remember, at most its max)."),
    forSet, forSlot, scopeSet, scopeSlot, err,
    h("div", { class: "actions" }, confirm, cancel));

  // The API's names for the parts of "remember": a problem with "remember"
  // itself (the tool does not allow it) goes to the form's own alert.
  const fields = [
    { name: "remember.for", el: forSet, control: forSet, slot: forSlot },
    { name: "remember.exact", el: scopeSet, control: scopeSet, slot: scopeSlot },
    { name: "remember.when", el: scopeSet, control: scopeSet, slot: scopeSlot },
  ];

  function show(e) {
    custom.removeAttribute("aria-invalid");
    showFieldErrors(err, fields, e);
    if (!forSlot.hidden && customRadio.checked) {
      custom.setAttribute("aria-invalid", "true");
      custom.focus();
    } else if (e && !err.hidden) {
      confirm.focus();
    }
  }

  return {
    el,
    show,
    setBusy(busy) {
      confirm.disabled = busy;
      cancel.disabled = busy;
    },
    focus() { (presets.find((p) => p.checked) || customRadio).focus(); },
    // read is the request's "remember", or null (with the problem shown)
    // when the custom duration is empty.
    read() {
      let span = (presets.find((p) => p.checked) || {}).value;
      if (customRadio.checked) {
        span = custom.value.trim();
        if (!span) {
          show({ code: "invalid_argument", message: "remember.for: enter a duration", details: { fields: [{ field: "remember.for", message: "enter a duration, like 90m or 2h30m" }] } });
          return null;
        }
      }
      const out = { for: span };
      if (exactInput.checked) out.exact = true;
      return out;
    },
  };
}

// rememberedNote says what the rule made with an approval lets through,
// until when, with a link to it (where it is revoked).
export function rememberedNote(rule) {
  const what = rule.scope === "any" ? `${rule.tool} for ${rule.endUserId}` : `${rule.tool} for ${rule.endUserId} (${scopeWords(rule)})`;
  return h("div", { class: "msg msg--ok remembered", data: { ruleId: rule.id } },
    h("p", {}, h("strong", { text: "Remembered: " }), `${what} is allowed without asking until `,
      h("time", { attrs: { datetime: rule.expiresAt }, title: ago(rule.expiresAt), text: stamp(rule.expiresAt) }),
      ` (${ago(rule.expiresAt)}) `,
      "(", h("a", { href: `#/rules/${enc(rule.id)}`, text: "revoke", title: `Open rule ${rule.id} to revoke it` }), ")"),
    h("p", { class: "small" }, "Rule ", ruleLink(rule.id)));
}
