// Package shard makes a store's writes go through Raft: a Shard is one
// replica of a store (a complete mqgate store: CommitLog, ConsumeQueues,
// index, system queues) replicated by one Raft group of go.etcd.io/raft/v3,
// with the CommitLog itself as the Raft log (package raftlog).
//
// # The node loop
//
// One goroutine (Shard.run) owns the raft.RawNode, with raft's
// AsyncStorageWrites on (raft's doc.go, "Usage with Asynchronous Storage
// Writes"), the Raft log's reads and the store's append path; a second
// one, the append worker, persists. Each turn the loop waits for a tick
// (Options.Ticks, or a ticker of TickInterval), a message from a peer
// (Step), a Put or the worker's persisted appends; takes every other
// message and Put already waiting; then handles every Ready
// (node.handle; no Advance):
//
//  1. a deposed leader's fence goes up (before anything of the Ready is
//     persisted, see below);
//  2. the messages to peers go out at once: a leader's appends before
//     its own entries are durable, so the followers' flushes run beside
//     its own (raft counts the leader toward the commit only once its
//     worker persisted them);
//  3. raft's MsgStorageAppend (entries, hard state, snapshot) goes to the
//     append worker, in order;
//  4. raft's MsgStorageApply (committed entries, all persisted here
//     already) is applied at once: the hard-state file's commit point is
//     raised to them (raftlog's SetCommit, which moves the dispatcher's
//     limit), configuration changes are applied and the Puts whose
//     entries they are answered, and its response stepped.
//
// The worker persists each MsgStorageAppend — raftlog.Storage.Append of
// its entries (one CommitLog flush and one index fdatasync), then its
// hard state — as many at once as wait and follow each other (one flush
// for all: the Raft log's group commit; node.persistAppends), sends the
// responses addressed to peers (a follower's MsgAppResp and a vote go
// out only once what they promise is durable) and hands the messages
// back to the loop (node.appended), which steps the responses addressed
// to itself (its own MsgAppResp, MsgStorageAppendResp). Raft's Append
// does not hold the Raft log's lock for the flush, so the loop steps
// messages, answers commits and reads entries meanwhile: a follower steps
// the next append while it persists the previous one, and a leader
// answers the Puts its followers' answers commit while it flushes the
// next entry. The simulation test drives the node without goroutines: the
// worker is a queue it drains itself.
//
// With no append outstanding and the store not serving, the loop cuts
// any CommitLog bytes no entry took (raftlog's DropUnindexed): only then
// is every byte past the persisted entries stale. An append that cannot
// be persisted for want of disk space is tried again, whole, every
// quarter second (node.persistAppends; Status.NoSpace says why
// meanwhile) instead of stopping the replica: nothing of it is
// acknowledged until it is persisted, so the replica only falls behind.
// A leader takes Puts while its worker flushes and proposes them together
// once that flush is done (node.mayPropose): one entry per flush, whose
// append message goes to the followers as the worker starts on it.
// CheckQuorum and PreVote are on; proposals are never forwarded (a
// follower refuses a Put). The loop body is the unexported node type.
//
// # The write path
//
// Put on the leader: the loop appends the batch to its own CommitLog
// through the store's append path without waiting for the flush
// (PutClassNoWait), so offsets, queue offsets and store time are decided
// once, by the leader, in log order (DLedger's way). At the end of a
// turn in which its append worker persists no entries it reads back the
// frames written since the last proposal — every Put it took since, and
// its writers' appends — (ReadFrameRange) and proposes them as one
// entry's data (node.proposeBatch; at most 1 MiB of frames, then the
// next entry starts at once): one entry, one append message to each
// follower and one answer from each, for all of them, where an entry per
// Put cost a message and an answer per Put per follower, and raft sends
// an append message for each proposal. When the worker persists the
// entry, raftlog recognises its bytes already in the CommitLog at its
// place and only writes the index entry and waits for the flush: no
// frame is written twice.
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
//     replica does not lead, or stepped down before it proposed the
//     Put's frames (cut again); nothing was written. A leader without an
//     owner that does not serve yet holds a Put until it does.
//   - ErrDropped: it leads, but raft dropped the proposal (a leadership
//     transfer, or too much uncommitted while the followers are away);
//     its frames are cut again (at once, or once no append is
//     outstanding), nothing was written.
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
// proposals raft never persisted are cut by the loop once no append is
// outstanding. After a crash a
// replica may have dispatched past the commit point its hard state
// holds (a commit-only change is not synced): those entries were
// committed, and raft learns the commit point again.
//
// # Writers of the store
//
// The store is opened Replicated (storage's replicate.go): besides Put,
// its own writers — the broker, writing as it does on a single node —
// append to it while this replica serves, and the loop proposes what
// they appended, in log order, with the Puts (the store's
// AppendSignal wakes it; the frames are read back with ReadFrameRange
// and verified in place when the entry is persisted, as for Put). A
// writer's wait (sync mode) ends once the commit point passes its
// records. The store is fenced — appends refused with ErrNotLeader — on
// every replica that does not serve: from Open, and from the moment a
// leader is deposed (before the Ready that deposes it is persisted) or
// raft refuses a proposal; the fence waits for the appends in flight and
// answers the waiting writes with ErrUnknownOutcome, and the frames no
// entry took are cut (DropUnindexed, once no append is outstanding)
// before serving again. With Options.Owned the fence is lifted by the
// owner (Serve, answered once no append is outstanding) once this
// replica leads in a generation (Status.Gen), CommitIndex reached the
// leader's first entry (LeadIndex) and the owner applied the log;
// without it, as soon as the replica leads and its first entries are
// persisted.
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
// Raft snapshots sent by the leader itself (a replica left behind is
// rebuilt from a copy, by its operator).
package shard
