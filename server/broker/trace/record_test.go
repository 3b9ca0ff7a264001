package trace

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sampleTraceRecord has an item of every kind and every field.
func sampleTraceRecord() Record {
	at := int64(1_700_000_000_000)
	return Record{LeaseNext: 12, OffsetNext: 40, Items: []Item{
		{Kind: Stored, At: at, Copy: -1, MessageID: "7F00000100001F900000000000000100", Topic: "orders", QueueID: 3, QueueOffset: 7, HasPosition: true, Until: at + 5000, HasLevel: true, Level: 2},
		{Kind: Delivered, At: at + 1, Copy: 0x100, Group: "g", Client: "worker-1", Epoch: 1 << 62, Until: at + 30_001},
		{Kind: Pushed, At: at + 2, Copy: 0x100, Group: "g", Epoch: 1 << 62, Status: 503, Text: "5xx"},
		{Kind: Nacked, At: at + 3, Copy: -1, Group: "g", Client: "worker-1", Text: "busy", HasLevel: true, Level: -1, DelayMs: 1500},
		{Kind: Retried, At: at + 4, Copy: 0x100, Group: "g", Epoch: 9, Until: at + 10, InPlace: true, Count: 2, Pos: 0x1f00},
		{Kind: Retried, At: at + 5, Copy: -1, Group: "g", RelatedID: "7F00000100001F900000000000000900", Reconsume: 3, Until: at + 60_000},
		{Kind: Acked, At: at - 7, Copy: 0x900, Group: "g"},
		{Kind: RolledBack, At: at, Copy: -1, Text: "max-checks", MessageID: "7F00000100001F900000000000000100", RelatedID: "7F00000100001F900000000000000100"},
		{Kind: DeadLettered, At: at, Copy: -1, Count: 1 << 40, HasPosition: true, Topic: "", QueueID: 0, QueueOffset: 0},
	}}
}

func TestTraceRecordRoundTrip(t *testing.T) {
	t.Parallel()
	rec := sampleTraceRecord()
	got, err := Decode(Encode(rec))
	require.NoError(t, err)
	require.Equal(t, rec, got)

	empty := Record{LeaseNext: -1, OffsetNext: -1}
	got, err = Decode(Encode(empty))
	require.NoError(t, err)
	require.Equal(t, Record{LeaseNext: -1, OffsetNext: -1, Items: []Item{}}, got)

	long := Record{LeaseNext: -1, OffsetNext: -1, Items: []Item{{Kind: Nacked, Copy: -1, Text: strings.Repeat("é", MaxString)}}}
	got, err = Decode(Encode(long))
	require.NoError(t, err)
	require.LessOrEqual(t, len(got.Items[0].Text), MaxString, "long strings are cut")
	require.True(t, strings.HasPrefix(long.Items[0].Text, got.Items[0].Text))

	b := Encode(rec)
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(append([]byte{}, b...), 0)} {
		_, err := Decode(bad)
		require.ErrorIs(t, err, ErrBadRecord, "%x", bad)
	}
}

// FuzzTraceRecord: trace records are read back from the CommitLog
// (possibly of another version, or damaged past their frame's check);
// decoding arbitrary bytes never panics nor allocates more than the input
// justifies, and what decodes encodes to a record that decodes the same.
func FuzzTraceRecord(f *testing.F) {
	f.Add(Encode(sampleTraceRecord()))
	f.Add(Encode(Record{LeaseNext: -1, OffsetNext: -1}))
	f.Add([]byte{1, 0, 0, 0, 0, 1, byte(Acked), 1, 0, 0, 0})
	f.Add([]byte{1, 1, 1, 0, 1, 1, 'a', 1, byte(Delivered), 3, 2, 2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := Decode(data)
		if err != nil {
			return
		}
		if len(rec.Items) > len(data) {
			t.Fatalf("%d items from %d bytes", len(rec.Items), len(data))
		}
		again, err := Decode(Encode(rec))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(rec, again) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", rec, again)
		}
	})
}
