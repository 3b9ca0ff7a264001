// mqgate console: the overview, topics, groups and consume tabs, and the start-up.
// lib.js (helpers, sign-in, the API client, tabs), dlq-timers.js, views.js
// and sqs.js load first.
"use strict";

// ---------- health ----------

async function health() {
  const badge = document.getElementById("health");
  try {
    const res = await fetch("../readyz", { headers: { Accept: "application/json" } });
    badge.textContent = res.ok ? "ready" : "not ready";
    badge.className = "badge " + (res.ok ? "ok" : "bad");
  } catch (e) {
    badge.textContent = "unreachable";
    badge.className = "badge bad";
  }
}

// ---------- overview ----------

// groupProgress loads every group's progress (null: not known).
async function groupProgress(groups) {
  const progress = {};
  await Promise.all(groups.map(async (g) => {
    try {
      progress[g.name] = await mq.progress(g.name);
    } catch (e) {
      if (signInNeeded(e)) throw e;
      progress[g.name] = null;
    }
  }));
  return { progress };
}

// topicStatuses loads each topic's queues (GET /topics/{topic}/status):
// the max offset of a topic is the sum over its own queues, whether or
// not a group consumes it (null: not known).
async function topicStatuses(topics) {
  const status = {};
  await Promise.all(topics.map(async (t) => {
    try {
      status[t.name] = await mq.topicStatus(t.name);
    } catch (e) {
      if (signInNeeded(e)) throw e;
      status[t.name] = null;
    }
  }));
  return status;
}

loaders.overview = async () => {
  health();
  startLive();
  const status = document.getElementById("status");
  try {
    const s = await mq.brokerStatus();
    const cards = [
      ["Flush mode", s.flushMode], ["Store size", fmtBytes(s.storeBytes)], ["Uptime", fmtDuration(s.uptimeMs)],
      ["CommitLog min offset", s.commitLogMinOffset], ["CommitLog max offset", s.commitLogMaxOffset],
    ];
    status.replaceChildren(...cards.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, v))));
    renderScheduler(s);
  } catch (err) {
    status.replaceChildren(el("div", {}, el("dt", {}, "Broker status"), el("dd", {}, err.message)));
    document.getElementById("scheduler").replaceChildren();
    fillTable(document.getElementById("delay-levels"), []);
  }
  const [topics, groups] = await Promise.all([mq.listTopics(), mq.listGroups()]);
  const [{ progress }, statuses] = await Promise.all([groupProgress(groups.groups), topicStatuses(topics.topics)]);
  fillTable(document.getElementById("overview-topics"), topics.topics.map((t) => {
    const st = statuses[t.name];
    const maxSum = st ? st.queues.reduce((n, q) => n + q.maxOffset, 0) : "unknown";
    return el("tr", {}, el("td", {}, t.name), el("td", { class: "num" }, t.queues),
      el("td", { class: "num" }, maxSum), el("td", { class: "num" }, st ? st.messages : "unknown"), el("td", {}, t.perm));
  }));
  fillTable(document.getElementById("overview-groups"), groups.groups.map((g) => {
    const p = progress[g.name];
    const inFlight = p ? p.queues.reduce((n, q) => n + q.inFlight, 0) : "unknown";
    return el("tr", {}, el("td", {}, g.name), el("td", {}, g.consumeMode),
      el("td", { class: "num" }, p ? p.totalLag : "unknown"), el("td", { class: "num" }, inFlight));
  }));
};

// renderScheduler shows the delay scheduler: lateness, deliveries and
// each level's position (offset) against its queue's end (maxOffset).
function renderScheduler(s) {
  const cards = [
    ["Scheduled (since start)", s.scheduledTotal === undefined ? "—" : s.scheduledTotal],
    ["Lateness p50", fmtMs(s.schedulerLatenessP50Ms)], ["Lateness p99", fmtMs(s.schedulerLatenessP99Ms)],
    ["Lateness max", fmtMs(s.schedulerLatenessMaxMs)],
    ["Backlog (all levels)", (s.delayLevels || []).reduce((n, l) => n + l.backlog, 0)],
    ["Timers pending", s.timersPending === undefined ? "—" : s.timersPending],
    ["Next timer", s.nextTimerAt ? fmtDue(s.nextTimerAt) : "—"],
  ];
  document.getElementById("scheduler").replaceChildren(...cards.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, v))));
  fillTable(document.getElementById("delay-levels"), (s.delayLevels || []).map((l) => el("tr", { class: l.backlog ? "busy" : undefined },
    el("td", { class: "num" }, l.level), el("td", { class: "num", title: l.delayMs + " ms" }, fmtDelay(l.delayMs)),
    el("td", { class: "num" }, l.offset), el("td", { class: "num" }, l.maxOffset),
    el("td", { class: "num" + (l.backlog ? " warn" : "") }, l.backlog), el("td", {}, fmtDue(l.nextDueAt)))));
}

