package send

import "time"

// Request is one message of a send (the broker's SendMessage is an alias).
type Request struct {
	// Body is the opaque payload; it must not be empty.
	Body []byte
	// Tag is the single filterable label of the message ("" = none).
	Tag string
	// Keys are business keys indexed for QueryByKey.
	Keys []string
	// Properties are user properties carried with the message.
	Properties map[string]string
	// ShardingKey, when set, selects the queue (hash mod queues) so that
	// messages with the same key stay in order.
	ShardingKey string
	// DelayLevel is a delay level 1..len(levels); 0 = not delayed.
	DelayLevel int
	// DelayMs delays delivery by this many milliseconds; 0 = not delayed.
	DelayMs int64
	// DeliverAt delays delivery until this instant; zero = not delayed.
	DeliverAt time.Time
	// DedupID makes the send idempotent within the dedup window: a second
	// send with the same id returns the first result with Duplicate set.
	DedupID string
	// Transactional stores the message as a half message of a transaction
	// of ProducerGroup (package txn): invisible to every group until it is
	// committed. A send carries one such message; it cannot be delayed.
	Transactional bool
	// ProducerGroup names the producer group asked about an unresolved
	// transaction (group naming rules); required when Transactional.
	ProducerGroup string
	// CheckAfterMs is how long after the send the first check of an
	// unresolved transaction falls due (0 = the transactions' default).
	CheckAfterMs int64
}

// Result is where one sent message was stored (the broker's SendResult
// is an alias).
type Result struct {
	// MessageID is the 32-hex-character message id.
	MessageID string
	// QueueID is the queue of the topic the message went to.
	QueueID int32
	// QueueOffset is the message's logical offset in that queue.
	QueueOffset int64
	// Duplicate reports that DedupID matched an earlier send and this
	// result is that earlier send's result (nothing new was stored).
	Duplicate bool
	// TransactionID names the transaction of a transactional send (its
	// MessageID); "" otherwise.
	TransactionID string
}
