package message

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
)

// Field offsets and widths of the payload. Part of the on-disk format;
// never change (see doc.go).
const (
	offsetQueueID        = 0
	offsetFlag           = 4
	offsetQueueOffset    = 8
	offsetSysFlag        = 16
	offsetBornTimestamp  = 20
	offsetBornHost       = 28
	offsetStoreTimestamp = 36
	offsetStoreHost      = 44
	offsetReconsumeTimes = 52
	offsetTagsCode       = 56

	// FixedHeaderSize is the size of the fixed-width fields before bodyLen.
	FixedHeaderSize = 64

	bodyLenWidth       = 4
	topicLenWidth      = 2
	propertiesLenWidth = 4
	keyLenWidth        = 2
	valueLenWidth      = 4

	// MinPayloadSize is the size of the smallest valid payload: empty
	// body, a one-byte topic and no properties.
	MinPayloadSize = FixedHeaderSize + bodyLenWidth + topicLenWidth + 1 + propertiesLenWidth
)

// PayloadSize returns the exact number of bytes EncodePayload writes.
func (m *Message) PayloadSize() int {
	return FixedHeaderSize + bodyLenWidth + len(m.Body) + topicLenWidth + len(m.Topic) +
		propertiesLenWidth + PropertiesSize(m.Properties)
}

// EncodePayload writes m's payload into dst, which must be exactly
// PayloadSize() bytes long; it panics otherwise, as a programming error.
// Callers run Validate first: EncodePayload does not check limits.
//
// The encoding is canonical: properties are written in ascending byte order
// of their keys, so the same message always yields the same bytes (and the
// same CRC) whatever order Go's map iteration picks. A replica that copies
// a record and one that re-encodes it hold equal bytes (see doc.go). It
// does not allocate for up to maxStackProperties properties.
func (m *Message) EncodePayload(dst []byte) {
	propertiesSize := PropertiesSize(m.Properties)
	size := FixedHeaderSize + bodyLenWidth + len(m.Body) + topicLenWidth + len(m.Topic) +
		propertiesLenWidth + propertiesSize
	if len(dst) != size {
		panic("message: EncodePayload: len(dst) != PayloadSize()")
	}
	be := binary.BigEndian
	be.PutUint32(dst[offsetQueueID:], uint32(m.QueueID))
	be.PutUint32(dst[offsetFlag:], uint32(m.Flag))
	be.PutUint64(dst[offsetQueueOffset:], uint64(m.QueueOffset))
	be.PutUint32(dst[offsetSysFlag:], uint32(m.SysFlag))
	be.PutUint64(dst[offsetBornTimestamp:], uint64(m.BornTimestamp))
	copy(dst[offsetBornHost:], m.BornHost[:])
	be.PutUint64(dst[offsetStoreTimestamp:], uint64(m.StoreTimestamp))
	copy(dst[offsetStoreHost:], m.StoreHost[:])
	be.PutUint32(dst[offsetReconsumeTimes:], uint32(m.ReconsumeTimes))
	be.PutUint64(dst[offsetTagsCode:], uint64(m.TagsCode))

	pos := FixedHeaderSize
	be.PutUint32(dst[pos:], uint32(len(m.Body)))
	pos += bodyLenWidth
	pos += copy(dst[pos:], m.Body)
	be.PutUint16(dst[pos:], uint16(len(m.Topic)))
	pos += topicLenWidth
	pos += copy(dst[pos:], m.Topic)
	be.PutUint32(dst[pos:], uint32(propertiesSize))
	pos += propertiesLenWidth
	var stack [maxStackProperties]property
	props := stack[:0]
	for k, v := range m.Properties {
		props = append(props, property{k, v})
	}
	slices.SortFunc(props, func(a, b property) int { return strings.Compare(a.key, b.key) })
	for _, p := range props {
		k, v := p.key, p.value
		be.PutUint16(dst[pos:], uint16(len(k)))
		pos += keyLenWidth
		pos += copy(dst[pos:], k)
		be.PutUint32(dst[pos:], uint32(len(v)))
		pos += valueLenWidth
		pos += copy(dst[pos:], v)
	}
}

// maxStackProperties is how many property keys EncodePayload sorts without
// allocating; the broker's own records carry fewer than a dozen.
const maxStackProperties = 32

type property struct{ key, value string }

// layout locates the variable-length regions of a payload.
type layout struct {
	body, topic, properties []byte
	propertyCount           int
}

