// Package raftlog is the Raft log of a replicated store: raft.Storage of
// go.etcd.io/raft/v3 over the store's CommitLog itself, so that every
// message is written once (DLedger's layout). The CommitLog holds the
// entries' bytes; a small index beside its segments says which bytes are
// which entry; a hard-state file holds the term, the vote and the commit
// point.
//
// # Entries
//
// A normal entry's data is a frame stream (commitlog's frames.go): the
// record frames of one batch, encoded by the leader at the CommitLog
// offset where the entry will begin on every replica — the end of the
// entry before it — with a Blank frame first when the batch starts a
// segment. Append hands the streams of the entries it persists to the
// store's AppendFrames (one call, so one flush per Ready), which checks
// every frame (checksum, magic, stored offset, placement) and refuses a
// bad stream whole; the replica's log then holds the leader's bytes at the
// leader's offsets, and ids and queue offsets follow (storage/doc.go,
// "Following another store"). Entries reads the same bytes back
// (Store.ReadFrameRange): the data is never stored twice.
//
// Entries without frames take no CommitLog bytes: an empty normal entry
// (a new leader's first) is an index entry of size 0 at the log's end; a
// configuration change (EntryConfChange, EntryConfChangeV2) is an index
// entry of size 0 with its type, and its data lives in raft/confs (rare
// and small). So the CommitLog holds exactly the data entries' frames,
// back to back, and the proposer's offsets depend on nothing else: the
// frames of the next proposal start at NextOffset plus the frames of the
// proposals still pending.
//
// # Files (part of the on-disk format; never change)
//
//	<data>/raft/meta              the compaction point, the snapshot point
//	                              and its configuration; replaced
//	                              atomically; its presence says the store
//	                              is a Raft log
//	<data>/raft/hardstate         two 64-byte slots
//	<data>/raft/confs             the data of configuration entries;
//	                              replaced atomically
//	<data>/raft/index/%020d       index files named by the first Raft
//	                              index they can hold: file b holds entries
//	                              b .. b+N-1 (N = Options.IndexFileEntries
//	                              when the files were created, 65 536 by
//	                              default, kept in the meta file), entry i
//	                              at byte (i-b)*40
//
// Integers are big-endian, checksums CRC-32C (Castagnoli). An index entry
// (40 bytes):
//
//	off len field
//	0   4   magic      0x4D515249 ("MQRI")
//	4   4   size       CommitLog bytes the entry covers (0: no frames)
//	8   8   offset     CommitLog offset of its first frame (the log's end, for size 0)
//	16  8   index      Raft index
//	24  8   term       Raft term
//	32  1   type       0 normal, 1 conf change, 2 conf change v2
//	33  3   reserved, zero
//	36  4   crc        of bytes [0:36]
//
// A hard-state slot (64 bytes; the file holds slot 0 and slot 1):
//
//	0   4   magic      0x4D515248 ("MQRH")
//	4   2   version    1
//	6   2   reserved, zero
//	8   8   seq        a write counter: the newer valid slot wins
//	16  8   term
//	24  8   vote
//	32  8   commit
//	40  20  reserved, zero
//	60  4   crc        of bytes [0:60]
//
// The meta file: magic 0x4D515253 ("MQRS"), version 1, two reserved
// bytes; the compaction point (index, term, offset: 3×8 bytes), the
// snapshot point (the same); the entries per index file (4 bytes); the
// length of the configuration (4 bytes) and the configuration
// (raftpb.ConfState, deterministic protobuf); a crc of every byte before
// it. The confs file: magic 0x4D515243 ("MQRC"), a
// count (4 bytes), per entry index (8), term (8), type (1), length (4),
// data; a crc of every byte before it.
//
// # Writing
//
// Append first replaces the confs file if a configuration entry is among
// the entries; then it writes the index entries (pwrite) and appends the
// frames (AppendFramesNoWait), and the index's fdatasync runs beside the
// CommitLog's flush: Append returns once both are durable. It waits for
// them without the lock the readers take (raft's Term, Entries, …, and
// SetHardState, SetCommit), holding only the writers' lock: a node loop
// whose append worker persists reads and commits meanwhile, and sees the
// entries being persisted only once Append returned. Their order
// does not matter, since Open drops index entries whose bytes did not
// make it (and cuts bytes no index entry names), above the commit point,
// which no entry of an unfinished Append can be below. With the store in
// async flush mode AppendFrames does not wait for the CommitLog's flush:
// an appended entry is then in the page cache only ("a quorum in
// memory"), as the store's async mode is for messages. SetHardState always writes the slot
// that does not hold the last synced hard state; a change of term or vote
// is fdatasynced and its slot becomes the synced one, so a torn write
// leaves the synced slot, which wins at Open. A change of the commit point
// alone is not synced (etcd's MustSync: the commit point is the cluster's
// and is learned again; the entries it names were synced by Append): it
// can only be lost, or win with the same term and vote. A file whose
// slots are invalid but one of which was never written (zeros, or
// missing) holds no hard state: the first write, always synced, was
// torn, and nothing relied on it. The node loop's append worker persists
// the entries of an append before its hard state, and SetCommit raises the
// commit point (keeping the term and vote) only to entries Append
// persisted, so the commit point never names an entry the index lacks. Open fdatasyncs the hard state and the index files it
// read, since a process crash can leave them in the page cache only and
// Raft treats what it reads as durable.
//
// A conflicting suffix (an entry whose index is held with another term)
// is cut before the new entries are appended: the index files first
// (truncated, the files after removed), then the CommitLog
// (Store.TruncateFrom, which takes back the queue offsets of the cut
// records). Entries held with the same index and term are the same
// entries (Raft's Log Matching property) and are passed over, so a
// retransmission writes nothing. A cut at or below the persisted commit
// point is refused (ErrCommitted): Raft never asks for one, and a replica
// that did it would lose acknowledged messages.
//
// # A leader's entries are written when proposed
//
// A leader decides offsets, queue offsets and store times once, in log
// order (DLedger's way): it appends a batch to its own CommitLog through
// the store's append path without waiting for the flush
// (PutClassNoWait), reads the frames it just wrote back
// (ReadFrameRange) and proposes them as the entry's data. When Append
// then persists that entry, the CommitLog past the last entry already
// holds its bytes at its place: Append compares them with the entry's
// data and, equal, writes only the index entry and waits for the
// CommitLog's flush (Store.WaitDurable) — the frames are never written
// twice. From the first entry whose bytes differ (a proposal raft
// dropped, entries of another leader) the tail is cut (Store.TruncateFrom,
// which gives back the queue offsets) and the rest appended as a
// follower's would be. Bytes past the last entry that no entry will
// claim are cut by DropUnindexed, which the node loop calls when no
// proposal is outstanding; Open cuts them too.
//
// # The dispatcher follows the commit point
//
// The store is opened with HoldDispatch: its ConsumeQueues and index are
// built no further than the end of the committed entries
// (SetDispatchLimit on every SetHardState), so consumers see only
// committed messages and the log above the commit point can still be cut.
//
// # Recovery: what Open checks and mends
//
// The index is read from the compaction point on and must chain:
// consecutive indexes, terms that never go down, each entry starting
// where the one before ended. Then:
//
//   - A damaged index entry between two good ones of the same term is
//     rebuilt from them (offset and size from theirs, the type from the
//     confs file) and rewritten; otherwise the first entry that does not
//     chain ends the index.
//   - Index entries past the CommitLog's end are dropped, and CommitLog
//     bytes past the last index entry are cut (a crash between the
//     CommitLog's flush and the index's, or between the two halves of a
//     cut). Both only above the commit point: an index that ends below
//     it, or a CommitLog that does, is damage (ErrCorrupt) — such a
//     replica must not vote or lead until it is rebuilt from the others.
//   - A hard-state file with no valid slot (both written), or a damaged
//     meta or confs file, is ErrCorrupt: the term and vote are what keeps
//     a replica from voting twice.
//
// TestPowerLossImages opens the Raft log from power-loss images (package
// storagetest's crash recorder: per file, what the last fdatasync, msync
// or directory fsync covered, and any of what was pending) of a run with
// appends, synced and unsynced hard states and a cut, and requires of
// each that every entry Append returned for survives with its bytes and
// that no term or vote goes back.
//
// A lost index cannot be rebuilt by scanning the CommitLog: frames carry
// no Raft index or term, and entries without frames leave no trace in
// it. A replica that lost its index below the commit point is rebuilt
// from the others, which the index's checksums make detectable.
//
// # Snapshots and compaction
//
// The messages are the log, so a snapshot is small: the snapshot point
// (index, term), its configuration, and as Data the CommitLog offset
// where the log continues (16 bytes: magic 0x4D515244 "MQRD", version,
// two reserved bytes, the offset; DecodeSnapshotData). CreateSnapshot and
// Compact are raft.MemoryStorage's (Compact keeps the entry it compacts
// to as the log's first point and removes the index files wholly below
// it; the CommitLog's segments go by retention, and CompactBelow compacts
// to a retention cut). ApplySnapshot accepts a snapshot only when the
// CommitLog already ends at the offset it names — a replica that starts
// from a copy of another's data first gets the CommitLog up to there as
// frame streams (package shard's ReceiveCopy: Store.ReadFramesTo on the
// source, AppendFrames here, into a store opened with StartOffset at the
// source's first segment), and SnapshotAt makes the snapshot — and
// otherwise refuses with ErrSnapshotNeedsLog, changing nothing.
//
// # Adopting a store
//
// Opening a store that has no raft/meta creates the Raft files; a log
// written before (a single node's data directory) becomes the prefix the
// first snapshot covers: compaction and snapshot point at index 0, term
// 0, at the CommitLog's end, with every message of it visible. The other
// replicas of a new group start from a copy of it (the data directory
// copied by hand, or package shard's copies).
package raftlog
