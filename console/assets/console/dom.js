// Building the page with DOM calls only. Data is always set as text
// (textContent, text nodes, attribute values), never parsed as HTML, and no
// style attribute is ever written, so the strict Content-Security-Policy
// holds and nothing from the API can become markup.

// h creates an element. props:
//   class, text, hidden, disabled, checked, value, type, id, href, for,
//   attrs {name: value} (set with setAttribute; "style" and on* refused),
//   data {key: value} (data-* attributes), on {event: handler}.
// children: nodes, strings (text), arrays, or null/false/undefined (skipped).
export function h(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null) continue;
    switch (k) {
      case "class": e.className = v; break;
      case "text": e.textContent = String(v); break;
      case "for": e.htmlFor = v; break;
      case "hidden": case "disabled": case "checked": case "required": case "open":
        e[k] = Boolean(v); break;
      case "value": case "type": case "id": case "href": case "name": case "rows":
      case "autocomplete": case "placeholder": case "spellcheck": case "title":
        e[k] = v; break;
      case "attrs":
        for (const [name, val] of Object.entries(v)) {
          if (name === "style" || /^on/i.test(name)) throw new Error("dom: refusing attribute " + name);
          if (val !== undefined && val !== null && val !== false) e.setAttribute(name, String(val));
        }
        break;
      case "data":
        for (const [name, val] of Object.entries(v)) if (val !== undefined && val !== null) e.dataset[name] = String(val);
        break;
      case "on":
        for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
        break;
      default:
        throw new Error("dom: unknown prop " + k);
    }
  }
  append(e, children);
  return e;
}

export function append(parent, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    parent.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return parent;
}

// replace sets an element's children.
export function replace(parent, ...children) {
  parent.replaceChildren();
  return append(parent, children);
}

// alertBox is an inline message (role=alert for errors, status otherwise).
export function alertBox(kind = "error") {
  return h("div", { class: "msg msg--" + kind, hidden: true, attrs: { role: kind === "error" ? "alert" : "status" } });
}

// showError writes an API error into an alertBox in the API's own words.
export function showError(box, err) {
  if (!err) {
    box.hidden = true;
    box.replaceChildren();
    return;
  }
  const lines = [h("strong", { text: errorTitle(err) }), " ", err.message || String(err)];
  const fields = err.details && Array.isArray(err.details.fields) ? err.details.fields : [];
  replace(box, h("p", {}, lines),
    fields.length > 1 || (fields.length === 1 && !String(err.message).startsWith(fields[0].field))
      ? h("ul", { class: "fields" }, fields.map((f) => h("li", {}, h("code", { text: f.field || "(body)" }), ": ", f.message)))
      : null,
    err.code ? h("p", { class: "msg__code" }, "code ", h("code", { text: err.code })) : null);
  box.hidden = false;
}

function errorTitle(err) {
  switch (err.code) {
    case "approval_expired": return "Expired:";
    case "approval_not_pending": return "No longer pending:";
    case "forbidden": return "Forbidden:";
    case "unauthenticated": return "Not signed in:";
    case "not_found": return "Not found:";
    case "invalid_argument": return "Invalid:";
    case "network": return "Network:";
    case "not_an_approver": return "Not an approver:";
    case "already_voted": return "Already voted:";
    case "approval_changed": return "Changed:";
    case "conflict": return "Conflict:";
  }
  return "Error:";
}

// field is a labelled form control with a slot under it for what the API
// says about it. name is the field as the API names it ("email"; a
// problem with "members[1]" goes to the field named "members", one with
// "remember.for" to a field of that name, else to "remember").
export function field(name, label, control, { help } = {}) {
  const slot = h("p", { id: control.id + "-error", class: "field__error", hidden: true });
  const helpEl = help ? h("p", { id: control.id + "-help", class: "help", text: help }) : null;
  control.setAttribute("aria-describedby", [helpEl && helpEl.id, slot.id].filter(Boolean).join(" "));
  const el = h("div", { class: "field", data: { field: name } },
    label ? h("label", { for: control.id, text: label }) : null, control, helpEl, slot);
  return { name, el, control, slot };
}

// showFieldErrors shows err next to the fields it names, and in box what
// names none of them (or an error about no field, such as a conflict; with
// fallback, the name of the field such an error goes to). null clears.
export function showFieldErrors(box, fields, err, { fallback } = {}) {
  for (const f of fields) {
    f.slot.hidden = true;
    f.slot.replaceChildren();
    f.control.removeAttribute("aria-invalid");
  }
  if (!err) {
    showError(box, null);
    return;
  }
  const problems = err.details && Array.isArray(err.details.fields) ? err.details.fields : [];
  const rest = [];
  let first = null;
  const put = (f, message) => {
    append(f.slot, [f.slot.childNodes.length ? " " : null, message]);
    f.slot.hidden = false;
    f.control.setAttribute("aria-invalid", "true");
    first = first || f;
  };
  for (const p of problems) {
    const f = fields.find((x) => x.name === p.field) || fields.find((x) => x.name === String(p.field || "").split(/[.[]/)[0]);
    if (f) put(f, /\[\d+\]/.test(p.field) ? `${p.field}: ${p.message}` : p.message);
    else rest.push(p);
  }
  if (problems.length === 0 && fallback && err.code !== "network") {
    const f = fields.find((x) => x.name === fallback);
    if (f) put(f, err.message);
  }
  if (first && rest.length === 0) {
    showError(box, null);
  } else if (first) {
    showError(box, { code: err.code, message: rest.map((p) => `${p.field}: ${p.message}`).join("; "), details: { fields: rest } });
  } else {
    showError(box, err);
  }
  if (first) first.control.focus();
}

export function showMessage(box, kind, ...content) {
  box.className = "msg msg--" + kind;
  replace(box, ...content);
  box.hidden = false;
}

// idText shows an id that never breaks mid-string (it is clipped with an
// ellipsis where there is no room; the whole id stays in the text and the
// title) and a button that copies it. link, when given, makes the id a
// link there.
export function idText(id, { link, cls = "" } = {}) {
  const text = link
    ? h("a", { href: link, class: "id__text mono", text: id, title: id })
    : h("span", { class: "id__text mono", text: id, title: id });
  const label = `Copy ${id}`;
  const copy = h("button", { type: "button", class: "id__copy", title: "Copy", attrs: { "aria-label": label } },
    h("span", { attrs: { "aria-hidden": "true" }, text: "copy" }));
  copy.addEventListener("click", async (ev) => {
    ev.stopPropagation();
    let done = false;
    try {
      await navigator.clipboard.writeText(id);
      done = true;
    } catch {
      // No clipboard permission: select the id for a manual copy.
      const range = document.createRange();
      range.selectNodeContents(text);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
    }
    copy.setAttribute("aria-label", done ? `Copied ${id}` : `Selected ${id}; press Ctrl+C to copy`);
    copy.dataset.copied = done ? "true" : "selected";
    setTimeout(() => {
      copy.setAttribute("aria-label", label);
      delete copy.dataset.copied;
    }, 2000);
  });
  return h("span", { class: ("id " + cls).trim(), data: { id } }, text, copy);
}
