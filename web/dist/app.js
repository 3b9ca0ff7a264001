// mqgate console: a small no-build client of the /v1 REST API.
"use strict";

const API = "../v1";

// ---------- helpers ----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function notice(text, kind) {
  const box = document.getElementById("notice");
  box.textContent = text;
  box.className = "notice " + (kind || "error");
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => box.classList.add("hidden"), kind === "info" ? 3000 : 8000);
}

class ProblemError extends Error {
  constructor(problem, status) {
    super((problem.title || "HTTP " + status) + (problem.detail ? ": " + problem.detail : ""));
    this.problem = problem;
    this.status = status;
  }
}

// ---------- sign-in ----------
//
// With an ACL file the API needs an account. The console keeps the access
// key and secret in sessionStorage (this tab only, gone when it closes)
// and sends them as HTTP Basic with every call. Every call also carries
// X-Requested-With: XMLHttpRequest, so that a 401 comes without
// WWW-Authenticate and the browser shows our form, not its own dialog.

const CREDENTIALS = "mqgate.credentials";

function credentials() {
  try { return JSON.parse(sessionStorage.getItem(CREDENTIALS)); } catch (e) { return null; }
}

function basicHeader(c) {
  const bytes = new TextEncoder().encode(c.accessKey + ":" + c.secretKey);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return "Basic " + btoa(bin);
}

// showLogin asks for an account, saying why.
function showLogin(why) {
  document.getElementById("login-why").textContent = why || "This gateway needs an account of its ACL file.";
  document.getElementById("login").classList.remove("hidden");
  document.querySelector("main").classList.add("hidden");
  document.querySelector("#login input[name=accessKey]").focus();
}

function showAccount() {
  const c = credentials();
  document.getElementById("account").classList.toggle("hidden", !c);
  document.getElementById("account-name").textContent = c ? "signed in as " + c.accessKey : "";
}

function hideLogin() {
  document.getElementById("login").classList.add("hidden");
  document.querySelector("main").classList.remove("hidden");
  showAccount();
}

function wireLogin() {
  document.getElementById("login").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const v = formValues(ev.target);
    const c = { accessKey: v.accessKey, secretKey: ev.target.elements.secretKey.value };
    // Any route tells good credentials from bad: 401 or not.
    const res = await fetch(API + "/topics", { headers: { Accept: "application/json", Authorization: basicHeader(c), "X-Requested-With": "XMLHttpRequest" } });
    if (res.status === 401) {
      let detail = "";
      try { detail = (await res.json()).detail || ""; } catch (e) { /* not a problem body */ }
      showLogin("Wrong access key or secret key. " + detail);
      return;
    }
    sessionStorage.setItem(CREDENTIALS, JSON.stringify(c));
    ev.target.reset();
    hideLogin();
    route();
  });
  document.getElementById("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(CREDENTIALS);
    showAccount();
    showLogin("Signed out.");
  });
  showAccount();
}

async function api(method, path, body, headers) {
  const init = { method, headers: Object.assign({ Accept: "application/json", "X-Requested-With": "XMLHttpRequest" }, headers || {}) };
  const c = credentials();
  if (c) init.headers.Authorization = basicHeader(c);
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(API + path, init);
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch (e) { data = { detail: text }; }
  }
  if (res.status === 401) {
    if (c) sessionStorage.removeItem(CREDENTIALS); // no longer valid (rotated, removed)
    showAccount();
    showLogin(c ? "The account was refused: " + ((data && data.detail) || "") : "This gateway needs an account of its ACL file.");
  }
  if (!res.ok) throw new ProblemError(data || {}, res.status);
  return data;
}

// guarded runs an async action and reports its error.
function guarded(fn) {
  return async (ev) => {
    if (ev && ev.preventDefault) ev.preventDefault();
    try { await fn(ev); } catch (err) { notice(err.message || String(err)); }
  };
}

function formValues(form) {
  const out = {};
  for (const [k, v] of new FormData(form).entries()) out[k] = typeof v === "string" ? v.trim() : v;
  for (const box of form.querySelectorAll("input[type=checkbox]")) out[box.name] = box.checked;
  return out;
}

