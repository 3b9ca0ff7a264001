// mqgate console: the dead letters and timers tabs (after lib.js).
"use strict";

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
  if (!err || signInNeeded(err)) { box.classList.add("hidden"); box.replaceChildren(); return; }
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
    names = (await mq.listGroups()).groups.map((g) => g.name);
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
    r = await mq.listDeadLetters(dlq.group, Object.fromEntries(q));
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

// dlqExport downloads every dead letter matching the filter (all pages,
// each with its detail: body and attempt history) as NDJSON, one JSON
// object a line. Nothing is downloaded when a page fails: the error shows.
const DLQ_EXPORT_MAX = 10000;
async function dlqExport() {
  if (!dlq.group) return;
  const lines = [];
  let cursor = "";
  do {
    const q = dlqQuery();
    q.set("limit", "500");
    if (cursor) q.set("cursor", cursor);
    const r = await mq.listDeadLetters(dlq.group, Object.fromEntries(q));
    for (const d of r.items || []) {
      lines.push(JSON.stringify(await mq.getDeadLetter(dlq.group, d.messageId)));
    }
    cursor = r.next || "";
  } while (cursor && lines.length < DLQ_EXPORT_MAX);
  const blob = new Blob(lines.map((l) => l + "\n"), { type: "application/x-ndjson" });
  const a = el("a", { href: URL.createObjectURL(blob), download: "dlq-" + dlq.group + ".ndjson" });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  notice("Exported " + lines.length + " dead letter(s) of " + dlq.group + " as NDJSON", "info");
}

async function dlqLoadDetail(id) {
  try {
    dlq.details.set(id, { data: await mq.getDeadLetter(dlq.group, id) });
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
  const r = await mq.resendDeadLetters(dlq.group, body);
  dlqResendReport(r);
  dlq.selected.clear();
  await dlqFetch(dlq.page);
}

async function dlqDiscard(d) {
  if (!confirm("Discard dead letter " + d.messageId + " of group " + dlq.group + "?\n\nIt stays listed as discarded and can no longer be resent.")) return;
  await mq.discardDeadLetter(dlq.group, d.messageId);
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
  document.getElementById("dlq-export").addEventListener("click", dlqGuarded(() => dlqExport()));
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
  if (!err || signInNeeded(err)) { box.classList.add("hidden"); box.replaceChildren(); return; }
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
    r = await mq.listTimers(Object.fromEntries(q));
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
    tmr.details.set(id, { data: await mq.getTimer(id) });
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
    const r = await mq.rescheduleTimer(t.id, body);
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
  await mq.cancelTimer(t.id);
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
