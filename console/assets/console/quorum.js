// Quorum: where an approval with approvers stands, in the API's terms.
// approvers has one tally per requirement ({group, min, counted, waiting,
// short}), progress says the same in words ("1 of 2 from finance — waiting
// on Bo Li, Cy Ng"), votes are the approvals counted on the current input.
// Who may vote was fixed when the approval was requested; the console only
// shows it (the API decides, and refuses with not_an_approver).

import { h } from "./dom.js";
import { ago, stamp } from "./format.js";

// hasQuorum reports whether a collects votes.
export function hasQuorum(a) {
  return Array.isArray(a.approvers) && a.approvers.length > 0;
}

const met = (t) => t.counted.length >= t.min;

function tallyState(t) {
  if (met(t)) return "met";
  return t.short ? "short" : "waiting";
}

// tallyWords: "1 of 2 from finance".
function tallyWords(t) {
  return `${t.counted.length} of ${t.min} from ${t.group}`;
}

// chip is one requirement, compact: "1/2 finance".
export function chip(t) {
  return h("span", {
    class: `chip chip--${tallyState(t)}`, data: { group: t.group, quorum: tallyState(t) },
    title: tallyWords(t), attrs: { "aria-label": tallyWords(t) },
    text: `${t.counted.length}/${t.min} ${t.group}`,
  });
}

export function chips(a) {
  return hasQuorum(a) ? a.approvers.map(chip) : [];
}

// isEligible: whether member may vote on a (counted or waiting in one of
// its requirements). Unknown (no member) counts as eligible: the API says.
export function isEligible(a, member) {
  if (!hasQuorum(a) || !member) return true;
  return a.approvers.some((t) => t.counted.concat(t.waiting).some((v) => v.member === member));
}

// hasVoted: whether member's approval of the current input is counted.
export function hasVoted(a, member) {
  return hasQuorum(a) && !!member && (a.votes || []).some((v) => v.member === member);
}

// waitingOn: the names a still waits on (of requirements not met), each once.
export function waitingOn(a) {
  const names = [];
  for (const t of a.approvers || []) {
    if (met(t)) continue;
    for (const v of t.waiting) if (!names.includes(v.name)) names.push(v.name);
  }
  return names;
}

// voteNoteText is what a voter reads after a vote that did not settle a.
export function voteNoteText(a) {
  const names = waitingOn(a);
  const short = (a.approvers || []).some((t) => t.short && !met(t));
  if (short) return "Your vote is counted; the approval still cannot be met (see above).";
  return names.length ? `Your vote is counted; waiting on ${names.join(", ")}.` : "Your vote is counted.";
}

// shortWarning says which requirements can never be met, or null.
export function shortWarning(a) {
  const short = (a.approvers || []).filter((t) => t.short && !met(t));
  if (short.length === 0) return null;
  return h("div", { class: "msg msg--error quorum__short", data: { quorum: "short" } },
    short.map((t) => h("p", {},
      h("strong", { text: `${t.min} from ${t.group}` }),
      ` cannot be met: only ${t.counted.length + t.waiting.length} eligible — deny it or let it expire.`)));
}

// progressLine is the progress in words and the warning, for the queue.
export function progressLine(a) {
  return h("div", { class: "quorum" },
    h("p", { class: "quorum__progress" }, h("span", { class: "muted", text: "Approvers: " }), h("span", { class: "quorum__text", text: a.progress })),
    shortWarning(a));
}

function names(voters, me) {
  if (voters.length === 0) return null;
  return voters.map((v, i) => [i > 0 ? ", " : null,
    h("span", { class: "voter", data: { member: v.member }, text: v.name || v.member }),
    me && v.member === me.memberId ? " (you)" : null]);
}

// detail is everything about a's quorum: the progress, each requirement
// with who was counted and who it waits on, and each vote with its time.
export function detail(a, me) {
  const votes = a.votes || [];
  const open = a.status === "pending";
  return h("section", { class: "quorum quorum--detail", attrs: { "aria-labelledby": `quorum-${a.id}` } },
    h("h3", { id: `quorum-${a.id}`, text: "Approvers" }),
    open ? h("p", { class: "quorum__progress" }, h("span", { class: "quorum__text", text: a.progress })) : null,
    open ? shortWarning(a) : null,
    h("ul", { class: "reqs" }, a.approvers.map((t) => h("li", { class: "req", data: { group: t.group } },
      h("p", { class: "req__head" }, chip(t), " ", h("strong", { text: t.group }), `: needs ${t.min} ${t.min === 1 ? "approval" : "approvals"}`),
      h("p", { class: "small req__counted" }, h("span", { class: "muted", text: "Counted: " }), names(t.counted, me) || "nobody yet"),
      open
        ? h("p", { class: "small req__waiting" }, h("span", { class: "muted", text: "Waiting on: " }),
          names(t.waiting, me) || (met(t) ? "nobody (met)" : "nobody — no eligible member is left"))
        : h("p", { class: "small req__waiting" }, h("span", { class: "muted", text: "Did not vote: " }), names(t.waiting, me) || "nobody")))),
    open ? h("p", { class: "help", text: "Who may vote was fixed when the approval was requested: later changes to a group do not change it. An edit of the input resets the votes." }) : null,
    h("h4", { text: "Votes" }),
    votes.length
      ? h("ol", { class: "votes" }, votes.map((v) => h("li", { data: { member: v.member } },
        h("strong", { text: v.name || v.member }), me && v.member === me.memberId ? " (you)" : null, " approved ",
        h("time", { attrs: { datetime: v.at }, title: stamp(v.at), text: `${stamp(v.at)} (${ago(v.at)})` }))))
      : h("p", { class: "muted small", text: "No votes yet on this input." }));
}
