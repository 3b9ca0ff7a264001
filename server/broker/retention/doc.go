// Package retention is the retention family of the broker: the leader's
// decisions on what the store may delete (the broker's
// storage.RetentionPolicy), the counts of the unconsumed messages a
// deletion takes, and the rmq_sys_CUT record — its codec, its write and
// its apply — by which every replica deletes what the leader deleted.
// service.go is the table of contents: what the package needs of the
// store (Store) and of the broker (Config), the Service.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; registry, send, retry, dlq, timer,
// txn, trace, instance, progress and lease moved before it).
//
// # The floors
//
// The store deletes whole CommitLog segments (the store's rules are in
// storage's doc.go, "Retention and disk pressure"); before every pass it
// asks Service.Floors for three CommitLog offsets:
//
//   - Keep: the lowest CommitLog offset of what must never be deleted and
//     cannot be carried forward — the undelivered entries of every delay
//     level (from the scheduler's position on), the progress and lease
//     records no offsets or leases snapshot covers yet and the transaction
//     records the transaction snapshot does not cover (Config.Kept names
//     these queue positions);
//   - Unconsumed: the lowest CommitLog offset some group still needs — per
//     queue of every topic, the message at the lowest committed offset of
//     the groups consuming it (all of a topic no group consumes yet: a
//     group created later reads it from the start), and per group's retry
//     topic, the lowest committed offset of its retry views. Disk pressure
//     deletes below it only with --disk-pressure-delete;
//   - Retained: for topics whose retentionHours is longer than the store's
//     retention, the first message still within it; age-based deletion
//     keeps the segments from there on.
//
// The groups' positions (Positions) are, per stored queue — a topic's
// configured queues and any others the store holds of it —, the
// committed offset (at least the queue's minimum) of every group that
// consumes the topic: by a subscription, by progress of its own or of
// its instances, or by a pop state. A broadcasting group's consumer
// instances each have a position, and the group's own counts only when
// it has offsets of its own or no instances. A group with retries has a
// position on its retry topic per topic it consumes (its retry views).
//
// # A topic's shorter retention
//
// A topic whose retentionHours is shorter than the store's retention
// shares segments with other topics, so its messages are expired
// logically: every pass's Floors raises its queues' minimum past the
// messages older than its retention (storage TrimQueue; readers then skip
// them as after retention). Retries and dead letters of its messages live
// by the store's retention.
//
// # Before a deletion
//
// Service.BeforeDelete carries forward what must outlive the cut —
// dead letters, pending timers, unresolved transactions, the registry
// (ClassReclaim appends of packages dlq, timer, txn and registry) and the
// lives the message trace must carry again, then the traces, which follow
// the copies they carry (Config.Carry, Config.CarryTraces) —, then
// appends the cut record, and counts, per progress key, the unconsumed
// messages the deletion takes away. So does a topic's logical expiry,
// and a deletion under --disk-pressure-delete alike: the messages below
// the cut above the key's committed offset (at least the view's Start:
// a retry view's first retry above its topic's retry floor), less those
// acked above it; a retry view counts its own topic's retries only. The
// counts go to the
// metric mqgate_retention_dropped_unconsumed_total{group}
// (Config.CountDropped), the progress field droppedUnconsumed
// (Service.Dropped; memory only, on the leader that counted, since it
// started) and a warning in the log; a deleted group's counts, or a
// forgotten instance's, go with it (Service.Forget).
//
// # The cut record
//
// Retention is decided by the leader and applied by every replica: before
// the leader's store deletes the segments below a cut (after the carries),
// BeforeDelete appends a cut record to Topic (rmq_sys_CUT, queue 0),
// through the flush, and every follower deletes the same segments when it
// applies that record (Service.Apply: Store.ApplyRetentionCut, as far as
// it dispatched). Its body is JSON Record {"cut","reason","at"}: the
// CommitLog offset below which segments go, storage's DeleteReason, and
// the leader's time (unix ms). A follower's store runs no retention of
// its own (the broker installs the policy when it takes over), so its
// segments are the leader's. Apply also runs at open, from the queue's
// start: a cut a follower received but had not applied when it stopped
// is applied then, and the others again, harmlessly. A record that does
// not decode (Decode) is logged and skipped.
//
// # Imports
//
// The storage facade (*storage.Store is its Store) and storage/message and
// storage/offset; of the other families' packages registry (the topics'
// and groups' configurations), progress (a group's view of a queue, the
// retry view's queue id, the bound of a retry count) and instance (an
// instance's progress group, the broadcasting mode). Never server/broker,
// any other package of server, api or cmd (internal/archtest): what it
// needs of the broker comes in its Config — the clock, the log, the
// mapping of the store's errors, the retry topics' prefix, and as funcs
// the queue positions no snapshot covers (the scheduler's, progress's,
// txn's, the lease log's), the registry's topics and groups, the progress
// table's keys, committed and acked offsets, the pop states' (group,
// topic) pairs, a broadcasting group's instances, a group's view of a
// queue, the metric, and the other families' carries. server/broker
// fills it in (retention.go there) and hands the store the policy when it
// takes over (follow.go); the follower's position in rmq_sys_CUT stays
// with the broker's follower (follow.go), which applies the cuts after
// the other families' records.
//
// # Locks
//
// The Service adds one, the dropped counts' lock, taken inside Dropped,
// Forget and the counting, with nothing taken under it. It holds no lock
// across its calls: the store calls Floors and BeforeDelete from its
// retention goroutine, one pass at a time; what it asks through its
// Config takes the registry's read side, the progress table's lock, the
// lock of the broker's map of pop states (Config.PopStates, across the
// walk of the map only) and the instances lock one at a time, each
// released before the next, and the carries take their families' locks as
// their packages say. Their place among the broker's locks is in
// ARCHITECTURE.md.
package retention
