package consume

import "time"

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