// ---------- topics ----------

loaders.topics = async () => {
  // The topics that hold an SQS queue carry its name (sqs.js).
  const [{ topics }, sqs] = await Promise.all([mq.listTopics(), sqsBackers()]);
  const statuses = await topicStatuses(topics);
  // A detail already shown is drawn again from the statuses just loaded
  // (and goes with its topic).
  const detail = document.getElementById("topic-detail");
  const shown = detail.dataset.topic;
  if (shown && topics.some((t) => t.name === shown)) showTopic(shown, statuses[shown]);
  else if (shown) { delete detail.dataset.topic; detail.replaceChildren(); }
  fillTable(document.getElementById("topic-list"), topics.map((t) => el("tr", { class: "clickable", "data-topic": t.name, onclick: guarded(() => openTopic(t.name)) },
    el("td", {}, t.name, sqsBadge(sqs.topics.get(t.name))), el("td", { class: "num" }, t.queues), el("td", { class: "num" }, t.retentionHours),
    el("td", { class: "num" }, statuses[t.name] ? statuses[t.name].messages : "unknown"),
    el("td", {}, t.perm), el("td", {}, fmtTime(t.createdAt)),
    el("td", {}, el("button", { class: "danger", onclick: guarded(async (ev) => {
      ev.stopPropagation(); // not a click on the row: the topic is not opened
      if (!confirm("Delete topic " + t.name + "?")) return;
      await mq.deleteTopic(t.name);
      notice("Topic " + t.name + " deleted", "info");
      await loaders.topics();
    }) }, "Delete")))));
};

// openTopic loads a topic's status when its row is clicked: the row may
// have been drawn before the latest sends, so its own status is not used.
let topicOpened = 0;
async function openTopic(name) {
  const seq = ++topicOpened;
  const [st] = Object.values(await topicStatuses([{ name }]));
  if (seq === topicOpened) showTopic(name, st); // not a slower answer to an earlier click
}

// showTopic shows a topic's queues: min and max offsets, newest store time.
function showTopic(name, st) {
  const box = document.getElementById("topic-detail");
  box.dataset.topic = name;
  if (!st) { box.replaceChildren(el("p", { class: "muted" }, "The status of " + name + " is unknown.")); return; }
  box.replaceChildren(el("h3", {}, "Queues of " + name + " (" + st.messages + " messages retained)"),
    el("div", { class: "scroll-x" }, el("table", { id: "topic-queues", class: "compact" },
      el("thead", {}, el("tr", {}, ["Queue", "Min offset", "Max offset", "Messages", "Last stored"].map((h) => el("th", {}, h)))),
      el("tbody", {}, st.queues.map((q) => el("tr", {}, el("td", { class: "num" }, q.queueId), el("td", { class: "num" }, q.minOffset),
        el("td", { class: "num" }, q.maxOffset), el("td", { class: "num" }, q.maxOffset - q.minOffset), el("td", {}, fmtTime(q.lastStoredAt))))))));
}

function messageTable(messages) {
  if (!messages.length) return el("p", { class: "muted" }, "No messages.");
  return el("div", { class: "scroll-x" }, el("table", {},
    el("thead", {}, el("tr", {}, ["Offset", "Message id", "Tag", "Keys", "Stored", "Body"].map((h) => el("th", {}, h)))),
    el("tbody", {}, messages.map((m) => el("tr", {},
      el("td", { class: "num" }, m.queueId + ":" + m.queueOffset),
      el("td", { class: "id" }, el("button", { class: "link", title: "details and delivery history", onclick: () => showTab("messages", m.messageId) }, m.messageId)),
      el("td", {}, m.tag || ""), el("td", {}, (m.keys || []).join(", ")), el("td", {}, fmtTime(m.storedAt)),
      el("td", {}, el("pre", { class: "body" }, bodyText(m))))))));
}

// ---------- message detail ----------

