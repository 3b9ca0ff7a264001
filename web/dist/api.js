// @ts-check
// mqgate console: every API call of the console, through the generated
// TypeScript client of clients/ts (vendor/mqgate-client.js, compiled from
// clients/ts/src/index.ts, over openapi-fetch). Paths, parameters, bodies
// and answers are type-checked against the spec's types (schema.ts) by
// web/typecheck_test.go; the other scripts call these functions (window.mq)
// and never build a URL of the API themselves.

import * as vendored from "./vendor/mqgate-client.js";

/** @typedef {import("../../clients/ts/src/schema").components["schemas"]} S */
/** @typedef {import("../../clients/ts/src/schema").paths} Paths */

/** The vendored module, typed as its TypeScript source. */
const lib = /** @type {typeof import("../../clients/ts/src/index")} */ (/** @type {unknown} */ (vendored));

const CREDENTIALS = "mqgate.credentials";

/** @returns {{ accessKey: string, secretKey: string } | null} the signed-in account of this tab */
function credentials() {
  try { return JSON.parse(sessionStorage.getItem(CREDENTIALS) || "null"); } catch (e) { return null; }
}

/** @param {{ accessKey: string, secretKey: string }} c */
function basicHeader(c) {
  return "Basic " + lib.base64(new TextEncoder().encode(c.accessKey + ":" + c.secretKey));
}

// The API is ../v1 from the console (/ui/), so that it works behind a
// proxy's path prefix.
const client = lib.createMqgateClient({ baseUrl: new URL("..", location.href).href });
client.use({
  onRequest({ request }) {
    // Marks the console's calls: their 401 comes without WWW-Authenticate
    // (no browser dialog; the sign-in form answers it).
    request.headers.set("X-Requested-With", "XMLHttpRequest");
    const c = credentials();
    if (c) request.headers.set("Authorization", basicHeader(c));
    return request;
  },
});

/**
 * hooks.unauthorized is called with every 401 (lib.js shows the sign-in form).
 * @type {{ unauthorized: (err: import("../../clients/ts/src/index").ProblemError) => void }}
 */
const hooks = { unauthorized: () => {} };

/**
 * call unwraps an answer: its data, or a thrown ProblemError (a 401 also
 * goes to hooks.unauthorized).
 * @template {import("../../clients/ts/src/index").Result} R
 * @param {Promise<R>} pending
 * @returns {Promise<import("../../clients/ts/src/index").ResultData<R>>}
 */
async function call(pending) {
  const r = await pending;
  try {
    return lib.unwrap(r);
  } catch (err) {
    if (err instanceof lib.ProblemError && err.status === 401) hooks.unauthorized(err);
    throw err;
  }
}

/** @param {string} topic */
const topicPath = (topic) => ({ params: { path: { topic } } });
/** @param {string} group */
const groupPath = (group) => ({ params: { path: { group } } });
const mergePatch = { "Content-Type": "application/merge-patch+json" };