function int(v) { return v === "" || v === undefined ? undefined : Number.parseInt(v, 10); }
function enc(name) { return encodeURIComponent(name); }
function fmtTime(s) { return s ? new Date(s).toLocaleString() : "—"; }
// fmtStamp is a compact local time for dense tables: "2026-11-29 20:48:38".
function fmtStamp(s) { return s ? localInput(s).replace("T", " ") : "—"; }
function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + units[i];
}
function fmtDuration(ms) {
  const s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600), m = Math.floor(s % 3600 / 60);
  return (d ? d + "d " : "") + (d || h ? h + "h " : "") + m + "m " + (s % 60) + "s";
}
// fmtDelay renders a delay level's length: "50 ms", "1.5 s", "2m", "1h 30m".
function fmtDelay(ms) {
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return +(ms / 1000).toFixed(3) + " s";
  const h = Math.floor(ms / 3600000), m = Math.floor(ms % 3600000 / 60000), s = +(ms % 60000 / 1000).toFixed(3);
  return [h ? h + "h" : "", m ? m + "m" : "", s ? s + "s" : ""].filter(Boolean).join(" ");
}
function fmtMs(v) {
  if (v === undefined || v === null) return "—";
  return (v < 10 ? +v.toFixed(2) : v < 1000 ? +v.toFixed(1) : Math.round(v)) + " ms";
}
// fmtDue renders a due time with how far it is from now.
function fmtDue(s) {
  if (!s) return "—";
  const t = new Date(s).getTime(), diff = Math.round(t - Date.now());
  const rel = Math.abs(diff) < 20 ? "now" : diff > 0 ? "in " + fmtDelay(diff) : fmtDelay(-diff) + " ago";
  return fmtStamp(s) + "." + String(t % 1000).padStart(3, "0") + " (" + rel + ")";
}
// localInput turns an RFC 3339 time into a datetime-local input value.
function localInput(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const p = (n) => String(n).padStart(2, "0");
  return d.getFullYear() + "-" + p(d.getMonth() + 1) + "-" + p(d.getDate()) + "T" + p(d.getHours()) + ":" + p(d.getMinutes()) + ":" + p(d.getSeconds());
}
// isoTime turns a datetime-local input value into RFC 3339 (UTC).
function isoTime(local) {
  if (!local) return undefined;
  const d = new Date(local);
  if (Number.isNaN(d.getTime())) throw new Error("invalid time " + local);
  return d.toISOString();
}
// problemView renders an API error (problem+json) in full.
function problemView(err) {
  const p = (err && err.problem) || {};
  const head = (p.title || (err && err.status ? "HTTP " + err.status : "Error")) + (err && err.status ? " (" + err.status + ")" : "");
  const extra = [p.code ? "code " + p.code : "", p.requestId ? "request " + p.requestId : ""].filter(Boolean).join(" · ");
  return [el("strong", {}, head), el("div", { class: "detail" }, p.detail || (err && !err.problem ? err.message || String(err) : "")),
    extra ? el("div", { class: "meta" }, extra) : null];
}

function fillTable(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren(...rows);
  if (!rows.length) body.append(el("tr", {}, el("td", { colspan: table.tHead.rows[0].cells.length, class: "muted" }, "none")));
}

// ---------- tabs ----------

const loaders = {};
// showTab shows a tab; route is the rest of the location hash after
// "name/" (the dead-letter view takes "group[/messageId][?filters]").
function showTab(name, route) {
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const s of document.querySelectorAll("section.tab")) s.classList.toggle("hidden", s.id !== name);
  history.replaceState(null, "", "#" + name);
  if (loaders[name]) guarded(loaders[name])(route);
}

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

// groupProgress loads every group's progress; per (topic, queue) the
// highest broker offset seen gives the queue's max offset.
async function groupProgress(groups) {
  const progress = {};
  const maxOffsets = {};
  await Promise.all(groups.map(async (g) => {
    try {
      const p = await api("GET", "/groups/" + enc(g.name) + "/progress");
      progress[g.name] = p;
      for (const q of p.queues) {
        const key = q.topic + "\u0000" + q.queueId;
        maxOffsets[key] = Math.max(maxOffsets[key] || 0, q.brokerOffset);
      }
    } catch (e) { progress[g.name] = null; }
  }));
  const perTopic = {};
  for (const [key, off] of Object.entries(maxOffsets)) {
    const topic = key.split("\u0000")[0];
    perTopic[topic] = (perTopic[topic] || 0) + off;
  }
  return { progress, perTopic };
}

