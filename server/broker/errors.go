package broker

import "errors"

// Sentinel errors. Wrap them with context (fmt.Errorf("...: %w", err)); the
// HTTP layer classifies them with errors.Is.
var (
	// ErrInvalidName: a topic or group name breaks the naming rules.
	ErrInvalidName = errors.New("broker: invalid name")
	// ErrInvalidArgument: a request field is out of range or inconsistent.
	ErrInvalidArgument = errors.New("broker: invalid argument")
	// ErrTopicNotFound: the topic does not exist (and auto-create is off).
	ErrTopicNotFound = errors.New("broker: topic not found")
	// ErrGroupNotFound: the group does not exist.
	ErrGroupNotFound = errors.New("broker: group not found")
	// ErrMessageNotFound: no message has that id (or key).
	ErrMessageNotFound = errors.New("broker: message not found")
	// ErrReservedName: the name is reserved for system topics/groups.
	ErrReservedName = errors.New("broker: reserved name")
	// ErrTooLarge: a message body exceeds the maximum message size.
	ErrTooLarge = errors.New("broker: message too large")
	// ErrEmptyBody: a message body is empty.
	ErrEmptyBody = errors.New("broker: empty message body")
	// ErrShuttingDown: the broker is closing and accepts no new work.
	ErrShuttingDown = errors.New("broker: shutting down")
	// ErrReadOnly: the store failed a flush and is read-only until restart.
	ErrReadOnly = errors.New("broker: store is read-only")
	// ErrDiskFull: the disk is above the ceiling of the write (sends above
	// --disk-send-ceiling, system records above --disk-system-ceiling), or
	// has no room for the next CommitLog segment. Retryable; nothing of
	// the refused write was stored.
	ErrDiskFull = errors.New("broker: disk full")
	// ErrFlushTimeout: the write was appended but its flush did not finish
	// in time; the outcome is unknown to the caller.
	ErrFlushTimeout = errors.New("broker: flush timeout")
	// ErrOffsetOutOfRange: the requested queue offset is outside the
	// queue's kept range.
	ErrOffsetOutOfRange = errors.New("broker: offset out of range")
	// ErrIdempotencyKeyReused: a dedup id was reused with a different
	// payload.
	ErrIdempotencyKeyReused = errors.New("broker: idempotency key reused with a different request")
	// ErrIdempotencyInFlight: a send with the same dedup id is still being
	// processed.
	ErrIdempotencyInFlight = errors.New("broker: idempotency key in flight")
	// ErrDispatchStalled: the store's dispatcher keeps failing (an I/O
	// error); sends are durable but consumers do not see them.
	ErrDispatchStalled = errors.New("broker: dispatcher stalled")
	// ErrQueueShrink: an update would lower a topic's queue count (it
	// always comes with ErrInvalidArgument).
	ErrQueueShrink = errors.New("broker: a topic's queue count cannot shrink")
	// ErrInvalidSQL: an SQL92 filter does not compile, or names a property
	// of the broker (SQLError says where).
	ErrInvalidSQL = errors.New("broker: invalid SQL filter")
	// ErrClientIDRequired: a request of a broadcasting group's consumer
	// instance (a pop pull) does not name the instance (the transport's
	// X-Mqgate-Client-Id).
	ErrClientIDRequired = errors.New("broker: client id required")
	// ErrNotImplemented: the operation is not implemented (yet).
	ErrNotImplemented = errors.New("broker: not implemented")
)

// Sentinels of the limits; LimitError unwraps to one of them.
var (
	// ErrPropertiesTooLarge: a message's properties (with tag, keys,
	// sharding key and dedup id) are over MaxUserPropertiesBytes or
	// MaxProperties.
	ErrPropertiesTooLarge = errors.New("broker: properties too large")
	// ErrValueTooLong: a field is longer than its limit.
	ErrValueTooLong = errors.New("broker: value too long")
)

// ErrQuotaExceeded: the request would pass one of the broker's quotas.
var ErrQuotaExceeded = errors.New("broker: quota exceeded")

// Sentinels of transactions (txn.go).
var (
	// ErrTransactionNotFound: no transaction has that id (never sent, or
	// finished so long ago that retention took its records).
	ErrTransactionNotFound = errors.New("broker: transaction not found")
	// ErrTransactionFinished: the transaction ended the other way; it
	// always comes as a *TransactionFinishedError.
	ErrTransactionFinished = errors.New("broker: transaction finished")
)
