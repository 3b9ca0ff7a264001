// Package lease is the lease family of the broker (RocketMQ 5's POP
// checkpoints): the rmq_sys_LEASE record, the snapshot of the live leases,
// and the Fold those records make.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry, txn, dlq, registry and
// timer moved before it). It imports nothing of the module, and
// server/broker imports it (as leaselog: its pop states' lease type has
// the package's name). What needs the broker stays there (lease_log.go,
// follow.go, pop.go): the leases themselves, in the pop states' cursors;
// the notes of the changes made under a pop state's lock and their writes
// (a pull's grants, a lease change, an ordered message failed in place,
// and the undoing of a pull's grants whose record failed); the snapshot
// workers; which folded leases are still owed (the registry, the
// progress table and the store decide: Prune takes that as a predicate)
// and their install into the cursors at open and at Promote.
//
// # The record
//
// A Record (server/broker/doc.go, "What the broker persists", gives the
// bytes) is a list of Entries, each the Items of one queue of one group
// held by one client, with the key's progress generation and the time the
// entry was written; an Item is one offset's lease: its epoch, its
// deadline (Unix ms, rounded up: MilliCeil), its failures, and its State —
// Held until the deadline, Waiting (an ordered message failed in place,
// offered again at the deadline) or Released (a lease changed to 0).
// Acks, nacks and expiries need no lease record: they end a lease in the
// progress records (storage/offset). Key is storage/offset's Key field
// for field, so that this package needs nothing of storage; QueueID
// RetryQueueID names a (group, topic)'s view of the group's retry topic.
// EncodeRecord writes one, DecodeRecord reads and checks one: it never
// panics, allocates no more than its input justifies, and refuses what
// EncodeRecord would not write (ErrBadRecord).
//
// # Fold
//
// Fold.Apply folds records in, in queue order: of each offset the newest
// epoch wins; of one epoch, the later record. A release stays in the fold
// (so that a later record of an older epoch cannot bring the lease back)
// until Prune drops it with the leases owed no more. Top is the highest
// epoch seen, from which the broker's epoch counter restarts (Raise takes
// a snapshot's counter). Apply reads neither the clock nor a random
// source: deadlines, epochs and times travel in the records, so every
// copy of the log folds to the same leases. The broker folds the snapshot
// and the records after it at open, and every record while it follows
// another broker's log; Promote installs the Unreleased leases still owed
// in offset order. A leader of a replicated store keeps folding the
// committed records, and writes its snapshots from that fold rather than
// from its pop states, whose grants may never be committed.
//
// # The snapshot
//
// config/leases.snapshot (SnapshotFile): magic "MQLS", version, the
// CRC-32C of the rest, the rmq_sys_LEASE queue offset covered, the epoch
// counter, and the live leases as one record body (EncodeSnapshot,
// DecodeSnapshot; a Fold's leases as a record: Fold.Record). Lost or
// damaged, the broker replays every retained lease record, which
// retention keeps from the last snapshot's offset on.
//
// # Locks
//
// None: a Fold is not safe for concurrent use. The broker's locks guard
// it, as before it moved: a follower's fold the follower's lock
// (follow.go), a replicated leader's the committed fold's lock
// (lease_log.go).
package lease