loaders.overview = async () => {
  health();
  const status = document.getElementById("status");
  try {
    const s = await api("GET", "/broker/status");
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
  const [topics, groups] = await Promise.all([api("GET", "/topics"), api("GET", "/groups")]);
  const { progress, perTopic } = await groupProgress(groups.groups);
  fillTable(document.getElementById("overview-topics"), topics.topics.map((t) => el("tr", {},
    el("td", {}, t.name), el("td", { class: "num" }, t.queues),
    el("td", { class: "num" }, perTopic[t.name] !== undefined ? perTopic[t.name] : "—"), el("td", {}, t.perm))));
  fillTable(document.getElementById("overview-groups"), groups.groups.map((g) => {
    const p = progress[g.name];
    const inFlight = p ? p.queues.reduce((n, q) => n + q.inFlight, 0) : "—";
    return el("tr", {}, el("td", {}, g.name), el("td", {}, g.consumeMode),
      el("td", { class: "num" }, p ? p.totalLag : "—"), el("td", { class: "num" }, inFlight));
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
  const { topics } = await api("GET", "/topics");
  fillTable(document.getElementById("topic-list"), topics.map((t) => el("tr", {},
    el("td", {}, t.name), el("td", { class: "num" }, t.queues), el("td", { class: "num" }, t.retentionHours),
    el("td", {}, t.perm), el("td", {}, fmtTime(t.createdAt)),
    el("td", {}, el("button", { class: "danger", onclick: guarded(async () => {
      if (!confirm("Delete topic " + t.name + "?")) return;
      await api("DELETE", "/topics/" + enc(t.name));
      notice("Topic " + t.name + " deleted", "info");
      await loaders.topics();
    }) }, "Delete")))));
};

function messageTable(messages) {
  if (!messages.length) return el("p", { class: "muted" }, "No messages.");
  return el("table", {},
    el("thead", {}, el("tr", {}, ["Offset", "Message id", "Tag", "Keys", "Stored", "Body"].map((h) => el("th", {}, h)))),
    el("tbody", {}, messages.map((m) => el("tr", {},
      el("td", { class: "num" }, m.queueId + ":" + m.queueOffset), el("td", {}, m.messageId), el("td", {}, m.tag || ""),
      el("td", {}, (m.keys || []).join(", ")), el("td", {}, fmtTime(m.storedAt)),
      el("td", {}, el("pre", { class: "body" }, bodyText(m)))))));
}

function bodyText(m) {
  const text = m.bodyEncoding === "base64" ? "[base64] " + m.body : m.body;
  return text.length > 2000 ? text.slice(0, 2000) + " …" : text;
}

// ---------- groups ----------

loaders.groups = async () => {
  const { groups } = await api("GET", "/groups");
  const { progress } = await groupProgress(groups);
  fillTable(document.getElementById("group-list"), groups.map((g) => el("tr", { class: "clickable", onclick: guarded(() => showGroup(g.name)) },
    el("td", {}, g.name), el("td", {}, g.consumeMode), el("td", {}, g.orderly ? "yes" : "no"),
    el("td", { class: "num" }, g.retryMaxTimes),
    el("td", {}, g.subscriptions.map((s) => s.topic + (s.tagExpression && s.tagExpression !== "*" ? " [" + s.tagExpression + "]" : "")).join(", ")),
    el("td", { class: "num" }, progress[g.name] ? progress[g.name].totalLag : "—"),
    el("td", { class: "actions" }, el("button", { class: "secondary", onclick: (ev) => {
      ev.stopPropagation();
      showTab("dlq", enc(g.name));
    } }, "Dead letters"), el("button", { class: "danger", onclick: guarded(async (ev) => {
      ev.stopPropagation();
      if (!confirm("Delete group " + g.name + "?")) return;
      await api("DELETE", "/groups/" + enc(g.name));
      notice("Group " + g.name + " deleted", "info");
      await loaders.groups();
    }) }, "Delete")))));
};

async function showGroup(name) {
  const p = await api("GET", "/groups/" + enc(name) + "/progress");
  document.getElementById("group-detail").replaceChildren(
    el("h3", {}, "Progress of " + name + " (total lag " + p.totalLag + ")"),
    el("table", {},
      el("thead", {}, el("tr", {}, ["Topic", "Queue", "Broker offset", "Consumer offset", "Lag", "In flight", "Last stored"].map((h) => el("th", {}, h)))),
      el("tbody", {}, p.queues.map((q) => el("tr", {},
        el("td", {}, q.topic), el("td", { class: "num" }, q.queueId), el("td", { class: "num" }, q.brokerOffset),
        el("td", { class: "num" }, q.consumerOffset), el("td", { class: "num" }, q.lag), el("td", { class: "num" }, q.inFlight),
        el("td", {}, fmtTime(q.lastStoredAt)))))));
  document.querySelector("#reset-form [name=group]").value = name;
}

// ---------- dead letters ----------

// dlq is the dead-letter view's state. filter/status/limit are the ones of
// the last listing (what the table shows); cursors[i] fetches page i.
const dlq = {
  group: "", filter: {}, status: undefined, limit: 50, cursors: [""], page: 0, next: "", items: [], failed: false,
  selected: new Set(), open: new Set(), details: new Map(),
};
const DLQ_DEFAULT_LIMIT = 50;

function dlqForm() { return document.getElementById("dlq-form"); }

// dlqProblem shows an API error in the view (or clears it).
function dlqProblem(err) {
  const box = document.getElementById("dlq-problem");
  if (!err) { box.classList.add("hidden"); box.replaceChildren(); return; }
  box.replaceChildren(...problemView(err));
  box.classList.remove("hidden");
  box.scrollIntoView({ block: "nearest" });
}

// dlqGuarded is guarded for this view: errors go to its problem box.
function dlqGuarded(fn) {
  return async (ev) => {
    if (ev && ev.preventDefault) ev.preventDefault();
    try { await fn(ev); } catch (err) { dlqProblem(err); }
  };
}

function dlqQuery() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(dlq.filter)) if (v) q.set(k, v);
  if (dlq.status) q.set("status", dlq.status);
  return q;
}

function dlqFilterText(f) {
  const parts = [];
  if (f.originalTopic) parts.push("topic " + f.originalTopic);
  if (f.reasonContains) parts.push("reason containing \"" + f.reasonContains + "\"");
  if (f.from) parts.push("dead at or after " + fmtTime(f.from));
  if (f.to) parts.push("dead at or before " + fmtTime(f.to));
  return parts.join(", ");
}

// loaders.dlq fills the group picker and lists; route is
// "group[/messageId][?originalTopic=…&reasonContains=…&status=…&from=…&to=…&limit=…]",
// messageId naming a letter to open.
loaders.dlq = async (route) => {
  const form = dlqForm();
  const select = form.elements.group;
  let want = select.value, openId, params;
  if (typeof route === "string") {
    const i = route.indexOf("?");
    const path = i < 0 ? route : route.slice(0, i);
    params = new URLSearchParams(i < 0 ? "" : route.slice(i + 1));
    const parts = path ? path.split("/").map(decodeURIComponent) : [];
    if (parts[0]) want = parts[0];
    openId = parts[1];
  }
  let names;
  try {
    names = (await api("GET", "/groups")).groups.map((g) => g.name);
  } catch (err) { dlqProblem(err); return; }
  if (want && !names.includes(want)) names.push(want); // the API says whether it exists
  if (!names.length) {
    select.replaceChildren(el("option", { value: "" }, "(no groups)"));
    dlq.group = ""; dlq.items = []; dlq.next = "";
    renderDLQ("No consumer groups yet: dead letters belong to a group.");
    return;
  }
  select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
  select.value = want || names[0];
  if (params) {
    for (const name of ["originalTopic", "reasonContains", "status", "limit"]) form.elements[name].value = params.get(name) || "";
    if (!form.elements.limit.value) form.elements.limit.value = DLQ_DEFAULT_LIMIT;
    form.elements.from.value = params.get("from") ? localInput(params.get("from")) : "";
    form.elements.to.value = params.get("to") ? localInput(params.get("to")) : "";
  }
  if (!params && dlq.group === select.value && !dlq.failed) await dlqFetch(dlq.page); // back on the tab: refresh this page
  else await dlqList(openId);
};

// dlqList lists from the first page with the form's group and filter.
async function dlqList(openId) {
  const v = formValues(dlqForm());
  if (!v.group) return;
  dlq.group = v.group;
  dlq.filter = { originalTopic: v.originalTopic || undefined, reasonContains: v.reasonContains || undefined, from: isoTime(v.from), to: isoTime(v.to) };
  dlq.status = v.status || undefined;
  dlq.limit = Math.min(500, Math.max(1, int(v.limit) || DLQ_DEFAULT_LIMIT));
  dlq.cursors = [""];
  dlq.selected.clear();
  dlq.open.clear();
  if (openId) dlq.open.add(openId);
  const q = dlqQuery();
  if (dlq.limit !== DLQ_DEFAULT_LIMIT) q.set("limit", dlq.limit);
  const qs = q.toString();
  history.replaceState(null, "", "#dlq/" + enc(dlq.group) + (qs ? "?" + qs : ""));
  await dlqFetch(0);
}

// dlqFetch loads page (an index into dlq.cursors) of the current listing.
async function dlqFetch(page) {
  const q = dlqQuery();
  q.set("limit", dlq.limit);
  if (dlq.cursors[page]) q.set("cursor", dlq.cursors[page]);
  let r;
  try {
    r = await api("GET", "/groups/" + enc(dlq.group) + "/dlq?" + q);
  } catch (err) {
    dlq.items = []; dlq.next = ""; dlq.failed = true;
    renderDLQ("Could not list dead letters: see the error above.");
    dlqProblem(err);
    return;
  }
  dlqProblem(null);
  dlq.failed = false;
  dlq.page = page;
  dlq.items = r.items || [];
  dlq.next = r.next || "";
  dlq.cursors.length = page + 1;
  if (dlq.next) dlq.cursors.push(dlq.next);
  const dead = new Set(dlq.items.filter((d) => d.status === "dead").map((d) => d.messageId));
  for (const id of dlq.selected) if (!dead.has(id)) dlq.selected.delete(id);
  dlq.details.clear(); // statuses may have changed
  renderDLQ();
  await Promise.all([...dlq.open].map(dlqLoadDetail));
}

async function dlqLoadDetail(id) {
  try {
    dlq.details.set(id, { data: await api("GET", "/groups/" + enc(dlq.group) + "/dlq/" + enc(id)) });
  } catch (err) {
    dlq.details.set(id, { error: err });
  }
  if (dlq.open.has(id)) renderDLQ();
}

function dlqToggle(id) {
  if (String(window.getSelection())) return; // selecting text, not clicking
  if (dlq.open.has(id)) dlq.open.delete(id);
  else dlq.open.add(id);
  renderDLQ();
  if (dlq.open.has(id) && !dlq.details.has(id)) dlqLoadDetail(id);
}

function fmtLevel(level) {
  return level === -1 ? "−1 (straight to DLQ)" : level === 0 ? "0 (broker backoff)" : String(level);
}

// dlqDetailView shows one letter's body and failure history.
function dlqDetailView(id) {
  const c = dlq.details.get(id);
  if (!c) return el("p", { class: "muted" }, "Loading…");
  if (c.error) return el("div", { class: "problem" }, ...problemView(c.error));
  const d = c.data;
  const props = Object.entries(d.properties || {});
  const facts = [
    ["Origin message id", d.originMessageId || "—"], ["Original topic", d.originalTopic],
    ["Status", d.status + (d.statusAt ? " since " + fmtStamp(d.statusAt) : "")],
    ["Tag", d.tag || "—"], ["Keys", (d.keys || []).join(", ") || "—"],
  ];
  const attempts = d.attempts || [];
  return el("div", { class: "dlq-detail" },
    el("dl", { class: "facts" }, facts.map(([k, v]) => el("div", {}, el("dt", {}, k), el("dd", {}, v)))),
    props.length ? el("div", { class: "props" }, el("h4", {}, "Properties"),
      el("table", { class: "compact" }, el("tbody", {}, props.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))))) : null,
    ...bodyView(d),
    el("h4", {}, "Attempt history (" + attempts.length + ")"),
    attempts.length ? el("table", { class: "compact" },
      el("thead", {}, el("tr", {}, ["#", "At", "Outcome", "Client", "Reason", "Delay level"].map((h, i) => el("th", { class: i === 0 ? "num" : undefined }, h)))),
      el("tbody", {}, attempts.map((a, i) => el("tr", {},
        el("td", { class: "num" }, i + 1), el("td", { class: "time", title: a.at }, fmtStamp(a.at)),
        el("td", {}, el("span", { class: "pill " + a.outcome }, a.outcome)), el("td", {}, a.client || "—"),
        el("td", {}, a.reason || "—"), el("td", {}, fmtLevel(a.delayLevel))))))
      : el("p", { class: "muted" }, "No attempts recorded."));
}

