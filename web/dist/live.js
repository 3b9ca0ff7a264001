// @ts-check
// mqgate console: the live overview. While the overview is shown the
// stats come every 2 s from GET /v1/stats/stream (server-sent events, read
// with fetch so that the account's Authorization goes along); when the
// stream cannot be had or breaks, GET /v1/stats is polled every 2 s
// instead. Rates are the differences of the totals between two snapshots,
// and the last minutes are drawn with uPlot (vendor/).
"use strict";

const LIVE_INTERVAL_MS = 2000;
const LIVE_POINTS = 150; // 5 minutes of 2 s samples

/** @typedef {"t" | "sent" | "delivered" | "acked" | "retried" | "dlq" | "lag" | "inFlight"} SeriesKey */
/** @typedef {"sentTotal" | "deliveredTotal" | "ackedTotal" | "retriedTotal" | "deadLetteredTotal"} TotalField */

const live = {
  /** @type {ReturnType<typeof setInterval> | null} */
  timer: null,
  /** @type {Stats | null} the previous /stats answer */
  prev: null,
  /** @type {Record<SeriesKey, number[]>} */
  series: { t: [], sent: [], delivered: [], acked: [], retried: [], dlq: [], lag: [], inFlight: [] },
  /** @type {Record<string, uPlot>} */
  charts: {},
  polls: 0, // snapshots shown, for the e2e test
  /** @type {AbortController | null} the stream being read */
  stream: null,
};

/**
 * rate is the per-second rate of a total between two snapshots.
 * @param {Stats} cur @param {Stats | null} prev @param {TotalField} field @param {number} seconds
 */
function rate(cur, prev, field, seconds) {
  if (!prev || seconds <= 0) return 0;
  return Math.max(0, (cur[field] - prev[field]) / seconds);
}

/**
 * must returns the element of id (the page's own, always there).
 * @param {string} id @returns {HTMLElement}
 */
function must(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error("the page has no #" + id);
  return node;
}

/** @param {number} v */
function fmtRate(v) { return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + "/s"; }

/** @param {SeriesKey} key @param {number} v */
function pushSample(key, v) {
  const a = live.series[key];
  a.push(v);
  if (a.length > LIVE_POINTS) a.shift();
}

/**
 * chart creates (once) or updates a uPlot chart in the element id.
 * @param {string} id @param {string} title @param {string[]} labels @param {string[]} colors @param {number[][]} data
 */
function chart(id, title, labels, colors, data) {
  const box = must(id);
  if (typeof uPlot === "undefined" || !box) return;
  const width = Math.max(200, (box.clientWidth || 300) - 16); // inside the box's padding
  box.dataset.points = String(data[0].length);
  let u = live.charts[id];
  if (!u && data[0].length < 2) { // one sample has no time span to draw
    box.replaceChildren(el("p", { class: "muted" }, title + ": collecting samples …"));
    return;
  }
  if (!u) {
    box.replaceChildren();
    u = new uPlot({
      title, width, height: 200,
      scales: { x: { time: true } },
      series: [{}].concat(labels.map((label, i) => ({ label, stroke: colors[i], width: 1.5, value: (/** @type {unknown} */ _self, /** @type {number | null} */ v) => v == null ? "—" : +v.toFixed(2) }))),
      axes: [{}, { size: 50 }],
      legend: { live: false },
    }, data, box);
    live.charts[id] = u;
  } else {
    if (Math.abs(u.width - width) > 4) u.setSize({ width, height: 200 });
    u.setData(data);
  }
}

/** @param {string} k @param {string} v @param {string} [title] */
function card(k, v, title) {
  return el("div", title ? { title } : {}, el("dt", {}, k), el("dd", {}, v));
}

/**
 * renderLive shows one /stats answer: the cards and the charts.
 * @param {Stats} s
 */