// parseLayout checks the structure of b (every length in bounds, the
// properties region exactly filled, no trailing bytes) and returns where
// the regions are. It does not allocate on success.
func parseLayout(b []byte) (layout, error) {
	var l layout
	if len(b) < MinPayloadSize {
		return l, fmt.Errorf("%w: %d bytes, shorter than the minimum %d", ErrCorrupt, len(b), MinPayloadSize)
	}
	be := binary.BigEndian
	rest := b[FixedHeaderSize:]

	bodyLen := uint64(be.Uint32(rest))
	rest = rest[bodyLenWidth:]
	if bodyLen > MaxBodySize || bodyLen > uint64(len(rest)) {
		return l, fmt.Errorf("%w: body length %d with %d bytes left", ErrCorrupt, bodyLen, len(rest))
	}
	l.body, rest = rest[:bodyLen], rest[bodyLen:]

	if len(rest) < topicLenWidth {
		return l, fmt.Errorf("%w: truncated before topic length", ErrCorrupt)
	}
	topicLen := int(be.Uint16(rest))
	rest = rest[topicLenWidth:]
	if topicLen == 0 || topicLen > MaxTopicLen || topicLen > len(rest) {
		return l, fmt.Errorf("%w: topic length %d with %d bytes left", ErrCorrupt, topicLen, len(rest))
	}
	l.topic, rest = rest[:topicLen], rest[topicLen:]

	if len(rest) < propertiesLenWidth {
		return l, fmt.Errorf("%w: truncated before properties length", ErrCorrupt)
	}
	propertiesLen := uint64(be.Uint32(rest))
	rest = rest[propertiesLenWidth:]
	if propertiesLen > MaxPropertiesSize || propertiesLen != uint64(len(rest)) {
		return l, fmt.Errorf("%w: properties length %d with %d bytes left", ErrCorrupt, propertiesLen, len(rest))
	}
	l.properties = rest

	for p := l.properties; len(p) > 0; {
		var err error
		if _, _, p, err = nextProperty(p); err != nil {
			return l, err
		}
		l.propertyCount++
	}
	return l, nil
}

// nextProperty splits the first property entry off p.
func nextProperty(p []byte) (key, value, rest []byte, err error) {
	be := binary.BigEndian
	if len(p) < keyLenWidth {
		return nil, nil, nil, fmt.Errorf("%w: truncated property key length", ErrCorrupt)
	}
	keyLen := int(be.Uint16(p))
	p = p[keyLenWidth:]
	if keyLen == 0 || keyLen > len(p) {
		return nil, nil, nil, fmt.Errorf("%w: property key length %d with %d bytes left", ErrCorrupt, keyLen, len(p))
	}
	key, p = p[:keyLen], p[keyLen:]
	if len(p) < valueLenWidth {
		return nil, nil, nil, fmt.Errorf("%w: truncated property value length", ErrCorrupt)
	}
	valueLen := uint64(be.Uint32(p))
	p = p[valueLenWidth:]
	if valueLen > uint64(len(p)) {
		return nil, nil, nil, fmt.Errorf("%w: property value length %d with %d bytes left", ErrCorrupt, valueLen, len(p))
	}
	return key, p[:valueLen], p[valueLen:], nil
}

// DecodePayload decodes the payload b into m, overwriting every field
// except PhysicalOffset, which the record frame carries and the caller sets.
// Body, topic and properties are copied, so b may be reused afterwards. An
// empty body decodes as nil and no properties as a nil map. Any
// inconsistency is ErrCorrupt (see doc.go); DecodePayload never panics.
func DecodePayload(b []byte, m *Message) error {
	l, err := parseLayout(b)
	if err != nil {
		return err
	}
	var properties map[string]string
	if l.propertyCount > 0 {
		properties = make(map[string]string, l.propertyCount)
		inserted := 0
		for p := l.properties; len(p) > 0; {
			key, value, rest, _ := nextProperty(p) // checked by parseLayout
			p = rest
			k := internKey(key)
			properties[k] = string(value)
			if inserted++; len(properties) != inserted {
				return fmt.Errorf("%w: property %q repeated", ErrCorrupt, k)
			}
		}
	}
	var body []byte
	if len(l.body) > 0 {
		body = make([]byte, len(l.body))
		copy(body, l.body)
	}

	be := binary.BigEndian
	physicalOffset := m.PhysicalOffset
	*m = Message{
		Topic:          string(l.topic),
		QueueID:        int32(be.Uint32(b[offsetQueueID:])),
		Flag:           int32(be.Uint32(b[offsetFlag:])),
		QueueOffset:    int64(be.Uint64(b[offsetQueueOffset:])),
		PhysicalOffset: physicalOffset,
		SysFlag:        int32(be.Uint32(b[offsetSysFlag:])),
		BornTimestamp:  int64(be.Uint64(b[offsetBornTimestamp:])),
		StoreTimestamp: int64(be.Uint64(b[offsetStoreTimestamp:])),
		ReconsumeTimes: int32(be.Uint32(b[offsetReconsumeTimes:])),
		TagsCode:       int64(be.Uint64(b[offsetTagsCode:])),
		Body:           body,
		Properties:     properties,
	}
	copy(m.BornHost[:], b[offsetBornHost:])
	copy(m.StoreHost[:], b[offsetStoreHost:])
	return nil
}

