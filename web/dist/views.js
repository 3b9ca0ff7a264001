// @ts-check
// mqgate console: the search of a topic by store time (Messages), the
// group actions (skip the backlog, reset by time), a group's push state,
// and the checks the server makes of names and limits, made before a form
// is sent. Loaded after lib.js (el, mq, problemView…) and before app.js.
"use strict";

/** @typedef {import("../../clients/ts/src/schema").components["schemas"]} Schemas */

// Names as the broker takes them (DESIGN: topics ^[a-zA-Z0-9_-]{1,127}$
// without the reserved rmq_sys_ prefix and SCHEDULE_TOPIC_XXXX, groups
// ^[a-zA-Z0-9_-]{1,120}$, RocketMQ's current limit).
const NAME_RULES = {
  topic: { re: /^[A-Za-z0-9_-]{1,127}$/, max: 127 },
  group: { re: /^[A-Za-z0-9_-]{1,120}$/, max: 120 },
};
/** The search's bounds (server/broker browse.go: SearchMaxLimit). */
const SEARCH_MAX_LIMIT = 100;
const SEARCH_DEFAULT_LIMIT = 32;

/**
 * nameProblem says what is wrong with a topic or group name ("" when
 * nothing is), as the server would.
 * @param {"topic" | "group"} kind @param {string} v
 */
function nameProblem(kind, v) {
  if (v === "") return "";
  const rule = NAME_RULES[kind];
  if (v.length > rule.max) return "A " + kind + " name has at most " + rule.max + " characters (this one has " + v.length + ").";
  if (!rule.re.test(v)) return "A " + kind + " name has only letters, digits, _ and - (no spaces).";
  if (kind === "topic" && (v.startsWith("rmq_sys_") || v === "SCHEDULE_TOPIC_XXXX")) return v + " is reserved for system topics.";
  return "";
}

// wireNameChecks makes every input marked data-name="topic|group" refuse a
// name the server would refuse: the browser then blocks the form's submit
// and says why, before any request.
function wireNameChecks() {
  for (const node of document.querySelectorAll("input[data-name]")) {
    const input = /** @type {HTMLInputElement} */ (node);
    const kind = input.dataset.name === "group" ? "group" : "topic";
    input.maxLength = NAME_RULES[kind].max;
    input.autocomplete = "off";
    const check = () => input.setCustomValidity(nameProblem(kind, input.value.trim()));
    input.addEventListener("input", check);
    check();
  }
}

/**
 * must returns the page's element of id.
 * @param {string} id @returns {HTMLElement}
 */
function byId(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error("the page has no #" + id);
  return node;
}

// ---------- search by store time ----------

/** @typedef {NonNullable<import("../../clients/ts/src/schema").paths["/topics/{topic}/messages"]["get"]["parameters"]["query"]>} SearchQuery */

const search = {
  topic: "",
  /** @type {SearchQuery | null} the query of the listing shown */
  query: null,
  /** @type {string[]} cursors[i] fetches page i */
  cursors: [""],
  page: 0,
  next: "",
  shown: 0,
};

/**
 * searchQuery reads the search form, checking it as the server does; it
 * throws an Error that says what to fix.
 * @param {HTMLFormElement} form
 * @returns {{ topic: string, query: SearchQuery }}
 */
function searchQuery(form) {
  const v = /** @type {Record<string, string>} */ (formValues(form));
  const topic = v.topic || "";
  const problem = nameProblem("topic", topic);
  if (!topic || problem) throw new Error(problem || "Name the topic to search.");
  const from = isoTime(v.from || ""), to = isoTime(v.to || "");
  if (!from || !to) throw new Error("Give both times: stored from (inclusive) and to (exclusive).");
  if (new Date(to).getTime() <= new Date(from).getTime()) throw new Error("\"To\" must be after \"from\".");
  /** @type {SearchQuery} */
  const query = { from, to };
  const limit = v.limit === "" || v.limit === undefined ? SEARCH_DEFAULT_LIMIT : Number(v.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > SEARCH_MAX_LIMIT) throw new Error("Page size is 1 to " + SEARCH_MAX_LIMIT + ".");
  query.limit = limit;
  if (v.queueId !== "" && v.queueId !== undefined) {
    const q = Number(v.queueId);
    if (!Number.isInteger(q) || q < 0) throw new Error("Queue is a queue id, 0 or more.");
    query.queueId = q;
  }
  return { topic, query };
}

/**
 * searchError replaces what the result box shows with err.
 * @param {unknown} err
 */
function searchError(err) {
  search.query = null;
  search.next = "";
  const box = byId("search-result");
  if (signInNeeded(err)) { box.replaceChildren(); return; }
  box.replaceChildren(el("div", { class: "problem", role: "alert" }, ...problemView(err)));
  searchPager();
}

// searchPager enables the pager's buttons for the listing shown.
function searchPager() {
  const ok = search.query !== null;
  /** @type {HTMLButtonElement} */ (byId("search-prev")).disabled = !ok || search.page === 0;
  /** @type {HTMLButtonElement} */ (byId("search-next")).disabled = !ok || !search.next;
  byId("search-page").textContent = ok ? "page " + (search.page + 1) : "";
}

/**
 * searchFetch loads page (an index into search.cursors) of the listing.
 * @param {number} page
 */
