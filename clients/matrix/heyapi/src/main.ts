// The @hey-api/openapi-ts row of the generator matrix (../../matrix_test.go):
// the SDK generated from docs/openapi.json into src/client at test time
// sends a message, pulls it, extends its lease and acks it against the
// server at $MQGATE_URL, checking each answer. It prints one line per step;
// any surprise throws (exit 1) with what it was.
import { client } from "./client/client.gen.js";
import { ackMessages, changeInvisibleTime, pullMessages, sendMessages } from "./client/index.js";
import type { PulledMessage } from "./client/index.js";

const url = process.env.MQGATE_URL!;
const topic = process.env.MQGATE_TOPIC!;
const group = process.env.MQGATE_GROUP!;
client.setConfig({ baseUrl: `${url}/v1` });

/** ok returns an answer's data, throwing on an error answer. */
function ok<T>(what: string, res: { data?: T; error?: unknown; response: Response }): T {
  if (res.error !== undefined || res.data === undefined) {
    throw new Error(`${what}: ${res.response.status} ${JSON.stringify(res.error)}`);
  }
  return res.data;
}

/** near requires an RFC 3339 time within 3 s of want (ms since the epoch). */
function near(what: string, at: string | undefined, want: number): number {
  const t = Date.parse(at ?? "");
  if (!(Math.abs(t - want) < 3000)) {
    throw new Error(`${what}: ${at}, want about ${new Date(want).toISOString()}`);
  }
  return t;
}

const sent = ok("send", await sendMessages({ path: { topic }, body: { body: "hello from hey-api", tag: "matrix" } }));
const id = sent.results[0]!.messageId;
console.log("sent", id);

const pulledAt = Date.now();
const pulled = ok(
  "pull",
  await pullMessages({ path: { group, topic }, body: { maxMessages: 1, waitMs: 5000, invisibleMs: 20_000 } }),
);
if (pulled.messages.length !== 1) throw new Error(`pull: ${pulled.messages.length} messages`);
// The types say what the spec does: receipt and leaseUntil are always there.
const m: PulledMessage = pulled.messages[0]!;
const receipt: string = m.receipt;
if (m.messageId !== id || receipt === "") throw new Error(`pull: ${JSON.stringify(m)}`);
const first = near("pull leaseUntil", m.leaseUntil, pulledAt + 20_000);
console.log("pulled", m.messageId, m.body);

const leasedAt = Date.now();
const leased = ok("lease", await changeInvisibleTime({ path: { group }, body: { items: [{ receipt, invisibleMs: 60_000 }] } }));
const res = leased.results[0]!;
if (res.status !== "ok") throw new Error(`lease: ${JSON.stringify(res)}`);
if (near("lease leaseUntil", res.leaseUntil, leasedAt + 60_000) <= first) throw new Error("lease: the lease did not move");
console.log("lease extended");

const acked = ok("ack", await ackMessages({ path: { group }, body: { receipts: [res.newReceipt ?? receipt] } }));
if (acked.results[0]?.status !== "ok") throw new Error(`ack: ${JSON.stringify(acked)}`);
console.log("acked");

const again = ok("pull again", await pullMessages({ path: { group, topic }, body: { waitMs: 300 } }));
if (again.messages.length !== 0) throw new Error(`pull again: ${JSON.stringify(again)}`);
console.log("empty");
