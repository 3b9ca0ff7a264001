package consume

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/lease"
)

// PullRequest asks for leased (pop) messages of one topic for one group.
type PullRequest struct {
	// Group is the consumer group.
	Group string
	// Topic is the topic to pop from (plus the group's retry topic).
	Topic string
	// MaxMessages is the most messages to return (≥ 1).
	MaxMessages int
	// Wait is how long to long-poll when nothing is available; 0 returns
	// at once.
	Wait time.Duration
	// Invisible is the lease length; 0 = the group's configured default.
	Invisible time.Duration
	// TagExpression filters by tag ("" or "*" = all, "a || b"); "" takes
	// the group's subscription of the topic.
	TagExpression string
	// SQL filters by properties (an SQL92 expression, package
	// server/broker/filter); "" takes the group's subscription of the
	// topic. With both filters a message must pass both.
	SQL string
	// NoAutoCreate fails a pull of an unknown group (the broker's ErrGroupNotFound)
	// even when the broker creates groups on first use: push delivery's
	// pullers set it, so that a pull in flight while its group is deleted
	// does not create the group again.
	NoAutoCreate bool
}

// Message is a message as delivered to a consumer or read by an admin.
type Message struct {
	// MessageID is the 32-hex-character message id.
	MessageID string
	// Receipt is the opaque lease handle for ack/nack/lease ("" for reads
	// that lease nothing).
	Receipt string
	// Topic is the message's (original) topic.
	Topic string
	// QueueID is the queue the message was read from.
	QueueID int32
	// QueueOffset is the message's logical offset in that queue.
	QueueOffset int64
	// ReconsumeTimes counts earlier failed deliveries.
	ReconsumeTimes int32
	// OriginMessageID is the id of the very first copy of a retried
	// message ("" for a first delivery).
	OriginMessageID string
	// Tag is the message's tag.
	Tag string
	// Keys are the message's business keys.
	Keys []string
	// Properties are the user properties.
	Properties map[string]string
	// Body is the payload.
	Body []byte
	// BornAt is when the producer's request reached the gateway.
	BornAt time.Time
	// StoredAt is when the message was appended to the CommitLog.
	StoredAt time.Time
	// LeaseUntil is when the lease behind Receipt runs out (the pull's
	// invisibility counted from the grant); zero for reads that lease
	// nothing.
	LeaseUntil time.Time
}

// ReceiptStatus is the outcome of one ack, nack or lease change.
type ReceiptStatus string

// Receipt statuses.
const (
	// ReceiptOK means the operation took effect (or had already, for a
	// repeated ack).
	ReceiptOK ReceiptStatus = "ok"
	// ReceiptExpired means the lease behind the receipt is over: the
	// message was or will be redelivered under a newer receipt.
	ReceiptExpired ReceiptStatus = "expired"
	// ReceiptInvalid means the receipt is malformed, forged or belongs to
	// another group.
	ReceiptInvalid ReceiptStatus = "invalid"
)

// ReceiptResult is the per-receipt outcome of Ack, Nack and ChangeLease.
type ReceiptResult struct {
	// Receipt is the receipt the caller sent.
	Receipt string
	// Status is the outcome.
	Status ReceiptStatus
	// NewReceipt is the receipt to use from now on, when a lease change
	// issued one.
	NewReceipt string
	// Error explains a non-ok status for humans.
	Error string
	// LeaseUntil is, for an ok lease change, when the changed lease runs
	// out (the time of the change when it made the message visible again);
	// zero otherwise.
	LeaseUntil time.Time
	// settling, on an ack of a lease another ack is settling, is that
	// ack's outcome: the answer waits for it (Ack).
	settling *lease.Settle
}

// NackItem asks for one leased message to be retried later.
type NackItem struct {
	// Receipt is the lease handle from Pull.
	Receipt string
	// DelayLevel: -1 = straight to the DLQ, 0 = broker-controlled
	// (the group's RetryPolicy), > 0 = that level.
	DelayLevel int
	// Delay, when > 0, retries after this long (up to MaxRetryDelay)
	// instead of a delay level: the retry copy waits on a timer.
	// Exclusive with DelayLevel.
	Delay time.Duration
	// Reason is a free-text failure reason kept with retries and in the DLQ.
	Reason string
}

// LeaseItem changes the invisibility of one leased message.
type LeaseItem struct {
	// Receipt is the lease handle from Pull.
	Receipt string
	// Invisible is the new lease length counted from now.
	Invisible time.Duration
}
