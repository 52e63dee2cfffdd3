// Members: the people of the project, their roles and (for owners) their
// emails and keys. Owners add members (optionally with a first key, shown
// once), change roles and remove members; everyone else reads. Every
// member chooses here which approval mail they get (My notifications).

import { h, replace, alertBox, showError, showMessage, field, showFieldErrors } from "./dom.js";
import { get, post, patch, del, enc } from "./api.js";
import { ago, stamp } from "./format.js";
import { mayManageMembers, ROLES } from "./access.js";

export function membersView(ctx) {
  const manage = mayManageMembers(ctx.me);
  const err = alertBox();
  const list = h("section", { attrs: { "aria-labelledby": "members-title" } },
    h("h2", { id: "members-title", text: "Members" }), h("p", { class: "muted", text: "Loading…" }));
  let stopped = false;

  replace(ctx.main,
    h("h1", { text: "Members" }),
    h("p", { class: "muted" }, manage
      ? "The people of this project. Each API key belongs to one member; traces and approvals name the member. Groups of members are the approvers stead.json asks for."
      : "The people of this project and their roles. Only owners add, change and remove members."),
    err,
    myNotificationsForm(ctx),
    manage ? addMemberForm(ctx, () => load()) : null,
    list);

  async function load() {
    try {
      const [ms, keys] = await Promise.all([
        get("/v1/members", { removed: "true" }),
        manage ? get("/v1/keys") : Promise.resolve(null),
      ]);
      if (stopped) return;
      showError(err, null);
      renderList(ms.members, keys && keys.keys);
    } catch (e) {
      if (!stopped) showError(err, e);
    }
  }

  function renderList(members, keys) {
    const working = new Map(); // member id → keys not revoked
    if (keys) for (const k of keys) if (!k.revokedAt) working.set(k.memberId, (working.get(k.memberId) || 0) + 1);
    // Current members first, then the removed, each oldest first.
    const sorted = [...members].sort((x, y) => Number(!!x.removedAt) - Number(!!y.removedAt));
    const cols = ["Name", "Role", manage ? "Email" : null, manage ? "Keys" : null, "Status", manage ? "Actions" : null].filter(Boolean);
    replace(list, h("h2", { id: "members-title" }, `Members (${members.filter((m) => !m.removedAt).length})`),
      members.length === 0
        ? h("div", { class: "empty" }, h("p", { class: "empty__title", text: "No members yet." }))
        : h("div", { class: "table-wrap", attrs: { tabindex: 0, role: "region", "aria-label": "Members" } },
          h("table", { class: "table members" },
            h("thead", {}, h("tr", {}, cols.map((c) => h("th", { attrs: { scope: "col" }, text: c })))),
            h("tbody", {}, sorted.map((m) => memberRow(ctx, m, { manage, keys: keys ? working.get(m.id) || 0 : null, reload: load }))))));
  }

  load();
  return () => { stopped = true; };
}

