package broker

import (
	"errors"

	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/send"
	"github.com/mqgate/mqgate/server/broker/txn"
)

// Sentinel errors. Wrap them with context (fmt.Errorf("%w: ...", Err…));
// the HTTP layer classifies them with errors.Is and shows their text to
// the caller as the problem's detail, so the text speaks of the request,
// never of this package (no "broker: " prefix).
var (
	// ErrInvalidName: a topic or group name breaks the naming rules
	// (package registry's).
	ErrInvalidName = registry.ErrInvalidName
	// ErrInvalidArgument: a request field is out of range or inconsistent.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrTopicNotFound: the topic does not exist (and auto-create is off).
	ErrTopicNotFound = errors.New("topic not found")
	// ErrGroupNotFound: the group does not exist.
	ErrGroupNotFound = errors.New("group not found")
	// ErrMessageNotFound: no message has that id (or key).
	ErrMessageNotFound = errors.New("message not found")
	// ErrReservedName: the name is reserved for system topics/groups.
	ErrReservedName = registry.ErrReservedName
	// ErrTooLarge: a message body exceeds the maximum message size.
	ErrTooLarge = errors.New("message too large")
	// ErrEmptyBody: a message body is empty.
	ErrEmptyBody = errors.New("empty message body")
	// ErrShuttingDown: the broker is closing and accepts no new work.
	ErrShuttingDown = errors.New("the server is shutting down")
	// ErrReadOnly: the store failed a flush and is read-only until restart.
	ErrReadOnly = errors.New("the store is read-only after a failed write, until the server restarts")
	// ErrDiskFull: the disk is above the ceiling of the write (sends above
	// --disk-send-ceiling, system records above --disk-system-ceiling), or
	// has no room for the next CommitLog segment. Retryable; nothing of
	// the refused write was stored.
	ErrDiskFull = errors.New("disk full")
	// ErrFlushTimeout: the write was appended but its flush did not finish
	// in time; the outcome is unknown to the caller.
	ErrFlushTimeout = errors.New("flush timeout: the write may or may not be stored")
	// ErrNotLeader: this replica of a cluster does not lead now (or has
	// not applied its log yet): nothing was written. Retryable; the
	// server forwards requests to the leader, so a client sees it only
	// while there is none.
	ErrNotLeader = errors.New("no leader: this node does not lead the cluster now; retry")
	// ErrOutcomeUnknown: the write was appended on the leader, which
	// stopped leading before it was committed on a majority: the next
	// leader may or may not hold it. Retry with the same idempotency key.
	ErrOutcomeUnknown = errors.New("the leadership changed before the write was committed: it may or may not be stored; retry with the same Idempotency-Key")
	// ErrOffsetOutOfRange: the requested queue offset is outside the
	// queue's kept range.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrIdempotencyKeyReused: a dedup id was reused with a different
	// payload.
	ErrIdempotencyKeyReused = errors.New("idempotency key reused with a different request")
	// ErrIdempotencyInFlight: a send with the same dedup id is still being
	// processed.
	ErrIdempotencyInFlight = errors.New("a request with this idempotency key is still in progress")
	// ErrDispatchStalled: the store's dispatcher keeps failing (an I/O
	// error); sends are durable but consumers do not see them.
	ErrDispatchStalled = errors.New("the store's dispatcher is stalled")
	// ErrQueueShrink: an update would lower a topic's queue count (it
	// always comes with ErrInvalidArgument).
	ErrQueueShrink = registry.ErrQueueShrink
	// ErrInvalidSQL: an SQL92 filter does not compile, or names a property
	// of the broker (SQLError says where).
	ErrInvalidSQL = errors.New("invalid SQL filter")
	// ErrClientIDRequired: a request of a broadcasting group's consumer
	// instance (a pop pull) does not name the instance (the transport's
	// X-Mqgate-Client-Id).
	ErrClientIDRequired = errors.New("client id required")
	// ErrNotImplemented: the operation is not implemented (yet).
	ErrNotImplemented = errors.New("not implemented")
)

// Sentinels of the limits (the send family's: package send); LimitError
// unwraps to one of them.
var (
	// ErrPropertiesTooLarge: a message's properties (with tag, keys,
	// sharding key and dedup id) are over MaxUserPropertiesBytes or
	// MaxProperties.
	ErrPropertiesTooLarge = send.ErrPropertiesTooLarge
	// ErrValueTooLong: a field is longer than its limit.
	ErrValueTooLong = send.ErrValueTooLong
)

// ErrQuotaExceeded: the request would pass one of the broker's quotas.
var ErrQuotaExceeded = registry.ErrQuotaExceeded

// Sentinels of transactions (package txn's).
var (
	// ErrTransactionNotFound: no transaction has that id (never sent, or
	// finished so long ago that retention took its records).
	ErrTransactionNotFound = txn.ErrNotFound
	// ErrTransactionFinished: the transaction ended the other way; it
	// always comes as a *TransactionFinishedError.
	ErrTransactionFinished = txn.ErrFinished
)
