package broker

// This file is the contract between the HTTP transport (package api) and the
// messaging semantics (this package): the value types that cross the
// boundary and the sentinel errors the transport maps to HTTP statuses. It
// holds types and errors only, no logic. The api package declares the
// method set it needs as the interface api.Broker, which *Broker satisfies.

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/send"
	"github.com/mqgate/mqgate/server/broker/txn"
)

// SendMessage is one message handed to Broker.Send (package send's
// Request).
type SendMessage = send.Request

// SendResult is where one sent message was stored (package send).
type SendResult = send.Result

// PullRequest asks for leased (pop) messages of one topic for one group
// (package consume's).
type PullRequest = consume.PullRequest

// ReceivedMessage is a message as delivered to a consumer or read by an
// admin (package consume's Message).
type ReceivedMessage = consume.Message

// ReceiptStatus is the outcome of one ack, nack or lease change (package
// consume's).
type ReceiptStatus = consume.ReceiptStatus

// Receipt statuses.
const (
	// ReceiptOK means the operation took effect (or had already, for a
	// repeated ack).
	ReceiptOK = consume.ReceiptOK
	// ReceiptExpired means the lease behind the receipt is over: the
	// message was or will be redelivered under a newer receipt.
	ReceiptExpired = consume.ReceiptExpired
	// ReceiptInvalid means the receipt is malformed, forged or belongs to
	// another group.
	ReceiptInvalid = consume.ReceiptInvalid
)

// ReceiptResult is the per-receipt outcome of Ack, Nack and ChangeLease;
// NackItem asks for one leased message to be retried later; LeaseItem
// changes the invisibility of one leased message (package consume's).
type (
	ReceiptResult = consume.ReceiptResult
	NackItem      = consume.NackItem
	LeaseItem     = consume.LeaseItem
)

// TopicConfig describes a topic; Subscription is one topic a group
// consumes; GroupConfig describes a consumer group; PushConfig is a
// group's webhook (push) endpoint. They are the registry's (package
// registry, whose records and snapshot files hold them); validation and
// defaults are the broker's (PutTopic, PutGroup, NormalizePush).
type (
	TopicConfig  = registry.TopicConfig
	Subscription = registry.Subscription
	GroupConfig  = registry.GroupConfig
	PushConfig   = registry.PushConfig
)

// QueueMessage is a message read by offset (Receipt is empty).
type QueueMessage = ReceivedMessage

// OffsetCommit sets a group's consumer offset of one queue (package
// consume's).
type OffsetCommit = consume.OffsetCommit

// QueueProgress is a group's position in one queue (package progress).
type QueueProgress = progress.QueueProgress

// InstanceProgress is one consumer instance of a broadcasting group and
// its own progress (package instance).
type InstanceProgress = instance.Progress

// GroupBacklog is what waits for a group besides the lag of its queues
// (package progress).
type GroupBacklog = progress.GroupBacklog

// LevelBacklog is what waits at one delay level (package progress).
type LevelBacklog = progress.LevelBacklog

// BrokerStatus is a snapshot of the broker's state (mqadmin brokerStatus).
type BrokerStatus struct {
	// StoreID names the store in message ids (storage.Store.StoreID), as
	// 16 upper-case hexadecimal digits.
	StoreID string
	// FlushMode is "sync" or "async".
	FlushMode string
	// StoreBytes is the disk space used by the store.
	StoreBytes int64
	// Uptime is how long the broker has been open.
	Uptime time.Duration
	// CommitLogMin is the lowest CommitLog offset still kept.
	CommitLogMin int64
	// CommitLogMax is the CommitLog's write offset.
	CommitLogMax int64
	// Appends, Flushes, FlushTime and MaxFlush describe the CommitLog's
	// group commit since start (records, msync batches, their total and
	// longest duration).
	Appends, Flushes    int64
	FlushTime, MaxFlush time.Duration
	// FlushCounts counts the flushes by duration: FlushCounts[i] those
	// that took at most FlushBuckets[i], the last one the longer ones.
	FlushCounts  []int64
	FlushBuckets []time.Duration
	// FlushRecordCounts counts the flushes by the records each covered:
	// FlushRecordCounts[i] those of at most FlushRecordBuckets[i], the
	// last one the larger ones; FlushRecords is their sum.
	FlushRecordCounts  []int64
	FlushRecordBuckets []int64
	FlushRecords       int64
	// Levels is the delay scheduler's position per delay level.
	Levels []DelayLevelStatus
	// Scheduled counts messages the scheduler delivered since start.
	Scheduled uint64
	// LatenessP50, LatenessP99 and LatenessMax summarise how late the
	// scheduler delivered its recent messages.
	LatenessP50, LatenessP99, LatenessMax time.Duration
	// TimersPending counts delayMs/deliverAt timers not yet due; NextTimerAt
	// is when the soonest fires (zero when none).
	TimersPending int
	NextTimerAt   time.Time
	// Transactions describes the unresolved transactions and what ended
	// them since start.
	Transactions TransactionStats
	// Dispatch is the store's dispatcher (CommitLog → ConsumeQueues).
	Dispatch DispatchStatus
	// Quarantined counts records the store set aside as undispatchable or
	// unreadable; Recent lists the newest of them.
	Quarantined       int64
	QuarantinedRecent []QuarantinedRecord
	// Disk is the store's file system and its ceilings.
	Disk DiskStatus
	// Scrub is the store's background scrubber.
	Scrub ScrubStatus
}