export const mq = {
  hooks,
  credentials,
  basicHeader,
  /** isProblem reports whether err is an answer of the API with that status (any when absent). @param {unknown} err @param {number} [status] */
  isProblem: (err, status) => err instanceof lib.ProblemError && (status === undefined || err.status === status),

  // topics
  listTopics: () => call(client.GET("/topics")),
  /** @param {string} topic */
  topicStatus: (topic) => call(client.GET("/topics/{topic}/status", topicPath(topic))),
  /** @param {string} topic @param {S["TopicRequest"]} body */
  putTopic: (topic, body) => call(client.PUT("/topics/{topic}", { ...topicPath(topic), body })),
  /** @param {string} topic */
  deleteTopic: (topic) => call(client.DELETE("/topics/{topic}", topicPath(topic))),
  /** @param {string} topic @param {number} queueId @param {number} offset @param {number} max */
  readQueue: (topic, queueId, offset, max) =>
    call(client.GET("/topics/{topic}/queues/{queueId}/messages", { params: { path: { topic, queueId }, query: { offset, max } } })),
  /**
   * searchMessages finds a topic's messages stored in [from, to).
   * @param {string} topic
   * @param {NonNullable<Paths["/topics/{topic}/messages"]["get"]["parameters"]["query"]>} query
   */
  searchMessages: (topic, query) => call(client.GET("/topics/{topic}/messages", { params: { path: { topic }, query } })),
  /** @param {string} topic @param {S["SendMessage"]} msg @param {string} [idempotencyKey] */
  send: (topic, msg, idempotencyKey) => call(client.POST("/topics/{topic}/messages", {
    params: { path: { topic }, header: idempotencyKey ? { "Idempotency-Key": idempotencyKey } : {} }, body: msg,
  })),

  // groups
  listGroups: () => call(client.GET("/groups")),
  /** @param {string} group */
  getGroup: (group) => call(client.GET("/groups/{group}", groupPath(group))),
  /** @param {string} group @param {S["GroupRequest"]} body */
  putGroup: (group, body) => call(client.PUT("/groups/{group}", { ...groupPath(group), body })),
  /** @param {string} group @param {S["GroupPatch"]} body */
  patchGroup: (group, body) => call(client.PATCH("/groups/{group}", { ...groupPath(group), body, headers: mergePatch })),
  /** @param {string} group */
  deleteGroup: (group) => call(client.DELETE("/groups/{group}", groupPath(group))),
  /** @param {string} group */
  progress: (group) => call(client.GET("/groups/{group}/progress", groupPath(group))),
  /** @param {string} group @param {S["ResetOffsetRequest"]} body */
  resetOffset: (group, body) => call(client.POST("/groups/{group}/reset-offset", { ...groupPath(group), body })),
  /** @param {string} group @param {string} [topic] every topic of the group when absent */
  skipBacklog: (group, topic) => call(client.POST("/groups/{group}/skip-backlog", { ...groupPath(group), body: topic ? { topic } : {} })),

  // consume
  /** @param {string} group @param {string} topic @param {S["PullRequest"]} body */
  pull: (group, topic, body) => call(client.POST("/groups/{group}/topics/{topic}/pull", { params: { path: { group, topic } }, body })),
  /** @param {string} group @param {string[]} receipts */
  ack: (group, receipts) => call(client.POST("/groups/{group}/ack", { ...groupPath(group), body: { receipts } })),
  /** @param {string} group @param {S["NackItem"][]} items */
  nack: (group, items) => call(client.POST("/groups/{group}/nack", { ...groupPath(group), body: { items } })),
  /** @param {string} group @param {S["LeaseItem"][]} items */
  leases: (group, items) => call(client.POST("/groups/{group}/leases", { ...groupPath(group), body: { items } })),

  // messages
  /** @param {string} messageId */
  getMessage: (messageId) => call(client.GET("/messages/{messageId}", { params: { path: { messageId } } })),
  /** @param {string} messageId */
  messageTrace: (messageId) => call(client.GET("/messages/{messageId}/trace", { params: { path: { messageId } } })),
  /** @param {string} topic @param {string} key */
  findByKey: (topic, key) => call(client.GET("/messages", { params: { query: { topic, key } } })),

  // broker
  brokerStatus: () => call(client.GET("/broker/status")),
  /** cluster is this node's view of its cluster (never forwarded: the node the console is served from answers). */
  cluster: () => call(client.GET("/cluster")),
  stats: () => call(client.GET("/stats")),
  /**
   * statsStream opens GET /stats/stream: the body's stream of server-sent
   * events (fetch, not EventSource, which cannot send Authorization).
   * @param {number} intervalMs @param {AbortSignal} signal
   */
  statsStream: async (intervalMs, signal) => {
    const r = await client.GET("/stats/stream", { params: { query: { intervalMs } }, parseAs: "stream", signal });
    if (!r.response.ok || !r.data) return call(Promise.resolve(r)).then(() => { throw new Error("the stats stream has no body"); });
    return /** @type {ReadableStream<Uint8Array>} */ (r.data);
  },

  // SQS endpoint (--sqs-listen)
  /**
   * listSQSQueues lists the SQS endpoint's queues whose names start with
   * prefix (all when empty); {enabled: false, queues: []} when it is off.
   * @param {string} [prefix]
   */
  listSQSQueues: (prefix) => call(client.GET("/sqs/queues", { params: { query: prefix ? { prefix } : {} } })),

  // dead letters
  /**
   * @param {string} group
   * @param {NonNullable<Paths["/groups/{group}/dlq"]["get"]["parameters"]["query"]>} query
   */
  listDeadLetters: (group, query) => call(client.GET("/groups/{group}/dlq", { params: { path: { group }, query } })),
  /** @param {string} group @param {string} messageId */
  getDeadLetter: (group, messageId) => call(client.GET("/groups/{group}/dlq/{messageId}", { params: { path: { group, messageId } } })),
  /** @param {string} group @param {string} messageId */
  discardDeadLetter: (group, messageId) => call(client.DELETE("/groups/{group}/dlq/{messageId}", { params: { path: { group, messageId } } })),
  /** @param {string} group @param {S["ResendRequest"]} body */
  resendDeadLetters: (group, body) => call(client.POST("/groups/{group}/dlq/resend", { ...groupPath(group), body })),

  // timers
  /** @param {NonNullable<Paths["/timers"]["get"]["parameters"]["query"]>} query */
  listTimers: (query) => call(client.GET("/timers", { params: { query } })),
  /** @param {string} id */
  getTimer: (id) => call(client.GET("/timers/{id}", { params: { path: { id } } })),
  /** @param {string} id @param {S["RescheduleRequest"]} body */
  rescheduleTimer: (id, body) => call(client.PUT("/timers/{id}", { params: { path: { id } }, body })),
  /** @param {string} id */
  cancelTimer: (id) => call(client.DELETE("/timers/{id}", { params: { path: { id } } })),
};

/** @type {any} */ (window).mq = mq;
