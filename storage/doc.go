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
// RecoverFrom/HighWater taken from the checkpoint: after a clean Close that is
// the exact end, so start-up does not scan; after a crash the scan starts at
// the segment holding the checkpointed flushed offset, a bad frame above it is
// a torn tail (truncated, a .broken copy kept) and a bad frame below it is
// corruption (Open fails unless Options.AllowCorrupt). ConsumeQueues and the
// index are then re-dispatched from the checkpointed dispatched offset to the
// recovered end — ConsumeQueue writes are position-addressed, so re-dispatch
// is idempotent — and trailing ConsumeQueue entries that point at or past the
// recovered end are dropped (RocketMQ's truncateDirtyLogicFiles).
//
// ConsumeQueue tagsCode: the hash of the message's tag (message.TagsCode);
// for SCHEDULE_TOPIC_XXXX the due time in unix ms; for retry topics
// (%RETRY%<group>) the hash of the original topic (RETRY_TOPIC), because one
// retry topic serves all topics of a group.
//
// While open, one dispatcher goroutine (RocketMQ's ReputMessageService)
// follows the CommitLog — up to the flushed offset in sync flush mode, so a
// consumer never sees a message that a crash could still take back, and up
// to the written offset in async mode — and appends ConsumeQueue and index
// entries, then wakes long-polling readers by closing a per-topic channel.
// A checkpointer flushes the derived files and rewrites the checkpoint every
// CheckpointInterval; a retention cleaner deletes whole expired segments.
//
// A deleted topic's messages stay in the CommitLog until retention: its
// ConsumeQueues' minimum offsets are raised above them (PurgeTopic, through
// MINOFFSET as retention does), so a re-dispatch never writes them back,
// queue offsets continue, and a message below its queue's minimum is not
// found by id or key either.
package storage