// bodySize is a body's length in bytes.
function bodySize(d) {
  const body = d.body || "";
  if (d.bodyEncoding !== "base64") return new TextEncoder().encode(body).length;
  return Math.floor(body.length * 3 / 4) - body.match(/=*$/)[0].length;
}

// bodyView shows a dead letter's whole body: JSON pretty-printed, control
// characters escaped, base64 as sent.
function bodyView(d) {
  let text = d.body || "", note = "";
  if (d.bodyEncoding === "base64") note = " (base64)";
  else {
    try {
      const v = JSON.parse(text);
      if (v !== null && typeof v === "object") { text = JSON.stringify(v, null, 2); note = " (JSON, formatted)"; }
    } catch (e) { /* not JSON */ }
    const escaped = text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, (c) => "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0"));
    if (escaped !== text) { text = escaped; note = " (control characters shown as \\xNN)"; }
  }
  return [el("h4", {}, "Body" + note + " — " + fmtBytes(bodySize(d))), el("pre", { class: "body" }, text || "(empty)")];
}

// renderDLQ draws the table, pager and buttons from dlq.
function renderDLQ(emptyText) {
  const rows = [];
  for (const d of dlq.items) {
    const open = dlq.open.has(d.messageId);
    const dead = d.status === "dead";
    rows.push(el("tr", { class: "clickable" + (open ? " open" : ""), onclick: () => dlqToggle(d.messageId) },
      el("td", { class: "pick" }, el("input", {
        type: "checkbox", checked: dlq.selected.has(d.messageId), disabled: !dead,
        title: dead ? "select for resend" : "only dead letters can be resent", "aria-label": "select " + d.messageId,
        onclick: (ev) => ev.stopPropagation(),
        onchange: (ev) => { if (ev.target.checked) dlq.selected.add(d.messageId); else dlq.selected.delete(d.messageId); dlqButtons(); },
      })),
      el("td", { class: "id" }, el("button", { class: "link", "aria-expanded": open ? "true" : "false", title: open ? "hide details" : "show body and history",
        onclick: (ev) => { ev.stopPropagation(); dlqToggle(d.messageId); } }, (open ? "▾ " : "▸ ") + d.messageId)),
      el("td", {}, d.originalTopic),
      el("td", { class: "num" }, d.reconsumeTimes),
      el("td", { class: "reason" }, d.reason || "—"),
      el("td", { class: "time", title: d.firstFailedAt }, fmtStamp(d.firstFailedAt)),
      el("td", { class: "time", title: d.deadAt }, fmtStamp(d.deadAt)),
      el("td", {}, el("span", { class: "pill " + d.status, title: d.statusAt ? "since " + fmtStamp(d.statusAt) : undefined }, d.status)),
      el("td", {}, el("button", {
        class: "danger small", disabled: d.status === "discarded", title: d.status === "discarded" ? "already discarded" : "discard this dead letter",
        onclick: dlqGuarded(async (ev) => { ev.stopPropagation(); await dlqDiscard(d); }),
      }, "Discard"))));
    if (open) rows.push(el("tr", { class: "detail" }, el("td", { colspan: 9 }, dlqDetailView(d.messageId))));
  }
  const table = document.getElementById("dlq-list");
  fillTable(table, rows);
  if (!rows.length) {
    const filtered = dlqFilterText(dlq.filter) || dlq.status;
    const text = emptyText || (dlq.page ? "No more dead letters." : filtered ? "No dead letters match this filter." : "The dead-letter queue of " + dlq.group + " is empty.");
    table.tBodies[0].rows[0].cells[0].textContent = text;
  }
  document.getElementById("dlq-title").textContent = dlq.group
    ? "Dead letters of " + dlq.group + (dlq.failed ? "" : " — " + dlq.items.length + " on page " + (dlq.page + 1) + (dlq.next ? ", more follow" : ""))
    : "Dead letters";
  document.getElementById("dlq-page").textContent = dlq.group && !dlq.failed ? "page " + (dlq.page + 1) : "";
  document.getElementById("dlq-first").disabled = dlq.page === 0 || dlq.failed;
  document.getElementById("dlq-prev").disabled = dlq.page === 0 || dlq.failed;
  document.getElementById("dlq-next").disabled = !dlq.next || dlq.failed;
  dlqButtons();
}