// traceDetail is the facts of one trace event worth a column.
function traceDetail(ev) {
  const parts = [];
  if (ev.group) parts.push("group " + ev.group);
  if (ev.clientId) parts.push("client " + ev.clientId);
  if (ev.attempt) parts.push("attempt " + ev.attempt);
  if (ev.leaseUntil) parts.push("lease until " + fmtTime(ev.leaseUntil));
  if (ev.delayLevel !== undefined) parts.push("level " + ev.delayLevel);
  if (ev.delayMs) parts.push("delay " + fmtDelay(ev.delayMs));
  if (ev.dueAt) parts.push("due " + fmtTime(ev.dueAt));
  if (ev.httpStatus) parts.push("HTTP " + ev.httpStatus);
  if (ev.result) parts.push(ev.result);
  if (ev.retryMessageId) parts.push("retry copy " + ev.retryMessageId);
  if (ev.deadLetterId) parts.push("dead letter " + ev.deadLetterId);
  if (ev.count) parts.push(ev.count + " events");
  return parts.join(" · ");
}

// showMessage shows one message with its delivery history
// (GET /messages/{id} and /messages/{id}/trace); an error replaces what
// was shown before.
async function showMessage(id) {
  const box = document.getElementById("message-detail");
  document.querySelector("#byid-form [name=id]").value = id;
  box.replaceChildren(el("p", { class: "muted" }, "Loading " + id + " …"));
  let m, trace;
  try {
    [m, trace] = await Promise.all([mq.getMessage(id), mq.messageTrace(id)]);
  } catch (err) {
    box.replaceChildren(el("div", { class: "problem", role: "alert" }, ...problemView(err)));
    if (signInNeeded(err)) box.replaceChildren();
    return;
  }
  const facts = [["Message id", m.messageId], ["Topic", m.topic], ["Queue", m.queueId + " @ " + m.queueOffset], ["Tag", m.tag || "—"],
    ["Keys", (m.keys || []).join(", ") || "—"], ["Stored", fmtTime(m.storedAt)], ["Reconsumed", m.reconsumeTimes]];
  if (m.properties) for (const [k, v] of Object.entries(m.properties)) facts.push(["property " + k, v]);
  const notes = [];
  if (trace.truncated) notes.push("the history is longer than shown");
  if (trace.partial) notes.push("part of the history could not be read");
  if (trace.droppedEvents) notes.push(trace.droppedEvents + " push outcomes were dropped");
  box.replaceChildren(el("div", { class: "panel detail-panel" },
    el("h2", {}, "Message " + m.messageId),
    el("dl", { class: "facts full" }, facts.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, String(v))))),
    el("pre", { class: "body full" }, bodyText(m)),
    el("h3", { class: "full" }, "Delivery history"),
    notes.length ? el("p", { class: "muted full" }, notes.join("; ")) : null,
    el("div", { class: "scroll-x full" }, el("table", { id: "trace-events", class: "compact" },
      el("thead", {}, el("tr", {}, ["When", "Event", "Message", "Where", "Details", "Reason"].map((h) => el("th", {}, h)))),
      el("tbody", {}, trace.events.length ? trace.events.map((ev) => el("tr", { "data-type": ev.type },
        el("td", { class: "time" }, fmtStamp(ev.at)), el("td", {}, el("span", { class: "pill " + ev.type }, ev.type)),
        el("td", { class: "id" }, ev.messageId || ""), el("td", {}, ev.topic ? ev.topic + (ev.queueId !== undefined ? " q" + ev.queueId + "@" + ev.queueOffset : "") : ""),
        el("td", {}, traceDetail(ev)), el("td", { class: "reason" }, ev.reason || "")))
        : [el("tr", {}, el("td", { colspan: 6, class: "muted" }, "no events"))])))));
}

loaders.messages = async (route) => {
  if (route && /^[0-9A-Fa-f]{32}$/.test(route)) await showMessage(route);
};

function bodyText(m) {
  const text = m.bodyEncoding === "base64" ? "[base64] " + m.body : m.body;
  return text.length > 2000 ? text.slice(0, 2000) + " …" : text;
}

// ---------- groups ----------

