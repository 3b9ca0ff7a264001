package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mqgate/mqgate/server/broker/quote"
	"github.com/mqgate/mqgate/storage/message"
)

// Limits on what a client may put in a message or a request. Send, Nack
// and the transport check them before anything is written, and the store
// checks the record format's own limits again on every append
// (message.Validate), so no request can produce a record that a reader of
// the CommitLog would refuse. They follow RocketMQ 5's proxy limits where
// it has one (16 KiB of user properties, 128 of them).
//
// The budget: a record's properties region holds at most
// message.MaxPropertiesSize (32 KiB). What the producer controls — its
// properties plus the tag, keys, sharding key and dedup id, which travel
// as properties — takes at most MaxUserPropertiesBytes of it; the rest is
// reserved for what the broker adds over a message's life (retry and DLQ
// bookkeeping, the bounded attempt history), which TestBrokerAdditionsFit
// checks.
const (
	// MaxTagBytes bounds a tag.
	MaxTagBytes = 255
	// MaxKeys bounds the business keys of one message.
	MaxKeys = 64
	// MaxKeyBytes bounds one business key.
	MaxKeyBytes = 255
	// MaxShardingKeyBytes bounds a sharding key.
	MaxShardingKeyBytes = 255
	// MaxDedupIDBytes bounds a dedup id (and an Idempotency-Key).
	MaxDedupIDBytes = 255
	// MaxProperties bounds the user properties of one message.
	MaxProperties = 128
	// MaxPropertyNameBytes bounds one property name.
	MaxPropertyNameBytes = 255
	// MaxUserPropertiesBytes bounds everything the producer puts in a
	// message besides its body, counted as stored: for each user property
	// and for the tag, the keys (joined by spaces), the sharding key and
	// the dedup id, 6 bytes plus the name and the value.
	MaxUserPropertiesBytes = 16 << 10
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
	MaxPullMessages = 32
	// DefaultPullMessages is a pull's maxMessages when it gives none.
	DefaultPullMessages = 16
	// MaxSendBatch is the most messages one send may carry.
	MaxSendBatch = 256
	// MaxBatchItems is the most receipts or items of one ack, nack, lease
	// change or offset commit.
	MaxBatchItems = 1024
	// maxReadQueueMessages bounds one ReadQueue (the API asks for at most
	// api.MaxReadMessages; internal readers for more).
	maxReadQueueMessages = 256
)

// What the broker keeps of failures: the attempt history (property
// ATTEMPTS) holds the newest attempts, each reason cut to
// maxStoredReasonBytes, in at most maxAttemptsBytes; older attempts are
// folded into one leading "omitted" entry with their count and the time of
// the first failure. The dead-letter reason (DLQ_REASON) is cut to
// maxDLQReasonBytes. Cuts end in a marker that says how long the text was.
const (
	maxAttemptsKept      = 32
	maxAttemptsBytes     = 8 << 10
	maxStoredReasonBytes = 512
	maxDLQReasonBytes    = 2 << 10
)

// LimitError is a value over one of the limits above (or the message size
// limit): it names the field, its size and the limit, and unwraps to
// ErrTooLarge, ErrPropertiesTooLarge or ErrValueTooLong.
type LimitError struct {
	// Field names the offending field as the client sent it ("tag",
	// "keys[2]", "properties", "messages[3].shardingKey").
	Field string
	// Size is the field's size in Unit.
	Size int
	// Limit is the most allowed, in Unit.
	Limit int
	// Unit is "bytes" unless it says otherwise ("properties", "keys").
	Unit string
	// Kind is the sentinel: ErrTooLarge, ErrPropertiesTooLarge or
	// ErrValueTooLong.
	Kind error
}

func (e *LimitError) Error() string {
	unit := e.Unit
	if unit == "" {
		unit = "bytes"
	}
	return fmt.Sprintf("%v: %s is %d %s; the limit is %d %s", e.Kind, e.Field, e.Size, unit, e.Limit, unit)
}

// Unwrap returns the limit's sentinel.
func (e *LimitError) Unwrap() error { return e.Kind }

// limitErr builds a LimitError in bytes.
func limitErr(kind error, field string, size, limit int) *LimitError {
	return &LimitError{Field: field, Size: size, Limit: limit, Kind: kind}
}

// prefixField prefixes the field of a LimitError in err (a batch names its
// message: "messages[3].").
func prefixField(err error, prefix string) error {
	var le *LimitError
	if errors.As(err, &le) {
		le.Field = prefix + le.Field
		return err
	}
	return fmt.Errorf("%s%w", strings.TrimSuffix(prefix, "."), err)
}

// QuoteValue quotes a client's value for an error message, cut to 64
// bytes so that a huge value is never echoed back whole.
func QuoteValue(s string) string { return quote.Value(s) }

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cutUTF8(s string, n int) string { return quote.CutUTF8(s, n) }

// truncateText cuts s to at most n bytes, ending in a marker that says how
// long it was.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	marker := fmt.Sprintf("… [truncated: %d bytes]", len(s))
	return cutUTF8(s, max(n-len(marker), 0)) + marker
}

