package message_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/mqgate/mqgate/storage/message"
)

// sampleMessage returns a message with every field set.
func sampleMessage() *message.Message {
	m := &message.Message{
		Topic:          "orders",
		QueueID:        3,
		Flag:           -7,
		QueueOffset:    1 << 40,
		SysFlag:        0x55,
		BornTimestamp:  1_700_000_000_123,
		BornHost:       message.HostFrom(netip.MustParseAddrPort("10.0.0.7:53122")),
		StoreTimestamp: 1_700_000_000_456,
		StoreHost:      message.HostFrom(netip.MustParseAddrPort("192.168.1.2:8080")),
		ReconsumeTimes: 2,
		Body:           []byte(`{"order":42}`),
	}
	m.SetTag("created")
	m.TagsCode = message.TagsCode("created")
	m.SetKeys([]string{"order-42", "customer-9"})
	m.SetProperty(message.PropertyUniqKey, "0A000007CF02000000000000000000AB")
	m.SetProperty(message.PropertyDedupID, "idem-1")
	m.SetProperty(message.PropertyOriginMessageID, "0A000007CF0200000000000000000001")
	m.SetProperty("user-prop", "")
	return m
}

// mustEncode validates and encodes m.
func mustEncode(t testing.TB, m *message.Message) []byte {
	t.Helper()
	require.NoError(t, m.Validate())
	b := make([]byte, m.PayloadSize())
	m.EncodePayload(b)
	return b
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	bigProps := map[string]string{}
	for i := 0; len(bigProps) < 100; i++ {
		bigProps[strings.Repeat("k", i+1)] = strings.Repeat("v", 200)
	}
	tests := []struct {
		name string
		msg  *message.Message
	}{
		{"OK_AllFields", sampleMessage()},
		{"OK_Minimal", &message.Message{Topic: "t"}},
		{"OK_EmptyBodyWithProperties", &message.Message{Topic: "t", Properties: map[string]string{"a": "b"}}},
		{"OK_NegativeAndExtremeNumbers", &message.Message{
			Topic: "x", QueueID: -1, Flag: -1 << 31, QueueOffset: -1, SysFlag: 1<<31 - 1,
			BornTimestamp: -1 << 63, StoreTimestamp: 1<<63 - 1, ReconsumeTimes: -5, TagsCode: -1,
			Body: []byte{0},
		}},
		{"OK_MaxTopic", &message.Message{Topic: strings.Repeat("t", message.MaxTopicLen), Body: []byte("b")}},
		{"OK_ManyProperties", &message.Message{Topic: "t", Properties: bigProps}},
		{"OK_BinaryBodyAndKeys", &message.Message{
			Topic: message.ScheduleTopic, Body: bytes.Repeat([]byte{0, 0xff}, 5000),
			Properties: map[string]string{"\x00\x01": "\xff\xfe", message.PropertyRealTopic: "orders"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := mustEncode(t, tt.msg)
			require.Len(t, b, tt.msg.PayloadSize())

			got := &message.Message{PhysicalOffset: 99}
			require.NoError(t, message.DecodePayload(b, got))
			require.Equal(t, int64(99), got.PhysicalOffset, "PhysicalOffset is left to the caller")
			got.PhysicalOffset = 0
			require.Equal(t, normalize(tt.msg), got)

			// The decoded message owns its memory: scribbling on b changes nothing.
			for i := range b {
				b[i] = 0xAA
			}
			require.Equal(t, normalize(tt.msg), got)
		})
	}
}

// normalize returns a copy of m in the shape DecodePayload produces: nil
// for an empty body or property map, PhysicalOffset zero.
func normalize(m *message.Message) *message.Message {
	c := *m
	c.PhysicalOffset = 0
	if len(c.Body) == 0 {
		c.Body = nil
	}
	if len(c.Properties) == 0 {
		c.Properties = nil
	}
	return &c
}

// messageGen generates valid messages with arbitrary bytes everywhere.
func messageGen() *rapid.Generator[*message.Message] {
	return rapid.Custom(func(t *rapid.T) *message.Message {
		m := &message.Message{
			Topic:          string(rapid.SliceOfN(rapid.Byte(), 1, message.MaxTopicLen).Draw(t, "topic")),
			QueueID:        rapid.Int32().Draw(t, "queueID"),
			Flag:           rapid.Int32().Draw(t, "flag"),
			QueueOffset:    rapid.Int64().Draw(t, "queueOffset"),
			SysFlag:        rapid.Int32().Draw(t, "sysFlag"),
			BornTimestamp:  rapid.Int64().Draw(t, "born"),
			BornHost:       message.Host(rapid.SliceOfN(rapid.Byte(), 8, 8).Draw(t, "bornHost")),
			StoreTimestamp: rapid.Int64().Draw(t, "stored"),
			StoreHost:      message.Host(rapid.SliceOfN(rapid.Byte(), 8, 8).Draw(t, "storeHost")),
			ReconsumeTimes: rapid.Int32().Draw(t, "reconsume"),
			TagsCode:       rapid.Int64().Draw(t, "tagsCode"),
			Body:           rapid.SliceOfN(rapid.Byte(), 0, 4096).Draw(t, "body"),
		}
		keys := rapid.OneOf(
			rapid.SampledFrom([]string{
				message.PropertyTags, message.PropertyKeys, message.PropertyUniqKey, message.PropertyDedupID,
				message.PropertyOriginMessageID, message.PropertyRetryTopic, message.PropertyDelayLevel, message.PropertyRealQueueID,
			}),
			rapid.StringN(1, 40, -1),
		)
		m.Properties = rapid.MapOfN(keys, rapid.StringN(0, 200, -1), 0, 20).Draw(t, "properties")
		return m
	})
}

func TestRoundTripProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		m := messageGen().Draw(t, "msg")
		require.NoError(t, m.Validate())
		b := make([]byte, m.PayloadSize())
		m.EncodePayload(b)

		var got message.Message
		require.NoError(t, message.DecodePayload(b, &got))
		require.Equal(t, normalize(m), &got)

		var d message.DispatchInfo
		require.NoError(t, message.DecodeDispatch(b, &d))
		requireDispatchAgrees(t, &got, &d)
	})
}

