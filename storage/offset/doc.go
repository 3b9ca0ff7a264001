// Package offset keeps consumer-group progress: per (group, topic, queue)
// the committed offset (the lowest offset not yet acknowledged, RocketMQ's
// ProcessQueue removeMessage rule) and the acknowledged offsets above it.
//
// A consumer instance of a broadcasting group has progress of its own,
// under the group "<group>@<client id>" (InstanceSep: group names never
// hold an "@", so the first one splits the two). Its records are the
// group records above; a forget of the group ends its instances' keys
// too, the forget of an instance only the instance's.
//
// It is a state machine plus two codecs; it does no I/O of its own except
// the snapshot file. The broker makes every change durable by writing it
// as a record body (EncodeRecord) to a system topic through the CommitLog's
// group commit before answering the client, applies it to a Table, and
// periodically saves a Snapshot naming the system-queue offset it covers.
// On start it loads the snapshot and re-applies the records after it.
//
// Records are idempotent: an ack adds offsets to a set, and a commit (an
// explicit offset set by a client, or a reset) carries a generation that
// increases per key, so re-applying a record the snapshot already covers
// changes nothing. That lets the snapshot name any system-queue offset at or
// below the true one.
//
// # Record body (part of the on-disk format; never change)
//
//	version u8 (1) | count u16 | count × entry
//	entry: kind u8 (1 ack, 2 commit, 3 advance, 4 failed, 5 forget) | groupLen u8
//	       | group | topicLen u8 | topic | queueId i32 | generation u32
//	       | ack, failed:     n u16 | n × offset i64
//	       | commit, advance: offset i64
//	       | forget:          nothing (topic empty, queueId and generation 0:
//	                          every key of the group is dropped, with its
//	                          instances' keys; of an instance, its keys)
//
// All integers big-endian.
//
// # Snapshot file (part of the on-disk format; never change)
//
//	magic u32 0x4D514F46 ("MQOF") | version u16 (1) | crc u32 (CRC-32C of the JSON) | JSON
//
// written atomically (tmp, fsync, rename, dir fsync). The JSON is
// {"sysOffset": N, "queues": [{"group","topic","queueId","committed","generation","acked":[...]}]}.
package offset
