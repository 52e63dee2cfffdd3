// The console: sign-in, the header and a hash router (#/approvals,
// #/approvals/{id}, #/rules, #/rules/{id}, #/runs, #/runs/{id},
// #/deployments, #/members, #/groups, #/webhooks, #/webhooks/{id}). Each
// view renders into <main> and returns a function that stops its timers
// and streams.

import { h, replace, alertBox, showError } from "./dom.js";
import { session, get, whenUnauthenticated } from "./api.js";
import { approvalsView, approvalView } from "./approvals.js";
import { runsView } from "./runs.js";
import { runView } from "./run.js";
import { deploymentsView } from "./deployments.js";
import { membersView } from "./members.js";
import { groupsView } from "./groups.js";
import { rulesView, ruleView } from "./rules.js";
import { webhooksView, webhookView } from "./webhooks.js";
import { SECTIONS } from "./access.js";
import { applyTheme, themeToggle } from "./theme.js";

applyTheme();
themeToggle(document.getElementById("theme-toggle"));

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const who = document.getElementById("who");

let stopView = () => {};
let signinNotice = null;

// parseHash: "#/runs/run_1?status=failed" → {parts: ["runs", "run_1"], query}.
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, qs = ""] = raw.split("?");
  return { parts: path.split("/").filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(qs) };
}

async function route() {
  stopView();
  stopView = () => {};
  if (!session.key) {
    renderSignin();
    return;
  }
  if (!session.me) {
    try {
      session.me = await get("/v1/me");
    } catch (err) {
      session.clear();
      signinNotice = err;
      renderSignin();
      return;
    }
  }
  renderHeader();
  const { parts, query } = parseHash();
  const section = parts[0] || "approvals";
  for (const a of nav.querySelectorAll("a")) {
    if (a.dataset.section === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const ctx = { main, query, me: session.me, navigate };
  let stop;
  switch (section) {
    case "approvals":
      stop = parts[1] ? approvalView(ctx, parts[1]) : approvalsView(ctx);
      break;
    case "rules":
      stop = parts[1] ? ruleView(ctx, parts[1]) : rulesView(ctx);
      break;
    case "runs":
      stop = parts[1] ? runView(ctx, parts[1]) : runsView(ctx);
      break;
    case "deployments":
      stop = deploymentsView(ctx);
      break;
    case "members":
      stop = membersView(ctx);
      break;
    case "groups":
      stop = groupsView(ctx);
      break;
    case "webhooks":
      stop = parts[1] ? webhookView(ctx, parts[1]) : webhooksView(ctx);
      break;
    default:
      replace(main, h("h1", { text: "Not found" }),
        h("p", {}, "There is no page here. ", h("a", { href: "#/approvals", text: "Go to the approvals" }), "."));
      stop = () => {};
  }
  stopView = stop || (() => {});
}

// navigate changes the route; replace=true keeps the history entry (filters).
function navigate(hash, { replace: rep = false } = {}) {
  if (rep) {
    history.replaceState(null, "", hash);
    route();
  } else {
    location.hash = hash;
  }
}

function renderHeader() {
  nav.hidden = false;
  const me = session.me;
  const allowed = SECTIONS[me.role] || ["approvals"];
  for (const a of nav.querySelectorAll("a")) a.hidden = !allowed.includes(a.dataset.section);
  const who_ = me.memberName && me.memberName !== me.keyName ? `${me.memberName}, ` : "";
  const label = me.keyName ? `${who_}${me.role} key “${me.keyName}”` : `${who_}${me.role} key`;
  replace(who,
    h("span", { class: "who__text" }, h("span", { class: "who__project", text: me.projectId }), " · ", label),
    h("button", { type: "button", class: "btn btn--quiet", text: "Sign out", on: { click: signOut } }));
}

function signOut() {
  session.clear();
  session.me = null;
  location.hash = "#/approvals";
  route();
}

function renderSignin() {
  nav.hidden = true;
  who.replaceChildren();
  const err = alertBox();
  const input = h("input", {
    id: "api-key", name: "api-key", type: "password", autocomplete: "off", spellcheck: false,
    attrs: { "aria-describedby": "api-key-help", required: true },
  });
  const button = h("button", { type: "submit", class: "btn btn--primary", text: "Sign in" });
  const form = h("form", { class: "signin", on: { submit: onSubmit } },
    h("h1", { text: "Sign in to Stead" }),
    h("label", { for: "api-key", text: "API key" }),
    input,
    h("p", { id: "api-key-help", class: "help" },
      "A project API key (stk_…) of an owner, developer, approver or viewer. ", h("code", { text: "stead dev" }),
      " prints the owner key on first start; an owner adds a member with a key on the Members page or with ", h("code", { text: "stead members add NAME --role ROLE --key" }),
      ". It is kept in this tab only (session storage) and sent only in the Authorization header."),
    err,
    button);
  replace(main, form);
  if (signinNotice) {
    showError(err, signinNotice);
    signinNotice = null;
  }
  input.focus();

  async function onSubmit(ev) {
    ev.preventDefault();
    const key = input.value.trim();
    showError(err, null);
    if (!key) {
      showError(err, { code: "invalid_argument", message: "enter an API key" });
      return;
    }
    button.disabled = true;
    try {
      const me = await get("/v1/me", undefined, { key });
      if (!["owner", "developer", "approver", "viewer"].includes(me.role)) {
        throw { code: "forbidden", message: "this is a customer token; the console needs a project API key (stk_…)" };
      }
      input.value = "";
      session.key = key;
      session.me = me;
      if (!location.hash || location.hash === "#" || location.hash.startsWith("#/signin")) {
        history.replaceState(null, "", "#/approvals");
      }
      route();
    } catch (e) {
      showError(err, e);
      input.select();
    } finally {
      button.disabled = false;
    }
  }
}

whenUnauthenticated((err) => {
  session.clear();
  session.me = null;
  signinNotice = err;
  route();
});

window.addEventListener("hashchange", route);
route();
