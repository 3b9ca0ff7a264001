// mqgate console: helpers, sign-in and tabs (the API calls are api.js's, mq).
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

// ---------- sign-in ----------
//
// With an ACL file the API needs an account. The console keeps the access
// key and secret in sessionStorage (this tab only, gone when it closes)
// and sends them as HTTP Basic with every call. Every call also carries
// X-Requested-With: XMLHttpRequest, so that a 401 comes without
// WWW-Authenticate and the browser shows our form, not its own dialog.

const CREDENTIALS = "mqgate.credentials";

function credentials() { return mq.credentials(); }
function basicHeader(c) { return mq.basicHeader(c); }

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

// Every API call goes through api.js (mq, the typed client of clients/ts).
// A 401 there means the account is missing or no longer valid (rotated,
// removed): the sign-in form shows, with the server's reason.
mq.hooks.unauthorized = (err) => {
  const c = credentials();
  if (c) sessionStorage.removeItem(CREDENTIALS);
  showAccount();
  showLogin(c ? "The account was refused: " + (err.detail || "") : "This gateway needs an account of its ACL file.");
};

// signInNeeded reports an error the sign-in form already answers: a 401
// shows the form with its reason (api), so it gets no error banner on top,
// least of all before the user has tried to sign in.
function signInNeeded(err) {
  return mq.isProblem(err, 401);
}

// guarded runs an async action and reports its error.
function guarded(fn) {
  return async (ev) => {
    if (ev && ev.preventDefault) ev.preventDefault();
    try { await fn(ev); } catch (err) { if (!signInNeeded(err)) notice(err.message || String(err)); }
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
  // Elements only: callers spread it into replaceChildren, which would
  // show a null as the text "null".
  const out = [el("strong", {}, head), el("div", { class: "detail" }, p.detail || (err && !err.problem ? err.message || String(err) : ""))];
  if (extra) out.push(el("div", { class: "meta" }, extra));
  return out;
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
  // The messages view keeps its route ("#messages/<id>"), the SQS view
  // its filter ("#sqs?prefix=…").
  let hash = "#" + name;
  if (route && name === "messages") hash += "/" + route;
  if (route && name === "sqs" && route.startsWith("?")) hash += route;
  history.replaceState(null, "", hash);
  if (loaders[name]) guarded(loaders[name])(route);
}
