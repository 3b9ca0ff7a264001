// End-to-end suite of @mqgate/client against a real mqgate server.
//
// MQGATE_URL is a server without an ACL file; MQGATE_AUTH_URL (optional) one
// with an ACL file whose admin account is MQGATE_ACCESS_KEY /
// MQGATE_SECRET_KEY and whose bearer JWTs are signed with
// MQGATE_JWT_SECRET. clients/ts/e2e_test.go starts both (with RocketMQ's
// delay levels compressed to milliseconds) and runs this file with
// `node --test`; every step checks real results: ids, counts, bodies.

import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { describe, test } from "node:test";

import {
  createMqgateClient,
  isProblem,
  isProblemError,
  messageBytes,
  messageText,
  ProblemError,
  sendRaw,
  unwrap,
  type Message,
  type PulledMessage,
  type MqgateClient,
  type Schemas,
} from "../src/index.js";

const baseUrl = process.env.MQGATE_URL;
if (!baseUrl) throw new Error("MQGATE_URL must name the server to test (clients/ts/e2e_test.go sets it)");
const client = createMqgateClient({ baseUrl });

/** A name no earlier run of the suite used on this server. */
const run = Date.now().toString(36);
const name = (what: string) => `ts-${what}-${run}`;

/** putTopic creates (or replaces) a topic with queues queues. */
async function putTopic(topic: string, queues: number): Promise<Schemas["Topic"]> {
  return unwrap(await client.PUT("/topics/{topic}", { params: { path: { topic } }, body: { queues } }));
}

/** send sends one JSON message and returns its result. */
async function send(topic: string, message: Schemas["SendMessage"]): Promise<Schemas["SendResult"]> {
  const res = unwrap(await client.POST("/topics/{topic}/messages", { params: { path: { topic } }, body: message }));
  assert.equal(res.results.length, 1);
  return res.results[0]!;
}

/** pull pulls once. */
async function pull(group: string, topic: string, req: Schemas["PullRequest"]): Promise<PulledMessage[]> {
  const res = unwrap(await client.POST("/groups/{group}/topics/{topic}/pull", { params: { path: { group, topic } }, body: req }));
  return res.messages;
}

/** pullN long-polls until n messages arrived, failing after timeoutMs. */
async function pullN(group: string, topic: string, n: number, timeoutMs = 10_000, invisibleMs = 30_000): Promise<PulledMessage[]> {
  const got: PulledMessage[] = [];
  const deadline = Date.now() + timeoutMs;
  while (got.length < n) {
    const left = deadline - Date.now();
    assert.ok(left > 0, `${got.length} of ${n} messages of ${topic} for ${group} within ${timeoutMs} ms`);
    got.push(...(await pull(group, topic, { maxMessages: Math.min(32, n - got.length), waitMs: Math.min(left, 2000), invisibleMs })));
  }
  assert.equal(got.length, n, "no more messages than expected");
  return got;
}

/** statuses are the per-receipt statuses of an ack, nack or lease change. */
const statuses = (res: Schemas["ReceiptResponse"]) => res.results.map((r) => r.status);

/** ack acks receipts and returns the statuses. */
async function ack(group: string, ...receipts: string[]): Promise<string[]> {
  return statuses(unwrap(await client.POST("/groups/{group}/ack", { params: { path: { group } }, body: { receipts } })));
}

/** progress is the group's consume progress. */
async function progress(group: string): Promise<Schemas["Progress"]> {
  return unwrap(await client.GET("/groups/{group}/progress", { params: { path: { group } } }));
}

/** inFlight counts the leases the group holds on topic's queues. */
const inFlight = (p: Schemas["Progress"], topic: string) =>
  p.queues.filter((q) => q.topic === topic).reduce((n, q) => n + q.inFlight, 0);

/** queueLag adds up the lag of topic's queues. */
const queueLag = (p: Schemas["Progress"], topic: string) =>
  p.queues.filter((q) => q.topic === topic && q.queueId >= 0).reduce((n, q) => n + q.lag, 0);