// requireDispatchAgrees checks that d carries the same values as m.
func requireDispatchAgrees(t require.TestingT, m *message.Message, d *message.DispatchInfo) {
	require.Equal(t, m.QueueID, d.QueueID)
	require.Equal(t, m.QueueOffset, d.QueueOffset)
	require.Equal(t, m.TagsCode, d.TagsCode)
	require.Equal(t, m.StoreTimestamp, d.StoreTimestamp)
	require.Equal(t, m.ReconsumeTimes, d.ReconsumeTimes)
	require.Equal(t, m.Topic, string(d.Topic))
	for key, got := range map[string][]byte{
		message.PropertyKeys: d.Keys, message.PropertyUniqKey: d.UniqKey, message.PropertyDedupID: d.DedupID,
		message.PropertyOriginMessageID: d.OriginID,
	} {
		want, ok := m.Properties[key]
		if !ok {
			require.Nil(t, got, key)
			continue
		}
		require.NotNil(t, got, key)
		require.Equal(t, want, string(got), key)
	}
}

func TestDecodeDispatch(t *testing.T) {
	t.Parallel()
	t.Run("OK_AgreesWithDecodePayload", func(t *testing.T) {
		m := sampleMessage()
		b := mustEncode(t, m)
		var d message.DispatchInfo
		require.NoError(t, message.DecodeDispatch(b, &d))
		requireDispatchAgrees(t, m, &d)
		require.Equal(t, "order-42 customer-9", string(d.Keys))
	})
	t.Run("OK_AbsentPropertiesAreNilAndStaleValuesCleared", func(t *testing.T) {
		d := message.DispatchInfo{Keys: []byte("stale"), UniqKey: []byte("stale"), DedupID: []byte("stale"), OriginID: []byte("stale")}
		require.NoError(t, message.DecodeDispatch(mustEncode(t, &message.Message{Topic: "t"}), &d))
		require.Nil(t, d.Keys)
		require.Nil(t, d.UniqKey)
		require.Nil(t, d.DedupID)
		require.Nil(t, d.OriginID)
	})
	t.Run("OK_EmptyValueIsNotNil", func(t *testing.T) {
		var d message.DispatchInfo
		m := &message.Message{Topic: "t", Properties: map[string]string{message.PropertyKeys: ""}}
		require.NoError(t, message.DecodeDispatch(mustEncode(t, m), &d))
		require.NotNil(t, d.Keys)
		require.Empty(t, d.Keys)
	})
}

