// Package shard makes a store's writes go through Raft: a Shard is one
// replica of a store (a complete mqgate store: CommitLog, ConsumeQueues,
// index, system queues) replicated by one Raft group of go.etcd.io/raft/v3,
// with the CommitLog itself as the Raft log (package raftlog).
//
// # The node loop
//
// One goroutine (Shard.run) owns the raft.RawNode, the Raft log and the
// store's append path, in the shape of etcd's raftexample. Each turn it
// waits for a tick (Options.Ticks, or a ticker of TickInterval), a
// message from a peer (Step) or a Put; takes every other message and Put
// already waiting; then handles every Ready in order:
//
//  1. persist the entries (raftlog.Storage.Append: one CommitLog flush and
//     one index fdatasync for all of them), then the hard state (which
//     moves the dispatcher's limit to the end of the committed entries);
//  2. send the messages (Options.Transport);
//  3. apply the committed entries (configuration changes; answer the Puts
//     whose entries they are);
//  4. Advance.
//
// With every Ready handled nothing proposed is outstanding, so the loop
// then cuts any CommitLog bytes no entry took (raftlog's DropUnindexed).
// A Ready that cannot be persisted for want of disk space is tried
// again, whole, every quarter second (node.persist; Status.NoSpace says
// why meanwhile) instead of stopping the replica: nothing of it is
// acknowledged until it is persisted, so the replica only falls behind.
// Puts that arrive while a Ready is persisted go into the next Ready
// together: one fsync for all of them (group commit). On a leader whose
// Ready holds only entries of its own term (its own proposals, which the
// Raft log verifies in place and never cuts), the persist runs in a
// goroutine of its own while the loop takes those Puts — writes their
// frames and proposes them, as raft's Node takes proposals between Ready
// and Advance — so the next flush can start as soon as this one ends; a
// proposal refused meanwhile stops the intake and its frames are cut
// once the persist is done. Such a Ready's commit point names only
// entries persisted before (a leader counts itself once its own entries
// are durable), so its hard state is written and its committed entries
// applied before its new entries are flushed: a Put's answer does not
// wait for the flush of the Puts proposed after it. The followers'
// answers are stepped during that flush too, and when one moves the
// commit point over entries persisted before it, the hard state is
// written and their Puts answered at once (node.commitBeside): raft
// hands a commit over only in the Ready after this flush, and a Put
// whose entry a follower acknowledged just after the leader began the
// next flush would otherwise wait for it.
// CheckQuorum and PreVote are on; proposals are never forwarded (a
// follower refuses a Put). The loop body is the unexported node type; the
// simulation test drives it step by step without goroutines.
//
// # The write path
//
// Put on the leader: the loop appends the batch to its own CommitLog
// through the store's append path without waiting for the flush
// (PutClassNoWait), so offsets, queue offsets and store time are decided
// once, by the leader, in log order (DLedger's way). At the end of its
// turn it reads back the frames written since the last proposal — every
// Put it took in the turn, and its writers' appends — (ReadFrameRange)
// and proposes them as one entry's data (node.proposeBatch; at most
// 1 MiB of frames, then the next entry starts): one entry, one append
// message to each follower and one answer from each, for all of them,
// where an entry per Put cost a message and an answer per Put per
// follower, and raft sends an append message for each proposal. When the entry comes out of the next Ready, raftlog recognises
// its bytes already in the CommitLog at its place and only writes the
// index entry and waits for the flush: no frame is written twice.
// Followers append the same bytes through AppendFrames, so every
// replica's segments are the leader's, byte for byte, and ids (the
// store id must be the shard's, the same on every replica) and queue
// offsets agree.
//
// Put returns nil only once its entry is committed — persisted on a
// majority, each copy flushed — and applied, which is after the dispatch
// limit passed it: consumers see only committed messages (ReadQueue on
// any replica). Everything else is refused or unknown, never a success:
//
//   - ErrNotLeader (NotLeaderError names the leader when known): this
//     replica does not lead; nothing was written.
//   - ErrDropped: it leads, but raft dropped the proposal (a leadership
//     transfer, or too much uncommitted while the followers are away);
//     its frames were cut again, nothing was written.
//   - ErrUnknownOutcome: proposed, but the leader stepped down, the
//     proposal lost its place before it was persisted, or ctx ended,
//     before the commit: the next leader may or may not commit it. The
//     caller retries with the same idempotency key.
//   - ErrNotLeader also when another leader's entry was committed at the
//     entry's index: it is definitely not in the log.
//   - ErrStopped, and the store's own refusals (ErrInvalidMessage,
//     ErrDiskFull, …), with nothing written.
//
// A deposed leader's uncommitted suffix is cut when the new leader's
// entries conflict with it (raftlog: Store.TruncateFrom, which gives
// back the queue offsets the cut records took); frames it wrote for
// proposals raft never persisted are cut by the loop. After a crash a
// replica may have dispatched past the commit point its hard state
// holds (a commit-only change is not synced): those entries were
// committed, and raft learns the commit point again.
//
// # Writers of the store
//
// The store is opened Replicated (storage's replicate.go): besides Put,
// its own writers — the broker, writing as it does on a single node —
// append to it while this replica serves, and the loop proposes what
// they appended, in log order, as one entry per turn (the store's
// AppendSignal wakes it; the frames are read back with ReadFrameRange
// and verified in place when the entry is persisted, as for Put). A
// writer's wait (sync mode) ends once the commit point passes its
// records. The store is fenced — appends refused with ErrNotLeader — on
// every replica that does not serve: from Open, and from the moment a
// leader is deposed (before the Ready that deposes it is persisted) or
// raft refuses a proposal; the fence waits for the appends in flight and
// answers the waiting writes with ErrUnknownOutcome, and the frames no
// entry took are cut (DropUnindexed) before serving again. With
// Options.Owned the fence is lifted by the owner (Serve) once this
// replica leads in a generation (Status.Gen), CommitIndex reached the
// leader's first entry (LeadIndex) and the owner applied the log;
// without it, as soon as the replica leads.
//
// # Membership
//
// ChangeConf proposes one configuration change (add a learner, promote
// it, remove a replica) and returns once it is applied here;
// OnConfChange tells the owner of each change as it is applied (again at
// start-up for every one in the log), with the new replica's peer address
// in the change's Context. A replica opened with Join and an empty log
// waits to be added instead of starting a group.
//
// # Copies
//
// The Raft log cannot bring every replica up to date: a replica that was
// away while retention deleted segments it had not received, a new
// replica added after retention deleted the first segment, or one joining
// a group that adopted a single node's log (whose entries start past
// offset 0) asks for entries whose bytes are gone. raftlog's Snapshot
// answers ErrSnapshotTemporarilyUnavailable for them, so raft leaves such
// a replica behind instead of panicking on an empty snapshot, and the
// leader logs a warning once a minute (TestFollowerBehindRetention).
//
// Such a replica starts from a copy (copy.go) instead: WriteCopy on any
// replica writes its metadata files (the broker's snapshots, read
// first), then its CommitLog from the first segment to an applied entry
// at or past everything those files cover, as frame streams; retention is
// held meanwhile. ReceiveCopy builds an empty data directory from it
// whose Raft log is a snapshot at that entry (the CommitLog ends there,
// starting where the source's starts; the configuration is the entry's;
// no vote), so the replica opens like one that compacted its log there
// and the leader sends it the entries after it. Every frame is checked
// as AppendFrames checks a follower's; a copy cut short or damaged
// leaves nothing (TestCopyCatchesUpPastRetention, FuzzReceiveCopy).
//
// # Damage
//
// A replica whose log is damaged must not vote or lead: it may lack what
// it acknowledged. raftlog refuses to open one damaged below its commit
// point; a committed entry that cannot be read back stops the loop
// (ErrDamaged); and the store marks itself damaged when a reader, the
// dispatcher or the scrubber finds a frame of its flushed log damaged
// (storage's damage.go), which stops the loop too (stopDamaged): a leader
// first hands its leadership to a voter holding its whole log, then
// nothing is stepped again — no vote, no append — and Status says
// "stopped". The mark keeps the store from opening until the replica is
// rebuilt from a copy (TestADamagedReplicaStops).
//
// # Not here yet
//
// AsyncStorageWrites (the leader already sends its appends before its
// own flush); raft snapshots sent by the leader itself (a replica left
// behind is rebuilt from a copy, by its operator).
package shard
