// Package storage is mqgate's message store: RocketMQ's broker storage
// design (CommitLog + ConsumeQueue + IndexFile) behind one facade, Store.
//
// # Directory layout (part of the on-disk format; never change)
//
//	<dir>/LOCK                        flock(2) target: one process per store
//	<dir>/abort                       present while the store is open; left
//	                                  behind by a crash, it selects the
//	                                  verifying (abnormal) recovery path
//	<dir>/checkpoint                  64-byte checkpoint (below), replaced
//	                                  atomically (tmp, fsync, rename, dir fsync)
//	<dir>/commitlog/%020d             CommitLog segments (package commitlog)
//	<dir>/consumequeue/<topic>/<queueId>/%020d
//	                                  ConsumeQueue files (package consumequeue)
//	<dir>/index/%020d                 key hash index files (package index)
//	<dir>/config/<name>               small metadata files, each replaced
//	                                  atomically (WriteMeta); the store's own
//	                                  are quarantine.json and scrub.json
//	                                  (below), the others belong to the
//	                                  store's user
//
// Topic names are 1-255 bytes of A-Z a-z 0-9 _ - % (they name ConsumeQueue
// directories); queue ids are 0..MaxQueueID.
//
// # Checkpoint (part of the on-disk format; never change)
//
//	off len field
//	0   4   magic        0x4D51434B ("MQCK")
//	4   2   version      1
//	6   2   flags        bit 0: written by a clean Close
//	8   8   flushed      CommitLog bytes known durable (the high-water mark)
//	16  8   dispatched   CommitLog offset below which every ConsumeQueue
//	                     entry and index entry is flushed
//	24  8   writtenAt    unix ms
//	32  28  reserved, zero
//	60  4   crc          CRC-32C of bytes [0:60]
//
// A checkpoint that fails its magic, version or CRC is ignored: recovery then
// scans the whole CommitLog and rebuilds every derived structure, which is
// slower but reaches the same state (RELIABILITY.md rule 7).
//
// # Lifecycle
//
// Open takes the directory lock, reads the checkpoint and notes whether the
// abort marker survived a previous run. The CommitLog is opened with
// RecoverFrom/HighWater taken from the checkpoint (see Recovery): its scan
// verifies every frame from RecoverFrom on, a bad frame above HighWater is
// a torn tail (truncated, a .broken copy kept) and a bad frame below it is
// corruption (Open fails with ErrCorrupt unless Options.AllowCorrupt, which
// cuts the log there like a torn tail). ConsumeQueues and the index are
// then re-dispatched from the checkpointed dispatched offset to the
// recovered end — ConsumeQueue writes are position-addressed, so
// re-dispatch is idempotent — and trailing ConsumeQueue entries that point
// at or past the recovered end are dropped (RocketMQ's
// truncateDirtyLogicFiles).
//
// # Recovery: what each start verifies
//
// Clean start (the abort marker is gone and the checkpoint says clean):
// RecoverFrom = HighWater = the checkpointed flushed offset, which is the
// exact end of the log. Nothing of the existing log is re-read: start-up
// costs the same for 1 MiB and 1 TiB. Damage that happened while the store
// was stopped is caught later, when a frame is read (every read checks its
// CRC) or by the scrubber.
//
// Unclean start (the abort marker survived a crash, or the checkpoint is
// not clean): HighWater = the checkpointed flushed offset, and RecoverFrom
// = the lower of the checkpointed dispatched offset and the base of the
// segment holding the flushed offset. So every frame that re-dispatch
// will read, every frame the crash may have left half-written, and the
// whole segment of the last durable byte are verified (size, magic,
// stored offset, CRC). A bad frame between RecoverFrom and HighWater was
// durable and is corruption: Open fails. A bad frame at or above
// HighWater is a torn tail: the log ends there.
//
// Re-dispatch starts at the checkpointed dispatched offset, or a little
// earlier where the index's last flushed record ends (the index never
// claims the last message it was given). Frames it reads that the scan did
// not verify — after a clean start, or that little way back — are checked
// by the dispatcher as at run time (see Damaged records): one that fails
// its CRC is quarantined and passed over; one whose header is damaged
// fails Open with ErrCorrupt, and since that range was not scanned,
// AllowCorrupt does not apply there: removing the checkpoint makes the
// next Open scan everything (and end the log at that frame).
//
// No checkpoint (missing, or it fails its magic, version or CRC): the
// whole CommitLog is scanned and verified, and everything is re-dispatched.
// Nothing is known to have been durable (HighWater 0), so the first bad
// frame, wherever it is, ends the log as a torn tail: the rest is cut off
// into .broken files, never deleted.
//
// Recovery never skips a bad frame and goes on: a valid-looking frame after
// an invalid one is not trusted (the kernel writes mmap pages back in any
// order), so the only choices are ending the log there or failing.
//
// ConsumeQueue tagsCode: the hash of the message's tag (message.TagsCode);
// for SCHEDULE_TOPIC_XXXX the due time in unix ms; for retry topics
// (%RETRY%<group>) the hash of the original topic (RETRY_TOPIC), because one
// retry topic serves all topics of a group.
//
// # What Put refuses, and quarantine
//
// Put and PutBatch refuse (ErrInvalidMessage, ErrMessageTooLarge) every
// message a reader of its record would refuse: the payload format's limits
// (message.Validate: topic length, body size, properties region), the topic
// and queue-id rules above, and MaxMessageSize. Nothing of a refused batch
// is written. So a record whose frame is intact (size, magic, CRC) but
// which cannot be dispatched or read — a payload that does not decode, a
// topic that cannot be a directory, an entry that conflicts with its
// queue — can only come from a bug or from a data dir written before a
// check existed. Such a record never stops the store: the dispatcher (at
// run time and during recovery) and the queue readers quarantine it —
// count it, log it with its offset, list it in config/quarantine.json
// (the count and the newest 100, as JSON) and in Quarantined — and move on.
// The stage of a quarantined record says who found it: "dispatch", "read"
// or "scrub".
//
// # Damaged records
//
// A record whose bytes changed after they were written (a bit flip on the
// device, a stray write) fails its frame's CRC-32C. Such a record is never
// served: every read of the CommitLog verifies the whole frame first
// (commitlog.Read and Next), whoever reads — ReadQueue (pulls, offset
// reads, push, resend, the scheduler, timers, the PostgreSQL mirror's
// replays), Lookup, LookupID, QueryByKey, FindByDedupID, FindByUniqKey,
// SearchOffsetByTime and the dispatcher. Checking costs little next to the
// copy (CRC-32C runs at several GB/s with the CPU's instruction; see the
// commitlog and ReadQueue benchmarks).
//
// What a reader does with a damaged record:
//
//   - ReadQueue and SearchOffsetByTime quarantine it (stage "read", the
//     reason names the CRC mismatch, its offset and its queue position)
//     and pass over it; the next messages of its queue are delivered.
//   - Lookup, QueryByKey and FindBy* quarantine it and leave it out; the
//     error of Lookup wraps ErrNotFound and ErrCorrupt.
//   - LookupID refuses it with ErrNotFound but does not quarantine it: a
//     message id is client input, and a client could plant a fake frame
//     header in a message body and name its offset.
//   - The dispatcher quarantines it (stage "dispatch") and passes over it,
//     because its header (size, magic, stored offset) is intact, so the
//     next frame's position is known. The record's queue offset is lost
//     with its payload; when the next record of that queue arrives with a
//     gap, the gap is closed with placeholder entries pointing at the
//     damaged frames passed over since the queue's last entry (a queue's
//     records lie in the log in queue-offset order, so its missing offsets
//     belong to those frames). Readers that reach a placeholder find a frame
//     that fails its CRC and pass over it, and the queue's offsets stay
//     dense.
//   - A frame whose header is damaged cannot be passed over: its size is
//     not trustworthy, and a resync that guessed the next frame could skip
//     an unknown number of good records and their queue offsets, or (on a
//     lucky guess inside a payload) dispatch bytes that are no record at
//     all. The dispatcher stops there: each retry fails the same way,
//     DispatchStatus.Err says where and why, and readiness fails (a 503
//     from /readyz), so an operator decides. Restarting with AllowCorrupt
//     cuts the log at that frame (the rest is kept in .broken files).
//
// The scrubber (Options.ScrubRate, default 16 MiB/s; ScrubInterval, default
// 24 h between pass starts) walks the sealed CommitLog segments, oldest
// first, and verifies every frame at that rate, so damage in records
// nobody reads is found too. Each bad frame is quarantined (stage
// "scrub"); a damaged header makes it skip the rest of that segment (the
// reason says how many bytes went unchecked), and so does a fault while
// reading the mapping (an I/O error of the device), which is reported
// instead of crashing the process. The active segment is left to the
// readers and to recovery. ScrubStatus reports its progress, which
// config/scrub.json keeps across restarts (a resumed pass restarts at
// the beginning of the segment it was in).
//
// DispatchStatus tells how far the dispatcher is behind the log (bytes,
// and since when, sampled every CheckpointInterval) and whether its passes
// are failing (an I/O error, or a damaged frame header; the pass is
// retried every 100 ms).
//
// While open, one dispatcher goroutine (RocketMQ's ReputMessageService)
// follows the CommitLog — up to the flushed offset in sync flush mode, so a
// consumer never sees a message that a crash could still take back, and up
// to the written offset in async mode — and appends ConsumeQueue and index
// entries, then wakes long-polling readers by closing a per-topic channel.
// A checkpointer flushes the derived files and rewrites the checkpoint every
// CheckpointInterval; a retention cleaner deletes whole expired segments;
// the scrubber verifies sealed segments (Damaged records).
//
// A deleted topic's messages stay in the CommitLog until retention: its
// ConsumeQueues' minimum offsets are raised above them (PurgeTopic, through
// MINOFFSET as retention does), so a re-dispatch never writes them back,
// queue offsets continue, and a message below its queue's minimum is not
// found by id or key either.
package storage
