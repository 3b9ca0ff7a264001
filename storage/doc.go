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
//	<dir>/timers/                     the broker's timer index, derived from
//	                                  its timer queues (server/broker/timerindex)
//	<dir>/config/<name>               small metadata files, each replaced
//	                                  atomically (WriteMeta); the store's own
//	                                  is quarantine.json (below), the others
//	                                  belong to the store's user (the broker:
//	                                  topics.json and groups.json, snapshots
//	                                  of its registry records; receipt.key;
//	                                  offsets.snapshot; delay.progress)
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
// A frame that fails its CRC is different: below the checkpointed flushed
// offset it is corruption, and Open fails (see Lifecycle).
//
// DispatchStatus tells how far the dispatcher is behind the log (bytes,
// and since when, sampled every CheckpointInterval) and whether its passes
// are failing (an I/O error; the pass is retried every 100 ms).
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
