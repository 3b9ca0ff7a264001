// Package clustercheck tests mqgate the way Jepsen tests a queue: a
// workload of producers and consumers talks to one or more gateway
// endpoints over plain HTTP and records every operation it attempts in a
// History; faults injected meanwhile (a kill -9, a restart) are recorded
// in the same History; a checker then decides from the History alone
// whether the gateway kept its promises. It is Jepsen's total-queue and
// Kafka analyses adapted to pop (lease) semantics.
//
// # The history
//
// Every operation is two events with one op id: an invoke, when the
// client starts the request, and a completion, when it knows how it
// ended. A completion is
//
//   - ok: the request took effect (a 200; for an ack, per receipt, the
//     status "ok");
//   - fail: it definitely did not (a 4xx that means "not done": a bad
//     request, an unknown topic, a rate limit, a receipt that expired);
//   - info: the outcome is unknown (a timeout, a refused or reset
//     connection, any 5xx including 503 flush-timeout, a 409 while the
//     same Idempotency-Key is in flight). An info send may have stored its
//     messages; an info ack may have acked.
//
// Message bodies are unique within a run (a run id, the producer and a
// sequence number), so a body names a message across its copies: the
// original, the retry copies a nack or an expired lease makes under
// %RETRY%<group>, and any copy a broken idempotency check might store.
//
// # The analyses (Check)
//
//   - lost: per group, a body whose send was ok but that the group never
//     got (after the drain), or got but never settled: no ack ok or info
//     (a nacked or expired message whose retry never came back);
//   - unexpected: a delivered body that no send carried, or whose every
//     send attempt definitely failed;
//   - illegal duplicates: a delivery to a group whose pull was invoked
//     after an ack of the same body by that group had completed ok (an ok
//     ack is durable: the message must never come back to that group);
//   - legitimate duplicates, counted by cause: the previous delivery was
//     nacked, its lease had ended, its ack's outcome was unknown, or other
//     (the gateway delivered again before the lease ended; allowed after a
//     machine crash, since a lease is flushed lazily, so counted, not
//     failed);
//   - inconsistent offsets: two bodies at one (topic, queue, queue offset)
//     or under one message id, a delivery whose position differs from its
//     send result's, a body stored twice (two different send results, or a
//     delivered original at two positions: a broken idempotency check);
//   - per-key order: the messages of one sharding key (the workload gives
//     each producer its own) on one queue in the order they were sent —
//     within an ok batch, and between two ok sends the first of which
//     ended before the second was invoked; a send whose outcome is unknown
//     is passed over;
//   - write unavailability: for every recorded fault, the time from the
//     fault to the first ok send completed after it.
//
// # Faults
//
// The tests inject them into real processes: kill -9 and a restart,
// SIGSTOP and SIGCONT (a stale leader), and partitions through Proxy, a
// TCP proxy per directed peer link (each replica dials every other one
// through its own proxy, so each direction of each pair is cut alone:
// one-way partitions as well as isolation).
//
// The workload (Run) sends with an Idempotency-Key and retries a send with
// the same key, rotating over the endpoints, until it is ok or definitely
// failed; its consumers long-poll, ack most messages, nack some and ack
// some too late (after the lease ended); at the end it drains every group
// until nothing has come for a while. The package imports nothing of the
// module: it talks HTTP to the binary, as a user would.
package clustercheck