// internKey returns the system property constant equal to key, so that
// decoding the common keys does not allocate, or a copy of key.
func internKey(key []byte) string {
	switch string(key) {
	case PropertyTags:
		return PropertyTags
	case PropertyKeys:
		return PropertyKeys
	case PropertyUniqKey:
		return PropertyUniqKey
	case PropertyRetryTopic:
		return PropertyRetryTopic
	case PropertyOriginMessageID:
		return PropertyOriginMessageID
	case PropertyRealTopic:
		return PropertyRealTopic
	case PropertyRealQueueID:
		return PropertyRealQueueID
	case PropertyDelayLevel:
		return PropertyDelayLevel
	case PropertyMaxReconsumeTimes:
		return PropertyMaxReconsumeTimes
	case PropertyDeliverTimeMs:
		return PropertyDeliverTimeMs
	case PropertyShardingKey:
		return PropertyShardingKey
	case PropertyDedupID:
		return PropertyDedupID
	}
	return string(key)
}

// DispatchInfo is what the store's dispatcher needs from a record to build
// ConsumeQueues and the index. Its byte slices alias the payload passed to
// DecodeDispatch and are valid only as long as that buffer is.
type DispatchInfo struct {
	// QueueID is the message's queue.
	QueueID int32
	// QueueOffset is the message's position in its queue.
	QueueOffset int64
	// TagsCode is the tag hash or, in ScheduleTopic, the due time.
	TagsCode int64
	// StoreTimestamp is the store time in unix milliseconds.
	StoreTimestamp int64
	// StoreHost is the store field (the store id, see doc.go).
	StoreHost Host
	// ReconsumeTimes counts failed deliveries so far.
	ReconsumeTimes int32
	// Topic is the message's topic (aliases the payload).
	Topic []byte
	// Keys is the raw KEYS property value (space-separated), nil if absent.
	Keys []byte
	// UniqKey is the raw UNIQ_KEY property value, nil if absent.
	UniqKey []byte
	// DedupID is the raw DEDUP_ID property value, nil if absent.
	DedupID []byte
	// OriginID is the raw ORIGIN_MESSAGE_ID property value (a retry's,
	// dead letter's or resend's first copy), nil if absent.
	OriginID []byte
}

// DecodeDispatch fills d from the payload b. It checks exactly what
// DecodePayload checks, so that a record the dispatcher accepts can always
// be read back, and returns ErrCorrupt on any inconsistency; it never
// panics. It does not allocate unless the payload has more than
// smallPropertyCount properties.
func DecodeDispatch(b []byte, d *DispatchInfo) error {
	l, err := parseLayout(b)
	if err != nil {
		return err
	}
	if err := checkRepeatedKeys(l); err != nil {
		return err
	}
	be := binary.BigEndian
	*d = DispatchInfo{
		QueueID:        int32(be.Uint32(b[offsetQueueID:])),
		QueueOffset:    int64(be.Uint64(b[offsetQueueOffset:])),
		TagsCode:       int64(be.Uint64(b[offsetTagsCode:])),
		StoreTimestamp: int64(be.Uint64(b[offsetStoreTimestamp:])),
		ReconsumeTimes: int32(be.Uint32(b[offsetReconsumeTimes:])),
		StoreHost:      Host(b[offsetStoreHost : offsetStoreHost+8]),
		Topic:          l.topic,
	}
	for p := l.properties; len(p) > 0; {
		key, value, rest, _ := nextProperty(p) // checked by parseLayout
		p = rest
		switch string(key) {
		case PropertyKeys:
			d.Keys = value
		case PropertyUniqKey:
			d.UniqKey = value
		case PropertyDedupID:
			d.DedupID = value
		case PropertyOriginMessageID:
			d.OriginID = value
		}
	}
	return nil
}

// smallPropertyCount is how many properties checkRepeatedKeys compares
// pairwise; above it, it uses a set.
const smallPropertyCount = 16

// checkRepeatedKeys returns ErrCorrupt when a property key occurs twice
// (DecodePayload refuses such a payload too).
func checkRepeatedKeys(l layout) error {
	if l.propertyCount < 2 {
		return nil
	}
	if l.propertyCount <= smallPropertyCount {
		var keys [smallPropertyCount][]byte
		n := 0
		for p := l.properties; len(p) > 0; {
			key, _, rest, _ := nextProperty(p) // checked by parseLayout
			p = rest
			for _, k := range keys[:n] {
				if string(k) == string(key) {
					return fmt.Errorf("%w: property %q repeated", ErrCorrupt, key)
				}
			}
			keys[n] = key
			n++
		}
		return nil
	}
	seen := make(map[string]struct{}, l.propertyCount)
	for p := l.properties; len(p) > 0; {
		key, _, rest, _ := nextProperty(p) // checked by parseLayout
		p = rest
		if _, dup := seen[string(key)]; dup {
			return fmt.Errorf("%w: property %q repeated", ErrCorrupt, key)
		}
		seen[string(key)] = struct{}{}
	}
	return nil
}