/** rejectsWith asserts that call throws a ProblemError with status and code, and returns it. */
async function rejectsWith(call: () => Promise<unknown>, status: number, code: string): Promise<ProblemError> {
  try {
    await call();
  } catch (e) {
    assert.ok(isProblemError(e), `a ProblemError, not ${String(e)}`);
    assert.equal(e.code, code, e.message);
    assert.equal(e.status, status, e.message);
    assert.equal(e.response?.status, status);
    assert.equal(e.problem.type, "urn:mqgate:problem:" + code);
    assert.ok(e.detail && e.detail.length > 0, "a detail");
    return e;
  }
  assert.fail(`expected a ${status} ${code}`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("topics and sends", () => {
  const topic = name("orders");

  test("create a topic, get it, list it", async () => {
    const created = unwrap(await client.PUT("/topics/{topic}", { params: { path: { topic } }, body: { queues: 2 } }));
    assert.equal(created.name, topic);
    assert.equal(created.queues, 2);
    const got = unwrap(await client.GET("/topics/{topic}", { params: { path: { topic } } }));
    assert.deepEqual({ name: got.name, queues: got.queues, perm: got.perm }, { name: topic, queues: 2, perm: created.perm });
    const list = unwrap(await client.GET("/topics"));
    assert.ok(list.topics.some((t) => t.name === topic && t.queues === 2), "the list has the topic");
  });

  test("single send: the message comes back with its tag, keys, properties and body", async () => {
    const sent = await send(topic, { body: '{"id":1001}', tag: "created", keys: ["order-1001"], properties: { source: "web" } });
    assert.match(sent.messageId, /^[0-9A-F]+$/);
    assert.ok(sent.queueId === 0 || sent.queueId === 1);
    const got = unwrap(await client.GET("/messages/{messageId}", { params: { path: { messageId: sent.messageId } } }));
    assert.equal(got.messageId, sent.messageId);
    assert.equal(got.topic, topic);
    assert.equal(got.queueId, sent.queueId);
    assert.equal(got.queueOffset, sent.queueOffset);
    assert.equal(messageText(got), '{"id":1001}');
    assert.equal(got.tag, "created");
    assert.deepEqual(got.keys, ["order-1001"]);
    assert.deepEqual(got.properties, { source: "web" });
  });

  test("batch send: results in order, one per message, offsets ascending per queue", async () => {
    const bodies = ["a", "b", "c", "d", "e"];
    const res = unwrap(
      await client.POST("/topics/{topic}/messages", {
        params: { path: { topic } },
        body: { messages: bodies.map((body, i) => ({ body, tag: "paid", keys: [`batch-${i}`] })) },
      }),
    );
    assert.equal(res.results.length, bodies.length);
    assert.equal(new Set(res.results.map((r) => r.messageId)).size, bodies.length, "distinct ids");
    const last = new Map<number, number>();
    for (const [i, r] of res.results.entries()) {
      const prev = last.get(r.queueId);
      if (prev !== undefined) assert.ok(r.queueOffset > prev, `message ${i} after the earlier ones of queue ${r.queueId}`);
      last.set(r.queueId, r.queueOffset);
      const m = unwrap(await client.GET("/messages/{messageId}", { params: { path: { messageId: r.messageId } } }));
      assert.equal(m.body, bodies[i]);
      assert.deepEqual(m.keys, [`batch-${i}`]);
    }
  });

  test("an Idempotency-Key makes a repeated send return the first result", async () => {
    const call = () =>
      client.POST("/topics/{topic}/messages", {
        params: { path: { topic }, header: { "Idempotency-Key": `once-${run}` } },
        body: { body: "only once" },
      });
    const first = await call();
    const again = await call();
    const [r1] = unwrap(first).results;
    const [r2] = unwrap(again).results;
    assert.equal(r1!.duplicate, undefined);
    assert.deepEqual(r2, { ...r1!, duplicate: true }, "the first send's result, marked a duplicate");
    assert.equal(again.response.headers.get("Idempotent-Replayed"), "true");
    assert.equal(first.response.headers.get("Idempotent-Replayed"), null);
  });
});

describe("raw sends", () => {
  const topic = name("raw");
  const group = name("raw-reader");

  test("application/octet-stream bytes and a text/plain body come back as sent", async () => {
    await putTopic(topic, 1);
    const bytes = new Uint8Array([0, 1, 2, 0xfe, 0xff, 0x80, 0x7f, 10]); // not UTF-8
    const bin = await sendRaw(client, topic, bytes, {
      tag: "raw",
      keys: ["raw-1", "raw-2"],
      properties: { "Source-System": "batch-job" },
    });
    const text = await sendRaw(client, topic, "héllo, wörld", { contentType: "text/plain; charset=utf-8", tag: "txt" });
    assert.notEqual(bin.messageId, text.messageId);
    assert.equal(text.queueOffset, bin.queueOffset + 1);

    const [m1, m2] = await pullN(group, topic, 2);
    assert.equal(m1!.messageId, bin.messageId);
    assert.equal(m1!.bodyEncoding, "base64", "binary bodies come base64-encoded");
    assert.deepEqual(messageBytes(m1!), bytes);
    assert.equal(m1!.tag, "raw");
    assert.deepEqual(m1!.keys, ["raw-1", "raw-2"]);
    assert.deepEqual(m1!.properties, { "source-system": "batch-job" }, "property names from headers are lower-cased");
    assert.equal(m2!.messageId, text.messageId);
    assert.equal(m2!.bodyEncoding, "utf8");
    assert.equal(messageText(m2!), "héllo, wörld");
    assert.equal(m2!.tag, "txt");
    assert.deepEqual(await ack(group, m1!.receipt, m2!.receipt), ["ok", "ok"]);
  });

  test("an empty raw body is refused with empty-body", async () => {
    await rejectsWith(() => sendRaw(client, topic, new Uint8Array(0)), 400, "empty-body");
  });
});

describe("consume: long poll, ack, nack, leases", () => {
  const topic = name("consume");
  const group = name("billing");

  test("a long poll waits for a message sent while it waits", async () => {
    await putTopic(topic, 1);
    const start = Date.now();
    const waiting = pull(group, topic, { maxMessages: 4, waitMs: 8000, invisibleMs: 30_000 });
    await sleep(300);
    const sent = await send(topic, { body: "worth the wait" });
    const got = await waiting;
    const waited = Date.now() - start;
    assert.equal(got.length, 1);
    assert.equal(got[0]!.messageId, sent.messageId);
    assert.equal(messageText(got[0]!), "worth the wait");
    assert.ok(waited >= 300 && waited < 8000, `answered when the message came (${waited} ms), not at waitMs`);
    assert.deepEqual(await ack(group, got[0]!.receipt), ["ok"]);
    // Acked: not delivered again; an empty long poll waits its waitMs.
    const emptyStart = Date.now();
    assert.deepEqual(await pull(group, topic, { waitMs: 300 }), []);
    assert.ok(Date.now() - emptyStart >= 250, "an empty pull waited");
  });

  test("ack: a held lease shows in the progress until it is acked; a repeated ack is ok", async () => {
    const sent = await send(topic, { body: "ack me" });
    const [m] = await pullN(group, topic, 1);
    assert.equal(m!.messageId, sent.messageId);
    assert.equal(m!.reconsumeTimes, 0);
    assert.equal(inFlight(await progress(group), topic), 1);
    assert.deepEqual(await ack(group, m!.receipt, m!.receipt), ["ok", "ok"]);
    assert.equal(inFlight(await progress(group), topic), 0);
    assert.deepEqual(await ack(group, "not-a-receipt"), ["invalid"]);
  });

  test("nack with a delay level: the message comes back as a retry after that level's delay", async () => {
    const status = unwrap(await client.GET("/broker/status"));
    const level3 = status.delayLevels.find((l) => l.level === 3);
    assert.ok(level3, "the server has delay level 3");

    const sent = await send(topic, { body: "retry me", tag: "t" });
    const [m] = await pullN(group, topic, 1);
    const nackedAt = Date.now();
    const res = unwrap(
      await client.POST("/groups/{group}/nack", {
        params: { path: { group } },
        body: { items: [{ receipt: m!.receipt, delayLevel: 3, reason: "try again" }] },
      }),
    );
    assert.deepEqual(statuses(res), ["ok"]);
    const [retry] = await pullN(group, topic, 1);
    assert.ok(Date.now() - nackedAt >= level3.delayMs - 5, `not before level 3's ${level3.delayMs} ms`);
    assert.equal(retry!.originMessageId, sent.messageId);
    assert.notEqual(retry!.messageId, sent.messageId, "a retry is a new copy");
    assert.equal(retry!.reconsumeTimes, 1);
    assert.equal(messageText(retry!), "retry me");
    assert.equal(retry!.tag, "t");
    assert.deepEqual(await ack(group, m!.receipt), ["expired"], "the nacked delivery's receipt is spent");
    assert.deepEqual(await ack(group, retry!.receipt), ["ok"]);
  });

  test("lease change: a lease set to 0 makes the message visible again at once, without an attempt", async () => {
    const sent = await send(topic, { body: "later" });
    const [held] = await pullN(group, topic, 1);
    const longer = unwrap(
      await client.POST("/groups/{group}/leases", {
        params: { path: { group } },
        body: { items: [{ receipt: held!.receipt, invisibleMs: 60_000 }] },
      }),
    );
    assert.deepEqual(statuses(longer), ["ok"]);
    const heldUntil = Date.parse(held!.leaseUntil);
    const movedUntil = Date.parse(longer.results[0]!.leaseUntil!);
    assert.ok(Math.abs(movedUntil - (Date.now() + 60_000)) < 5_000, `leaseUntil ${longer.results[0]!.leaseUntil} is about now + 60 s`);
    assert.ok(movedUntil > heldUntil, "the longer lease ends later than the pull's");
    const receipt = longer.results[0]!.newReceipt ?? held!.receipt;
    assert.deepEqual(await pull(group, topic, { waitMs: 200 }), [], "the longer lease hides it");
    const now = unwrap(
      await client.POST("/groups/{group}/leases", { params: { path: { group } }, body: { items: [{ receipt, invisibleMs: 0 }] } }),
    );
    assert.deepEqual(statuses(now), ["ok"]);
    const [again] = await pullN(group, topic, 1);
    assert.equal(again!.messageId, sent.messageId, "the same message, not a retry copy");
    assert.equal(again!.reconsumeTimes, 0, "a postponement is no failed attempt");
    assert.deepEqual(await ack(group, again!.receipt), ["ok"]);
  });
});

describe("dead letters", () => {
  const topic = name("dlq");
  const group = name("dlq-group");

  test("nack -1 sends straight to the DLQ; list, get, resend and discard", async () => {
    await putTopic(topic, 1);
    const put = unwrap(await client.PUT("/groups/{group}", { params: { path: { group } }, body: { retryMaxTimes: 3 } }));
    assert.equal(put.name, group);
    assert.equal(put.retryMaxTimes, 3);
    const first = await send(topic, { body: "poison 1", tag: "bad", keys: ["p-1"] });
    const second = await send(topic, { body: "poison 2", tag: "bad" });
    const ms = await pullN(group, topic, 2);
    assert.deepEqual(ms.map((m) => m.messageId), [first.messageId, second.messageId]);
    const nacked = unwrap(
      await client.POST("/groups/{group}/nack", {
        params: { path: { group } },
        body: { items: ms.map((m) => ({ receipt: m.receipt, delayLevel: -1, reason: `payment service down ${m.body}` })) },
      }),
    );
    assert.deepEqual(statuses(nacked), ["ok", "ok"]);
    assert.deepEqual(await pull(group, topic, { waitMs: 300 }), [], "dead letters never reach pulls");

    const list = unwrap(
      await client.GET("/groups/{group}/dlq", { params: { path: { group }, query: { originalTopic: topic, reasonContains: "PAYMENT" } } }),
    );
    assert.equal(list.items.length, 2);
    const byOrigin = new Map(list.items.map((d) => [d.originMessageId, d]));
    const dead1 = byOrigin.get(first.messageId);
    const dead2 = byOrigin.get(second.messageId);
    assert.ok(dead1 && dead2, "one letter per nacked message");
    assert.equal(dead1.status, "dead");
    assert.equal(dead1.originalTopic, topic);
    assert.equal(dead1.reason, "payment service down poison 1");
    assert.ok(dead1.attempts.length >= 1, "its attempt history");

    const one = unwrap(await client.GET("/groups/{group}/dlq/{messageId}", { params: { path: { group, messageId: dead1.messageId } } }));
    assert.equal(messageText(one), "poison 1");
    assert.equal(one.tag, "bad");
    assert.deepEqual(one.keys, ["p-1"]);

    const resent = unwrap(
      await client.POST("/groups/{group}/dlq/resend", { params: { path: { group } }, body: { messageIds: [dead1.messageId] } }),
    );
    assert.deepEqual(resent, { resent: [dead1.messageId], skipped: [] });
    const [back] = await pullN(group, topic, 1);
    assert.equal(messageText(back!), "poison 1", "a resent letter is delivered to the group again");
    assert.equal(back!.tag, "bad");
    assert.deepEqual(await ack(group, back!.receipt), ["ok"]);
    const again = unwrap(
      await client.POST("/groups/{group}/dlq/resend", { params: { path: { group } }, body: { messageIds: [dead1.messageId] } }),
    );
    assert.deepEqual(again, { resent: [], skipped: [dead1.messageId] }, "a letter is resent once");

    const discarded = await client.DELETE("/groups/{group}/dlq/{messageId}", { params: { path: { group, messageId: dead2.messageId } } });
    assert.equal(discarded.response.status, 204);
    assert.equal(unwrap(discarded), undefined);
    const left = unwrap(await client.GET("/groups/{group}/dlq", { params: { path: { group }, query: { originalTopic: topic, status: "dead" } } }));
    assert.deepEqual(left.items, [], "no letter is left dead");
    const gone = unwrap(await client.GET("/groups/{group}/dlq/{messageId}", { params: { path: { group, messageId: dead2.messageId } } }));
    assert.equal(gone.status, "discarded");
    assert.equal(unwrap(await client.GET("/groups/{group}/dlq/{messageId}", { params: { path: { group, messageId: dead1.messageId } } })).status, "resent");
  });
});

describe("timers", () => {
  const topic = name("timers");
  const group = name("timer-reader");

  test("a delayed send is a timer: list, get, reschedule (delivered), cancel (never delivered)", async () => {
    await putTopic(topic, 1);
    const keep = await send(topic, { body: "due in ten minutes", tag: "later", delayMs: 600_000 });
    const drop = await send(topic, { body: "cancel me", delayMs: 600_000 });
    const page = unwrap(await client.GET("/timers", { params: { query: { topic, limit: 10 } } }));
    assert.deepEqual(page.items.map((t) => t.id).sort(), [keep.messageId, drop.messageId].sort());
    assert.equal(page.next, undefined, "one page");

    const timer = unwrap(await client.GET("/timers/{id}", { params: { path: { id: keep.messageId } } }));
    assert.equal(timer.topic, topic);
    assert.equal(timer.tag, "later");
    assert.equal(messageText(timer), "due in ten minutes");
    const due = Date.parse(timer.deliverAt);
    assert.ok(due > Date.now() + 500_000 && due <= Date.now() + 600_000, `due in ten minutes: ${timer.deliverAt}`);
    assert.deepEqual(await pull(group, topic, { waitMs: 200 }), [], "not delivered before it is due");

    const cancelled = await client.DELETE("/timers/{id}", { params: { path: { id: drop.messageId } } });
    assert.equal(cancelled.response.status, 204);
    await rejectsWith(async () => unwrap(await client.GET("/timers/{id}", { params: { path: { id: drop.messageId } } })), 404, "message-not-found");

    const moved = unwrap(await client.PUT("/timers/{id}", { params: { path: { id: keep.messageId } }, body: { delayMs: 100 } }));
    assert.equal(moved.id, keep.messageId);
    assert.ok(Date.parse(moved.deliverAt) <= Date.now() + 100, `rescheduled to 100 ms from now: ${moved.deliverAt}`);
    const [m] = await pullN(group, topic, 1);
    assert.equal(messageText(m!), "due in ten minutes");
    assert.equal(m!.tag, "later");
    assert.deepEqual(await ack(group, m!.receipt), ["ok"]);
    assert.deepEqual(await pull(group, topic, { waitMs: 300 }), [], "the cancelled timer never fires");
    assert.deepEqual(unwrap(await client.GET("/timers", { params: { query: { topic } } })).items, [], "no timer left");
  });
});

describe("offsets and progress", () => {
  const topic = name("replay");
  const group = name("replayer");

  test("progress counts the backlog; reset-offset rewinds the group to a time", async () => {
    await putTopic(topic, 1);
    const before = new Date(Date.now() - 1000).toISOString();
    const sent = [];
    for (const body of ["one", "two", "three"]) sent.push(await send(topic, { body }));
    const [m1] = await pullN(group, topic, 1);
    assert.equal(m1!.body, "one");
    assert.deepEqual(await ack(group, m1!.receipt), ["ok"]);
    // The group exists now; the lag is what it has not consumed.
    let p = await progress(group);
    assert.equal(p.group, group);
    assert.equal(queueLag(p, topic), 2);
    assert.equal(p.totalLag, 2);
    const rest = await pullN(group, topic, 2);
    assert.deepEqual(
      rest.map((m) => m.body),
      ["two", "three"],
    );
    p = await progress(group);
    assert.equal(inFlight(p, topic), 2);
    assert.deepEqual(await ack(group, ...rest.map((m) => m.receipt)), ["ok", "ok"]);
    p = await progress(group);
    assert.equal(queueLag(p, topic), 0);
    assert.equal(p.totalLag, 0);
    const q = p.queues.find((x) => x.topic === topic && x.queueId === 0)!;
    assert.equal(q.brokerOffset, sent[2]!.queueOffset + 1);
    assert.equal(q.consumerOffset, q.brokerOffset);

    const reset = unwrap(await client.POST("/groups/{group}/reset-offset", { params: { path: { group } }, body: { timestamp: before, topic } }));
    assert.equal(queueLag(reset, topic), 3, "rewound before the first message");
    assert.equal(reset.totalLag, 3);
    const replayed = await pullN(group, topic, 3);
    assert.deepEqual(
      replayed.map((m) => m.messageId),
      sent.map((s) => s.messageId),
    );
    assert.deepEqual(await ack(group, ...replayed.map((m) => m.receipt)), ["ok", "ok", "ok"]);

    const future = new Date(Date.now() + 60_000).toISOString();
    const forward = unwrap(await client.POST("/groups/{group}/reset-offset", { params: { path: { group } }, body: { timestamp: future, topic } }));
    assert.equal(forward.totalLag, 0);
    const end = forward.queues.find((x) => x.topic === topic && x.queueId === 0)!;
    assert.equal(end.consumerOffset, end.brokerOffset);
  });
});

describe("errors by problem code", () => {
  test("an unknown topic is topic-not-found (unwrap throws a ProblemError)", async () => {
    const topic = name("missing");
    const e = await rejectsWith(async () => unwrap(await client.GET("/topics/{topic}", { params: { path: { topic } } })), 404, "topic-not-found");
    assert.equal(e.problem.instance, `/v1/topics/${topic}`);
    assert.ok(e.problem.requestId, "the request id");
    assert.equal(e.response?.headers.get("X-Request-Id"), e.problem.requestId);
    await rejectsWith(() => pull(name("nobody"), topic, { waitMs: 0 }), 404, "topic-not-found");
  });

  test("the raw result carries the typed problem as error", async () => {
    const { data, error, response } = await client.GET("/topics/{topic}", { params: { path: { topic: name("missing") } } });
    assert.equal(data, undefined);
    assert.equal(response.status, 404);
    assert.equal(response.headers.get("Content-Type"), "application/problem+json");
    assert.ok(isProblem(error));
    assert.equal(error.code, "topic-not-found");
    assert.equal(error.status, 404);
  });

  test("invalid arguments are invalid-argument, bad names invalid-name", async () => {
    const topic = name("args");
    await putTopic(topic, 1);
    const tooMany = await rejectsWith(() => pull(name("g"), topic, { maxMessages: 1000 }), 400, "invalid-argument");
    assert.match(tooMany.detail!, /maxMessages/);
    const badLevel = await rejectsWith(
      async () =>
        unwrap(await client.POST("/groups/{group}/nack", { params: { path: { group: name("g") } }, body: { items: [{ receipt: "r", delayLevel: -2 }] } })),
      400,
      "invalid-argument",
    );
    assert.match(badLevel.detail!, /delayLevel/);
    await rejectsWith(
      async () => unwrap(await client.PUT("/timers/{id}", { params: { path: { id: "0".repeat(32) } }, body: {} })),
      400,
      "invalid-argument",
    );
    await rejectsWith(() => putTopic("no spaces allowed", 1), 400, "invalid-name");
  });
});

describe("authentication", { skip: process.env.MQGATE_AUTH_URL ? false : "MQGATE_AUTH_URL is not set" }, () => {
  const authUrl = process.env.MQGATE_AUTH_URL ?? "";
  const accessKey = process.env.MQGATE_ACCESS_KEY ?? "";
  const secretKey = process.env.MQGATE_SECRET_KEY ?? "";
  const jwtSecret = process.env.MQGATE_JWT_SECRET ?? "";
  const listTopics = async (c: MqgateClient) => unwrap(await c.GET("/topics"));

  /** jwt signs claims with HS256. */
  function jwt(claims: Record<string, unknown>, secret: string): string {
    const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const unsigned = `${part({ alg: "HS256", typ: "JWT" })}.${part(claims)}`;
    return `${unsigned}.${createHmac("sha256", secret).update(unsigned).digest("base64url")}`;
  }
  const claims = () => ({ sub: accessKey, exp: Math.floor(Date.now() / 1000) + 300 });

  test("without credentials: unauthenticated", async () => {
    const e = await rejectsWith(() => listTopics(createMqgateClient({ baseUrl: authUrl })), 401, "unauthenticated");
    assert.match(e.response?.headers.get("WWW-Authenticate") ?? "", /Basic/);
  });

  test("basic: the right secret lists topics, a wrong one is unauthenticated", async () => {
    const ok = createMqgateClient({ baseUrl: authUrl, auth: { basic: { accessKey, secretKey } } });
    const topic = name("guarded");
    assert.equal((await ok.PUT("/topics/{topic}", { params: { path: { topic } }, body: { queues: 1 } })).response.status, 201);
    assert.ok((await listTopics(ok)).topics.some((t) => t.name === topic));
    await rejectsWith(
      () => listTopics(createMqgateClient({ baseUrl: authUrl, auth: { basic: { accessKey, secretKey: secretKey + "x" } } })),
      401,
      "unauthenticated",
    );
  });

  test("bearer: a signed JWT (as a string or from a function) signs in; a forged one does not", async () => {
    assert.ok(Array.isArray((await listTopics(createMqgateClient({ baseUrl: authUrl, auth: { bearer: jwt(claims(), jwtSecret) } }))).topics));
    let asked = 0;
    const refreshing = createMqgateClient({
      baseUrl: authUrl + "/v1",
      auth: {
        bearer: async () => {
          asked++;
          return jwt(claims(), jwtSecret);
        },
      },
    });
    await listTopics(refreshing);
    await listTopics(refreshing);
    assert.equal(asked, 2, "the function is asked before every request");
    await rejectsWith(
      () => listTopics(createMqgateClient({ baseUrl: authUrl, auth: { bearer: jwt(claims(), jwtSecret + "-forged") } })),
      401,
      "unauthenticated",
    );
  });
});
