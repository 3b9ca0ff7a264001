// Package registry is the registry family of the broker (RocketMQ's
// topics.json and subscriptionGroup.json): the configurations of topics
// and consumer groups, the tombstones of deleted topic names, the records
// of rmq_sys_META with their codec, the State those records make, with its
// apply, the snapshot files, and the Service that runs it all on the
// broker's store: the registry lock, the topic and group requests with
// their quotas, the replay at open and the follower's, retention's carry
// and the receipt key requests.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry, txn and dlq moved
// before it). Of the module it imports server/broker/receipt (the
// keyring, whose key records are META records), server/broker/retry (a
// group's retry policy), server/broker/quote (a name quoted in an error),
// the store's facade and storage/message (it appends rmq_sys_META and
// writes the files itself), and server/broker imports it. TopicConfig, Subscription, GroupConfig and PushConfig live
// here because the records and the snapshot files are made of them;
// broker.TopicConfig and the others are aliases, and so are
// broker.QuotaError, ErrQuotaExceeded, ErrQueueShrink, ErrInvalidName and
// ErrReservedName. The naming rules of topics and groups are here too
// (names.go: ValidateTopicName, ValidateGroupName, ValidateName, which
// the broker's ValidateTopicName and ValidateGroupName and the
// transaction family's producer groups use).
//
// What the family needs of the broker comes in its Config (filled in by
// server/broker's meta.go): the replay of a system queue (Scan: the
// broker's loop, shared by the families still in it), the store errors'
// mapping and the broker's sentinels, the checks of a group that
// are other families' (CheckGroup: its instance idle time, ConsumeFrom,
// retry policy, its subscriptions' filters, run after the registry's own
// checks, in that order), the wait for dispatch, a group's start offsets
// (Meet: package progress's Ledger.MeetTopics) and what a group's
// deletion drops beside its record (DropGroup: its pop states, consumer
// instances and progress). What stays in the broker: the exported
// requests, which delegate; the quotas of the other families (timers,
// transactions, consumer instances), which use QuotaError and Over; a
// topic's deletion but its record (server/broker's topicdelete.go: the
// topic gate, the purge, the other families' state, re-applying the
// tombstones at open with DeleteTopic's record and SetTombstone here).
//
// # Requests
//
// PutTopic, PatchTopic, GetTopic, PutGroup, PatchGroup, GetGroup and
// DeleteGroup validate and fill in defaults (requests.go), then change
// the registry (change.go: SetTopic, SetGroup, DeleteTopic, SetTombstone;
// SetTopic and SetGroup with ifAbsent are the broker's auto-create of a
// topic on send and of a group on pull). A change checks the quotas
// (quota.go), writes its record (log.go: commitLocked, through the group
// commit), applies it and rewrites the snapshot files, all under the
// registry lock. A topic put or patched unchanged writes nothing; a group
// put writes its record every time. A refusal writes nothing.
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
// a re-creation. The Service keeps beside the State the offset its
// snapshots cover.
//
// # Locks
//
// State has no lock. The Service's registry lock guards it: a change
// holds it from its checks across its record's write to its apply, so
// records reach the log in the order they are applied; readers hold it
// shared. The maps a State hands out (Topics, Tombstones, Groups) are
// replaced on every change, never changed in place, so a reader may keep
// one after the lock is released. The receipt keyring is an atomic
// pointer: Ring needs no lock.
//
// Its place among the broker's locks (ARCHITECTURE.md, "The broker as a
// state machine"): a change takes it after the topic gate (a topic's
// deletion writes its tombstone under the gate) and before the progress
// lock (a group change's start offsets, Config.Meet, are written through
// package progress's Ledger under the registry lock, before the group's
// record) and the store. Under it only the Ledger's lock (through Meet)
// and the store's locks are taken: the snapshot files are written under
// it, DropGroup runs after it is released. Readers (Topic, Group,
// Tombstone, the lists, View) take its read side for a lookup under
// whatever lock they hold — the topic gate (a transaction's commit, a
// dead letter's resend), the instances lock (package instance's sweep
// reads a group's idle time under it: the one family lock taken before
// it), a pop state's lock — and take nothing under it.
package registry
