// @ts-check
// mqgate console: the SQS view — the queues of the SQS-compatible endpoint
// (--sqs-listen) by their SQS names, with the topic and group that hold
// each (GET /v1/sqs/queues) — and the badges that mark, in the topics and
// groups lists, those that back an SQS queue. Loaded after lib.js and
// views.js (el, mq, problemView, signInNeeded…) and before app.js.
"use strict";

/** @typedef {import("../../clients/ts/src/schema").components["schemas"]["SQSQueue"]} SQSQueue */
/** @typedef {import("../../clients/ts/src/schema").components["schemas"]["SQSQueueList"]} SQSQueueList */

// A prefix as the server takes it (api/sqs.go: an SQS queue name's
// characters, at most 80 of them, as QueueNamePrefix).
const SQS_PREFIX_MAX = 80;
const SQS_PREFIX_RE = /^[A-Za-z0-9_.-]*$/;

// The attributes of a queue's approximate counts, shown when listed.
const SQS_COUNTS = [
  ["ApproximateNumberOfMessages", "visible"],
  ["ApproximateNumberOfMessagesNotVisible", "in flight"],
  ["ApproximateNumberOfMessagesDelayed", "delayed"],
];

/**
 * sqsPrefixProblem says what is wrong with a prefix ("" when nothing is),
 * as the server would.
 * @param {string} v
 */
function sqsPrefixProblem(v) {
  if (v.length > SQS_PREFIX_MAX) return "A prefix has at most " + SQS_PREFIX_MAX + " characters (this one has " + v.length + ").";
  if (!SQS_PREFIX_RE.test(v)) return "A prefix has only letters, digits, _, - and . (an SQS queue name's characters; no spaces).";
  return "";
}

/**
 * sqsElement returns the page's element of id.
 * @param {string} id @returns {HTMLElement}
 */
function sqsElement(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error("the page has no #" + id);
  return node;
}

/**
 * sqsBackers maps each topic and group that holds an SQS queue to the
 * queue's name: one call, made once per load of the topics or groups view.
 * Without the endpoint, or without the right to list it (403), or on any
 * other error, nothing is marked.
 * @returns {Promise<{ topics: Map<string, string>, groups: Map<string, string> }>}
 */
async function sqsBackers() {
  const out = { topics: new Map(), groups: new Map() };
  try {
    const r = await mq.listSQSQueues();
    for (const q of r.queues) {
      out.topics.set(q.topic, q.name);
      out.groups.set(q.group, q.name);
    }
  } catch (err) {
    // A 401 shows the sign-in form (api.js); anything else leaves the
    // lists unmarked.
  }
  return out;
}

/**
 * sqsBadge marks a topic or group that backs an SQS queue ("" when it
 * backs none).
 * @param {string | undefined} queue
 */
function sqsBadge(queue) {
  if (!queue) return "";
  return el("button", { class: "pill sqs", type: "button", title: "holds the SQS queue " + queue + " (open the SQS view)",
    onclick: (/** @type {Event} */ ev) => {
      ev.stopPropagation();
      showTab("sqs", "?prefix=" + encodeURIComponent(queue));
    } }, "SQS " + queue);
}

/**
 * sqsOpenTopic shows the topics view with name's queues.
 * @param {string} name
 */
async function sqsOpenTopic(name) {
  showTab("topics");
  let st = null;
  try {
    st = await mq.topicStatus(name);
  } catch (err) {
    if (signInNeeded(err)) return;
  }
  showTopic(name, st);
  sqsElement("topic-detail").scrollIntoView({ block: "nearest" });
}

/**
 * sqsOpenGroup shows the groups view with name's detail.
 * @param {string} name
 */
async function sqsOpenGroup(name) {
  showTab("groups");
  await showGroup(name);
  sqsElement("group-detail").scrollIntoView({ block: "nearest" });
}

/**
 * sqsLink is a link to another view of the console.
 * @param {string} text @param {string} cls @param {() => unknown} open
 */
