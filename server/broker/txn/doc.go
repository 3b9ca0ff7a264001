// Package txn is the transaction family of the broker (RocketMQ's
// transactional messages): the records of the two system topics, the
// snapshot of the unresolved transactions, and the State those records
// make, with its apply.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt and retry moved before it). It
// imports storage/message and server/broker/quote of the module and nothing else, and
// server/broker imports it. What needs the broker stays there: following
// the two queues through the store into the State and the snapshot file
// (txnstate.go, txnrecords.go), the requests — a transactional send, commit,
// rollback, the check pulls — and the leader's roll-back loop (txn.go),
// retention's carry of half messages, and the quotas on unresolved
// transactions.
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
// State.Install a decoded Snapshot; the broker calls them when it follows
// the queues — at open, on a follower, and after each of its own writes —
// and records how far with State.Followed. They read neither the clock
// nor a random source: a transaction's send time, check count and due
// times travel inside its records (the request that writes a record
// chooses them), so every copy of the log makes the same State.
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
// Unsure flag (a commit failed with an unknown outcome). The broker keeps
// its counters, the recovery report and the snapshot's position beside
// the State.
//
// # Locks
//
// State has one lock (State.Lock), which guards all of it; every method
// but Lock, Unlock and Wake needs it held. A Txn's op lock serialises the
// operations on one transaction (a commit, a rollback, a check handed out,
// a carry) across their write: it is taken before the State's lock, and
// never waited for while holding it — TakeDue, TakeExhausted and the
// broker's scans under the State's lock use TryLockOp. The place of both
// among the broker's locks is in ARCHITECTURE.md.
package txn
