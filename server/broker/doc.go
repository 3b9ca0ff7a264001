// Package broker holds mqgate's messaging semantics over the storage
// engine: send (with idempotency keys), pop-style pull with leases and
// receipts, ack / nack / lease changes with durable consumer progress,
// retries and dead letters, timers, transactional (half) messages,
// broadcasting groups with progress per consumer instance, and
// the admin operations. It knows
// nothing about HTTP; package api maps its types and errors onto the wire.
//
// # What the broker persists
//
// Every fact the broker must not lose is a record in the CommitLog,
// appended through the group commit before the change is visible to any
// client (so a 200 in sync mode means the fact is on disk). The files under
// <data>/config are snapshots, never the only copy of a fact (the receipt
// keyring included, since the keyring moved into the log; a receipt.key
// left by an older version is read once, adopted as key 1, and no longer
// used). The formats below are part of the on-disk format:
// add fields, never change or remove one.
//
// System topics (the "rmq_sys_" prefix is reserved, as are "%" and
// SCHEDULE_TOPIC_XXXX; clients cannot send to them):
//
//	rmq_sys_META          registry changes (package registry:
//	                      server/broker/registry/doc.go; the facade: meta.go).
//	                      Queue 0. Body: a JSON array of
//	                      {"kind","name","topic","group","tomb","key"},
//	                      kind one of topic, topic-deleted, tombstone, group,
//	                      group-deleted, receipt-key (key: a receipt key,
//	                      package receipt); each record holds the whole new
//	                      state of one topic, tombstone, group or key, so
//	                      replaying it is idempotent. A group is its
//	                      GroupConfig (package registry) under its Go field
//	                      names, ConsumeFrom ("last" or an
//	                      RFC 3339 time; absent = first), RetryPolicy
//	                      ({"Backoff","Initial","Max","Jitter"}, durations in
//	                      nanoseconds; absent = the ladder; package retry)
//	                      and InstanceIdle (nanoseconds; absent = 24 h)
//	                      included; each of its Subscriptions is
//	                      {"Topic","TagExpression","SQL"},
//	                      SQL (the SQL92 property filter, package filter)
//	                      left out when empty.
//	rmq_sys_OFFSET        consumer progress (written by package progress's
//	                      Ledger): acks, commits (resets, and the start
//	                      offsets of a group's ConsumeFrom), advances,
//	                      failed deliveries and forgets (a deleted group, an idle consumer
//	                      instance). Body: package offset's record encoding
//	                      (storage/offset/doc.go), generations make replay
//	                      idempotent. A broadcasting group's consumer
//	                      instance's keys name the group "<group>@<client id>"
//	                      (package instance's Key; broadcast.go); so do its
//	                      lease records and receipts.
//	rmq_sys_LEASE         leases (package lease: the codec, the fold, the
//	                      Log that writes and folds the records and the pop
//	                      states holding the leases; the pulls, the receipt
//	                      loop, the reaper and the send-back: package
//	                      consume). Queue 0. One record per pull
//	                      naming the leases it granted, one per lease change,
//	                      one per batch of ordered messages failed in place.
//	                      Body, big-endian:
//	                        version u8 (1) | count u32 | count × entry
//	                        entry: groupLen u8 | group | topicLen u8 | topic
//	                          | queueId i32 (-1: the retry view) | generation u32
//	                          | at i64 (Unix ms written) | clientLen u8 | client
//	                          | n u32 | n × (offset i64 | epoch u64
//	                          | deadline i64 (Unix ms) | failures u16 | state u8)
//	                      state 1 held until the deadline, 2 an ordered message
//	                      waiting in place until the deadline, 3 released (a
//	                      lease changed to 0). Of one offset the newest epoch
//	                      wins, of one epoch the later record; acks, nacks and
//	                      expiries end a lease in rmq_sys_OFFSET instead.
//	rmq_sys_DLQ           dead-letter status changes. Body: a JSON array of
//	                      {"group","messageId","status","at"}, status
//	                      resent or discarded (dead: no record), one
//	                      array per resend chunk or discard (package dlq).
//	rmq_sys_TIMER         timers: delayMs / deliverAt, and retries waiting on
//	                      a timer, whose destination is %RETRY%<group> (a
//	                      nack's delayMs, a RetryPolicy) (package timer:
//	                      server/broker/timer/doc.go; the facade: timer.go).
//	                      Queue 0. A record is the message itself with its
//	                      destination in REAL_TOPIC / REAL_QID and its due
//	                      time in TIMER_DELIVER_MS; a reschedule or a
//	                      retention carry appends a copy naming the timer
//	                      (TIMER_ID, UNIQ_KEY "timer:<id>") and the record it
//	                      supersedes (TIMER_PREV, its queue offset).
//	rmq_sys_TIMER_STATUS  timer settlements (package timer). Queue 0. Body: a
//	                      JSON array of {"id","status","at","seq","topic"},
//	                      status delivered or cancelled, seq the
//	                      rmq_sys_TIMER queue offset of the record settled
//	                      and topic its destination (records written before
//	                      the timer index have neither and settle every
//	                      record of the id).
//	rmq_sys_TRANS_HALF    half messages of unresolved transactions (package
//	                      txn: server/broker/txn/doc.go; the facade: txn.go),
//	                      RocketMQ's RMQ_SYS_TRANS_HALF_TOPIC. Queue 0. A
//	                      record is the message itself with its destination
//	                      in REAL_TOPIC / REAL_QID, its producer group in
//	                      TRAN_PGROUP and its checkAfterMs in
//	                      TRAN_CHECK_AFTER_MS; its message id is the
//	                      transaction id. A retention carry appends a copy
//	                      naming the transaction (TRAN_ID, UNIQ_KEY
//	                      "txn:<id>") with the checks handed out so far
//	                      (TRAN_CHECK_TIMES) and the next check's due time
//	                      (TRAN_NEXT_CHECK_MS, unix ms).
//	rmq_sys_TRANS_OP      transaction changes, RocketMQ's
//	                      RMQ_SYS_TRANS_OP_HALF_TOPIC. Queue 0. One record per
//	                      change, UNIQ_KEY "txn:<id>" (the newest names how a
//	                      transaction stands). Body: JSON
//	                      {"id","state","at","checkTimes","nextCheckMs",
//	                      "reason","producerGroup","topic","queueId","bornMs"},
//	                      state checked (a check handed out: the new count and
//	                      the next due time), committed or rolled-back (with
//	                      reason producer, max-checks, topic-deleted or lost,
//	                      and the transaction's group, topic, queue and
//	                      send time). A commit stores, in one batch before its
//	                      op record, the message on its topic and queue with
//	                      TRAN_ID and UNIQ_KEY "txn:<id>".
//	rmq_sys_TRACE         message trace events (package trace: record.go,
//	                      follow.go, carry.go), RocketMQ's
//	                      RMQ_SYS_TRACE_TOPIC. Queue 0. Appended by
//	                      the trace follower from the lease and progress
//	                      records (deliveries, releases, in-place retries,
//	                      acks) and from push outcomes, and by retention for
//	                      the lives it carries. KEYS lists what a record is
//	                      about: "c<hex>" per message copy (its CommitLog
//	                      offset), "l<id>" for a carried life (its origin id).
//	                      Body, varints of encoding/binary:
//	                        version u8 (1) | leaseNext varint | offsetNext varint
//	                        | base uvarint (unix ms) | nStrings uvarint
//	                        | nStrings × (len uvarint | bytes) | nEvents uvarint
//	                        | nEvents × event
//	                        event: kind u8 | fields uvarint | at varint (ms
//	                          after base) | copy varint (CommitLog offset;
//	                          -1 none) | the fields present, in bit order:
//	                          0 group, 1 client, 5 text, 9 messageId,
//	                          10 relatedId (string-table indexes), 2 epoch
//	                          uvarint, 3 until varint (ms after at), 4 status
//	                          uvarint, 6 level varint, 7 delayMs uvarint,
//	                          8 topic (index) | queueId uvarint | queueOffset
//	                          uvarint, 11 count uvarint, 12 reconsume uvarint,
//	                          13 inPlace (no value), 14 pos uvarint (the
//	                          CommitLog offset of the record the event was
//	                          read from: a trace orders the events of one
//	                          millisecond by it; older records lack it)
//	                      kind: 1 stored, 2 delivered, 3 released, 4 acked,
//	                      5 nacked, 6 lease-expired, 7 retried, 8
//	                      dead-lettered, 9 resent, 10 discarded, 11
//	                      transaction-committed, 12 transaction-rolled-back,
//	                      13 pushed. leaseNext and offsetNext (-1: not said)
//	                      are the rmq_sys_LEASE and rmq_sys_OFFSET queue
//	                      offsets the follower's events are complete up to:
//	                      it resumes there at open. Without such a record
//	                      (a new store, tracing turned on for the first
//	                      time) it starts at the queues' ends and appends a
//	                      record without events that says so.
//	rmq_sys_CUT           retention cuts (package retention:
//	                      server/broker/retention/doc.go, with the leader's
//	                      retention decisions; the facade: retention.go).
//	                      Queue 0. Body: JSON
//	                      {"cut","reason","at"}: the leader's retention
//	                      deleted the CommitLog segments below cut (reason
//	                      as storage's DeleteReason, at unix ms); appended
//	                      after the carries and before the deletion, applied
//	                      by every follower (and again, harmlessly, at open).
//	SCHEDULE_TOPIC_XXXX   delay-level messages and retries waiting on the
//	                      ladder (queue = level - 1), RocketMQ's layout, moved
//	                      to their real topic when due (package schedule).
//	%RETRY%<group>        a group's redeliveries, queue 0 (written, with
//	                      the dead letters, by package retry's Service:
//	                      server/broker/retry/doc.go; the facade: retry.go).
//	%DLQ%<group>          a group's dead letters, queue 0; never pulled
//	                      (package dlq).
//
// Properties the broker owns (a client cannot set them; broker.go's
// systemProperties refuses them on send, through package send's Check):
//
//	ATTEMPTS      JSON array of Attempt {"at","outcome","client","reason",
//	              "delayLevel","delayMs","count"}: the failed deliveries of
//	              a retry or dead letter, bounded to the newest 32 entries in 8 KiB
//	              with reasons cut to 512 bytes; older entries fold into one
//	              "omitted" entry with their count (package retry,
//	              attempts.go).
//	DLQ_REASON    the last failure reason of a dead letter (at most 2 KiB).
//	DLQ_ID        the id a dead letter keeps when retention carries it.
//	DLQ_DEAD_AT   its original death time (Unix ms). The DLQ_ properties
//	              are package dlq's.
//	TIMER_ID      the timer a copy belongs to.
//	TIMER_PREV    the timer-queue offset of the record a copy supersedes.
//	              The TIMER_ properties are package timer's.
//	ORDER_SEQ     the queue offset of a dead-lettered orderly message.
//	TRAN_ID       the transaction of a half-message copy or a committed
//	              message; a committed message is shown under it (its
//	              messageId is the send's).
//	BROADCAST_INSTANCE  the client id of the consumer instance a
//	              broadcasting group's dead letter failed with (kept by
//	              its resend, which only that instance's pulls take;
//	              package instance's Prop).
//	TRAN_PGROUP, TRAN_CHECK_AFTER_MS, TRAN_CHECK_TIMES, TRAN_NEXT_CHECK_MS
//	              a half message's producer group, first-check delay, and
//	              (on a carried copy) check count and next check.
//	and the storage engine's RocketMQ properties (REAL_TOPIC, REAL_QID,
//	DELAY, RETRY_TOPIC, UNIQ_KEY, TIMER_DELIVER_MS, …: storage/message).
//
// Files under <data>/config (written 0600 in a 0700 directory, each by
// "tmp, fsync, rename, fsync dir"):
//
//	topics.json, groups.json  snapshots of the registry, each naming the
//	                          rmq_sys_META queue offset it is complete up to
//	                          (package registry: JSON, version, metaOffset,
//	                          topics or groups by name); missing or unreadable
//	                          ones are rebuilt from the log. groups.json holds
//	                          push secrets.
//	offsets.snapshot          package offset's snapshot of consumer progress
//	                          and the rmq_sys_OFFSET offset it covers (written
//	                          and read by package progress); lost,
//	                          every retained offset record is replayed.
//	leases.snapshot           the live leases and the rmq_sys_LEASE offset it
//	                          covers (package lease): magic u32 0x4D514C53 ("MQLS") | version
//	                          u16 (1) | crc u32 (CRC-32C of the rest) |
//	                          sysOffset i64 | epoch u64 (the epoch counter) |
//	                          a lease record body holding every live lease;
//	                          lost, every retained lease record is replayed.
//	instances.snapshot        the last-seen times of broadcasting groups' consumer
//	                          instances (package instance: JSON, version 1 and
//	                          instances [{"group","client","lastSeenMs"}]),
//	                          written with the offsets snapshot; lost or
//	                          damaged, every instance's idle time counts from
//	                          the open.
//	receipt-keys.json         the snapshot of the receipt keyring (JSON: version,
//	                          metaOffset, keys [{"id","secret","createdMs"}]),
//	                          whose records are rmq_sys_META "receipt-key"
//	                          (package receipt; the file's codec is package
//	                          registry's); lost, the keys are replayed from
//	                          the log. Should the log hold no key of a data dir
//	                          that holds records, a new key is made and logged as
//	                          an error: outstanding receipts become invalid.
//	receipt.key               written by versions before the keyring: adopted as
//	                          key 1 at the first start after an upgrade.
//	transactions.snapshot     the unresolved transactions (package txn; JSON:
//	                          version, the queue offsets and last records of
//	                          rmq_sys_TRANS_HALF and rmq_sys_TRANS_OP it covers,
//	                          and per transaction its id, latest half record,
//	                          topic, queue, producer group, checkAfterMs, send
//	                          time, checks and next check); retention keeps the
//	                          records from its position on. Missing, damaged or
//	                          not matching the queues, the state is rebuilt
//	                          from them.
//
// The timer index (<data>/timers, package timerindex) is derived state:
// rebuilt from rmq_sys_TIMER and rmq_sys_TIMER_STATUS (applied through
// package timer's State, by its Service) when missing or damaged.
//
// # Filters
//
// A pull reads a queue from the group's cursor; the tag expression is
// matched on the ConsumeQueue's tag hash before a record is read, the SQL
// filter (sqlfilter.go) on the decoded properties after. What either
// refuses is marked consumed for the group (package consume's pull), so the group's
// offset moves past it: an ack entry in an rmq_sys_OFFSET record appended
// in one batch with the pull's lease record, before the pop state's lock
// is released and without waiting for its flush, and applied to the
// progress table once appended, as every progress record is (a skip lost
// with the log's tail, or refused, is derived again by the next pull past
// it). The
// retry view applies the subscription's filters to the retry copies, which
// carry the original's tag and properties.
//
// # Message trace
//
// Trace (trace.go; the query, the follower and the carry are package
// trace's: server/broker/trace/doc.go) lists a message's life from records written anyway: the
// message and its copies (found by ORIGIN_MESSAGE_ID, which the store
// indexes: storage FindByOrigin) with their attempt histories, the
// transaction op records, the dead-letter statuses, and rmq_sys_TRACE,
// where the follower (package trace's follow.go) indexes by message copy what the
// lease and progress records say (nothing is written for it on the send,
// pull and ack paths) and push outcomes (a bounded buffer, drops counted).
// Trace records come after the records they derive from, so they outlive
// the message; a dead letter or retry timer carried past retention has
// its life's events carried with it. A trace lists at most MaxTraceEvents
// events. Options.NoMessageTrace (the server's default; --message-trace clears it) stops the
// follower.
//
// # Broadcasting
//
// A broadcasting group's consumer instances (package instance:
// server/broker/instance/doc.go, with its registration, sweep, snapshot
// file and queries; broadcast.go is the facade) each get every
// message, with progress, pop states, leases and retries of their own
// under the progress group "<group>@<client id>": registered by their
// first pull, queue read or offset commit (start offsets by the group's
// ConsumeFrom, bounded by Quotas.MaxInstancesPerGroup), retried in place
// (never through %RETRY%), dead-lettered to the group's DLQ naming the
// instance, and forgotten durably (a forget record) once idle longer than
// the group's InstanceIdle.
//
// # Receipts
//
// A receipt is the opaque handle of one lease (package receipt): base64url
// without padding of
//
//	version u8 (3) | keyId u16 | epoch u64 | queueId i32 | offset i64
//	| groupLen u8 | group | topicLen u8 | topic | mac [16]
//
// big-endian, where mac is the AES-128-CMAC (RFC 4493) of everything
// before it under the first 16 bytes of HMAC-SHA256(secret, "mqgate
// receipt v2 AES-128-CMAC"), secret being key keyId's of the receipt
// keyring (package receipt: in the log, so every copy of the log verifies
// the same receipts; the newest key signs, the eight newest verify;
// POST /v1/broker/receipt-keys/rotate adds one). Version 2 receipts (no
// keyId, the same MAC) and version 1 receipts (HMAC-SHA256 truncated to
// 16 bytes), written before the keyring, are checked under key 1. The group of a broadcasting group's
// instance's receipt is the instance's progress group ("<group>@<client
// id>"): it settles that instance's lease. The epoch increases with every lease
// granted, so the receipt of an older lease of the same message is stale
// and refused rather than settling the newer lease. The counter starts,
// at every open, above the clock in nanoseconds and above every epoch in
// the lease records and snapshot, so it never goes back across restarts.
//
// # Durability of a reply
//
// Send, ack, nack, lease changes, offset commits, topic and group
// changes, dead-letter resends, timer operations, transaction commits,
// rollbacks and handed-out checks answer only after their records are
// appended (and, in sync flush mode, flushed). A pull answers once its
// lease record is appended, without waiting for its flush
// (Store.PutClassNoWait): the record is in the page cache, so it survives
// a crash or kill of the process, and it is on disk with the next flush —
// the next ack's or send's, at the latest commitlog.LazyFlushDelay (10 ms)
// later, and before any later reply that waited for a flush, an ack of
// those very leases included. Leases therefore survive a restart or a
// crash of the process: a leased message is not delivered to another
// pull before its lease ends, its receipt still acks ok, and a lease that
// ends unacknowledged (also one that ran out while the broker was down)
// takes the retry path. A crash of the machine can lose the lease
// records of the last flush (in async mode, of the last flush interval):
// those messages are delivered again at once (at-least-once), which is
// all a lost lease can cost; waiting for the flush would cost every pull
// one. A pull decides its leases, writes their record and
// only then puts them into its cursors, with the code that installs the
// folded leases when the broker takes over (package lease's
// PopState.Apply; server/broker/consume/doc.go), and so does every other
// lease change. When a pull's record
// cannot be written (disk above the system ceiling, read-only store) the
// pull fails and nothing of it is applied: no lease, and none of the
// offsets its filters passed over, which the next pull passes over and
// records again. What stays in memory: the attempt history of an
// ordered message retried in place (its failure count is recorded).
//
// # Time
//
// The broker reads time from one clock, Options.Clock (a
// clockwork.Clock, the wall clock by default), and hands it to its store
// (StoreTimestamp), its delay scheduler and its periodic passes whose
// effect depends on time: the lease reaper, the dedup window (package
// send's Table, whose decisions take the time from the send:
// server/broker/send/doc.go), the instance sweep. Lease deadlines, timer and retry due times, born and
// created times, transaction check times and lease epochs all come from
// it, so tests run leases, the retry ladder, timers and transactions on
// a clockwork.FakeClock (clock_test.go walks the whole 18-level ladder,
// a lease expiry, a timer and a transaction's checks and roll-back in
// about a second of wall time). Push delivery (server/push) extends leases on
// the same clock. Durations that are only measured and reported (flush
// times, recovery, metrics) stay on the wall clock.
//
// # What stays in memory
//
// Deliberately memory-only, on every replica: long-poll waiters,
// in-flight idempotency claims (package send's Table; a claim becomes
// durable as the message's record), metrics and rate limiters,
// retention's counts of the unconsumed messages it took (the progress
// field droppedUnconsumed, package retention: the counting leader's),
// the attempt history of an ordered message retried in place, the push
// dispatcher's connections, and on the leader the pop states' cursors
// (where each queue's next pull reads, rebuilt from the progress table
// and the folded lease records when a broker takes over) with the claims
// a request holds on a lease while it settles it (being acknowledged,
// being sent back: the ack's or the retry copy's record ends it). Per-replica
// facts stay local: quarantine, the scrub position, checkpoints and the
// snapshots of derived state (offsets.snapshot, leases, instances,
// transactions, the timer index). Everything else is a record in the
// CommitLog; ARCHITECTURE.md ("The broker as a state machine") maps the
// record families to the packages they are moving to.
package broker