// memberRow is one member; for owners, with role change and removal.
function memberRow(ctx, m, { manage, keys, reload }) {
  const you = ctx.me && ctx.me.memberId === m.id;
  const removed = !!m.removedAt;
  const nameCell = h("th", { attrs: { scope: "row" } }, h("span", { class: "member__name", text: m.name }), you ? " (you)" : null,
    h("div", { class: "small muted mono", text: m.id }));
  const status = removed
    ? h("td", {}, h("span", { class: "badge badge--cancelled", text: "removed" }), " ", h("time", { class: "small", attrs: { datetime: m.removedAt }, title: stamp(m.removedAt), text: ago(m.removedAt) }))
    : h("td", {}, h("span", { class: "small", title: stamp(m.createdAt), text: `added ${ago(m.createdAt)}` }));
  const row = h("tr", { class: removed ? "member member--removed" : "member", data: { memberId: m.id, role: m.role, removed: removed ? "true" : null } }, nameCell);

  if (!manage || removed) {
    row.append(h("td", {}, h("span", { class: `tag tag--role-${m.role}`, text: m.role })));
    if (manage) row.append(h("td", { text: m.email || "—" }), h("td", { text: "—" }));
    row.append(status);
    if (manage) row.append(h("td", { text: "—" }));
    return row;
  }

  // Role: a select and a button, so that a role changes only on purpose.
  const roleErr = alertBox();
  const select = h("select", { id: `role-${m.id}` }, ROLES.map((r) => h("option", { value: r.id, text: r.id })));
  select.value = m.role;
  const roleField = field("role", null, select);
  const save = h("button", { type: "button", class: "btn btn--quiet", text: "Change role", disabled: true });
  select.after(save);
  select.addEventListener("change", () => { save.disabled = select.value === m.role; });
  save.addEventListener("click", async () => {
    save.disabled = true;
    select.disabled = true;
    showFieldErrors(roleErr, [roleField], null);
    try {
      await patch(`/v1/members/${enc(m.id)}`, { role: select.value });
      reload();
    } catch (e) {
      showFieldErrors(roleErr, [roleField], e, { fallback: "role" });
      select.disabled = false;
      save.disabled = select.value === m.role;
    }
  });
  const roleCell = h("td", {},
    h("label", { for: select.id, class: "sr-only", text: `Role of ${m.name}` }),
    roleField.el, roleErr);

  const keysCell = h("td", {}, keys > 0
    ? `${keys} ${keys === 1 ? "key" : "keys"}`
    : h("span", { class: "tag tag--warn", title: "A member without a working key cannot sign in or vote.", text: "no working key" }));

  // Remove, after a confirmation in place.
  const actions = h("td", {});
  const removeErr = alertBox();
  const removeBtn = h("button", { type: "button", class: "btn btn--danger btn--quiet", text: "Remove", attrs: { "aria-label": `Remove ${m.name}` }, on: { click: confirmRemove } });
  replace(actions, removeBtn, removeErr);

  function confirmRemove() {
    const yes = h("button", { type: "button", class: "btn btn--danger", text: `Remove ${m.name}` });
    const no = h("button", { type: "button", class: "btn", text: "Cancel" });
    const box = h("div", { class: "confirm", attrs: { role: "group", "aria-label": `Confirm removing ${m.name}` } },
      h("p", { class: "small" }, `Remove ${m.name} from the project? Their keys stop working at once`,
        you ? ", yours included: you will be signed out" : "", ". Traces keep their name."),
      h("div", { class: "actions" }, yes, no), removeErr);
    no.addEventListener("click", () => {
      showError(removeErr, null);
      replace(actions, removeBtn, removeErr);
      removeBtn.focus();
    });
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      no.disabled = true;
      showError(removeErr, null);
      try {
        await del(`/v1/members/${enc(m.id)}`);
        reload();
      } catch (e) {
        showError(removeErr, e);
        yes.disabled = false;
        no.disabled = false;
      }
    });
    replace(actions, box);
    no.focus();
  }

  row.append(roleCell, h("td", { text: m.email || "—" }), keysCell, status, actions);
  return row;
}

// EMAIL_LEVELS are the email settings a member may choose (PATCH
// /v1/me/notifications), with what each mails.
const EMAIL_LEVELS = [
  { id: "all", text: "All — every approval I may decide, with reminders, escalations and expiry warnings" },
  { id: "requests", text: "Requests only — each approval's request, no reminders" },
  { id: "none", text: "None — no mail" },
];

// myNotificationsForm is the signed-in member's own email setting (GET
// /v1/me says it). Slack posts to a channel and is not affected.
function myNotificationsForm(ctx) {
  if (!ctx.me || !ctx.me.notify) return null;
  const select = h("select", { id: "my-email" }, EMAIL_LEVELS.map((l) => h("option", { value: l.id, text: l.text })));
  select.value = ctx.me.notify.email;
  const email = field("email", "Email about approvals", select, { help: "Slack messages go to a channel and are not affected." });
  const err = alertBox();
  const done = h("p", { class: "small", attrs: { role: "status", "aria-live": "polite" } });
  const save = h("button", { type: "submit", class: "btn", text: "Save", disabled: true });
  select.addEventListener("change", () => {
    save.disabled = select.value === ctx.me.notify.email;
    done.textContent = "";
  });
  const form = h("form", { class: "card form", attrs: { "aria-labelledby": "my-notifications-title", novalidate: true }, on: { submit: onSubmit } },
    h("h2", { id: "my-notifications-title", class: "form__title", text: "My notifications" }),
    email.el, err, h("div", { class: "actions" }, save, done));

  async function onSubmit(ev) {
    ev.preventDefault();
    save.disabled = true;
    showFieldErrors(err, [email], null);
    try {
      const n = await patch("/v1/me/notifications", { email: select.value });
      ctx.me.notify = n;
      select.value = n.email;
      done.textContent = "Saved.";
    } catch (e) {
      showFieldErrors(err, [email], e, { fallback: "email" });
      save.disabled = false;
    }
  }
  return form;
}

