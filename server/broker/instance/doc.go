// Package instance is the broadcasting consumer-instance family of the
// broker (RocketMQ's MessageModel.BROADCASTING, per consumer instance):
// the naming rules of an instance's progress group, the set of the known
// instances with their last-seen times and the decisions over it, and the
// codec of the instances snapshot.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry, txn, dlq, registry and
// timer moved before it). It imports storage/offset of the module (the
// separator of an instance's progress group is package offset's, whose
// records carry the instance's progress) and nothing else, and
// server/broker imports it. What needs the broker stays there
// (broadcast.go): registering an instance with its start offsets (commit
// records in rmq_sys_OFFSET), the instance's pop states and its view of the
// queues and of its group's retry topic, the requests — pulls, queue reads,
// offset commits and resets, settlements by receipt — the leader's sweep of
// idle instances with its forget records, the instances lock, and reading
// and writing the snapshot file.
//
// # Names
//
// A broadcasting group's consumer instance is a client id (the transport's
// X-Mqgate-Client-Id) with progress of its own under the progress group
// "<group>@<client id>" (Key; Sep is package offset's InstanceSep). Group
// names never hold the separator, so the first one splits the two (Split,
// Base): a client id may hold one, and a name without one, or ending in
// it, is the group's own. Its progress records, lease records and receipts
// name that progress group; a dead letter of the instance names its client
// id in the property BROADCAST_INSTANCE (Prop), and a resend of it goes to
// that instance only. The start offsets written when an instance
// registers carry a commit generation taken from the clock (Generation:
// the time in seconds, above every generation the key had), so what an
// earlier instance under the same client id left behind does not apply.
//
// # Records
//
// The family has no system topic of its own: an instance's progress is
// records of rmq_sys_OFFSET (package offset) under its progress group, and
// the forget record of that group (offset.KindForget) ends it when the
// instance is forgotten. The set of known instances is rebuilt from the
// progress keys at open (Set.Restore: every registered instance has some).
//
// # The set and its decisions
//
// Set holds the known instances per group: each one's last-seen time, its
// requests under way and the topics it has start offsets in. Its decisions
// take the time as an argument and read neither the clock nor a random
// source: Room (the instance limit, Quotas.MaxInstancesPerGroup: a new
// instance past it is refused before anything is written; 0 is unlimited)
// and Idle (the instances to forget at a time: none under way, last seen
// at least their group's InstanceIdle before it). A group's InstanceIdle
// is MinIdle..MaxIdle, 0 meaning DefaultIdle (CheckIdle, Idle).
//
// # The snapshot
//
// config/instances.snapshot (SnapshotFile) is every known instance's
// last-seen time (JSON, SnapshotVersion 1, written by EncodeSnapshot):
//
//	{"version":1,"instances":[{"group":"g","client":"c","lastSeenMs":1700000000123}]}
//
// the instances by group and client id, a time in unix milliseconds. The
// broker writes it with the offsets snapshot when the set changed since
// the last one (Set.Snapshot; the end of a request alone is not a
// change). DecodeSnapshot refuses a file that is not that, whole: not one
// JSON object, another version, members of the wrong type, an entry with
// an empty group or one holding the separator, an empty client id, an
// instance twice; members it does not know are ignored. The times are
// advisory: without a usable file (lost, damaged) every instance counts
// as seen at the open, and a time not before the open counts as the
// open's.
//
// # Memory only
//
// Everything of Set but the last-seen times the snapshot keeps: the
// requests under way (Enter, Leave), the topics met, and whether the set
// changed since the last snapshot.
//
// # Locks
//
// Set has none: the broker's instances lock guards it (every method is
// called under it). That lock's place among the broker's locks is in
// ARCHITECTURE.md.
package instance