loaders.groups = async () => {
  // The groups that hold an SQS queue carry its name (sqs.js).
  const [{ groups }, sqs] = await Promise.all([mq.listGroups(), sqsBackers()]);
  const { progress } = await groupProgress(groups);
  fillTable(document.getElementById("group-list"), groups.map((g) => el("tr", { class: "clickable", "data-group": g.name, onclick: guarded(() => showGroup(g.name)) },
    el("td", {}, g.name, sqsBadge(sqs.groups.get(g.name))), el("td", {}, g.consumeMode), el("td", {}, g.orderly ? "yes" : "no"),
    el("td", { class: "num" }, g.retryMaxTimes),
    el("td", {}, g.subscriptions.map((s) => s.topic + (s.tagExpression && s.tagExpression !== "*" ? " [" + s.tagExpression + "]" : "") + (s.sql ? " where " + s.sql : "")).join(", ")),
    el("td", { class: "push" }, pushState(g)),
    el("td", { class: "num" }, progress[g.name] ? progress[g.name].totalLag : "unknown"),
    el("td", { class: "actions" }, el("button", { class: "secondary", onclick: (ev) => {
      ev.stopPropagation();
      showTab("dlq", enc(g.name));
    } }, "Dead letters"), el("button", { class: "danger", onclick: guarded(async (ev) => {
      ev.stopPropagation();
      if (!confirm("Delete group " + g.name + "?")) return;
      await mq.deleteGroup(g.name);
      notice("Group " + g.name + " deleted", "info");
      await loaders.groups();
    }) }, "Delete")))));
};

// levelCount is a LevelBacklog's count: "unknown" (or "≥ n") when it
// could not be counted.
function levelCount(l) {
  if (l.count !== undefined && l.count !== null) return String(l.count);
  return l.atLeast !== undefined && l.atLeast !== null ? "≥ " + l.atLeast : "unknown";
}

function backlogText(b) {
  const total = b.total === undefined || b.total === null ? "unknown" : b.total;
  const levels = (b.byLevel || []).map((l) => "L" + l.level + " (" + fmtDelay(l.delayMs) + "): " + levelCount(l)).join(", ");
  return total + (levels ? " — " + levels : "") + (b.timers ? "; " + b.timers + " on timers" : "");
}

// progressTable is a group's (or an instance's) progress per queue.
function progressTable(queues) {
  return el("div", { class: "scroll-x" }, el("table", {},
    el("thead", {}, el("tr", {}, ["Topic", "Queue", "Broker offset", "Consumer offset", "Lag", "In flight", "Last stored"].map((h) => el("th", {}, h)))),
    el("tbody", {}, queues.length ? queues.map((q) => el("tr", {},
      el("td", {}, q.topic), el("td", { class: "num" }, q.queueId === -1 ? "retry" : q.queueId), el("td", { class: "num" }, q.brokerOffset),
      el("td", { class: "num" }, q.consumerOffset), el("td", { class: "num" }, q.lag + (q.lagIsLowerBound ? "+" : "")),
      el("td", { class: "num" }, q.inFlight), el("td", {}, fmtTime(q.lastStoredAt))))
      : [el("tr", {}, el("td", { colspan: 7, class: "muted" }, "none"))])));
}

// showGroup shows a group's progress, retry and delayed backlog by level,
// its consumer instances (broadcasting) and its push endpoint.
async function showGroup(name) {
  const box = document.getElementById("group-detail");
  let p, g;
  try {
    [p, g] = await Promise.all([mq.progress(name), mq.getGroup(name)]);
  } catch (err) {
    box.replaceChildren(signInNeeded(err) ? "" : el("div", { class: "problem", role: "alert" }, ...problemView(err)));
    return;
  }
  const facts = [["Total lag", p.totalLag + (p.totalLagIsLowerBound ? " (at least)" : "")],
    ["Retry backlog", backlogText(p.retry)], ["Delayed backlog", backlogText(p.delayed)]];
  if (g.push) {
    facts.push(["Push endpoint", g.push.url], ["Push state", (g.push.disabled ? "paused" + (g.push.disabledReason ? " (" + g.push.disabledReason + ")" : "") : "delivering") +
      ", " + g.push.mode + ", " + g.push.maxConcurrency + " concurrent, timeout " + fmtDelay(g.push.timeoutMs)]);
  } else facts.push(["Push endpoint", "none (pull)"]);
  const parts = [el("h3", {}, "Group " + name),
    el("dl", { class: "facts" }, facts.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, String(v))))),
    el("h4", {}, "Progress per queue"), progressTable(p.queues)];
  if (p.instances && p.instances.length) {
    parts.push(el("h4", {}, "Consumer instances"), el("div", { class: "scroll-x" }, el("table", { id: "group-instances" },
      el("thead", {}, el("tr", {}, ["Client id", "Last seen", "Active requests", "Forgotten at", "Lag"].map((h) => el("th", {}, h)))),
      el("tbody", {}, p.instances.map((i) => el("tr", {}, el("td", {}, i.clientId), el("td", {}, fmtTime(i.lastSeenAt)),
        el("td", { class: "num" }, i.active), el("td", {}, i.forgetAt ? fmtTime(i.forgetAt) : "—"),
        el("td", { class: "num" }, i.totalLag + (i.totalLagIsLowerBound ? "+" : ""))))))));
  }
  if (p.notes && p.notes.length) parts.push(el("p", { class: "muted" }, p.notes.join(" ")));
  // After an action the list's lag and this view are shown anew.
  parts.push(groupActions(name, g, async (n) => { await loaders.groups(); await showGroup(n); }));
  box.replaceChildren(...parts);
  document.querySelector("#reset-form [name=group]").value = name;
}

