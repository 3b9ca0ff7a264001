// Package progress is the progress family of the broker: consumer
// groups' offsets and acknowledgements, the rmq_sys_OFFSET records, and
// what they say (a group's progress and backlog).
//
// It is a package of the broker's split by record family
// (ARCHITECTURE.md, "The broker as a state machine"). The record codec,
// the table the records apply to and its snapshot codec are
// storage/offset's (storage/offset/doc.go); this package holds the
// request logic over them:
//
//   - the Ledger, which writes the records: Persist appends a record
//     (with the messages written in the same batch, such as a nack's retry
//     copies) through the store's system class and only then applies it to
//     the table, so the table, and every snapshot of it, never holds a
//     change the log might not; PersistNoWait does the same without
//     waiting for the flush (a pull's skips, with its grants); AckEntry,
//     Commit (a reset: a new
//     generation) and Advance (retention's floor) build on it; AwaitApplied
//     waits for the appends in flight; Message wraps a record for the log;
//   - where a group starts (consumefrom.go): NormalizeConsumeFrom and
//     MeetTopics, the start offsets a group's ConsumeFrom writes when it
//     meets a topic;
//   - the queries (query.go): Progress (and GetOffsets, the same),
//     QueueRows, GroupTopics and Backlog, with their result types
//     (broker.QueueProgress, GroupBacklog and LevelBacklog are aliases).
//   - the table's recovery and the follower's apply (open.go), one code
//     for both: Open reads the offsets snapshot (SnapshotFile) and applies
//     every record after the position it covers, Follow applies what the
//     store dispatched since; WriteSnapshot writes the snapshot under the
//     lock held exclusively (a follower's covers what it applied, a
//     deposed replicated leader writes none), and SnapshotAt is where
//     retention keeps the records from.
//
// # Imports
//
// storage (the system class of an append, its result and ReadResult,
// the replay of a system queue),
// storage/message, storage/offset, and of the family packages registry
// (the group and topic configurations) and quote; never server/broker,
// server/*, api or cmd (internal/archtest). What the ledger needs of the
// broker it is given: its Config (the store through the Store interface,
// the clock, the mapping of the store's errors, the broker's
// ErrInvalidArgument, MaxBatchItems, the logger, whether a group is gone,
// whether the broker follows or is deposed) and, for the queries, the Broker
// interface (the registry, the broadcasting groups' instances, the pop
// states' views and leases in flight, retention's counts, the delay
// ladder, the timers), which server/broker fills in (progress.go).
//
// # What stays in server/broker and why
//
//   - The receipt loop and the requests that settle leases (package
//     consume: Ack, ChangeLease, Nack): they decide under a pop state's
//     lock, mark leases settling and release them after the record is
//     written; the pop states, their cursors and leases are the lease
//     family's. They write through the Ledger.
//   - The writers of skips (package consume's pull: an ack entry appended
//     in one batch with the pull's lease record, under the pop state's
//     lock), of a cursor's alignment (package consume), of a group's
//     forget (admin.go; an instance's and its start offsets: package
//     instance), of a deleted topic's (topicdelete.go)
//     and of failed deliveries (package retry, through the Config
//     retry.go fills in): they call the Ledger.
//   - awaitDispatch, which other families' requests use too.
//
// # Locks
//
// The Ledger's lock is held shared by an append from its write to its
// apply, and exclusively by the offsets snapshot and by the follower while
// it applies records (and, empty, by AwaitApplied). Appends are made under
// the pop states' locks (an ack's records, a skip, a cursor's alignment),
// under the registry lock (a group's start offsets, MeetTopics) and under
// the instances lock (an instance's start offsets and forget): the lock
// comes after all of them and before the store; under it only the store's
// locks and the table's own are taken. It is so the one family lock taken
// after locks of a family later in ARCHITECTURE.md's list (the lease
// family's pop states): a pop state's holder writes progress, never the
// reverse. The queries take no lock of their own: the broker's methods
// they call take theirs (a pop state's lock per queue for its leases in
// flight, the pop states' map, the ladder's, the timers').
package progress