function renderLive(s) {
  const prev = live.prev;
  const seconds = prev ? (new Date(s.at).getTime() - new Date(prev.at).getTime()) / 1000 : 0;
  const r = {
    sent: rate(s, prev, "sentTotal", seconds), delivered: rate(s, prev, "deliveredTotal", seconds),
    acked: rate(s, prev, "ackedTotal", seconds), retried: rate(s, prev, "retriedTotal", seconds),
    dlq: rate(s, prev, "deadLetteredTotal", seconds),
  };
  live.prev = s;
  live.polls++;
  pushSample("t", new Date(s.at).getTime() / 1000);
  for (const k of /** @type {const} */ (["sent", "delivered", "acked", "retried", "dlq"])) pushSample(k, r[k]);
  pushSample("lag", s.totalLag);
  pushSample("inFlight", s.inFlight);

  const delayed = s.delayedBacklog.reduce((n, l) => n + l.backlog, 0);
  const byLevel = s.delayedBacklog.filter((l) => l.backlog > 0).map((l) => "L" + l.level + ": " + l.backlog).join(", ");
  const disk = (s.diskUsedRatio * 100).toFixed(1) + "% of disk (sends refused above " + (s.diskSendCeiling * 100).toFixed(0) + "%)";
  must("live").replaceChildren(
    card("Send", fmtRate(r.sent)), card("Deliver", fmtRate(r.delivered)), card("Ack", fmtRate(r.acked)),
    card("Retry (nack, expired)", fmtRate(r.retried)), card("To DLQ", fmtRate(r.dlq)),
    card("Total lag", String(s.totalLag)), card("Oldest unconsumed", s.oldestUnackedMs ? fmtDelay(s.oldestUnackedMs) : "—"),
    card("In flight", String(s.inFlight)), card("Delayed backlog", String(delayed), byLevel || "no level has a backlog"),
    card("Timers pending", String(s.timersPending)), card("Store", fmtBytes(s.storeBytes), disk),
    card("Disk used", (s.diskUsedRatio * 100).toFixed(1) + "%", disk),
    card("Dispatch lag", fmtBytes(s.dispatchLagBytes)), card("Quarantined", String(s.quarantinedRecords)),
    card("PostgreSQL mirror", mirrorText(s.mirror), s.mirror.lastError || (s.mirror.enabled ? s.mirror.passesTotal + " passes, " + s.mirror.failuresTotal + " failed" : "no --database-url")),
    card("Sent (since start)", String(s.sentTotal)), card("Acked (since start)", String(s.ackedTotal)));
  must("live").dataset.totalLag = String(s.totalLag);
  must("live").dataset.sentTotal = String(s.sentTotal);
  /** @type {Record<string, number>} */
  const before = {};
  for (const t of prev ? prev.topics : []) before[t.topic] = t.sentTotal;
  fillTable(must("live-topics"), s.topics.map((t) => el("tr", {}, el("td", {}, t.topic), el("td", { class: "num" }, t.sentTotal),
    el("td", { class: "num" }, prev && seconds > 0 ? fmtRate(Math.max(0, (t.sentTotal - (before[t.topic] || 0)) / seconds)) : "—"))));
  fillTable(must("overview-consumers"), s.consumers.map((c) => el("tr", {},
    el("td", {}, c.group), el("td", {}, c.topic), el("td", { class: "num" }, c.lag),
    el("td", { class: "num" }, c.oldestUnackedMs ? fmtDelay(c.oldestUnackedMs) : "—"), el("td", { class: "num" }, c.inFlight))));

  const ser = live.series;
  chart("chart-rates", "Messages per second", ["send", "deliver", "ack", "retry", "DLQ"],
    ["#2458d6", "#1c7c45", "#7a3fc4", "#c98a00", "#b3261e"], [ser.t, ser.sent, ser.delivered, ser.acked, ser.retried, ser.dlq]);
  chart("chart-lag", "Lag and in flight", ["total lag", "in flight"], ["#b3261e", "#2458d6"], [ser.t, ser.lag, ser.inFlight]);
}