function sqsLink(text, cls, open) {
  return el("button", { type: "button", class: "link " + cls, onclick: () => { open(); } }, text);
}

/**
 * sqsCounts is a queue's approximate counts: those its attributes hold,
 * or else its group's progress (the lag waits, what is leased is in
 * flight), filled in when it arrives.
 * @param {SQSQueue} q
 */
function sqsCounts(q) {
  const parts = SQS_COUNTS.filter(([k]) => q.attributes[k] !== undefined).map(([k, label]) => q.attributes[k] + " " + label);
  if (parts.length) return parts.join(", ");
  const cell = el("span", { class: "muted" }, "…");
  mq.progress(q.group).then((p) => {
    const inFlight = p.queues.reduce((n, x) => n + x.inFlight, 0);
    const delayed = p.delayed && typeof p.delayed.total === "number" ? p.delayed.total : 0;
    cell.className = "";
    cell.title = "the lag and leases of group " + q.group;
    cell.textContent = p.totalLag + (p.totalLagIsLowerBound ? "+" : "") + " waiting" + (delayed ? " (" + delayed + " of them delayed)" : "") + ", " + inFlight + " in flight";
  }, () => { cell.textContent = "—"; });
  return cell;
}

/**
 * sqsRedrive is a queue's redrive: where its dead letters go, after how
 * many receives, and the queues that send theirs to it.
 * @param {SQSQueue} q
 */
function sqsRedrive(q) {
  const parts = [];
  if (q.deadLetterQueue) {
    parts.push(el("div", { class: "redrive-to" }, "→ ", el("strong", {}, q.deadLetterQueue),
      q.maxReceiveCount ? " after " + q.maxReceiveCount + " receive" + (q.maxReceiveCount === 1 ? "" : "s") : ""));
  }
  if (q.deadLetterSourceQueues.length) {
    parts.push(el("div", { class: "redrive-from" }, "dead letters of ", q.deadLetterSourceQueues.join(", ")));
  }
  return parts.length ? parts : "—";
}

/**
 * sqsTags is a queue's tags as key=value pills.
 * @param {SQSQueue} q
 */
function sqsTags(q) {
  const tags = Object.entries(q.tags).sort(([a], [b]) => a.localeCompare(b));
  if (!tags.length) return "—";
  return tags.map(([k, v]) => el("span", { class: "tag" }, v === "" ? k : k + "=" + v));
}

/**
 * sqsShow fills the view with a listing.
 * @param {SQSQueueList} r @param {string} prefix
 */
function sqsShow(r, prefix) {
  const box = sqsElement("sqs-result");
  const state = sqsElement("sqs-state");
  box.dataset.enabled = String(r.enabled);
  if (!r.enabled) {
    state.replaceChildren(el("div", { class: "off-state", id: "sqs-off" },
      el("strong", {}, "The SQS endpoint is off."),
      el("p", {}, "Start mqgate with ", el("code", {}, "--sqs-listen 127.0.0.1:9324"), " (or MQGATE_SQS_LISTEN) to serve the SQS API; " +
        "the AWS SDKs and the AWS CLI then use it as their endpoint URL, and their queues show here.")));
    box.replaceChildren();
    box.dataset.count = "0";
    return;
  }
  state.replaceChildren(el("p", { class: "muted", id: "sqs-endpoint" }, "Endpoint ", el("code", {}, r.endpoint || "?"),
    " — " + r.queues.length + " queue" + (r.queues.length === 1 ? "" : "s") + (prefix ? " named " + prefix + "…" : "")));
  box.dataset.count = String(r.queues.length);
  if (!r.queues.length) {
    box.replaceChildren(el("p", { class: "muted" }, prefix ? "No queue's name starts with " + prefix + "." : "No queues yet (CreateQueue makes one)."));
    return;
  }
  box.replaceChildren(el("div", { class: "scroll-x" }, el("table", { id: "sqs-list" },
    el("thead", {}, el("tr", {}, ["Queue", "Held by", "Messages (approx.)", "Redrive", "Tags", "URL"].map((h) => el("th", {}, h)))),
    el("tbody", {}, r.queues.map((q) => el("tr", { "data-queue": q.name },
      el("td", { class: "sqs-name", "data-label": "Queue" }, el("strong", {}, q.name), q.fifo ? el("span", { class: "pill fifo" }, "FIFO") : null,
        el("div", { class: "muted small", title: "created " + fmtTime(q.createdAt) + ", changed " + fmtTime(q.lastModifiedAt) }, q.arn)),
      el("td", { class: "sqs-map", "data-label": "Held by" },
        el("div", {}, "topic ", sqsLink(q.topic, "sqs-topic", () => sqsOpenTopic(q.topic))),
        el("div", {}, "group ", sqsLink(q.group, "sqs-group", () => sqsOpenGroup(q.group)))),
      el("td", { class: "sqs-counts", "data-label": "Messages" }, sqsCounts(q)),
      el("td", { class: "sqs-redrive", "data-label": "Redrive" }, sqsRedrive(q)),
      el("td", { class: "sqs-tags", "data-label": "Tags" }, sqsTags(q)),
      el("td", { class: "sqs-url", "data-label": "URL" }, el("code", {}, q.url))))))));
}

