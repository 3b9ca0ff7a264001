package message

import (
	"fmt"
	"slices"
	"strings"
)

// System property keys. They are UPPER_CASE, as in RocketMQ, and travel in
// Message.Properties like user properties.
const (
	// PropertyTags holds the message's single tag.
	PropertyTags = "TAGS"
	// PropertyKeys holds the business keys, separated by single spaces.
	PropertyKeys = "KEYS"
	// PropertyUniqKey holds the producer-side unique id of the message.
	PropertyUniqKey = "UNIQ_KEY"
	// PropertyRetryTopic holds the original topic of a retried message
	// (set on the first retry only).
	PropertyRetryTopic = "RETRY_TOPIC"
	// PropertyOriginMessageID holds the id of the very first delivery of a
	// retried or dead-lettered message.
	PropertyOriginMessageID = "ORIGIN_MESSAGE_ID"
	// PropertyRealTopic holds the destination topic of a message parked in
	// ScheduleTopic.
	PropertyRealTopic = "REAL_TOPIC"
	// PropertyRealQueueID holds the destination queue id (decimal) of a
	// message parked in ScheduleTopic.
	PropertyRealQueueID = "REAL_QID"
	// PropertyDelayLevel holds the delay level (decimal, 1..18 by default).
	PropertyDelayLevel = "DELAY"
	// PropertyMaxReconsumeTimes holds the group's retry limit carried with a
	// retried message.
	PropertyMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	// PropertyDeliverTimeMs holds an arbitrary delivery time (unix ms,
	// decimal) for timer messages.
	PropertyDeliverTimeMs = "TIMER_DELIVER_MS"
	// PropertyShardingKey holds the FIFO sharding key.
	PropertyShardingKey = "SHARDING_KEY"
	// PropertyDedupID holds the producer's deduplication id
	// (Idempotency-Key or dedupId).
	PropertyDedupID = "DEDUP_ID"
)

// ScheduleTopic is the internal topic that holds delayed messages; queue
// level-1 holds the messages of delay level `level`.
const ScheduleTopic = "SCHEDULE_TOPIC_XXXX"

// Size limits of the format. Validate enforces them and DecodePayload treats
// a payload beyond them as corrupt. They are part of the on-disk format;
// never lower them.
const (
	// MaxTopicLen is the longest topic name in bytes.
	MaxTopicLen = 255
	// MaxPropertiesSize is the largest encoded properties region in bytes
	// (the sum over entries of 2 + len(key) + 4 + len(value)).
	MaxPropertiesSize = 32 << 10
	// MaxBodySize is a sanity ceiling on the body in bytes. The broker
	// enforces its configured --max-message-size (4 MiB by default) far
	// below it.
	MaxBodySize = 256 << 20
)

// Message is one message as the store keeps it. The zero value is an empty
// message; Properties may be nil.
type Message struct {
	// Topic is the topic the message is stored under.
	Topic string
	// QueueID is the queue of Topic the message is stored in.
	QueueID int32
	// Flag is the producer's opaque flag.
	Flag int32
	// QueueOffset is the message's position in its queue, assigned by the
	// store under the append lock.
	QueueOffset int64
	// PhysicalOffset is the CommitLog offset of the record. It is not part
	// of the payload (the record frame carries it); the caller sets it
	// after decoding.
	PhysicalOffset int64
	// SysFlag holds opaque system flags.
	SysFlag int32
	// BornTimestamp is when the message was created, in unix milliseconds.
	BornTimestamp int64
	// BornHost is the address of the producer.
	BornHost Host
	// StoreTimestamp is when the store appended the message, in unix
	// milliseconds; assigned by the store.
	StoreTimestamp int64
	// StoreHost is the address of the storing broker.
	StoreHost Host
	// ReconsumeTimes counts failed deliveries so far.
	ReconsumeTimes int32
	// TagsCode is TagsCode(Tag()), or the due time in unix milliseconds for
	// messages in ScheduleTopic. The store computes it before appending.
	TagsCode int64
	// Body is the message body.
	Body []byte
	// Properties holds system (UPPER_CASE) and user properties.
	Properties map[string]string
}

// Property returns the value of property k, or "" when it is absent.
func (m *Message) Property(k string) string { return m.Properties[k] }