// ---------- consume ----------

let leased = [];

function renderLeased() {
  const box = document.getElementById("pulled");
  if (!leased.length) { box.replaceChildren(el("p", { class: "muted" }, "Nothing leased.")); return; }
  box.replaceChildren(...leased.map((m) => {
    const delay = el("input", { type: "number", min: "-1", max: "18", value: "0", title: "delay level (-1 = DLQ)" });
    const lease = el("input", { type: "number", min: "0", value: "30000", title: "invisible ms" });
    return el("div", { class: "msg" },
      el("header", {}, el("strong", {}, m.messageId), el("span", { class: "meta" }, m.topic + " q" + m.queueId + "@" + m.queueOffset),
        el("span", { class: "meta" }, "reconsumed " + m.reconsumeTimes + "×"), m.tag ? el("span", { class: "meta" }, "tag " + m.tag) : null,
        m.state ? el("span", { class: "status " + m.state }, m.state) : null),
      el("pre", { class: "body" }, bodyText(m)),
      m.properties && Object.keys(m.properties).length ? el("div", { class: "meta" }, "properties: " + JSON.stringify(m.properties)) : null,
      el("div", { class: "actions" },
        el("button", { onclick: guarded(() => settle("ack", [m])) }, "Ack"),
        el("button", { class: "secondary", onclick: guarded(() => settle("nack", [m], int(delay.value))) }, "Nack"), delay,
        el("button", { class: "secondary", onclick: guarded(() => settle("leases", [m], int(lease.value))) }, "Set lease"), lease));
  }));
}

async function settle(kind, msgs, arg) {
  const group = document.querySelector("#pull-form [name=group]").value.trim();
  let body;
  if (kind === "ack") body = { receipts: msgs.map((m) => m.receipt) };
  else if (kind === "nack") body = { items: msgs.map((m) => ({ receipt: m.receipt, delayLevel: arg || 0, reason: "nacked from console" })) };
  else body = { items: msgs.map((m) => ({ receipt: m.receipt, invisibleMs: arg || 0 })) };
  const { results } = kind === "ack" ? await mq.ack(group, body.receipts) : kind === "nack" ? await mq.nack(group, body.items) : await mq.leases(group, body.items);
  results.forEach((r, i) => {
    const m = msgs[i];
    if (r.newReceipt) m.receipt = r.newReceipt;
    m.state = r.status === "ok" ? (kind === "leases" ? "ok" : kind + "ed") : r.status;
  });
  if (kind !== "leases") leased = leased.filter((m) => !(msgs.includes(m) && m.state !== "expired" && m.state !== "invalid"));
  renderLeased();
  notice(kind + ": " + results.map((r) => r.status).join(", "), "info");
}

// ---------- wiring ----------

