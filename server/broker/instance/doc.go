// Package instance is the broadcasting consumer-instance family of the
// broker (RocketMQ's MessageModel.BROADCASTING, per consumer instance):
// the naming rules of an instance's progress group, the set of the known
// instances with their last-seen times and the decisions over it, the
// codec of the instances snapshot, and the requests, queries and leader
// service over them.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"), and holds the family's request logic
// and leader service too:
//
//   - Service (service.go): the known instances behind the instances lock;
//     Enter, an instance's registration by its first request with the
//     instance limit and its start offsets (commit records in
//     rmq_sys_OFFSET, written through the progress Ledger), and the count
//     of its requests under way; Touch, Known, Clients, DropGroup,
//     HasOwnOffsets; Open (the set rebuilt from the progress keys and the
//     snapshot file) and WriteSnapshot (the file);
//   - the leader's sweep of idle instances (sweep.go: Sweep, the pass the
//     broker's leader service runs every SweepInterval) with their forget
//     records;
//   - the queries and requests (query.go): Instances and Offsets with
//     their rows (Progress; broker.InstanceProgress is an alias),
//     CountRetries (an instance's retry lag), ResetCommits (a reset's
//     fan-out to a group's instances and own offsets) and ReadStart (where
//     a read by offset starts, and as whom);
//   - the pure parts: the naming rules (names.go), Set and its decisions
//     (set.go), the snapshot's codec (snapshot.go).
//
// # Imports
//
// storage (ReadResult) and its leaf packages storage/offset and
// storage/message, and of the family packages progress (the Ledger that
// writes the records, the rows of a progress group) and registry (the
// group and topic configurations); never server/broker, server/*, api or
// cmd (internal/archtest). What it needs of the broker it is given: its
// Config (the store through the Store interface, the Ledger, the clock,
// the logger, the broker's errors and its rule for a client id, the
// instance limit and its quota error, MaxBatchItems, the retry topic's
// name) and the Broker interface (the registry's word on a group or a
// topic, the waits for dispatch, dropping an instance's pop states and
// retention's counts), which server/broker fills in (broadcast.go).
//
// # What stays in server/broker and why
//
//   - The facade (broadcast.go): the exported Instances, ReadQueueFor and
//     constants, the unexported names the broker's files call
//     (enterInstance, instanceKnown, …), each a line or two.
//   - An instance's view of the queues and its pop states (cursors,
//     leases, lease notes): package consume's (View.ForInstance) and the
//     lease family's, changed under the pop states' locks;
//     Broker.DropPopStates takes those locks for the sweep.
//   - The requests that act as an instance and call Enter: pulls
//     and offset commits (package consume), settlements by
//     receipt, which Touch (package consume), and ReadQueueFor's filters and read
//     (broadcast.go, with ReadStart); a retry's write asks Known (package
//     retry's Config, filled in by retry.go).
//
// # Broadcasting
//
// In a group whose ConsumeMode is Broadcasting every consumer instance —
// a client id, the transport's X-Mqgate-Client-Id, required there —
// receives every message of the group's topics, with progress of its own:
// pop pulls, acks, nacks and lease changes, and offset reads and commits,
// all act on the instance's keys (Key). Everything else is the machinery
// of a group: the instance has its own pop states, its progress records
// are the group records of rmq_sys_OFFSET (durable before the answer,
// snapshotted, replayed), the subscription's tag and SQL filters apply,
// and a receipt names the instance's key as its group, so an ack settles
// that instance's lease and no other's.
//
// Registration. The first pull, queue read or offset commit of a client id
// the group does not know registers it (Enter), after the instance limit
// is checked and before anything is written: for every queue of the
// topic its start offset by the group's ConsumeFrom ("" the queue's first
// retained offset, "last" its max offset, a time the first message stored
// at or after it) and for the topic's view of the group's retry topic its
// end, as commit records of a generation taken from the clock
// (Generation). A topic the instance meets later gets its starts the same
// way; a queue added to a topic later starts at its first message.
//
// Retries. A nack or an expired lease of an instance is retried in place,
// as an ordered message is: it is offered to the same instance again when
// due, and after the group's retryMaxTimes goes to %DLQ%<group> with the
// instance in BROADCAST_INSTANCE (Prop); a resend of that letter is
// delivered to that instance only (its view of %RETRY%<group> takes the
// copies naming it).
//
// Forgetting. An instance whose last request is older than the group's
// InstanceIdle and that has none under way is forgotten by the sweep: its
// pop states are dropped and a forget record of its key (offset.KindForget)
// ends its progress, durably. A client id that comes back is a new
// instance: it registers again and starts by ConsumeFrom.
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
// One: the instances lock (Service's mu), which guards the Set (Set has no
// lock of its own). It is held by a registration across its start
// offsets' write, by the sweep across an instance's forget record (and
// the drop of its pop states before it), and briefly by the other
// methods. It comes after the topic gate (a retry's send-back asks Known
// under the gate) and before the registry lock (the sweep reads a group's
// idle time under it), the pop states' locks (the sweep drops an
// instance's pop states under it), the progress Ledger's lock and the
// store; ARCHITECTURE.md has the whole order. The queries read the set
// under it and the rows after releasing it.
package instance