function dlqButtons() {
  const n = dlq.selected.size;
  const sel = document.getElementById("dlq-resend-selected");
  sel.textContent = "Resend selected" + (n ? " (" + n + ")" : "");
  sel.disabled = n === 0;
  // nothing to resend when an unfiltered-by-status first page is empty
  const none = dlq.page === 0 && !dlq.items.length && !dlq.status;
  document.getElementById("dlq-resend-filter").disabled = !dlq.group || dlq.failed || none;
  const all = document.getElementById("dlq-all");
  const dead = dlq.items.filter((d) => d.status === "dead");
  all.disabled = !dead.length;
  all.checked = dead.length > 0 && dead.every((d) => dlq.selected.has(d.messageId));
  all.indeterminate = !all.checked && dead.some((d) => dlq.selected.has(d.messageId));
}

function dlqResendReport(r) {
  const skipped = r.skipped.length ? ", skipped " + r.skipped.length + " (already resent or discarded)" : "";
  notice("Resent " + r.resent.length + " dead letter(s) to their original topics" + skipped, "info");
}

async function dlqResend(body) {
  const r = await api("POST", "/groups/" + enc(dlq.group) + "/dlq/resend", body);
  dlqResendReport(r);
  dlq.selected.clear();
  await dlqFetch(dlq.page);
}