// DiskStatus is the store's view of its file system (storage.DiskStatus).
type DiskStatus struct {
	// Usage is the used fraction (0..1) at SampledAt.
	Usage     float64
	SampledAt time.Time
	// SampleError is why the last sample failed ("" when it did not).
	SampleError string
	// CleanRatio is the usage above which retention deletes consumed
	// segments early; SendCeiling the one above which sends are refused;
	// SystemCeiling the one above which acks and other system records are
	// refused too.
	CleanRatio, SendCeiling, SystemCeiling float64
	// PressureDelete: above CleanRatio unconsumed segments are deleted too
	// (--disk-pressure-delete).
	PressureDelete bool
	// SendsRefused and SystemRefused: sends / the broker's own records
	// (acks, nacks and their retries, commits) are refused: Usage is above
	// the send / system ceiling, or the last such append found no room on
	// the file system.
	SendsRefused, SystemRefused bool
	// SystemRoom is the CommitLog room, allocated ahead of need, that the
	// broker's own records may still use, in bytes.
	SystemRoom int64
	// NoSpace counts appends refused because the next CommitLog segment
	// could not be created (a full file system), since start.
	NoSpace int64
}

// ScrubStatus describes the store's scrubber, which re-reads the sealed
// CommitLog segments and verifies every frame's CRC.
type ScrubStatus struct {
	// Enabled is false when the scrubber is off; Rate is its pace in
	// bytes per second.
	Enabled bool
	Rate    int64
	// Position is the CommitLog offset the current pass has reached.
	Position int64
	// Passes counts full passes; LastPassAt and LastPassDuration describe
	// the last one (zero before the first).
	Passes           int64
	LastPassAt       time.Time
	LastPassDuration time.Duration
	// PassStartedAt is when the current pass started (zero between
	// passes); NextPassAt when the next starts (zero during a pass).
	PassStartedAt time.Time
	NextPassAt    time.Time
	// BytesVerified, RecordsVerified and BadFrames count since start;
	// each bad frame is also quarantined (stage "scrub").
	BytesVerified   int64
	RecordsVerified int64
	BadFrames       int64
	// Busy is the time spent verifying since start.
	Busy time.Duration
}

// DispatchStatus describes the store's dispatcher.
type DispatchStatus struct {
	// Dispatched is the CommitLog offset below which every record is
	// visible to consumers (or quarantined).
	Dispatched int64
	// LagBytes is how many CommitLog bytes (that consumers may see) are
	// not dispatched yet.
	LagBytes int64
	// Delay is how long the dispatcher has been behind (0 when caught up).
	Delay time.Duration
	// Error is why its passes fail ("" when they do not); FailingSince
	// says since when.
	Error        string
	FailingSince time.Time
}

// QuarantinedRecord is one record the store set aside: it cannot be
// dispatched or read (its payload is invalid, or its bytes were damaged
// and fail the frame's CRC). The store moves on without it.
type QuarantinedRecord struct {
	// Offset is the record's CommitLog offset; Size its frame size.
	Offset int64
	Size   int32
	// Stage is "dispatch", "read" or "scrub".
	Stage string
	// Reason says why.
	Reason string
	// At is when it was quarantined.
	At time.Time
}

// DelayLevelStatus is one delay level's scheduler position.
type DelayLevelStatus struct {
	// Level is the delay level (1-based).
	Level int
	// Delay is the level's delay.
	Delay time.Duration
	// Offset is the next schedule entry to deliver.
	Offset int64
	// MaxOffset is the number of entries written to the level's queue.
	MaxOffset int64
	// Backlog is MaxOffset - Offset.
	Backlog int64
	// NextDue is when the head entry is due (zero when idle).
	NextDue time.Time
}

// Transaction states.
const (
	TxnPending    = txn.Pending
	TxnCommitted  = txn.Committed
	TxnRolledBack = txn.RolledBack
)

// Why a transaction was rolled back.
const (
	// TxnReasonProducer: the producer (or an operator) asked for it.
	TxnReasonProducer = txn.ReasonProducer
	// TxnReasonMaxChecks: every check was handed out and none answered.
	TxnReasonMaxChecks = txn.ReasonMaxChecks
	// TxnReasonTopicDeleted: its topic was deleted before the commit.
	TxnReasonTopicDeleted = txn.ReasonTopicDeleted
	// TxnReasonLost: its half message was lost (a damaged CommitLog).
	TxnReasonLost = txn.ReasonLost
)

// Transaction is one transactional (half) message and how it stands
// (package txn's View: ID, State — TxnPending, TxnCommitted or
// TxnRolledBack —, Reason, ProducerGroup, Topic, QueueID, QueueOffset,
// CheckTimes, NextCheckAt, CreatedAt, FinishedAt).
type Transaction = txn.View

// TransactionCheck is one check handed out to a producer group: the
// transaction and its half message as a pull renders it (no receipt).
type TransactionCheck struct {
	Transaction Transaction
	Message     ReceivedMessage
}

// TransactionStats counts transactions (package txn's Stats: Pending,
// and since start Committed, RolledBack, MaxChecksRolledBack and
// ChecksHandedOut).
type TransactionStats = txn.Stats
