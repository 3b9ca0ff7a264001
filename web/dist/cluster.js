// @ts-check
// mqgate console: the cluster view — this node's view of its cluster
// (GET /v1/cluster, answered by the node that serves this console, never
// forwarded to the leader): its id and Raft role, the leader, term, commit
// and applied index, and every replica with, on the leader, how far it has
// caught up. Polled every 2 s while the view is shown, like the overview's
// fallback; a single node shows its standalone note. Loaded after lib.js
// (el, mq, problemView, fillTable…) and before app.js.
"use strict";

/** @typedef {import("../../clients/ts/src/schema").components["schemas"]["Cluster"]} ClusterView */
/** @typedef {import("../../clients/ts/src/schema").components["schemas"]["ClusterPeer"]} ClusterPeer */

const CLUSTER_INTERVAL_MS = 2000;

const clusterPolling = {
  /** @type {ReturnType<typeof setInterval> | null} */
  timer: null,
  // Each request is numbered and an answer older than the one shown is
  // dropped: a slow answer never overwrites a newer one (or its error).
  asked: 0,
  shown: 0,
  polls: 0, // answers shown, for the e2e test
};

/**
 * clusterElement returns the page's element of id.
 * @param {string} id @returns {HTMLElement}
 */
function clusterElement(id) {
  const node = document.getElementById(id);
  if (!node) throw new Error("the page has no #" + id);
  return node;
}

function clusterShown() {
  return !clusterElement("cluster").classList.contains("hidden") && !document.hidden;
}

/** @param {string} role */
function rolePill(role) {
  return el("span", { class: "pill " + role }, role);
}

/** @param {string} k @param {string | Node} v @param {string} [title] */
function clusterCard(k, v, title) {
  return el("div", title ? { title } : {}, el("dt", {}, k), el("dd", {}, v));
}

/**
 * clusterServes says in a few words whether this node serves the API
 * itself or forwards it.
 * @param {ClusterView} v
 */
function clusterServes(v) {
  if (v.serving) return "yes (leader, log applied)";
  if (v.leader === v.nodeId) return "not yet (applying its log)";
  if (v.leader) return "forwards to node " + v.leader;
  return "no (no leader)";
}

/**
 * clusterShow replaces the view with one answer.
 * @param {ClusterView} v
 */
function clusterShow(v) {
  clusterPolling.polls++;
  clusterElement("cluster-problem").classList.add("hidden");
  const facts = clusterElement("cluster-facts");
  facts.dataset.role = v.role;
  facts.dataset.leader = v.leader ? String(v.leader) : "";
  facts.dataset.nodeId = String(v.nodeId);
  facts.dataset.polls = String(clusterPolling.polls);
  const standalone = v.role === "standalone";
  clusterElement("cluster-standalone").classList.toggle("hidden", !standalone);
  clusterElement("cluster-replicas").classList.toggle("hidden", standalone);
  if (standalone) {
    facts.replaceChildren(clusterCard("This node", "single node"), clusterCard("Role", rolePill(v.role)));
    fillTable(/** @type {HTMLTableElement} */ (clusterElement("cluster-peers")), []);
    clusterElement("cluster-note").textContent = "";
    return;
  }
  const byId = new Map(v.peers.map((p) => [p.id, p]));
  const leader = v.leader ? byId.get(v.leader) : undefined;
  const leaderText = !v.leader ? "none (election under way)"
    : "node " + v.leader + (v.leader === v.nodeId ? " (this node)" : leader ? " (" + leader.address + ")" : "");
  const behind = v.commitIndex - v.appliedIndex;
  facts.replaceChildren(
    clusterCard("This node", "node " + v.nodeId), clusterCard("Role", rolePill(v.role)),
    clusterCard("Leader", leaderText), clusterCard("Serves the API", clusterServes(v)),
    clusterCard("Term", String(v.term)), clusterCard("Commit index", String(v.commitIndex)),
    clusterCard("Applied index", String(v.appliedIndex), behind > 0 ? behind + " committed entries not applied yet" : "every committed entry applied"));
  // Match index and lag are the leader's knowledge: elsewhere the API
  // leaves them out, and "—" says unknown, not zero.
  const known = v.role === "leader";
  fillTable(/** @type {HTMLTableElement} */ (clusterElement("cluster-peers")), v.peers.map((p) => el("tr", { "data-id": p.id, "data-role": p.role },
    el("td", { class: "num" }, p.id), el("td", { class: "address" }, p.address, p.id === v.nodeId ? el("span", { class: "pill self" }, "this node") : null),
    el("td", {}, rolePill(p.role)),
    el("td", { class: "num" }, known ? String(p.matchIndex || 0) : "—"),
    el("td", { class: "num", title: known ? (p.lagBytes || 0) + " bytes of the CommitLog not yet on this replica" : "known on the leader only" },
      known ? fmtBytes(p.lagBytes || 0) : "—"))));
  clusterElement("cluster-note").textContent = known
    ? "Match index: the last Raft index in the replica's log; lag: the CommitLog bytes it still lacks."
    : "Match index and lag are known on the leader only" + (v.leader ? ": open this console on node " + v.leader + " to see them." : ".");
}

/**
 * clusterProblem replaces what the view shows with err, so a stale view
 * is never shown as current.
 * @param {unknown} err
 */
function clusterProblem(err) {
  const facts = clusterElement("cluster-facts");
  facts.replaceChildren();
  facts.dataset.role = "";
  facts.dataset.leader = "";
  fillTable(/** @type {HTMLTableElement} */ (clusterElement("cluster-peers")), []);
  clusterElement("cluster-note").textContent = "";
  clusterElement("cluster-standalone").classList.add("hidden");
  clusterElement("cluster-replicas").classList.add("hidden");
  const box = clusterElement("cluster-problem");
  if (signInNeeded(err)) { box.classList.add("hidden"); return; }
  box.replaceChildren(...problemView(err));
  box.classList.remove("hidden");
}

// clusterPoll asks for the view once.
async function clusterPoll() {
  const n = ++clusterPolling.asked;
  /** @type {ClusterView | null} */
  let v = null;
  /** @type {unknown} */
  let failure = null;
  try {
    v = await mq.cluster();
  } catch (err) {
    failure = err;
  }
  if (n < clusterPolling.shown) return;
  clusterPolling.shown = n;
  if (v) clusterShow(v);
  else {
    clusterProblem(failure);
    if (signInNeeded(failure)) clusterStop();
  }
}

function clusterStart() {
  if (clusterPolling.timer) return;
  clusterPolling.timer = setInterval(() => {
    if (!clusterShown()) { clusterStop(); return; }
    clusterPoll();
  }, CLUSTER_INTERVAL_MS);
}

function clusterStop() {
  if (clusterPolling.timer) clearInterval(clusterPolling.timer);
  clusterPolling.timer = null;
}

loaders.cluster = async () => {
  clusterStart();
  await clusterPoll();
};

document.addEventListener("DOMContentLoaded", () => {
  clusterElement("cluster-refresh").addEventListener("click", () => { clusterPoll(); });
  document.addEventListener("visibilitychange", () => { if (clusterShown()) { clusterStart(); clusterPoll(); } });
});