async function dlqDiscard(d) {
  if (!confirm("Discard dead letter " + d.messageId + " of group " + dlq.group + "?\n\nIt stays listed as discarded and can no longer be resent.")) return;
  await api("DELETE", "/groups/" + enc(dlq.group) + "/dlq/" + enc(d.messageId));
  notice("Dead letter " + d.messageId + " discarded", "info");
  await dlqFetch(dlq.page);
}

function wireDLQ() {
  const form = dlqForm();
  form.addEventListener("submit", dlqGuarded(() => dlqList()));
  form.elements.group.addEventListener("change", dlqGuarded(() => dlqList()));
  document.getElementById("dlq-clear").addEventListener("click", dlqGuarded(() => {
    for (const name of ["originalTopic", "reasonContains", "status", "from", "to"]) form.elements[name].value = "";
    return dlqList();
  }));
  document.getElementById("dlq-first").addEventListener("click", dlqGuarded(() => dlqFetch(0)));
  document.getElementById("dlq-prev").addEventListener("click", dlqGuarded(() => dlqFetch(Math.max(0, dlq.page - 1))));
  document.getElementById("dlq-next").addEventListener("click", dlqGuarded(() => dlqFetch(dlq.page + 1)));
  document.getElementById("dlq-all").addEventListener("change", (ev) => {
    for (const d of dlq.items) {
      if (d.status !== "dead") continue;
      if (ev.target.checked) dlq.selected.add(d.messageId); else dlq.selected.delete(d.messageId);
    }
    renderDLQ();
  });
  document.getElementById("dlq-resend-selected").addEventListener("click", dlqGuarded(() => {
    if (!dlq.selected.size) return undefined;
    return dlqResend({ messageIds: [...dlq.selected] });
  }));
  document.getElementById("dlq-resend-filter").addEventListener("click", dlqGuarded(() => {
    const f = {};
    for (const [k, v] of Object.entries(dlq.filter)) if (v) f[k] = v;
    const what = dlqFilterText(f);
    const note = dlq.status && dlq.status !== "dead" ? "\n\n(The status filter does not apply: only letters still dead are resent.)" : "";
    if (!confirm((what ? "Resend every dead letter of group " + dlq.group + " matching " + what
      : "No filter is set: resend EVERY dead letter of group " + dlq.group) + " (up to 10 000) to its original topic?" + note)) return undefined;
    return dlqResend({ filter: f });
  }));
}

// ---------- timers ----------

// tmr is the timers view's state, like dlq: cursors[i] fetches page i;
// open holds expanded rows, editing the row whose reschedule form shows.
const tmr = { topic: "", limit: 100, cursors: [""], page: 0, next: "", items: [], failed: false, open: new Set(), details: new Map(), editing: "" };
const TIMERS_DEFAULT_LIMIT = 100;

function timersProblem(err) {
  const box = document.getElementById("timers-problem");
  if (!err) { box.classList.add("hidden"); box.replaceChildren(); return; }
  box.replaceChildren(...problemView(err));
  box.classList.remove("hidden");
  box.scrollIntoView({ block: "nearest" });
}

function timersGuarded(fn) {
  return async (ev) => {
    if (ev && ev.preventDefault) ev.preventDefault();
    try { await fn(ev); } catch (err) { timersProblem(err); }
  };
}

// loaders.timers lists with the form's filter; route "?topic=…" sets it.
loaders.timers = async (route) => {
  const form = document.getElementById("timers-form");
  if (typeof route === "string") {
    const params = new URLSearchParams(route.replace(/^[^?]*\??/, ""));
    form.elements.topic.value = params.get("topic") || "";
    form.elements.limit.value = params.get("limit") || TIMERS_DEFAULT_LIMIT;
    return timersList();
  }
  if (tmr.cursors.length > 1 || tmr.items.length) return timersFetch(tmr.page); // back on the tab: refresh this page
  return timersList();
};

