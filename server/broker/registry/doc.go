// Package registry is the registry family of the broker (RocketMQ's
// topics.json and subscriptionGroup.json): the configurations of topics
// and consumer groups, the tombstones of deleted topic names, the records
// of rmq_sys_META with their codec, the State those records make, with its
// apply, and the codec of the snapshot files.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry, txn and dlq moved
// before it). It imports server/broker/receipt (the keyring, whose key
// records are META records) and server/broker/retry (a group's retry
// policy) of the module and nothing else, and server/broker imports it.
// TopicConfig, Subscription, GroupConfig and PushConfig live here because
// the records and the snapshot files are made of them; broker.TopicConfig
// and the others are aliases, and their validation and defaults are the
// broker's. What needs the broker stays there: appending the records
// through the store and rewriting the snapshot files after each change, the
// open that reads the files and replays the records after them, the
// follower's scan (metalog.go), the requests with their quota checks and
// the start offsets a group's subscriptions write (meta.go, quota.go,
// package progress), a topic's deletion (topicdelete.go), the receipt key
// requests (receiptkeys.go) and retention's carry of the registry
// (carryMeta).
//
// # Records
//
// Topic (rmq_sys_META), queue 0: each message's body is a JSON array of
// Record {"kind","name","topic","group","tomb","key"} (EncodeBody,
// DecodeBody), one change's records in one message. A record holds the
// whole new state of what it names:
//
//   - KindTopic ("topic"): Topic, a topic's TopicConfig.
//   - KindTopicDeleted ("topic-deleted"): topic Name was deleted; Tomb is
//     its Tombstone (when and below which CommitLog and schedule offsets).
//   - KindTombstone ("tombstone"): Name's tombstone is Tomb (nil: dropped,
//     once retention has deleted what it covers; clamped after a lost
//     tail).
//   - KindGroup ("group"): Group, a group's GroupConfig.
//   - KindGroupDeleted ("group-deleted"): group Name was deleted.
//   - KindReceiptKey ("receipt-key", receipt.MetaKind): Key, a receipt
//     key (package receipt).
//
// The configurations are written under their Go field names (durations in
// nanoseconds, times in RFC 3339); server/broker/doc.go ("What the broker
// persists") describes the topic beside the other families'. DecodeBody
// checks the JSON only; Record.Check says what makes one record unusable
// (an unknown kind, a topic, group or key record without it), and applying
// skips such a record alone. CarryBodies packs the whole registry
// (State.Records) into messages of at most MaxCarryBytes, which the broker
// appends before retention deletes a segment holding META records.
//
// # Apply
//
// State.Apply applies one record; the broker applies each message's
// records in log order at open, on a follower, and on the leader after
// appending its own. It reads neither the clock nor a random source: a
// configuration's CreatedAt, a tombstone's DeletedAt and a key's secret
// and time are chosen by the request that writes the record and travel in
// it, so every copy of the log makes the same State, and applying a record
// again changes nothing. The request picks CreatedAt with
// State.TopicCreatedAt and State.GroupCreatedAt: a name created again is
// created after its deletion, even within the millisecond of it.
//
// # The snapshot files
//
// config/topics.json (TopicsFile), config/groups.json (GroupsFile) and
// config/receipt-keys.json (ReceiptKeysFile) are the State (JSON,
// indented, SnapshotVersion) and MetaOffset, the rmq_sys_META queue offset
// below which each holds every record: topics.json maps each name to a
// TopicEntry (the topic, and under "Deleted" its tombstone; a name that
// is only a tombstone has no queues), groups.json each name to its
// GroupConfig (push secrets included), receipt-keys.json lists the keys.
// State.EncodeTopics, EncodeGroups and EncodeReceiptKeys write them;
// DecodeTopics, DecodeGroups and DecodeReceiptKeys read them, version 1
// files (bare maps, before the records) included as covering no record,
// and what decoded of a damaged file is kept, covering no record either;
// State.InstallTopics, InstallGroups and InstallKey put them into a State.
// The broker then replays the records from the lowest of the three
// offsets, so losing the files loses nothing.
//
// # Memory only
//
// Not in any record: when this process last deleted each group
// (State.NoteGroupGone, for GroupCreatedAt: a group's deletion record has
// no time). After a restart the restart itself separates a deletion from
// a re-creation. The broker keeps beside the State the offset its
// snapshots cover, the quotas and the callback that writes a group's
// start offsets.
//
// # Locks
//
// State has no lock. The broker's registry lock guards it: a change holds
// it from its checks across its record's write to its apply, so records
// reach the log in the order they are applied; readers hold it shared.
// The maps a State hands out (Topics, Tombstones, Groups) are replaced on
// every change, never changed in place, so a reader may keep one after
// the lock is released. The receipt keyring is an atomic pointer: Ring
// needs no lock. The registry lock's place among the broker's locks is in
// ARCHITECTURE.md.
package registry
