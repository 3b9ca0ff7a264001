package broker

import (
	"fmt"
	"unicode/utf8"

	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/server/broker/quote"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/server/broker/send"
)

// Limits on what a client may put in a message or a request. Send, Nack
// and the transport check them before anything is written, and the store
// checks the record format's own limits again on every append
// (message.Validate), so no request can produce a record that a reader of
// the CommitLog would refuse. A message's own limits are the send family's
// (server/broker/send, which checks them: Service.Send); what the producer
// controls takes at most MaxUserPropertiesBytes of a record's properties,
// the rest being reserved for what the broker adds over a message's life
// (retry and DLQ bookkeeping, the bounded attempt history), which
// TestBrokerAdditionsFit checks.
const (
	// MaxTagBytes bounds a tag.
	MaxTagBytes = send.MaxTagBytes
	// MaxKeys bounds the business keys of one message.
	MaxKeys = send.MaxKeys
	// MaxKeyBytes bounds one business key.
	MaxKeyBytes = send.MaxKeyBytes
	// MaxShardingKeyBytes bounds a sharding key.
	MaxShardingKeyBytes = send.MaxShardingKeyBytes
	// MaxDedupIDBytes bounds a dedup id (and an Idempotency-Key).
	MaxDedupIDBytes = send.MaxDedupIDBytes
	// MaxProperties bounds the user properties of one message.
	MaxProperties = send.MaxProperties
	// MaxPropertyNameBytes bounds one property name.
	MaxPropertyNameBytes = send.MaxPropertyNameBytes
	// MaxUserPropertiesBytes bounds everything the producer puts in a
	// message besides its body, counted as stored (send.MaxUserPropertiesBytes).
	MaxUserPropertiesBytes = send.MaxUserPropertiesBytes
	// MaxReasonBytes bounds the reason of a nack. The broker keeps a
	// shorter prefix of it (see the attempt history).
	MaxReasonBytes = 16 << 10
	// MaxClientIDBytes bounds a client id (X-Mqgate-Client-Id).
	MaxClientIDBytes = 128
	// MaxTagExpressionBytes bounds a tag expression ("a || b").
	MaxTagExpressionBytes = 4096
)

// Limits and defaults of one request; package api exports the same values
// (api.MaxPullMessages, …), so the transport and the broker never disagree.
const (
	// MaxPullMessages is the most messages one pull returns.
	MaxPullMessages = consume.MaxMessages
	// DefaultPullMessages is a pull's maxMessages when it gives none.
	DefaultPullMessages = consume.DefaultMessages
	// MaxSendBatch is the most messages one send may carry.
	MaxSendBatch = send.MaxBatch
	// MaxBatchItems is the most receipts or items of one ack, nack, lease
	// change or offset commit.
	MaxBatchItems = 1024
	// maxReadQueueMessages bounds one ReadQueue (the API asks for at most
	// api.MaxReadMessages; internal readers for more).
	maxReadQueueMessages = 256
)

// What the broker keeps of failures: the attempt history (property
// ATTEMPTS; its bounds are the retry family's, package retry) and the
// dead-letter reason (DLQ_REASON), cut to maxDLQReasonBytes. Cuts end in
// a marker that says how long the text was.
const maxDLQReasonBytes = 2 << 10

// LimitError is a value over one of the limits above (or the message size
// limit): it names the field, its size and the limit, and unwraps to
// ErrTooLarge, ErrPropertiesTooLarge or ErrValueTooLong.
type LimitError = send.LimitError

// limitErr builds a LimitError in bytes.
func limitErr(kind error, field string, size, limit int) *LimitError {
	return send.Limit(kind, field, size, limit)
}

// QuoteValue quotes a client's value for an error message, cut to 64
// bytes so that a huge value is never echoed back whole.
func QuoteValue(s string) string { return quote.Value(s) }

// checkReason checks a nack reason.
func checkReason(field, reason string) error {
	if len(reason) > MaxReasonBytes {
		return limitErr(ErrValueTooLong, field, len(reason), MaxReasonBytes)
	}
	if !utf8.ValidString(reason) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, field)
	}
	return nil
}

// CheckClientID checks a client id (the transport's X-Mqgate-Client-Id,
// which it names field).
func CheckClientID(field, id string) error {
	if len(id) > MaxClientIDBytes {
		return limitErr(ErrValueTooLong, field, len(id), MaxClientIDBytes)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return fmt.Errorf("%w: %s must be printable ASCII without spaces", ErrInvalidArgument, field)
		}
	}
	return nil
}

// Attempt outcomes.
// An attempt's outcome (package retry).
const (
	outcomeNack    = retry.OutcomeNack
	outcomeExpired = retry.OutcomeExpired
	outcomeOmitted = retry.OutcomeOmitted
)

// boundAttempts keeps the newest attempts of history within the history's
// bounds and returns the encoding (retry.Bound).
func boundAttempts(history []Attempt) string { return retry.Bound(history) }