async function timersList() {
  const v = formValues(document.getElementById("timers-form"));
  tmr.topic = v.topic || "";
  tmr.limit = Math.min(500, Math.max(1, int(v.limit) || TIMERS_DEFAULT_LIMIT));
  tmr.cursors = [""];
  tmr.open.clear();
  tmr.editing = "";
  const q = new URLSearchParams();
  if (tmr.topic) q.set("topic", tmr.topic);
  if (tmr.limit !== TIMERS_DEFAULT_LIMIT) q.set("limit", tmr.limit);
  const qs = q.toString();
  history.replaceState(null, "", "#timers" + (qs ? "?" + qs : ""));
  await timersFetch(0);
}

// timersFetch loads page (an index into tmr.cursors), soonest first as the API orders them.
async function timersFetch(page) {
  const q = new URLSearchParams();
  if (tmr.topic) q.set("topic", tmr.topic);
  q.set("limit", tmr.limit);
  if (tmr.cursors[page]) q.set("cursor", tmr.cursors[page]);
  let r;
  try {
    r = await api("GET", "/timers?" + q);
  } catch (err) {
    tmr.items = []; tmr.next = ""; tmr.failed = true;
    renderTimers("Could not list timers: see the error above.");
    timersProblem(err);
    return;
  }
  timersProblem(null);
  tmr.failed = false;
  tmr.page = page;
  tmr.items = r.items || [];
  tmr.next = r.next || "";
  tmr.cursors.length = page + 1;
  if (tmr.next) tmr.cursors.push(tmr.next);
  const ids = new Set(tmr.items.map((t) => t.id));
  for (const id of tmr.open) if (!ids.has(id)) tmr.open.delete(id);
  if (!ids.has(tmr.editing)) tmr.editing = "";
  tmr.details.clear();
  renderTimers();
  await Promise.all([...tmr.open].map(timerLoadDetail));
}

async function timerLoadDetail(id) {
  try {
    tmr.details.set(id, { data: await api("GET", "/timers/" + enc(id)) });
  } catch (err) {
    tmr.details.set(id, { error: err });
  }
  if (tmr.open.has(id)) renderTimers();
}

function timerToggle(id) {
  if (String(window.getSelection())) return; // selecting text, not clicking
  if (tmr.open.has(id)) tmr.open.delete(id);
  else tmr.open.add(id);
  renderTimers();
  if (tmr.open.has(id) && !tmr.details.has(id)) timerLoadDetail(id);
}

function timerDetailView(id) {
  const c = tmr.details.get(id);
  if (!c) return el("p", { class: "muted" }, "Loading…");
  if (c.error) return el("div", { class: "problem" }, ...problemView(c.error));
  const t = c.data;
  const props = Object.entries(t.properties || {});
  return el("div", { class: "dlq-detail" },
    props.length ? el("div", { class: "props" }, el("h4", {}, "Properties"),
      el("table", { class: "compact" }, el("tbody", {}, props.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))))) : null,
    ...bodyView(t));
}

// rescheduleForm is the inline form: a delay from now, or a due time.
function rescheduleForm(t) {
  const delay = el("input", { name: "delayMs", type: "number", min: "0", placeholder: "e.g. 60000" });
  const at = el("input", { name: "deliverAt", type: "datetime-local", step: "1", value: localInput(t.deliverAt) });
  delay.addEventListener("input", () => { if (delay.value) at.value = ""; });
  at.addEventListener("input", () => { if (at.value) delay.value = ""; });
  return el("form", { class: "reschedule", onsubmit: timersGuarded(async () => {
    let body;
    if (delay.value !== "") body = { delayMs: int(delay.value) };
    else if (at.value) body = { deliverAt: isoTime(at.value) };
    else throw new Error("Give a delay in ms or a delivery time.");
    const r = await api("PUT", "/timers/" + enc(t.id), body);
    notice("Timer " + t.id + " now due " + fmtDue(r.deliverAt), "info");
    tmr.editing = "";
    await timersFetch(tmr.page);
  }) },
  el("label", {}, "Deliver in (ms from now)", delay), el("span", { class: "or" }, "or"),
  el("label", {}, "Deliver at (local time)", at),
  el("button", { type: "submit", class: "small" }, "Save"),
  el("button", { type: "button", class: "secondary small", onclick: () => { tmr.editing = ""; renderTimers(); } }, "Close"));
}

async function timerCancel(t) {
  if (!confirm("Cancel timer " + t.id + " (topic " + t.topic + ", due " + fmtStamp(t.deliverAt) + ")?\n\nThe message will never be delivered.")) return;
  await api("DELETE", "/timers/" + enc(t.id));
  notice("Timer " + t.id + " cancelled", "info");
  await timersFetch(tmr.page);
}