// header builds a payload by hand from its parts, so tests can write
// inconsistent lengths.
type rawPayload struct {
	bodyLen, topicLen, propertiesLen int
	body, topic, properties          []byte
}

func (r rawPayload) bytes() []byte {
	b := make([]byte, message.FixedHeaderSize)
	b = binary.BigEndian.AppendUint32(b, uint32(r.bodyLen))
	b = append(b, r.body...)
	b = binary.BigEndian.AppendUint16(b, uint16(r.topicLen))
	b = append(b, r.topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.propertiesLen))
	return append(b, r.properties...)
}

// property encodes one property entry with the given declared lengths.
func property(keyLen int, key string, valueLen int, value string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(keyLen))
	b = append(b, key...)
	b = binary.BigEndian.AppendUint32(b, uint32(valueLen))
	return append(b, value...)
}

func TestDecodeCorrupt(t *testing.T) {
	t.Parallel()
	good := rawPayload{bodyLen: 2, body: []byte("hi"), topicLen: 1, topic: []byte("t")}
	props := func(entries ...[]byte) rawPayload {
		r := good
		r.properties = bytes.Join(entries, nil)
		r.propertiesLen = len(r.properties)
		return r
	}
	withLen := func(r rawPayload, f func(*rawPayload)) rawPayload { f(&r); return r }
	tests := []struct {
		name    string
		payload []byte
	}{
		{"Empty", nil},
		{"ShortHeader", make([]byte, message.FixedHeaderSize)},
		{"BodyLenPastEnd", withLen(good, func(r *rawPayload) { r.bodyLen = 1000 }).bytes()},
		{"BodyLenHuge", withLen(good, func(r *rawPayload) { r.bodyLen = 1<<32 - 1 }).bytes()},
		{"TopicEmpty", withLen(good, func(r *rawPayload) { r.topicLen = 0; r.topic = nil; r.body = []byte("hi_") }).bytes()},
		{"TopicLenPastEnd", withLen(good, func(r *rawPayload) { r.topicLen = 200 }).bytes()},
		{"TopicTooLong", rawPayload{topicLen: 256, topic: bytes.Repeat([]byte("t"), 256)}.bytes()},
		{"PropertiesLenShort", withLen(props(property(1, "k", 1, "v")), func(r *rawPayload) { r.propertiesLen-- }).bytes()},
		{"PropertiesLenLong", withLen(props(property(1, "k", 1, "v")), func(r *rawPayload) { r.propertiesLen++ }).bytes()},
		{"PropertiesOverLimit", withLen(good, func(r *rawPayload) {
			r.properties = property(1, "k", message.MaxPropertiesSize, strings.Repeat("v", message.MaxPropertiesSize))
			r.propertiesLen = len(r.properties)
		}).bytes()},
		{"PropertyEmptyKey", props(property(0, "", 1, "v")).bytes()},
		{"PropertyKeyLenPastEnd", props(property(9, "k", 1, "v")).bytes()},
		{"PropertyValueLenPastEnd", props(property(1, "k", 9, "v")).bytes()},
		{"PropertyValueLenHuge", props(property(1, "k", 1<<32-1, "v")).bytes()},
		{"PropertyTruncatedKeyLen", props([]byte{0}).bytes()},
		{"PropertyTruncatedValueLen", props(property(1, "k", 1, "v")[:5]).bytes()},
		{"TrailingByte", append(good.bytes(), 0)},
	}
	for _, tt := range tests {
		t.Run("ErrCorrupt_"+tt.name, func(t *testing.T) {
			t.Parallel()
			var m message.Message
			require.ErrorIs(t, message.DecodePayload(tt.payload, &m), message.ErrCorrupt)
			var d message.DispatchInfo
			require.ErrorIs(t, message.DecodeDispatch(tt.payload, &d), message.ErrCorrupt)
		})
	}

	t.Run("ErrCorrupt_DuplicateKey", func(t *testing.T) {
		t.Parallel()
		b := props(property(4, "KEYS", 1, "a"), property(4, "KEYS", 1, "b")).bytes()
		var m message.Message
		require.ErrorIs(t, message.DecodePayload(b, &m), message.ErrCorrupt)
		// DecodeDispatch refuses what DecodePayload refuses, so that a
		// dispatched record can always be read back.
		var d message.DispatchInfo
		require.ErrorIs(t, message.DecodeDispatch(b, &d), message.ErrCorrupt)
	})

	t.Run("ErrCorrupt_DuplicateKeyAmongMany", func(t *testing.T) {
		t.Parallel()
		var entries [][]byte
		for i := 0; i < 40; i++ {
			k := fmt.Sprintf("k%02d", i)
			entries = append(entries, property(len(k), k, 1, "v"))
		}
		entries = append(entries, property(3, "k07", 1, "w"))
		b := props(entries...).bytes()
		var m message.Message
		require.ErrorIs(t, message.DecodePayload(b, &m), message.ErrCorrupt)
		var d message.DispatchInfo
		require.ErrorIs(t, message.DecodeDispatch(b, &d), message.ErrCorrupt)
		// Without the repeat both decode.
		b = props(entries[:40]...).bytes()
		require.NoError(t, message.DecodePayload(b, &m))
		require.NoError(t, message.DecodeDispatch(b, &d))
	})

	t.Run("ErrCorrupt_EveryTruncationAndExtension", func(t *testing.T) {
		t.Parallel()
		b := mustEncode(t, sampleMessage())
		for n := 0; n < len(b); n++ {
			var m message.Message
			require.ErrorIs(t, message.DecodePayload(b[:n], &m), message.ErrCorrupt, "prefix %d", n)
			var d message.DispatchInfo
			require.ErrorIs(t, message.DecodeDispatch(b[:n], &d), message.ErrCorrupt, "prefix %d", n)
		}
		var m message.Message
		require.ErrorIs(t, message.DecodePayload(append(b, 'x'), &m), message.ErrCorrupt)
	})
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  message.Message
		want error
	}{
		{"OK", *sampleMessage(), nil},
		{"ErrInvalid_EmptyTopic", message.Message{}, message.ErrInvalid},
		{"ErrTooLarge_Topic", message.Message{Topic: strings.Repeat("t", message.MaxTopicLen+1)}, message.ErrTooLarge},
		{"ErrInvalid_EmptyPropertyKey", message.Message{Topic: "t", Properties: map[string]string{"": "v"}}, message.ErrInvalid},
		{"ErrTooLarge_Properties", message.Message{Topic: "t", Properties: map[string]string{
			"k": strings.Repeat("v", message.MaxPropertiesSize),
		}}, message.ErrTooLarge},
		{"OK_PropertiesAtLimit", message.Message{Topic: "t", Properties: map[string]string{
			"k": strings.Repeat("v", message.MaxPropertiesSize-7),
		}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.msg.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				// A valid message always decodes.
				var m message.Message
				require.NoError(t, message.DecodePayload(mustEncode(t, &tt.msg), &m))
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

func TestAccessors(t *testing.T) {
	t.Parallel()
	var m message.Message
	require.Empty(t, m.Tag())
	require.Nil(t, m.Keys())
	m.SetTag("a")
	require.Equal(t, "a", m.Tag())
	m.SetTag("")
	_, ok := m.Properties[message.PropertyTags]
	require.False(t, ok, "empty tag removes the property")

	m.SetKeys([]string{"k1", "", "k2"})
	require.Equal(t, "k1 k2", m.Property(message.PropertyKeys))
	require.Equal(t, []string{"k1", "k2"}, m.Keys())
	m.SetKeys(nil)
	require.Nil(t, m.Keys())
	_, ok = m.Properties[message.PropertyKeys]
	require.False(t, ok)

	m.SetProperty("x", "y")
	require.Equal(t, "y", m.Property("x"))
	m.DeleteProperty("x")
	require.Empty(t, m.Property("x"))
}

func TestTagsCode(t *testing.T) {
	t.Parallel()
	require.Zero(t, message.TagsCode(""))
	// FNV-1a 64 test vectors (part of the on-disk format).
	require.Equal(t, int64(-5808556873153909620), message.TagsCode("a"))      // 0xaf63dc4c8601ec8c
	require.Equal(t, int64(-8821353812377114648), message.TagsCode("foobar")) // 0x85944171f73967e8
	for _, tag := range []string{"b", "created", "TagA", strings.Repeat("z", 300)} {
		h := fnv.New64a()
		h.Write([]byte(tag))
		require.Equal(t, int64(h.Sum64()), message.TagsCode(tag), tag)
	}
}

func TestZeroAllocs(t *testing.T) {
	m := sampleMessage()
	b := make([]byte, m.PayloadSize())
	m.EncodePayload(b)
	if n := testing.AllocsPerRun(100, func() { m.EncodePayload(b) }); n != 0 {
		t.Fatalf("EncodePayload allocates %v times per run", n)
	}
	var d message.DispatchInfo
	if n := testing.AllocsPerRun(100, func() {
		if err := message.DecodeDispatch(b, &d); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("DecodeDispatch allocates %v times per run", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = message.TagsCode("some-tag") }); n != 0 {
		t.Fatalf("TagsCode allocates %v times per run", n)
	}
}

func BenchmarkEncodePayload(b *testing.B) {
	m := sampleMessage()
	m.Body = bytes.Repeat([]byte("x"), 1024)
	buf := make([]byte, m.PayloadSize())
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		m.EncodePayload(buf)
	}
}

func BenchmarkDecodePayload(b *testing.B) {
	m := sampleMessage()
	m.Body = bytes.Repeat([]byte("x"), 1024)
	buf := mustEncode(b, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var got message.Message
	for b.Loop() {
		if err := message.DecodePayload(buf, &got); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDispatch(b *testing.B) {
	m := sampleMessage()
	m.Body = bytes.Repeat([]byte("x"), 1024)
	buf := mustEncode(b, m)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var d message.DispatchInfo
	for b.Loop() {
		if err := message.DecodeDispatch(buf, &d); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEncodingIsCanonical: the same message always encodes to the same
// bytes, properties in ascending key order, whatever order the map is
// iterated in or was filled in — what lets a replica that re-encodes a
// record and one that copies it hold equal bytes.
func TestEncodingIsCanonical(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 9, 31, 32, 33, 120} {
		m := sampleMessage()
		for i := 0; i < n; i++ {
			m.SetProperty(fmt.Sprintf("p%03d", (i*37)%n), fmt.Sprint(i))
		}
		want := mustEncode(t, m)
		for round := 0; round < 50; round++ {
			copied := *m
			copied.Properties = make(map[string]string, len(m.Properties))
			for k, v := range m.Properties { // another map, filled in another order
				copied.Properties[k] = v
			}
			require.Equal(t, want, mustEncode(t, &copied), "%d properties, round %d", n, round)
		}
		var keys []string
		for p := want[len(want)-message.PropertiesSize(m.Properties):]; len(p) > 0; {
			kl := int(binary.BigEndian.Uint16(p))
			keys = append(keys, string(p[2:2+kl]))
			vl := int(binary.BigEndian.Uint32(p[2+kl:]))
			p = p[2+kl+4+vl:]
		}
		require.IsIncreasing(t, keys, "%d properties", n)
	}
}