/**
 * mirrorText is the PostgreSQL mirror's state in a few words.
 * @param {Stats["mirror"]} m
 */
function mirrorText(m) {
  if (!m.enabled) return "off";
  if (!m.healthy) return "degraded, " + m.behindRecords + " behind";
  return m.behindRecords ? m.behindRecords + " records behind (" + fmtDelay(m.behindMs) + ")" : "in step";
}

/**
 * liveProblem replaces the cards' content with an error, so stale numbers
 * are never shown as current.
 * @param {unknown} err
 */
function liveProblem(err) {
  live.prev = null;
  must("live").replaceChildren();
  const box = must("live-problem");
  box.replaceChildren(...problemView(err));
  box.classList.remove("hidden");
}

/** @param {Stats} s */
function showSnapshot(s) {
  renderLive(s);
  must("live-problem").classList.add("hidden");
}

// pollLive asks for one snapshot.
async function pollLive() {
  try {
    showSnapshot(await mq.stats());
  } catch (err) {
    if (signInNeeded(err)) { stopLive(); return; }
    liveProblem(err);
  }
}

/** @param {"stream" | "poll"} mode */
function setMode(mode) {
  must("live").dataset.mode = mode;
  must("live-mode").textContent = mode === "stream" ? "live: server-sent events every 2 s" : "polling every 2 s";
}

/**
 * streamEvent handles one server-sent event (its lines).
 * @param {string} block
 */
function streamEvent(block) {
  let name = "message", data = "";
  for (const line of block.split("\n")) {
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i), value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data += (data ? "\n" : "") + value;
  }
  if (name === "stats") showSnapshot(JSON.parse(data));
  else if (name === "problem") liveProblem({ problem: JSON.parse(data), status: JSON.parse(data).status });
}

// streamLive reads the stats stream until the overview is left (it is
// then aborted), or it ends or fails: then it falls back to polling.
async function streamLive() {
  const ctl = new AbortController();
  live.stream = ctl;
  setMode("stream");
  try {
    const body = await mq.statsStream(LIVE_INTERVAL_MS, ctl.signal);
    const reader = body.getReader();
    const text = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += text.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      for (let i = buf.indexOf("\n\n"); i >= 0; i = buf.indexOf("\n\n")) {
        streamEvent(buf.slice(0, i));
        buf = buf.slice(i + 2);
      }
      if (!overviewShown()) { ctl.abort(); break; }
    }
  } catch (err) {
    if (ctl.signal.aborted) return;
    if (signInNeeded(err)) { live.stream = null; return; }
  }
  if (live.stream !== ctl) return; // stopped meanwhile
  live.stream = null;
  if (!ctl.signal.aborted && overviewShown()) startPolling();
}

function startPolling() {
  if (live.timer) return;
  setMode("poll");
  pollLive();
  live.timer = setInterval(() => {
    if (!overviewShown()) { stopLive(); return; }
    pollLive();
  }, LIVE_INTERVAL_MS);
}

function overviewShown() {
  return !must("overview").classList.contains("hidden") && !document.hidden;
}

// startLive follows the stats while the overview is shown (and the page
// visible): the stream, or polling where streams cannot be read.
function startLive() {
  if (live.timer || live.stream) return;
  if (typeof ReadableStream === "undefined") startPolling();
  else streamLive();
}

function stopLive() {
  if (live.timer) clearInterval(live.timer);
  live.timer = null;
  if (live.stream) live.stream.abort();
  live.stream = null;
}

document.addEventListener("visibilitychange", () => { if (overviewShown()) startLive(); });
window.addEventListener("resize", () => {
  for (const [id, u] of Object.entries(live.charts)) {
    const box = must(id);
    if (box && box.clientWidth) u.setSize({ width: Math.max(200, box.clientWidth - 16), height: 200 });
  }
});