function renderTimers(emptyText) {
  const rows = [];
  for (const t of tmr.items) {
    const open = tmr.open.has(t.id);
    rows.push(el("tr", { class: "clickable" + (open ? " open" : ""), onclick: () => timerToggle(t.id) },
      el("td", { class: "id" }, el("button", { class: "link", "aria-expanded": open ? "true" : "false", title: open ? "hide body" : "show body",
        onclick: (ev) => { ev.stopPropagation(); timerToggle(t.id); } }, (open ? "▾ " : "▸ ") + t.id)),
      el("td", {}, t.topic),
      el("td", { class: "num" }, t.queueId),
      el("td", { class: "time", title: t.deliverAt }, fmtDue(t.deliverAt)),
      el("td", { class: "time", title: t.scheduledAt }, fmtStamp(t.scheduledAt)),
      el("td", {}, t.tag || "—"),
      el("td", {}, (t.keys || []).join(", ") || "—"),
      el("td", { class: "actions" },
        el("button", { class: "secondary small", onclick: (ev) => { ev.stopPropagation(); tmr.editing = tmr.editing === t.id ? "" : t.id; renderTimers(); } }, "Reschedule"),
        el("button", { class: "danger small", onclick: timersGuarded(async (ev) => { ev.stopPropagation(); await timerCancel(t); }) }, "Cancel"))));
    if (tmr.editing === t.id) rows.push(el("tr", { class: "edit" }, el("td", { colspan: 8 }, rescheduleForm(t))));
    if (open) rows.push(el("tr", { class: "detail" }, el("td", { colspan: 8 }, timerDetailView(t.id))));
  }
  const table = document.getElementById("timer-list");
  fillTable(table, rows);
  if (!rows.length) {
    table.tBodies[0].rows[0].cells[0].textContent = emptyText || (tmr.page ? "No more timers." : tmr.topic ? "No pending timers for topic " + tmr.topic + "." : "No pending timers.");
  }
  document.getElementById("timers-title").textContent = "Pending timers" + (tmr.topic ? " of " + tmr.topic : "") +
    (tmr.failed ? "" : " — " + tmr.items.length + " on page " + (tmr.page + 1) + (tmr.next ? ", more follow" : ""));
  document.getElementById("timers-page").textContent = tmr.failed ? "" : "page " + (tmr.page + 1);
  document.getElementById("timers-first").disabled = tmr.page === 0 || tmr.failed;
  document.getElementById("timers-prev").disabled = tmr.page === 0 || tmr.failed;
  document.getElementById("timers-next").disabled = !tmr.next || tmr.failed;
}

function wireTimers() {
  const form = document.getElementById("timers-form");
  form.addEventListener("submit", timersGuarded(() => timersList()));
  document.getElementById("timers-clear").addEventListener("click", timersGuarded(() => { form.elements.topic.value = ""; return timersList(); }));
  document.getElementById("timers-first").addEventListener("click", timersGuarded(() => timersFetch(0)));
  document.getElementById("timers-prev").addEventListener("click", timersGuarded(() => timersFetch(Math.max(0, tmr.page - 1))));
  document.getElementById("timers-next").addEventListener("click", timersGuarded(() => timersFetch(tmr.page + 1)));
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
  const { results } = await api("POST", "/groups/" + enc(group) + "/" + kind, body);
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
    const t = await api("PUT", "/topics/" + enc(v.name), { queues: int(v.queues), retentionHours: int(v.retentionHours), perm: v.perm || undefined });
    notice("Topic " + t.name + " saved (" + t.queues + " queues)", "info");
    await loaders.topics();
  }));

  document.getElementById("browse-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const q = new URLSearchParams({ offset: v.offset || "0", max: v.max || "32" });
    const r = await api("GET", "/topics/" + enc(v.topic) + "/queues/" + int(v.queueId) + "/messages?" + q);
    document.getElementById("browse-result").replaceChildren(el("p", { class: "muted" }, "next offset " + r.nextOffset), messageTable(r.messages));
    ev.target.querySelector("[name=offset]").value = r.nextOffset;
  }));

  document.getElementById("group-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const body = { consumeMode: v.consumeMode || undefined, orderly: v.orderly, retryMaxTimes: int(v.retryMaxTimes), invisibleMs: int(v.invisibleMs) };
    if (v.topic) body.subscriptions = [{ topic: v.topic, tagExpression: v.tagExpression || undefined }];
    const g = await api("PUT", "/groups/" + enc(v.name), body);
    notice("Group " + g.name + " saved", "info");
    await loaders.groups();
  }));

  document.getElementById("reset-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const p = await api("POST", "/groups/" + enc(v.group) + "/reset-offset", { timestamp: new Date(v.timestamp).toISOString(), topic: v.topic || undefined });
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
    const headers = v.idempotencyKey ? { "Idempotency-Key": v.idempotencyKey } : undefined;
    const r = await api("POST", "/topics/" + enc(v.topic) + "/messages", msg, headers);
    document.getElementById("send-result").textContent = JSON.stringify(r, null, 2);
    notice("Sent " + r.results.length + " message(s)", "info");
  }));

  document.getElementById("pull-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const button = ev.target.querySelector("button");
    button.disabled = true;
    try {
      const r = await api("POST", "/groups/" + enc(v.group) + "/topics/" + enc(v.topic) + "/pull", {
        maxMessages: int(v.maxMessages), waitMs: int(v.waitMs), invisibleMs: int(v.invisibleMs), tagExpression: v.tagExpression || undefined,
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
    const m = await api("GET", "/messages/" + enc(formValues(ev.target).id));
    document.getElementById("found").replaceChildren(messageTable([m]));
  }));
  document.getElementById("bykey-form").addEventListener("submit", guarded(async (ev) => {
    const v = formValues(ev.target);
    const r = await api("GET", "/messages?" + new URLSearchParams({ topic: v.topic, key: v.key }));
    document.getElementById("found").replaceChildren(messageTable(r.messages));
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
