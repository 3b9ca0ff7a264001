// Package lease is the lease family of the broker (RocketMQ 5's POP
// checkpoints): the rmq_sys_LEASE record, the snapshot of the live leases,
// the Fold those records make, the lease log that writes and folds them,
// and the pop states that hold the leases.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry, txn, dlq, registry and
// timer moved before it). It holds:
//
//   - the record and snapshot codecs (records.go, snapshot.go) and the
//     Fold and its apply (fold.go), below;
//   - the lease log (log.go, notes.go): Log notes lease changes (Note,
//     NoteReleased, into Notes) and writes their records (Stages: a
//     request's records appended under the pop states' locks, their flush
//     awaited after; GrantsMessage: a pull's grants as one record, which
//     the pull appends with the offsets its filters passed over in one
//     batch, not waited for, through package progress's
//     Ledger.PersistNoWait); folds the
//     snapshot and the records after it at open (Open, with what it
//     restored: Recovered) and, while the broker follows another broker's
//     log, the records since (Follow); says which folded leases are still
//     owed when the broker takes over (Owed: neither released, nor owed no
//     more by the broker's word, Config.Owed, nor lost with the log's
//     tail, in offset order per key; Top, the highest epoch folded) and
//     ends the following (Lead: a replicated leader's fold goes on, of the
//     committed records only); writes config/leases.snapshot (Snapshot: a
//     follower's fold at the position it folded, a replicated leader's
//     fold of the committed records, or any other leader's cursors,
//     Config.Live) and says from where retention keeps the lease records
//     (KeepFrom);
//   - the pop states (popstate.go): a PopState per (group, topic) with its
//     lock, its Cursors per queue (the next offset never handed out, the
//     Leases in flight by offset, an orderly group's busy sharding keys
//     and the offsets deferred behind them), the round-robin position of
//     its pulls, the lease changes noted under its lock (Notes,
//     TakeNotes) and the offsets a pull's filters passed over (Skip,
//     TakeSkips), the wake-up of its long polls (WakeChan, Release); and
//     the bookkeeping the broker's requests do on them: a lease as a
//     record's item (Lease.Item), a folded lease as installed at the
//     takeover and every lease change the broker's requests decide, once
//     its record is appended, by one code (PopState.Apply: a record's
//     item into a cursor), the
//     cursors' leases for a leader's snapshot (AppendLive), and the lease reaper's scan of a cursor (Expire: the
//     leases done meanwhile taken out of flight, the ones run out marked
//     for send-back or handed back to be retried in place, the soonest
//     deadline left).
//
// # Imports
//
// storage (the Store interface's types) and its leaf packages
// storage/message and storage/offset (a progress key, a pull's skips),
// and internal/wire (the big-endian reader of the records); never
// server/broker, server/*, api or cmd (internal/archtest). What it needs
// of the broker it is given in its Config, which server/broker fills in
// (lease_log.go): the store through the Store interface, the clock, the
// logger, the mapping of the store's errors, a key's progress
// generation, where a folded lease is read and whether it is
// still owed (the registry, the progress table, the views and the store
// decide), the epoch counter and the leases of the cursors.
//
// # What is decided elsewhere and why
//
// What decides with the pop states needs the registry, the progress
// table, the store, the retry family and the epoch counter, so it sits
// above this package, in package consume (server/broker/consume/doc.go):
// the map of pop states ((group, topic) to *PopState, under its own lock,
// which no pop state's lock is held across), the pull (its plan, the
// queue reads, the filters and their skips, the grants, which draw epochs
// and sign receipts, the long poll), an ordered message's failure in
// place (a retry wait, maybe jittered, and an epoch; the re-offers of due
// and deferred messages read the store), the lease reaper's walk over the
// pop states and what it does with the leases Expire hands back (an
// ordered message fails in place or is dead; the others are sent back),
// the send-back of failed deliveries and its settlement, where a folded
// lease is read and whether it is still owed (Config.Owed: consume's
// OwedPlace, over the registry, the progress table and the views), the
// leases of a leader's snapshot (Config.Live) and the install of the owed
// leases into the cursors at Promote (an orderly lease reads its
// message's sharding key), and the receipt loop (Ack, ChangeLease and
// Nack, deciding under a pop state's lock). Those callers change a Lease
// by applying a lease record's item once the record is appended
// (PopState.Apply: granted, offered again, extended, waiting or failed in
// place, released) and otherwise only through the moves no record holds
// (KeepHistory, SendBack, StartSettling and EndSettling), under the pop
// state's lock, and read it through its methods. Its History (an ordered message's in-place attempt history,
// package retry's attempts) is opaque here (any): retry is above this
// package in ARCHITECTURE.md's list, so it is not imported, and package
// consume, which sets it, reads it back as retry's type.
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
// for field (the codec's own type, which the trace family reads; the log
// converts one into the other); QueueID
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
// copy of the log folds to the same leases. The Log folds the snapshot
// and the records after it at open, and every record while the broker
// follows another broker's log; at Promote the broker installs the
// Unreleased leases still owed (Log.Owed) in offset order. A leader of a
// replicated store keeps folding the committed records, and writes its
// snapshots from that fold rather than from its pop states, whose grants
// may never be committed.
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
// A Fold has none: it is not safe for concurrent use. A PopState has
// one, its lock (Lock, Unlock), which guards the pop state, its cursors
// and their leases: every other method of PopState, Cursor and Lease is
// called with it held (but by the install of the owed leases at the
// takeover, which, as before the pop states moved, runs under the
// follower's lock before the broker serves as a leader: server/broker's
// installLeases), and the package takes it nowhere itself. The
// broker holds it, as before the pop states moved, across a pull's reads,
// grants and the append of its records (GrantsMessage, through the
// progress Ledger), across a receipt
// request's run of receipts of one (group, topic) and the append of its
// notes (Stage), across the reaper's scan of a pop state and the append
// of its notes, and across an offset commit's write (all of them package
// consume's); it takes under it the
// registry's read side, the progress table's lock and the progress
// Ledger's (Expire asks whether an offset is acked; a skip and a
// cursor's alignment write progress), the epoch counter, the lock of its
// map of pop states (a nack in place looks its pop state up; that lock is
// never held while a pop state's is taken) and the store, never another
// pop state's lock or the fold lock. Log has one, the
// fold lock, which guards its fold, the position it folded to, whether
// it follows and what it recovered; Notes and Stages are their caller's
// (a pop state's notes under the pop state's lock), and Note, Stage and
// GrantsMessage take no lock of the package, so the fold lock and the pop
// states' locks are never nested. The fold lock is taken under the
// broker's follower lock (Follow, the follower's Snapshot, the takeover's
// Top, Owed and Lead) and before the registry lock, the progress table's
// and the store's: Owed and the prune of a Snapshot ask Config.Owed under
// it, which reads the registry and the progress table — where the
// committed fold's lock was before the lease log moved. Config.Live and
// Config.Epoch (the pop states' locks) are called with no lock of the
// package held.
package lease
