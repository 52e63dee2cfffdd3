// Deployments: the versions with their bundle digests, and the latest
// deployment's agents with their tools' posture, steps and policy.

import { h, replace, alertBox, showError } from "./dom.js";
import { get } from "./api.js";
import { ago, stamp, bytes, duration, goDuration } from "./format.js";

export function deploymentsView(ctx) {
  const err = alertBox();
  const agents = h("section", { attrs: { "aria-labelledby": "agents-title" } }, h("h2", { id: "agents-title", text: "Agents" }), h("p", { class: "muted", text: "Loading…" }));
  const versions = h("section", { attrs: { "aria-labelledby": "versions-title" } }, h("h2", { id: "versions-title", text: "Versions" }), h("p", { class: "muted", text: "Loading…" }));
  replace(ctx.main, h("h1", { text: "Deployments" }), err, agents, versions);
  let stopped = false;

  Promise.all([get("/v1/agents"), get("/v1/deployments", { limit: 100 })]).then(([ag, dep]) => {
    if (stopped) return;
    if (ag.agents.length === 0) {
      replace(agents, h("h2", { id: "agents-title", text: "Agents" }),
        h("div", { class: "empty" }, h("p", { class: "empty__title", text: "Nothing is deployed yet." }),
          h("p", {}, "Deploy a folder with a stead.json and its handlers: ", h("code", { text: "stead deploy DIR" }), ".")));
    } else {
      replace(agents, h("h2", { id: "agents-title" }, `Agents of the latest deployment (version ${ag.deployment})`),
        ag.agents.map(agentCard));
    }
    if (dep.deployments.length === 0) {
      replace(versions, h("h2", { id: "versions-title", text: "Versions" }), h("p", { class: "muted", text: "No versions yet." }));
    } else {
      replace(versions, h("h2", { id: "versions-title", text: "Versions" }),
        h("ul", { class: "versions" }, dep.deployments.map((d) => versionRow(d, ag.deployment))));
    }
  }).catch((e) => {
    if (stopped) return;
    agents.replaceChildren();
    versions.replaceChildren();
    showError(err, e);
  });
  return () => { stopped = true; };
}

function versionRow(d, latest) {
  return h("li", { class: "card version", data: { version: d.version } },
    h("div", { class: "card__head" },
      h("h3", { class: "card__title", text: `Version ${d.version}` }),
      d.version === latest ? h("span", { class: "badge badge--succeeded", text: "latest" }) : null),
    h("dl", { class: "facts" },
      h("div", {}, h("dt", { text: "Digest" }), h("dd", {}, h("code", { class: "digest", text: d.digest }))),
      h("div", {}, h("dt", { text: "Bundle" }), h("dd", { text: bytes(d.bundleSize) })),
      h("div", {}, h("dt", { text: "Agents" }), h("dd", { text: d.agents.join(", ") || "—" })),
      h("div", {}, h("dt", { text: "Deployed by" }), h("dd", { text: d.createdBy })),
      h("div", {}, h("dt", { text: "Deployed" }), h("dd", {}, h("time", { attrs: { datetime: d.createdAt }, title: stamp(d.createdAt), text: `${stamp(d.createdAt)} (${ago(d.createdAt)})` })))));
}

function posture(t) {
  const tags = [
    h("span", { class: `tag tag--${t.effect}`, text: t.effect }),
    h("span", { class: `tag tag--${t.source}`, text: t.source }),
  ];
  if (t.requiresApproval) tags.push(h("span", { class: "tag tag--approval", text: "requires approval" }));
  return tags;
}

function agentCard(a) {
  return h("article", { class: "card agent", data: { agent: a.name } },
    h("div", { class: "card__head" }, h("h3", { class: "card__title", text: a.name })),
    a.description ? h("p", { text: a.description }) : null,
    h("p", { class: "small muted" }, `Approvals expire after ${duration(goDuration(a.approvalTimeout))} unless a tool says otherwise.`),
    h("h4", { text: "Tools" }),
    h("div", { class: "table-wrap", attrs: { tabindex: 0, role: "region", "aria-label": `Tools of ${a.name}` } },
      h("table", { class: "table" },
        h("thead", {}, h("tr", {}, ["Tool", "Posture", "Approval timeout", "Timeout"].map((c) => h("th", { attrs: { scope: "col" }, text: c })))),
        h("tbody", {}, a.tools.map((t) => h("tr", { data: { tool: t.name } },
          h("th", { attrs: { scope: "row" } }, h("code", { text: t.name }), t.description ? h("div", { class: "small muted", text: t.description }) : null),
          h("td", {}, posture(t)),
          h("td", { text: duration(goDuration(t.approvalTimeout)) }),
          h("td", { text: duration(t.timeoutMs) })))))),
    h("h4", { text: "Steps" }),
    h("ol", { class: "steps" }, a.steps.map((s) => h("li", {},
      h("strong", { text: s.id }), " — ", s.kind === "tool" || s.tool ? h("code", { text: s.tool }) : s.kind,
      s.input !== undefined ? h("pre", { class: "json small", text: JSON.stringify(s.input) }) : null))),
    a.policy && a.policy.length
      ? [h("h4", { text: "Policy" }), h("ul", { class: "policy" }, a.policy.map((r) => h("li", {},
        h("span", { class: `tag tag--${r.decision}`, text: r.decision }), " ", h("code", { text: r.tool }),
        r.reason ? ` — ${r.reason}` : "", r.when ? h("pre", { class: "json small", text: JSON.stringify(r.when) }) : null)))]
      : null);
}
