// Groups: named sets of members, the approvers stead.json asks for by name
// ("approvers": {"group": "finance", "min": 2}). Membership is a project
// setting, never part of stead.json. Owners create groups, add and remove
// members and delete groups; everyone else reads.

import { h, replace, alertBox, showError, field, showFieldErrors } from "./dom.js";
import { get, post, patch, del, enc } from "./api.js";
import { mayManageMembers, DECIDING_ROLES } from "./access.js";

export function groupsView(ctx) {
  const manage = mayManageMembers(ctx.me);
  const err = alertBox();
  const list = h("div", { class: "cards groups" }, h("p", { class: "muted", text: "Loading…" }));
  const formSlot = h("div");
  let stopped = false;
  let members = []; // current members, for the pickers
  const cards = new Map(); // group name → card element

  replace(ctx.main,
    h("h1", { text: "Groups" }),
    h("p", { class: "muted" },
      "A tool or policy rule in stead.json names a group as its approvers, e.g. ",
      h("code", { text: '"approvers": {"group": "finance", "min": 2}' }),
      ". Who is in a group is set here, not in stead.json, so a deploy cannot change it. ",
      manage ? null : "Only owners create and change groups."),
    err, formSlot,
    h("h2", { text: "Groups of this project" }),
    list);

  Promise.all([get("/v1/groups"), get("/v1/members")]).then(([gs, ms]) => {
    if (stopped) return;
    members = ms.members.filter((m) => !m.removedAt);
    if (manage) replace(formSlot, createForm());
    list.replaceChildren();
    for (const g of gs.groups) list.append(card(g));
    showEmpty();
  }).catch((e) => {
    if (stopped) return;
    list.replaceChildren();
    showError(err, e);
  });

  function showEmpty() {
    const empty = list.querySelector(".empty");
    if (cards.size === 0 && !empty) {
      list.append(h("div", { class: "empty" }, h("p", { class: "empty__title", text: "No groups yet." }),
        h("p", {}, manage ? "Create one above, then name it in stead.json." : "An owner creates them.")));
    } else if (cards.size > 0 && empty) {
      empty.remove();
    }
  }

  // card renders group g, replacing its earlier card.
  function card(g) {
    const el = groupCard(g);
    const old = cards.get(g.name);
    if (old) old.replaceWith(el);
    cards.set(g.name, el);
    return el;
  }

  function groupCard(g) {
    const cardErr = alertBox();
    const inGroup = new Set(g.members.map((m) => m.id));
    const memberItems = g.members.map((m) => {
      const notes = [];
      if (m.removed) notes.push("removed from the project: cannot vote");
      else if (!DECIDING_ROLES.includes(m.role)) notes.push(`${m.role}: cannot vote`);
      const remove = manage
        ? h("button", { type: "button", class: "btn btn--quiet", text: "Remove", attrs: { "aria-label": `Remove ${m.name} from ${g.name}` }, on: { click: () => change({ remove: [m.id] }, remove) } })
        : null;
      return h("li", { class: "group-member", data: { memberId: m.id } },
        h("span", { class: "group-member__name", text: m.name }),
        m.role ? h("span", { class: `tag tag--role-${m.role}`, text: m.role }) : null,
        notes.map((n) => h("span", { class: "tag tag--warn", text: n })),
        remove);
    });

    let addBox = null, addField = null;
    if (manage) {
      const candidates = members.filter((m) => !inGroup.has(m.id));
      const select = h("select", { id: `add-${g.name}` },
        h("option", { value: "", text: candidates.length ? "Choose a member…" : "Every member is in this group" }),
        candidates.map((m) => h("option", { value: m.id, text: `${m.name} (${m.role})` })));
      addField = field("add", `Add a member to ${g.name}`, select);
      const add = h("button", { type: "button", class: "btn", text: "Add", disabled: true });
      select.addEventListener("change", () => { add.disabled = !select.value; });
      add.addEventListener("click", () => select.value && change({ add: [select.value] }, add));
      select.disabled = candidates.length === 0;
      select.after(add);
      addBox = h("div", { class: "group-add" }, addField.el);
    }

    const actions = manage ? h("div", { class: "actions" }) : null;
    if (manage) {
      const delBtn = h("button", { type: "button", class: "btn btn--danger", text: "Delete group", attrs: { "aria-label": `Delete group ${g.name}` } });
      replace(actions, delBtn);
      delBtn.addEventListener("click", () => {
        const yes = h("button", { type: "button", class: "btn btn--danger", text: `Delete ${g.name}` });
        const no = h("button", { type: "button", class: "btn", text: "Cancel" });
        replace(actions, h("div", { class: "confirm", attrs: { role: "group", "aria-label": `Confirm deleting ${g.name}` } },
          h("p", { class: "small" }, `Delete group ${g.name}? If stead.json still names it, approvals that ask for it have no one to ask until you create it again. Approvals already asked for keep their approvers.`),
          h("div", { class: "actions" }, yes, no)));
        no.focus();
        no.addEventListener("click", () => {
          replace(actions, delBtn);
          delBtn.focus();
        });
        yes.addEventListener("click", async () => {
          yes.disabled = no.disabled = true;
          showError(cardErr, null);
          try {
            await del(`/v1/groups/${enc(g.name)}`);
            cards.get(g.name).remove();
            cards.delete(g.name);
            showEmpty();
          } catch (e) {
            showError(cardErr, e);
            yes.disabled = no.disabled = false;
          }
        });
      });
    }

    async function change(body, button) {
      button.disabled = true;
      showFieldErrors(cardErr, addField ? [addField] : [], null);
      try {
        const next = await patch(`/v1/groups/${enc(g.name)}`, body);
        const el = card(next);
        const focus = el.querySelector(body.add ? "select" : ".btn");
        if (focus) focus.focus();
      } catch (e) {
        showFieldErrors(cardErr, addField ? [addField] : [], e);
        button.disabled = false;
      }
    }

    return h("article", { class: "card group", data: { group: g.name }, attrs: { "aria-labelledby": `group-${g.name}`, tabindex: -1 } },
      h("div", { class: "card__head" },
        h("h3", { class: "card__title", id: `group-${g.name}`, text: g.name }),
        h("span", { class: "muted small", text: `${g.members.length} ${g.members.length === 1 ? "member" : "members"}` })),
      g.description ? h("p", { text: g.description }) : null,
      g.members.length
        ? h("ul", { class: "group-members", attrs: { "aria-label": `Members of ${g.name}` } }, memberItems)
        : h("p", { class: "muted small", text: "No members: an approval that asks for this group cannot be met." }),
      addBox, cardErr, actions);
  }

  // createForm creates a group with the members ticked.
  function createForm() {
    const name = field("name", "Name", h("input", { type: "text", id: "group-name", autocomplete: "off", spellcheck: false, attrs: { maxlength: 40 } }),
      { help: "Lowercase letters, digits and hyphens, e.g. finance or refunds-eu: stead.json names the group by it." });
    const description = field("description", "Description (optional)", h("input", { type: "text", id: "group-description", autocomplete: "off", attrs: { maxlength: 200 } }));
    const boxes = members.map((m) => h("input", { type: "checkbox", id: `group-member-${m.id}`, value: m.id }));
    const picker = h("fieldset", { class: "picker", id: "group-members" },
      h("legend", { text: "Members" }),
      members.length
        ? members.map((m, i) => h("span", { class: "check" }, boxes[i], h("label", { for: boxes[i].id, text: `${m.name} (${m.role})` })))
        : h("p", { class: "muted small", text: "The project has no members to add yet." }));
    const membersField = { name: "members", control: picker, slot: h("p", { id: "group-members-error", class: "field__error", hidden: true }) };
    picker.setAttribute("aria-describedby", membersField.slot.id);
    const fields = [name, description, membersField];
    const err = alertBox();
    const submit = h("button", { type: "submit", class: "btn btn--primary", text: "Create group" });
    const form = h("form", { class: "card form", attrs: { "aria-labelledby": "create-group-title", novalidate: true }, on: { submit: onSubmit } },
      h("h2", { id: "create-group-title", class: "form__title", text: "Create a group" }),
      h("div", { class: "form__grid" }, name.el, description.el),
      picker, membersField.slot, err,
      h("div", { class: "actions" }, submit));

    async function onSubmit(ev) {
      ev.preventDefault();
      submit.disabled = true;
      showFieldErrors(err, fields, null);
      const body = { name: name.control.value.trim(), members: boxes.filter((b) => b.checked).map((b) => b.value) };
      if (description.control.value.trim()) body.description = description.control.value.trim();
      try {
        const g = await post("/v1/groups", body);
        form.reset();
        list.prepend(card(g));
        showEmpty();
        cards.get(g.name).focus();
      } catch (e) {
        // A name another group has is a conflict about the name.
        showFieldErrors(err, fields, e, { fallback: e.code === "conflict" ? "name" : undefined });
      } finally {
        submit.disabled = false;
      }
    }
    return form;
  }

  return () => { stopped = true; };
}