async function searchFetch(page) {
  if (!search.query) return;
  const query = { ...search.query };
  if (search.cursors[page]) query.cursor = search.cursors[page];
  const box = byId("search-result");
  let r;
  try {
    r = await mq.searchMessages(search.topic, query);
  } catch (err) {
    searchError(err);
    return;
  }
  search.page = page;
  search.next = r.next || "";
  search.cursors.length = page + 1;
  if (search.next) search.cursors.push(search.next);
  search.shown = r.messages.length;
  const more = search.next ? "; more may follow (each page reads at most 1024 entries, so a page can be short)" : "";
  box.replaceChildren(
    el("p", { class: "muted", id: "search-summary" }, r.messages.length + " message(s) of " + search.topic + " on page " + (page + 1) +
      " (" + r.scanned + " entries read)" + more),
    messageTable(r.messages));
  box.dataset.count = String(r.messages.length);
  searchPager();
}

function wireSearch() {
  const form = /** @type {HTMLFormElement} */ (byId("search-form"));
  // A sensible window: the last hour.
  const now = Date.now();
  /** @type {HTMLInputElement} */ (form.elements.namedItem("from")).value = localInput(new Date(now - 3600_000).toISOString());
  /** @type {HTMLInputElement} */ (form.elements.namedItem("to")).value = localInput(new Date(now + 60_000).toISOString());
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    let q;
    try {
      q = searchQuery(form);
    } catch (err) {
      searchError(err);
      return;
    }
    search.topic = q.topic;
    search.query = q.query;
    search.cursors = [""];
    await searchFetch(0);
  });
  byId("search-prev").addEventListener("click", () => searchFetch(Math.max(0, search.page - 1)));
  byId("search-next").addEventListener("click", () => searchFetch(search.page + 1));
  searchPager();
}

// ---------- group actions ----------

/**
 * pushState is a group's push endpoint in a few words.
 * @param {Schemas["Group"]} g
 */
function pushState(g) {
  if (!g.push) return "pull";
  let host = g.push.url;
  try { host = new URL(g.push.url).host; } catch (e) { /* shown as it is */ }
  return (g.push.disabled ? "paused" + (g.push.disabledReason ? " (" + g.push.disabledReason + ")" : "") : "on") + " → " + host;
}

/**
 * groupActions is the group view's actions: skip the backlog of one topic
 * or all, reset the offsets to a store time. Their errors show in the
 * view, replacing the last one; after each, the view shows the group anew
 * (refresh).
 * @param {string} name @param {Schemas["Group"]} g @param {(name: string) => Promise<void>} refresh
 */
function groupActions(name, g, refresh) {
  const problem = el("div", { class: "problem hidden", role: "alert", id: "group-actions-problem" });
  /** @param {unknown} err */
  const fail = (err) => {
    if (signInNeeded(err)) return;
    problem.replaceChildren(...problemView(err));
    problem.classList.remove("hidden");
  };
  const topics = g.subscriptions.map((s) => s.topic);
  const topicSelect = () => el("select", { name: "topic" },
    el("option", { value: "" }, "every topic of the group"), topics.map((t) => el("option", { value: t }, t)));
  const skipTopic = /** @type {HTMLSelectElement} */ (topicSelect());
  const resetTopic = /** @type {HTMLSelectElement} */ (topicSelect());
  const resetAt = /** @type {HTMLInputElement} */ (el("input", { name: "timestamp", type: "datetime-local", step: "1", required: true,
    value: localInput(new Date(Date.now() - 3600_000).toISOString()) }));

  const skip = el("form", { class: "inline-action", id: "skip-form" },
    el("label", {}, "Skip the backlog of", skipTopic),
    el("button", { type: "submit", class: "danger" }, "Skip backlog"));
  skip.addEventListener("submit", async (/** @type {Event} */ ev) => {
    ev.preventDefault();
    const topic = skipTopic.value;
    if (!confirm("Skip the backlog of " + name + (topic ? " on " + topic : " on every topic") + "?\n\nWhat is stored now will never be delivered to it.")) return;
    try {
      const p = await mq.skipBacklog(name, topic || undefined);
      notice("Backlog of " + name + " skipped; lag now " + p.totalLag, "info");
      await refresh(name);
    } catch (err) { fail(err); }
  });
  const reset = el("form", { class: "inline-action", id: "reset-here-form" },
    el("label", {}, "Reset", resetTopic), el("label", {}, "to the first message stored at or after", resetAt),
    el("button", { type: "submit", class: "secondary" }, "Reset by time"));
  reset.addEventListener("submit", async (/** @type {Event} */ ev) => {
    ev.preventDefault();
    try {
      const timestamp = isoTime(resetAt.value);
      if (!timestamp) throw new Error("Give the time to reset to.");
      const p = await mq.resetOffset(name, { timestamp, topic: resetTopic.value || undefined });
      notice("Offsets of " + name + " reset; lag now " + p.totalLag, "info");
      await refresh(name);
    } catch (err) { fail(err); }
  });
  return el("div", { class: "group-actions" }, el("h4", {}, "Actions"), problem, skip, reset);
}

document.addEventListener("DOMContentLoaded", () => {
  wireNameChecks();
  wireSearch();
});
