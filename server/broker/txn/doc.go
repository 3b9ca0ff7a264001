// Package txn is the transaction family of the broker (RocketMQ's
// transactional messages): the records of the two system topics, the
// snapshot of the unresolved transactions, the State those records make
// with its apply, and the Service at work on them — following the two
// queues through the store into the State, the snapshot file, the
// requests (a transactional send's checks and reservation, commit,
// rollback, describe, the check pulls), the leader's roll-back loop and
// retention's carry of half messages.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"). It imports, of the module, the store's
// facade (storage, storage/message), internal/worker (the loop's backoff)
// and server/broker/quote, and never server/broker: what it needs of the
// broker it is given in a Config (the store as the Store interface, the
// clock, the log, the options, the broker's name rules and sentinels, and
// as funcs the registry's word on a topic, the topic gate, the wait for
// the dispatcher). server/broker imports it and keeps a facade (txn.go
// there): the exported requests, which check that the broker is open and
// delegate, their types as aliases of this package's (Transaction is
// View, TransactionStats is Stats, TransactionFinishedError is
// FinishedError, ErrTransactionNotFound and ErrTransactionFinished are
// ErrNotFound and ErrFinished), the quotas on unresolved transactions
// (Reserve is given the check), what a send and a pull render (a
// duplicate send's result, a check's half message), and the calls of the
// broker's other files: open, close and the periodic snapshot, a
// follower's catch-up, the loop as a leader-only service, a topic's
// deletion, retention's carry and the records it keeps (KeepFrom).
//
// # Records
//
// Both topics are written and read at queue 0 (server/broker/doc.go, "What
// the broker persists", describes them beside the other families' topics):
//
//   - HalfTopic (rmq_sys_TRANS_HALF): a half message is the message itself,
//     its destination in REAL_TOPIC and REAL_QID, its producer group in
//     PropGroup and its first check's delay in PropCheckAfter; its message
//     id is the transaction id. A copy carried past retention adds PropID
//     and UNIQ_KEY Key(id), the checks handed out (PropChecks) and the
//     next check's due time (PropNextCheck). ReadHalf reads what applying
//     needs of either.
//   - OpTopic (rmq_sys_TRANS_OP): an OpRecord (JSON) per change of one
//     transaction, with UNIQ_KEY Key(id): Checked (a check handed out: the
//     new count and the next due time), Committed or RolledBack (with a
//     reason, and the transaction's group, topic, queue and send time, so
//     that the newest op record of a finished transaction says how it
//     ended). OpMessage encodes one, DecodeOp decodes and checks one.
//
// # Apply
//
// State.ApplyHalf and State.ApplyOp apply the records in queue order,
// State.Install a decoded Snapshot; Service.Follow calls them with what
// the store dispatched since the State's position — at open, on a
// follower, and after each of the family's own writes (every writer
// stores its records first and then follows: nothing is changed in memory
// that is not in the log) — and records how far with State.Followed.
// They read neither the clock nor a random source: a transaction's send
// time, check count and due times travel inside its records (the request
// that writes a record chooses them), so every copy of the log makes the
// same State.
//
// # Requests and services
//
// A commit writes, in one batch, the message to its topic and queue
// (CommittedCopy: the half message named by the transaction) and an op
// record Committed; a rollback writes the op record RolledBack alone; a
// repeated one finds how the transaction ended from its newest op record
// (by UNIQ_KEY Key(id)). A commit whose topic was deleted since the send,
// or whose half message is lost, rolls back instead. A transaction's first
// check falls due CheckAfter after the send, each later one
// max(CheckAfter, Config.CheckInterval) after the previous was handed out
// (PullChecks); one handed out Config.MaxChecks times and due again is
// rolled back by Loop, the leader-only roll-back loop, whose pass is
// rollBackExhausted. Carry copies, before retention deletes the CommitLog
// below a cut, every unresolved transaction whose latest half record lies
// there (HalfCopy); RollbackTopic ends a deleted topic's transactions.
//
// # The snapshot
//
// config/transactions.snapshot (SnapshotFile) is the State and the
// Position it covers (JSON, SnapshotVersion): per queue the next offset
// and the last record applied, whose CommitLog offset lets the broker see
// that the queue still holds what the snapshot saw; per transaction its
// id, latest half record, destination, group, checkAfterMs, send time,
// checks and next check. DecodeSnapshot refuses what it cannot trust
// (Names carries the broker's name rules), and the broker then rebuilds the
// State from the queues, which retention keeps from the snapshot's
// position on.
//
// # Memory only
//
// Not in any record: the heaps that order the transactions by their next
// check (per producer group, and the exhausted ones whose every check was
// handed out), the reservations of transactional sends being written
// (Reserve, Release: the quotas count them until ApplyHalf sees their half
// record), the check pulls waiting on a group (Wait) and their change
// signals, the Wake signal of the roll-back loop, a Txn's op lock and its
// Unsure flag (a commit failed with an unknown outcome), and beside the
// State in the Service its counters (Stats), the recovery report and the
// snapshot's position.
//
// # Locks
//
// State has one lock (State.Lock, promoted to the Service), which guards
// all of it and the Service's fields; every method of State but Lock,
// Unlock and Wake needs it held, and so does Service.Follow. A Txn's op
// lock serialises the operations on one transaction (a commit, a
// rollback, a check handed out, a carry) across their write: it is taken
// before the State's lock, and never waited for while holding it —
// TakeDue, TakeExhausted and the scans under the State's lock
// (RollbackTopic) use TryLockOp. A commit and a check pull take the
// topic gate (Config.Gate) while holding op locks, never while holding
// the State's lock, which a commit takes under the gate to follow its
// records; RollbackTopic runs under the gate's write side and only tries
// op locks. Under the State's lock the family takes nothing of the
// broker's but the store's own locks. The place of both among the
// broker's locks is in ARCHITECTURE.md.
package txn
