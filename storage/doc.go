// Package storage is mqgate's message store: RocketMQ's broker storage
// design (CommitLog + ConsumeQueue + IndexFile) behind one facade, Store.
//
// # Directory layout (part of the on-disk format; never change)
//
//	<dir>/LOCK                        flock(2) target: one process per store
//	<dir>/abort                       present while the store is open; left
//	                                  behind by a crash, it selects the
//	                                  verifying (abnormal) recovery path
//	<dir>/storeid                     the store id (below) as 16 hex digits
//	                                  and a newline, replaced atomically; a
//	                                  cache: the log is the authority
//	<dir>/checkpoint                  64-byte checkpoint (below), replaced
//	                                  atomically (tmp, fsync, rename, dir fsync)
//	<dir>/queues                      the queue table (below), replaced
//	                                  atomically before each checkpoint
//	<dir>/commitlog/%020d             CommitLog segments (package commitlog)
//	<dir>/consumequeue/<topic>/<queueId>/%020d
//	                                  ConsumeQueue files (package consumequeue)
//	<dir>/consumequeue/<topic>/<queueId>.broken/
//	                                  the files of a queue that was rebuilt
//	                                  (the newest set aside; never read)
//	<dir>/index/%020d                 key hash index files (package index)
//	<dir>/raft/                       the Raft log's index, hard state and
//	                                  meta when the CommitLog is a Raft log
//	                                  (package raftlog)
//	<dir>/timers/                     the broker's timer index, derived from
//	                                  its timer queues (server/broker/timerindex)
//	<dir>/config/<name>               small metadata files, each replaced
//	                                  atomically (WriteMeta); the store's own
//	                                  are quarantine.json, scrub.json and
//	                                  repair.json (below), the others belong to the
//	                                  store's user (the broker: topics.json
//	                                  and groups.json, snapshots of its
//	                                  registry records; receipt.key;
//	                                  offsets.snapshot; delay.progress)
//
// Topic names are 1-255 bytes of A-Z a-z 0-9 _ - % (they name ConsumeQueue
// directories); queue ids are 0..MaxQueueID.
//
// # Store id
//
// Every record's storeHost field, and so the first half of every message id,
// holds the store id: 8 bytes that name the store, not the node serving it,
// so that a copy of the log (a replica's, a restored backup's) mints and
// resolves the same ids. A store that has never written chooses it once
// (Options.StoreID, else 8 random bytes) and caches it in <dir>/storeid; a
// store whose log holds records takes the id of the newest record its
// ConsumeQueues index and rewrites the file when it is missing, damaged or
// different. A data directory written before store ids carries the node's
// IPv4 address and port there and keeps them, so its old and new ids share
// their first half. Ids are resolved by their offset alone.
//
// # Following another store (replica.go)
//
// A store can hold a copy of another's CommitLog: ReadFrames on the leader
// cuts a frame stream of its durable frames (records whole, Blank frames as
// their header alone: commitlog's frames.go), AppendFrames on the follower
// checks every frame (checksum, magic, stored offset, placement; a Blank
// frame must close its segment exactly) and allocates every byte before it
// writes any, so a damaged stream is refused whole (ErrCorrupt) and changes
// nothing. With the same segment size the follower's segments are the
// leader's byte for byte; its ConsumeQueues and index follow from its own
// dispatcher; it takes the leader's store id and queue offsets from the
// frames, so after a failover it mints what the leader would have.
// A follower that starts from a copy of a store whose retention deleted
// its first segments is opened with Options.StartOffset (its first
// segment's base) before the frames are appended; the source holds its
// retention meanwhile (HoldRetention: no pass runs, a cut applied waits
// for the last release), and MetaFiles and ReadFramesTo give it the
// metadata files and the frames up to the copy's point.
//
// # A Raft log's store (truncate.go)
//
// With Options.HoldDispatch the dispatcher goes no further than a limit
// its owner moves (SetDispatchLimit: the Raft commit point), at Open and
// Close too, and the queue offsets of the records above it are counted at
// Open from the log. Only such a store cuts its log's tail while open
// (TruncateFrom: a replica's conflicting suffix), never at or below the
// limit or the dispatched offset, so nothing a consumer could have seen
// is cut; the checkpoint's high-water mark is lowered first, and the cut
// log is byte for byte the log that never wrote the suffix, with the cut
// records' queue offsets given out again.
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
// slower but reaches the same state (ARCHITECTURE.md, crash-consistency rule 7).
//
// # Lifecycle
//
// Open takes the directory lock, reads the checkpoint and notes whether the
// abort marker survived a previous run. The CommitLog is opened with
// RecoverFrom/HighWater taken from the checkpoint (see Recovery): its scan
// verifies every frame from RecoverFrom on, a bad frame above HighWater is
// a torn tail (truncated, a .broken copy kept) and a bad frame below it is
// corruption (Open fails with ErrCorrupt; see Repair). The ConsumeQueues are checked
// against the queue table and the CommitLog and the damaged ones rebuilt
// (see Derived state below). ConsumeQueues and the index are then
// re-dispatched from the checkpointed dispatched offset to the
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
// fails Open with ErrCorrupt, which Repair (it verifies every frame)
// deals with like any other damage.
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
// # Crash images: what the sweep checks
//
// Every file of the store — segments, ConsumeQueues and their MINOFFSET,
// index files, the checkpoint, the queue table, the abort marker and
// config/* (the store's own and its user's, through WriteMeta and FS) — is
// written through Options.FS. Tests run the store on vfs.FaultFS
// (storagetest.CrashRecorder), which records every write, store through a
// mapping, size change, create, rename, remove and barrier, and models a
// power loss at any recorded moment: per file, what the last fdatasync or
// msync covered is durable and everything since is pending; per
// directory, the entries of its last fsync are durable and every create,
// rename, remove and mkdir since is pending. A crash image keeps the
// durable state and any of: nothing pending, everything, a prefix of the
// pending namespace operations, a prefix of the pending writes, a pending
// run of sectors torn at a sector boundary or mid-sector, random subsets.
// So an image can hold a rename that reverts to the old file, a created
// file that is missing, a .tmp written but not renamed or torn, a new
// segment not yet renamed, pages of one file written back out of order.
//
// TestCrashImageSweep (and TestBrokerCrashImageSweep for the broker's
// files) opens the store from images of many points of a run with sends
// over several queues, segment rolls, checkpoints and metadata
// replacements, and requires of each: Open succeeds (start-up never
// refuses a state a crash can produce); every Put that returned nil before
// the point is readable at its queue offset with its content; no queue
// offset is given out again; a WriteMeta that returned nil is not undone
// (that version or a later one). TestPowerLossDuringSegmentRoll,
// TestPowerLossDuringCheckpoint and TestPowerLossDuringMetadataSnapshot
// do the same around the steps of one protocol only. The quick tier
// samples (about 3 000 images in all, seeded); LONG=1 checks many more.
// New directories are created with their parent fsynced (vfs.MkdirAllSync)
// and every replaced file is written tmp, fdatasync, rename, directory
// fsync (vfs.WriteFileAtomic), which is what these checks rely on.
//
// # Queue table (part of the on-disk format; never change)
//
// <dir>/queues lists every ConsumeQueue with the bounds it had at the last
// checkpoint, so that start-up can tell a queue that lost files from one
// that never had them. Integers are big-endian:
//
//	off len field
//	0   4   magic        0x4D515154 ("MQQT")
//	4   2   version      1
//	6   2   reserved, zero
//	8   8   indexedPhy   the index's MaxPhysicalOffset at the snapshot (-1: none)
//	16  4   count        number of records
//	20  ... count records, sorted by topic then queue id:
//	        1 topicLen (1..255), topicLen topic bytes,
//	        4 queueId (uint32), 8 minOffset, 8 maxOffset,
//	        8 lastPhy (CommitLog offset of entry maxOffset-1; -1: empty)
//	end 4   crc          CRC-32C of every byte before it
//
// A checkpoint reads the dispatched offset D, flushes the CommitLog, takes
// the table (each queue's minimum and maximum offsets, taken after D was
// read, so they cover every record below D), msyncs the derived files, and
// only then writes the table and the checkpoint, so every entry the table
// counts is durable. The table is rewritten only when it changed.
//
// # Derived state is rebuilt from the CommitLog
//
// The CommitLog is the only source of truth; a ConsumeQueue or index file
// that is missing, truncated, zeroed or wrong is detected and rebuilt:
//
//   - At Open, a queue whose directory cannot be opened (ErrCorrupt: a file
//     missing between two others, a bad size) is set aside as
//     <queueId>.broken and rebuilt. A queue of the table whose directory is
//     missing, or whose recovered maximum is below the table's, is rebuilt.
//     The other queues are sampled: the entries at the minimum, at each
//     file boundary, at the table's maximum - 1 and at the maximum - 1
//     (those pointing below D) must point at a record that carries that
//     entry's topic, queue id and queue offset, and the entry's size; a
//     queue that fails is rebuilt. Without a readable table (a data dir of
//     an earlier version, or a lost file) every record of the CommitLog is
//     re-dispatched instead, which rebuilds every queue.
//   - A rebuild closes the queue, moves its directory aside, and re-puts
//     the entries of every record of that queue from the CommitLog's
//     minimum through the dispatcher's own code path, skipping records
//     below the table's (or the old queue's) minimum offset, so retention
//     and topic deletion are not undone.
//   - Queue offsets are never reused: the next offset of a queue is the
//     larger of its rebuilt maximum and the table's maximum when retention
//     took the queue's records (the table's lastPhy is below the
//     CommitLog's minimum): the empty queue is restarted at the table's
//     maximum, with a warning. Records a Repair gave up keep their offsets
//     taken (config/repair.json; see Repair). Records the CommitLog lost
//     at its end otherwise (a torn tail: never acknowledged in sync mode;
//     an AllowCorrupt cut) are gone: their offsets are given out again,
//     counted in RepairStats.LostRecords, and the broker clamps a consumer
//     offset above the maximum visibly.
//   - While the store runs, a queue entry whose record does not carry that
//     entry's topic, queue id and queue offset, or an empty entry below
//     the maximum, is never served: ReadQueue stops before it (the
//     consumer's next offset stays on it), counts it, and asks the
//     dispatcher to rebuild the queue; readers of the topic are woken when
//     the rebuild is done. A dispatch that would leave a gap in a queue
//     (its files lost an end that the table did not know of yet) rebuilds
//     the queue before the record is put.
//   - The index re-adds every record above its MaxPhysicalOffset; when it
//     lost every file (its MaxPhysicalOffset is below the table's
//     indexedPhy and names no retained record), Open re-dispatches from the
//     CommitLog's minimum.
//
// RepairStats counts what was rebuilt.
//
// Index keys ("<topic>\x00<kind><key>", package index): kind 0 each
// business key of KEYS, 1 UNIQ_KEY, 2 DEDUP_ID, all under the record's
// topic; kind 3 ORIGIN_MESSAGE_ID under the empty topic, so the copies of
// one message in every topic are found by its id (FindByOrigin). Records
// indexed by an earlier version have no kind-3 keys.
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
//     from /readyz), so an operator decides: stopping the server and
//     running `mqgate repair` (see Repair) gives up the rest of that
//     segment and keeps everything after it.
//
// A replica of a Raft group (Options.Replicated) does not go on past
// damage: the first quarantine whose cause is damaged bytes also marks
// the store damaged (damage.go), its owner stops the replica, and Open
// refuses the store until it is rebuilt from the others.
//
// The scrubber (Options.ScrubRate, default 16 MiB/s; ScrubInterval, default
// 24 h between pass starts) walks the CommitLog, oldest segment first, up
// to the flushed offset (the sealed segments and the durable part of the
// active one), and verifies every frame at that rate, so damage in records
// nobody reads is found too. Each bad frame is quarantined (stage
// "scrub"); a damaged header makes it skip the rest of that segment (the
// reason says how many bytes went unchecked), and so does a fault while
// reading the mapping (an I/O error of the device), which is reported
// instead of crashing the process. ScrubStatus reports its progress, which
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
// CheckpointInterval; a retention cleaner deletes whole segments (below);
// the scrubber verifies the durable log (Damaged records).
//
// # Repair
//
// When durable data is gone — a segment deleted, an old one truncated,
// bytes zeroed or overwritten below the high-water mark — Open refuses
// (ErrCorrupt; the server's message names `mqgate repair`). Repair, run on
// the stopped store, is the way out; it never guesses:
//
//   - It verifies every frame of every segment file, read-only, and lists
//     the damaged ranges: a gap between segment files, the frames from an
//     invalid one to the end of its segment (past a bad header the next
//     frame's position is known only at the next segment's base), data
//     that ends (zeros) below the high-water mark, segment files missing
//     after the last one below it. A record frame whose header is intact
//     but whose CRC fails, followed by a valid frame, is one damaged
//     record: it alone is given up, left in place (the format has no
//     filler for the middle of a segment), and recovery passes over it
//     from then on (commitlog.Options.Lost). Past the high-water mark, an
//     invalid frame with no valid data after it is a torn tail, left to
//     recovery.
//   - What is lost, per topic and queue: a queue's records lie in the log
//     in queue-offset order, so a jump of a queue's offsets across a
//     damaged range is that many records lost there, and so is the
//     distance from a queue's last surviving record to the highest offset
//     it had given out (the queue table's, or its ConsumeQueue files',
//     read without opening them). Without the table and the files, the
//     loss at a queue's end is not knowable and is not reported.
//   - The dry run (the default) prints this and changes nothing. Apply
//     keeps every intact frame at its offset (message ids, ConsumeQueue
//     and index entries stay valid) and makes each damaged range (but a
//     damaged record left in place) a Blank one: the non-zero bytes are copied to commitlog/<segment>.broken
//     first, then zeroed; a truncated file is extended; a Blank frame
//     covers the rest of the segment; missing segment files are recreated,
//     each one Blank frame. So the log walks from its first segment to its
//     end again, and continues above everything given out before. It then
//     records the ranges and each damaged queue's highest offset (its
//     floor) in config/repair.json, writes a checkpoint whose dispatched
//     offset is below the first damaged range, and opens and closes the
//     store, which rebuilds what the damage made wrong.
//   - From then on (lost.go) readers pass over a queue entry that points
//     into a lost range (counted as ReadResult.Skipped, never
//     quarantined), Open's checks accept such entries, a gap of queue
//     offsets across lost ranges is closed with placeholder entries
//     pointing into them (when a queue is rebuilt from the CommitLog), and
//     a queue whose entries end below its floor is filled up to it: no
//     queue offset is given out twice, so a consumer's committed offset
//     never points at another message.
//
// Options.AllowCorrupt, the library's older override, instead cuts the
// log at the first bad frame like a torn tail, giving up every frame after
// it; no flag of the server exposes it.
//
// # Disk space
//
// Every append has a Class, and each class a ceiling on the used fraction
// of the file system holding the store (sampled with statfs every
// DiskCheckInterval, at each retention pass, and on the write path by the
// first append after the CommitLog has grown by 1 MiB since the last
// sample, so a fast producer cannot outrun the sampling):
//
//	ClassSend     producers' messages (Put, PutBatch)       refused above DiskSendCeiling (0.85)
//	ClassSystem   acks and offset commits, retry and        refused above DiskSystemCeiling (0.95)
//	              dead-letter copies, status records,
//	              delayed and timer deliveries
//	ClassReclaim  copies retention needs to delete a        never refused by a ceiling
//	              segment (dead letters, pending timers)
//
// So when the disk fills — by the store or by another process — producers
// get ErrDiskFull first, while consumers keep acknowledging, failing and
// committing from the headroom between the two ceilings, and the broker's
// own records keep its promises for messages already accepted. The system
// ceiling is held against the used fraction less the CommitLog's room
// allocated ahead (the reserve below): that room is kept for these
// records, and writing into it takes nothing more from the disk. A refusal
// happens before any byte is written and is retryable; nothing is lost.
//
// Independently of the ceilings the CommitLog writes only into blocks it
// has allocated (fallocate) and keeps a real reserve for the broker's own
// records: DiskSystemReserve bytes (16 MiB, at most a segment) allocated
// at the start of the segment after the active one. A ClassSend append is
// refused with ErrDiskFull when its bytes cannot be allocated or the
// reserve would not stay whole after it; ClassSystem and ClassReclaim
// appends use the reserve (rolling early into that segment when the
// active one cannot grow) and are refused only once it is used up too
// (package commitlog, "Disk space"). So system records keep at least the
// reserve's worth of room even on a disk another process filled. Every
// such refusal is whole (a batch reserves every segment it will roll into
// and allocates every byte before writing its first record), and the next
// append that needs the room tries again: appends resume by themselves once
// space returns. That is never the fatal write-path failure (ErrReadOnly,
// only for a failed flush). DiskStatus reports the room left for system
// records and whether sends, or system records, are being refused for want
// of room. A ConsumeQueue or index file the dispatcher cannot create or
// grow stops its pass (DispatchStatus reports the error); the pass is
// retried every 100 ms and resumes when space returns: the reserve is the
// CommitLog's, so on a disk another process filled to the last block, a
// retry copy appended into the reserve is delivered once its queue's file
// can grow.
//
// The footprint follows the data: CommitLog segments are sparse files of
// SegmentSize bytes whose blocks are allocated ahead of the write position
// in a window that grows from 4 MiB to 64 MiB, ConsumeQueue files grow in
// steps from 4 KiB, and the first index file is 1.3 MB. A fresh data dir
// with a few messages takes about 20 MiB (4 MiB of the first segment and
// the next segment's 16 MiB reserve).
//
// # Retention and disk pressure
//
// Retention deletes whole CommitLog segments, oldest first, never the
// active one and never records not yet dispatched. What consumers still
// need is known to the store's owner, which installs a RetentionPolicy:
// before every pass it reports three floors (CommitLog offsets), and before
// every deletion it is told the cut and the reason, re-appends what must
// outlive it (ClassReclaim) and counts the unconsumed messages consumers
// lose. A pass deletes:
//
//   - a segment last written more than FileReservedTime (72 h) ago,
//     consumed or not (reason "expired"), unless it holds a message a
//     longer topic retention keeps (the Retained floor);
//   - while the disk is above DiskMaxUsedRatio (0.75), one more segment per
//     pass before its time, only if every consumer has consumed it (below
//     the Unconsumed floor, reason "consumed"); with DiskPressureDelete
//     (RocketMQ's behaviour, off by default) also when some have not
//     (reason "disk-pressure");
//   - never anything at or above the Keep floor (records that cannot be
//     carried forward: undelivered delay-level entries, progress records
//     no snapshot covers).
//
// So disk pressure never deletes an unconsumed message unless told to;
// when nothing may go, sends stay refused until consumers catch up, time
// retention frees segments, or an operator makes room. Without a policy
// the store knows no consumer: pressure then deletes early only with
// DiskPressureDelete. An owner with a policy sets AwaitRetentionPolicy, so
// that no pass deletes anything while it is still opening (before it can
// carry), and calls PauseRetention before it closes what its carries write
// to; a pass under way always finishes first. ConsumeQueue and index files wholly below the new
// minimum go with the segments. A topic that keeps its messages for less
// time than the store expires them logically instead (TrimQueue raises its
// queues' minimum, persisted like retention's), since its bytes share
// segments with other topics.
//
// A deleted topic's messages stay in the CommitLog until retention: its
// ConsumeQueues' minimum offsets are raised above them (PurgeTopic, through
// MINOFFSET as retention does), so a re-dispatch never writes them back,
// queue offsets continue, and a message below its queue's minimum is not
// found by id or key either.
package storage