/**
 * sqsError replaces what the view shows with err.
 * @param {unknown} err
 */
function sqsError(err) {
  sqsShowProblem(signInNeeded(err) ? [] : [el("div", { class: "problem", role: "alert" }, ...problemView(err))]);
}

/**
 * sqsShowProblem replaces the listing (and the endpoint's line) with nodes.
 * @param {Node[]} nodes
 */
function sqsShowProblem(nodes) {
  const box = sqsElement("sqs-result");
  sqsElement("sqs-state").replaceChildren();
  box.dataset.count = "";
  delete box.dataset.enabled;
  box.replaceChildren(...nodes);
}

/**
 * sqsRefused shows why a prefix is not sent, replacing what the view
 * showed.
 * @param {string} why
 */
function sqsRefused(why) {
  sqsShowProblem([el("div", { class: "problem", role: "alert" },
    el("strong", {}, "Not sent: the server would refuse this prefix"), el("div", { class: "detail" }, why))]);
}

/**
 * sqsLoad lists the queues whose names start with prefix, checking it as
 * the server does first; an error replaces the listing shown before.
 * @param {string} prefix
 */
async function sqsLoad(prefix) {
  const input = /** @type {HTMLInputElement} */ (sqsElement("sqs-prefix"));
  input.value = prefix;
  input.setCustomValidity(sqsPrefixProblem(prefix));
  const problem = sqsPrefixProblem(prefix);
  if (problem) { sqsRefused(problem); return; }
  let r;
  try {
    r = await mq.listSQSQueues(prefix || undefined);
  } catch (err) {
    sqsError(err);
    return;
  }
  sqsShow(r, prefix);
}

// The view's route is "?prefix=…" (#sqs?prefix=orders).
loaders.sqs = async (/** @type {string | undefined} */ route) => {
  const prefix = new URLSearchParams((route || "").replace(/^\?/, "")).get("prefix") || "";
  await sqsLoad(prefix);
};

function wireSQS() {
  const form = /** @type {HTMLFormElement} */ (sqsElement("sqs-form"));
  const input = /** @type {HTMLInputElement} */ (sqsElement("sqs-prefix"));
  input.maxLength = SQS_PREFIX_MAX;
  input.autocomplete = "off";
  input.addEventListener("input", () => input.setCustomValidity(sqsPrefixProblem(input.value.trim())));
  // The browser blocks a submit while the prefix is refused (and says
  // why): nothing is sent.
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const prefix = input.value.trim();
    showTab("sqs", prefix ? "?prefix=" + encodeURIComponent(prefix) : undefined);
  });
  sqsElement("sqs-refresh").addEventListener("click", () => {
    const prefix = input.value.trim();
    showTab("sqs", prefix ? "?prefix=" + encodeURIComponent(prefix) : undefined);
  });
}

document.addEventListener("DOMContentLoaded", wireSQS);