// checkLabel checks a tag, key or sharding key: valid UTF-8 without
// control characters and, unless spaces is set, without white space.
func checkLabel(field, v string, limit int, spaces bool) error {
	if len(v) > limit {
		return limitErr(ErrValueTooLong, field, len(v), limit)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, field)
	}
	for _, r := range v {
		if unicode.IsControl(r) || (!spaces && unicode.IsSpace(r)) {
			what := "white space or control characters"
			if spaces {
				what = "control characters"
			}
			return fmt.Errorf("%w: %s %s may not contain %s", ErrInvalidArgument, field, QuoteValue(v), what)
		}
	}
	return nil
}

// propertyEntrySize is what one property takes in a record.
func propertyEntrySize(name, value string) int { return 6 + len(name) + len(value) }

// validateSend checks one message of a send against the limits; field
// names are relative to the message ("tag", "keys[1]").
func (b *Broker) validateSend(in *SendMessage) error {
	switch {
	case len(in.Body) == 0:
		return ErrEmptyBody
	case len(in.Body) > b.opts.MaxMessageSize:
		return &LimitError{Field: "body", Size: len(in.Body), Limit: b.opts.MaxMessageSize, Kind: ErrTooLarge}
	}
	if in.Tag != "" {
		if err := checkLabel("tag", in.Tag, MaxTagBytes, false); err != nil {
			return err
		}
		if strings.Contains(in.Tag, "||") {
			return fmt.Errorf("%w: tag %s may not contain '||' (it separates tags in a tag expression)", ErrInvalidArgument, QuoteValue(in.Tag))
		}
	}
	if len(in.Keys) > MaxKeys {
		return &LimitError{Field: "keys", Size: len(in.Keys), Limit: MaxKeys, Unit: "keys", Kind: ErrValueTooLong}
	}
	used := 0
	keysLen := 0
	for i, k := range in.Keys {
		field := fmt.Sprintf("keys[%d]", i)
		if k == "" {
			return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, field)
		}
		if err := checkLabel(field, k, MaxKeyBytes, false); err != nil {
			return err
		}
		keysLen += len(k) + 1
	}
	if keysLen > 0 {
		used += propertyEntrySize(message.PropertyKeys, "") + keysLen - 1
	}
	if in.ShardingKey != "" {
		if err := checkLabel("shardingKey", in.ShardingKey, MaxShardingKeyBytes, true); err != nil {
			return err
		}
		used += propertyEntrySize(message.PropertyShardingKey, in.ShardingKey)
	}
	if in.DedupID != "" {
		if err := checkLabel("dedupId", in.DedupID, MaxDedupIDBytes, true); err != nil {
			return err
		}
		used += propertyEntrySize(message.PropertyDedupID, in.DedupID)
	}
	if in.Tag != "" {
		used += propertyEntrySize(message.PropertyTags, in.Tag)
	}
	if len(in.Properties) > MaxProperties {
		return &LimitError{Field: "properties", Size: len(in.Properties), Limit: MaxProperties, Unit: "properties", Kind: ErrPropertiesTooLarge}
	}
	for k, v := range in.Properties {
		if k == "" {
			return fmt.Errorf("%w: a property name is empty", ErrInvalidArgument)
		}
		if err := checkLabel("property name "+QuoteValue(k), k, MaxPropertyNameBytes, false); err != nil {
			return err
		}
		if _, sys := systemProperties[k]; sys {
			return fmt.Errorf("%w: property %s is reserved for the broker", ErrInvalidArgument, k)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("%w: the value of property %s is not valid UTF-8", ErrInvalidArgument, QuoteValue(k))
		}
		used += propertyEntrySize(k, v)
	}
	if used > MaxUserPropertiesBytes {
		return &LimitError{Field: "properties", Size: used, Limit: MaxUserPropertiesBytes, Kind: ErrPropertiesTooLarge}
	}
	return nil
}

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
const (
	outcomeNack    = "nack"
	outcomeExpired = "expired"
	// outcomeOmitted marks the leading history entry that stands for
	// attempts no longer kept: Count of them, the first at At.
	outcomeOmitted = "omitted"
)

// newAttempt is a failed delivery as the history keeps it: reason and
// client cut to their stored sizes.
func newAttempt(at time.Time, outcome, client, reason string, level int) Attempt {
	return Attempt{At: at.UTC(), Outcome: outcome, Client: cutUTF8(client, MaxClientIDBytes),
		Reason: truncateText(reason, maxStoredReasonBytes), Level: level}
}

// boundAttempts keeps the newest attempts of history within
// maxAttemptsKept entries and maxAttemptsBytes of JSON, folding the
// older ones into a leading omitted entry, and returns the encoding.
func boundAttempts(history []Attempt) string {
	var omitted *Attempt
	if len(history) > 0 && history[0].Outcome == outcomeOmitted {
		o := history[0]
		omitted, history = &o, history[1:]
	}
	fold := func(n int) {
		if n == 0 {
			return
		}
		if omitted == nil {
			omitted = &Attempt{At: history[0].At, Outcome: outcomeOmitted}
		}
		omitted.Count += n
		history = history[n:]
	}
	fold(max(len(history)-(maxAttemptsKept-1), 0))
	for {
		out := history
		if omitted != nil {
			omitted.Reason = fmt.Sprintf("%d earlier failures not kept", omitted.Count)
			out = append([]Attempt{*omitted}, history...)
		}
		b, _ := json.Marshal(out)
		if len(b) <= maxAttemptsBytes || len(history) == 0 {
			return string(b)
		}
		fold(1)
	}
}
