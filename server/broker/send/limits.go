package send

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mqgate/mqgate/server/broker/quote"
	"github.com/mqgate/mqgate/storage/message"
)

// Limits on what a producer may put in one message, checked (Check)
// before anything is written; the store checks the record format's own
// limits again on every append (message.Validate). They follow RocketMQ
// 5's proxy limits where it has one (16 KiB of user properties, 128 of
// them).
//
// The budget: a record's properties region holds at most
// message.MaxPropertiesSize (32 KiB). What the producer controls — its
// properties plus the tag, keys, sharding key and dedup id, which travel
// as properties — takes at most MaxUserPropertiesBytes of it; the rest is
// reserved for what the broker adds over a message's life.
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
	// MaxBatch is the most messages one send may carry.
	MaxBatch = 256
)

// Sentinels of the limits; a LimitError unwraps to one of them (or to a
// sentinel of the broker's, such as its message size limit's).
var (
	// ErrPropertiesTooLarge: a message's properties (with tag, keys,
	// sharding key and dedup id) are over MaxUserPropertiesBytes or
	// MaxProperties.
	ErrPropertiesTooLarge = errors.New("properties too large")
	// ErrValueTooLong: a field is longer than its limit.
	ErrValueTooLong = errors.New("value too long")
)

// LimitError is a value over one of the limits (the ones above, or the
// broker's): it names the field, its size and the limit, and unwraps to
// its Kind.
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
	// Kind is the sentinel: ErrPropertiesTooLarge, ErrValueTooLong or the
	// broker's ErrTooLarge.
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

// Limit builds a LimitError in bytes.
func Limit(kind error, field string, size, limit int) *LimitError {
	return &LimitError{Field: field, Size: size, Limit: limit, Kind: kind}
}

// PrefixField prefixes the field of a LimitError in err (a batch names its
// message: "messages[3]."); any other error gets the prefix without its
// final dot and a colon before its text ("messages[3]: empty message
// body").
func PrefixField(err error, prefix string) error {
	var le *LimitError
	if errors.As(err, &le) {
		le.Field = prefix + le.Field
		return err
	}
	return fmt.Errorf("%s: %w", strings.TrimSuffix(prefix, "."), err)
}

// Message is what Check reads of one message of a send.
type Message struct {
	Tag         string
	Keys        []string
	ShardingKey string
	DedupID     string
	Properties  map[string]string
}

// Check checks m against the limits and the property rules; field names
// are relative to the message ("tag", "keys[1]"). reserved reports the
// property names the broker sets (a client may not). A *LimitError is
// over a limit; any other error is an invalid argument, which the broker
// wraps in its sentinel (its text follows the sentinel's).
func Check(m Message, reserved func(name string) bool) error {
	if m.Tag != "" {
		if err := CheckLabel("tag", m.Tag, MaxTagBytes, false); err != nil {
			return err
		}
		if strings.Contains(m.Tag, "||") {
			return fmt.Errorf("tag %s may not contain '||' (it separates tags in a tag expression)", quote.Value(m.Tag))
		}
	}
	if len(m.Keys) > MaxKeys {
		return &LimitError{Field: "keys", Size: len(m.Keys), Limit: MaxKeys, Unit: "keys", Kind: ErrValueTooLong}
	}
	used := 0
	keysLen := 0
	for i, k := range m.Keys {
		field := fmt.Sprintf("keys[%d]", i)
		if k == "" {
			return fmt.Errorf("%s is empty", field)
		}
		if err := CheckLabel(field, k, MaxKeyBytes, false); err != nil {
			return err
		}
		keysLen += len(k) + 1
	}
	if keysLen > 0 {
		used += PropertyEntrySize(message.PropertyKeys, "") + keysLen - 1
	}
	if m.ShardingKey != "" {
		if err := CheckLabel("shardingKey", m.ShardingKey, MaxShardingKeyBytes, true); err != nil {
			return err
		}
		used += PropertyEntrySize(message.PropertyShardingKey, m.ShardingKey)
	}
	if m.DedupID != "" {
		if err := CheckLabel("dedupId", m.DedupID, MaxDedupIDBytes, true); err != nil {
			return err
		}
		used += PropertyEntrySize(message.PropertyDedupID, m.DedupID)
	}
	if m.Tag != "" {
		used += PropertyEntrySize(message.PropertyTags, m.Tag)
	}
	if len(m.Properties) > MaxProperties {
		return &LimitError{Field: "properties", Size: len(m.Properties), Limit: MaxProperties, Unit: "properties", Kind: ErrPropertiesTooLarge}
	}
	for k, v := range m.Properties {
		if k == "" {
			return errors.New("a property name is empty")
		}
		if err := CheckLabel("property name "+quote.Value(k), k, MaxPropertyNameBytes, false); err != nil {
			return err
		}
		if reserved(k) {
			return fmt.Errorf("property %s is reserved for the broker", k)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("the value of property %s is not valid UTF-8", quote.Value(k))
		}
		used += PropertyEntrySize(k, v)
	}
	if used > MaxUserPropertiesBytes {
		return &LimitError{Field: "properties", Size: used, Limit: MaxUserPropertiesBytes, Kind: ErrPropertiesTooLarge}
	}
	return nil
}

// CheckLabel checks a tag, key or sharding key: at most limit bytes
// (else a *LimitError), valid UTF-8 without control characters and,
// unless spaces is set, without white space (else an invalid argument).
func CheckLabel(field, v string, limit int, spaces bool) error {
	if len(v) > limit {
		return Limit(ErrValueTooLong, field, len(v), limit)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%s is not valid UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) || (!spaces && unicode.IsSpace(r)) {
			what := "white space or control characters"
			if spaces {
				what = "control characters"
			}
			return fmt.Errorf("%s %s may not contain %s", field, quote.Value(v), what)
		}
	}
	return nil
}

// PropertyEntrySize is what one property takes in a record.
func PropertyEntrySize(name, value string) int { return 6 + len(name) + len(value) }