// route shows the tab the location hash names: "#tab" or "#tab/rest".
function route() {
  const hash = location.hash.slice(1);
  const name = hash.split(/[/?]/)[0];
  const rest = hash.slice(name.length);
  const known = [...document.querySelectorAll("section.tab")].some((s) => s.id === name);
  if (!known) { showTab("overview"); return; }
  showTab(name, rest ? rest.replace(/^\//, "") : undefined);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  document.getElementById("overview-refresh").addEventListener("click", guarded(loaders.overview));
  document.getElementById("topics-refresh").addEventListener("click", guarded(loaders.topics));
  document.getElementById("groups-refresh").addEventListener("click", guarded(loaders.groups));

  document.getElementById("topic-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const t = await mq.putTopic(v.name, { queues: int(v.queues), retentionHours: int(v.retentionHours), perm: v.perm || undefined });
    notice("Topic " + t.name + " saved (" + t.queues + " queues)", "info");
    await loaders.topics();
  }));

  document.getElementById("browse-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const r = await mq.readQueue(v.topic, int(v.queueId), int(v.offset || "0"), int(v.max || "32"));
    document.getElementById("browse-result").replaceChildren(el("p", { class: "muted" }, "next offset " + r.nextOffset), messageTable(r.messages));
    ev.target.querySelector("[name=offset]").value = r.nextOffset;
  }));

  // The group form creates a group with PUT, and changes an existing one
  // with a merge patch of only the fields filled in, so that what the form
  // does not show (a push endpoint, a retry policy left blank) is kept.
  document.getElementById("group-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const body = { consumeMode: v.consumeMode || undefined, retryMaxTimes: int(v.retryMaxTimes), invisibleMs: int(v.invisibleMs), consumeFrom: v.consumeFrom || undefined };
    if (v.topic) body.subscriptions = [{ topic: v.topic, tagExpression: v.tagExpression || undefined, sql: v.sql || undefined }];
    if (v.backoff) {
      body.retryPolicy = { backoff: v.backoff, initialMs: int(v.initialMs), maxMs: int(v.maxMs), jitter: v.jitter === "" ? undefined : Number(v.jitter) };
    }
    let exists = true;
    try {
      await mq.getGroup(v.name);
    } catch (e) {
      if (!mq.isProblem(e, 404)) throw e;
      exists = false;
    }
    let g;
    if (exists) {
      body.orderly = v.orderly || undefined;
      g = await mq.patchGroup(v.name, body);
    } else {
      body.orderly = v.orderly;
      g = await mq.putGroup(v.name, body);
    }
    notice("Group " + g.name + (exists ? " updated" : " created") + " (retry " + g.retryPolicy.backoff + ", from " + g.consumeFrom + ")", "info");
    await loaders.groups();
  }));

  document.getElementById("reset-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const p = await mq.resetOffset(v.group, { timestamp: new Date(v.timestamp).toISOString(), topic: v.topic || undefined });
    notice("Offsets of " + v.group + " reset; lag now " + p.totalLag, "info");
    await showGroup(v.group);
  }));

  document.getElementById("send-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const properties = {};
    for (const line of v.properties.split("\n")) {
      const i = line.indexOf("=");
      if (i > 0) properties[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    }
    const msg = {
      body: v.body, bodyEncoding: v.base64 ? "base64" : undefined, tag: v.tag || undefined,
      keys: v.keys ? v.keys.split(",").map((k) => k.trim()).filter(Boolean) : undefined,
      properties: Object.keys(properties).length ? properties : undefined, shardingKey: v.shardingKey || undefined,
      delayLevel: int(v.delayLevel) || undefined, delayMs: int(v.delayMs) || undefined,
    };
    const r = await mq.send(v.topic, msg, v.idempotencyKey || undefined);
    document.getElementById("send-result").textContent = JSON.stringify(r, null, 2);
    notice("Sent " + r.results.length + " message(s)", "info");
  }));

  document.getElementById("pull-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const button = ev.target.querySelector("button");
    button.disabled = true;
    try {
      const r = await mq.pull(v.group, v.topic, {
        maxMessages: int(v.maxMessages), waitMs: int(v.waitMs), invisibleMs: int(v.invisibleMs), tagExpression: v.tagExpression || undefined,
        sql: v.sql || undefined,
      });
      leased = leased.concat(r.messages);
      renderLeased();
      notice("Leased " + r.messages.length + " message(s)", "info");
    } finally { button.disabled = false; }
  }));
  document.getElementById("ack-all").addEventListener("click", guarded(async () => {
    if (leased.length) await settle("ack", leased.slice());
  }));

  document.getElementById("byid-form").addEventListener("submit", guarded(async (ev) => {
    document.getElementById("found").replaceChildren();
    showTab("messages", formValues(ev.target).id);
  }));
  document.getElementById("bykey-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const found = document.getElementById("found");
    document.getElementById("message-detail").replaceChildren();
    try {
      const r = await mq.findByKey(v.topic, v.key);
      found.replaceChildren(messageTable(r.messages));
    } catch (err) {
      found.replaceChildren(signInNeeded(err) ? "" : el("div", { class: "problem", role: "alert" }, ...problemView(err)));
    }
  }));

  wireLogin();
  wireDLQ();
  wireTimers();
  renderLeased();
  health();
  route();
  window.addEventListener("hashchange", route);
  setInterval(health, 10000);
});