// CopyTo is a new message on topic carrying m's body, flag, born time
// and host, reconsume count and properties, less the named ones: the base
// of every copy the broker writes (retries, dead letters carried past
// retention, resends, transactions' halves and commits, timers and their
// deliveries). The store assigns the rest when the copy is written.
func (m *Message) CopyTo(topic string, drop ...string) *Message {
	out := &Message{Topic: topic, Body: m.Body, Flag: m.Flag, BornTimestamp: m.BornTimestamp,
		BornHost: m.BornHost, ReconsumeTimes: m.ReconsumeTimes}
	for k, v := range m.Properties {
		if !slices.Contains(drop, k) {
			out.SetProperty(k, v)
		}
	}
	return out
}

// SetProperty sets property k to v, allocating the map if needed.
func (m *Message) SetProperty(k, v string) {
	if m.Properties == nil {
		m.Properties = make(map[string]string)
	}
	m.Properties[k] = v
}

// DeleteProperty removes property k.
func (m *Message) DeleteProperty(k string) { delete(m.Properties, k) }

// Tag returns the message's tag, or "" when it has none.
func (m *Message) Tag() string { return m.Properties[PropertyTags] }

// SetTag sets the message's tag; the empty tag removes it.
func (m *Message) SetTag(tag string) {
	if tag == "" {
		delete(m.Properties, PropertyTags)
		return
	}
	m.SetProperty(PropertyTags, tag)
}

// Keys returns the message's business keys (the KEYS property split on
// spaces), or nil when it has none.
func (m *Message) Keys() []string {
	v := m.Properties[PropertyKeys]
	if v == "" {
		return nil
	}
	return strings.Fields(v)
}

// SetKeys sets the message's business keys, joined by single spaces; empty
// keys are dropped and no keys removes the property. Keys must not contain
// spaces.
func (m *Message) SetKeys(keys []string) {
	var b strings.Builder
	for _, k := range keys {
		if k == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
	}
	if b.Len() == 0 {
		delete(m.Properties, PropertyKeys)
		return
	}
	m.SetProperty(PropertyKeys, b.String())
}

// TagsCode returns the tag hash stored in ConsumeQueue entries: FNV-1a 64
// over the tag's bytes, as an int64. The empty tag hashes to 0. Part of the
// on-disk format; never change.
func TagsCode(tag string) int64 {
	if tag == "" {
		return 0
	}
	const (
		offsetBasis = 14695981039346656037
		prime       = 1099511628211
	)
	h := uint64(offsetBasis)
	for i := 0; i < len(tag); i++ {
		h ^= uint64(tag[i])
		h *= prime
	}
	return int64(h)
}

// Validate checks m against the limits of the format: a topic of 1 to
// MaxTopicLen bytes, a body of at most MaxBodySize bytes and valid
// properties. Callers validate before EncodePayload.
func (m *Message) Validate() error {
	if m.Topic == "" {
		return fmt.Errorf("%w: empty topic", ErrInvalid)
	}
	if len(m.Topic) > MaxTopicLen {
		return fmt.Errorf("%w: topic is %d bytes, limit %d", ErrTooLarge, len(m.Topic), MaxTopicLen)
	}
	if len(m.Body) > MaxBodySize {
		return fmt.Errorf("%w: body is %d bytes, limit %d", ErrTooLarge, len(m.Body), MaxBodySize)
	}
	return ValidateProperties(m.Properties)
}

// ValidateProperties checks that every key is non-empty and that the
// encoded properties fit in MaxPropertiesSize bytes.
func ValidateProperties(p map[string]string) error {
	size := 0
	for k, v := range p {
		if k == "" {
			return fmt.Errorf("%w: empty property key", ErrInvalid)
		}
		size += propertyEntrySize(k, v)
		if size > MaxPropertiesSize {
			return fmt.Errorf("%w: properties exceed %d bytes", ErrTooLarge, MaxPropertiesSize)
		}
	}
	return nil
}

// PropertiesSize returns the encoded size of p in bytes.
func PropertiesSize(p map[string]string) int {
	size := 0
	for k, v := range p {
		size += propertyEntrySize(k, v)
	}
	return size
}

func propertyEntrySize(k, v string) int { return keyLenWidth + len(k) + valueLenWidth + len(v) }