// addMemberForm adds a member, optionally with a first key whose secret
// is shown this once.
function addMemberForm(ctx, onAdded) {
  const name = field("name", "Name", h("input", { type: "text", id: "member-name", autocomplete: "off", attrs: { maxlength: 100 } }));
  const email = field("email", "Email (optional)", h("input", { type: "email", id: "member-email", autocomplete: "off", spellcheck: false }));
  const roleSelect = h("select", { id: "member-role" }, ROLES.map((r) => h("option", { value: r.id, text: r.text })));
  roleSelect.value = "approver";
  const role = field("role", "Role", roleSelect);
  const withKey = h("input", { type: "checkbox", id: "member-key", checked: true });
  const keyName = field("keyName", "Key name (optional)", h("input", { type: "text", id: "member-key-name", autocomplete: "off", attrs: { maxlength: 100 } }),
    { help: "Names the key in lists and logs, e.g. “Ana's laptop”." });
  withKey.addEventListener("change", () => { keyName.el.hidden = !withKey.checked; });
  const fields = [name, email, role, keyName];
  const err = alertBox();
  const done = h("div", { class: "msg msg--ok", hidden: true, attrs: { role: "status" } });
  const submit = h("button", { type: "submit", class: "btn btn--primary", text: "Add member" });
  const form = h("form", { class: "card form", attrs: { "aria-labelledby": "add-member-title", novalidate: true }, on: { submit: onSubmit } },
    h("h2", { id: "add-member-title", class: "form__title", text: "Add a member" }),
    h("div", { class: "form__grid" }, name.el, email.el, role.el),
    h("div", { class: "field" }, h("span", { class: "check" }, withKey, h("label", { for: "member-key", text: "Also create an API key for them" }))),
    keyName.el,
    err,
    h("div", { class: "actions" }, submit),
    done);

  async function onSubmit(ev) {
    ev.preventDefault();
    submit.disabled = true;
    done.hidden = true;
    showFieldErrors(err, fields, null);
    const body = { name: name.control.value, role: roleSelect.value };
    if (email.control.value.trim()) body.email = email.control.value;
    if (withKey.checked) {
      body.key = true;
      if (keyName.control.value.trim()) body.keyName = keyName.control.value;
    }
    try {
      const m = await post("/v1/members", body);
      form.reset();
      roleSelect.value = "approver";
      withKey.checked = true;
      keyName.el.hidden = false;
      showMessage(done, "ok", h("p", {}, h("strong", { text: m.name }), ` was added as ${m.role}.`), m.key ? newKey(m) : null);
      onAdded();
    } catch (e) {
      showFieldErrors(err, fields, e);
    } finally {
      submit.disabled = false;
    }
  }
  return form;
}

// newKey shows a freshly created key's secret, once.
function newKey(m) {
  const id = `new-key-${m.id}`;
  const input = h("input", { type: "text", id, class: "mono secret", value: m.key.key, spellcheck: false, autocomplete: "off", attrs: { readonly: true } });
  const copied = h("span", { class: "small", attrs: { "aria-live": "polite" } });
  const copy = h("button", { type: "button", class: "btn btn--quiet", text: "Copy" });
  copy.addEventListener("click", async () => {
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      copied.textContent = "Copied.";
    } catch {
      copied.textContent = "Selected: copy it with Ctrl+C (⌘C).";
    }
  });
  return h("div", { class: "new-key" },
    h("label", { for: id, text: `API key of ${m.name} (${m.key.id}) — shown this once: copy it now and hand it to them safely` }),
    h("span", { class: "field--inline new-key__row" }, input, copy, copied),
    h("p", { class: "help", text: "It is stored only as a hash; if it is lost, create another key and revoke this one." }));
}
