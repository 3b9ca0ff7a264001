package broker

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sampleTraceRecord has an item of every kind and every field.
func sampleTraceRecord() traceRecord {
	at := int64(1_700_000_000_000)
	return traceRecord{LeaseNext: 12, OffsetNext: 40, Items: []traceItem{
		{Kind: traceStored, At: at, Copy: -1, MessageID: "7F00000100001F900000000000000100", Topic: "orders", QueueID: 3, QueueOffset: 7, HasPosition: true, Until: at + 5000, HasLevel: true, Level: 2},
		{Kind: traceDelivered, At: at + 1, Copy: 0x100, Group: "g", Client: "worker-1", Epoch: 1 << 62, Until: at + 30_001},
		{Kind: tracePushed, At: at + 2, Copy: 0x100, Group: "g", Epoch: 1 << 62, Status: 503, Text: "5xx"},
		{Kind: traceNacked, At: at + 3, Copy: -1, Group: "g", Client: "worker-1", Text: "busy", HasLevel: true, Level: -1, DelayMs: 1500},
		{Kind: traceRetried, At: at + 4, Copy: 0x100, Group: "g", Epoch: 9, Until: at + 10, InPlace: true, Count: 2},
		{Kind: traceRetried, At: at + 5, Copy: -1, Group: "g", RelatedID: "7F00000100001F900000000000000900", Reconsume: 3, Until: at + 60_000},
		{Kind: traceAcked, At: at - 7, Copy: 0x900, Group: "g"},
		{Kind: traceRolledBack, At: at, Copy: -1, Text: "max-checks", MessageID: "7F00000100001F900000000000000100", RelatedID: "7F00000100001F900000000000000100"},
		{Kind: traceDeadLettered, At: at, Copy: -1, Count: 1 << 40, HasPosition: true, Topic: "", QueueID: 0, QueueOffset: 0},
	}}
}

func TestTraceRecordRoundTrip(t *testing.T) {
	t.Parallel()
	rec := sampleTraceRecord()
	got, err := decodeTraceRecord(encodeTraceRecord(rec))
	require.NoError(t, err)
	require.Equal(t, rec, got)

	empty := traceRecord{LeaseNext: -1, OffsetNext: -1}
	got, err = decodeTraceRecord(encodeTraceRecord(empty))
	require.NoError(t, err)
	require.Equal(t, traceRecord{LeaseNext: -1, OffsetNext: -1, Items: []traceItem{}}, got)

	long := traceRecord{LeaseNext: -1, OffsetNext: -1, Items: []traceItem{{Kind: traceNacked, Copy: -1, Text: strings.Repeat("é", traceMaxString)}}}
	got, err = decodeTraceRecord(encodeTraceRecord(long))
	require.NoError(t, err)
	require.LessOrEqual(t, len(got.Items[0].Text), traceMaxString, "long strings are cut")
	require.True(t, strings.HasPrefix(long.Items[0].Text, got.Items[0].Text))

	b := encodeTraceRecord(rec)
	for _, bad := range [][]byte{nil, {2}, b[:len(b)-1], append(append([]byte{}, b...), 0)} {
		_, err := decodeTraceRecord(bad)
		require.ErrorIs(t, err, errBadTraceRecord, "%x", bad)
	}
}

// FuzzTraceRecord: trace records are read back from the CommitLog
// (possibly of another version, or damaged past their frame's check);
// decoding arbitrary bytes never panics nor allocates more than the input
// justifies, and what decodes encodes to a record that decodes the same.
func FuzzTraceRecord(f *testing.F) {
	f.Add(encodeTraceRecord(sampleTraceRecord()))
	f.Add(encodeTraceRecord(traceRecord{LeaseNext: -1, OffsetNext: -1}))
	f.Add([]byte{1, 0, 0, 0, 0, 1, byte(traceAcked), 1, 0, 0, 0})
	f.Add([]byte{1, 1, 1, 0, 1, 1, 'a', 1, byte(traceDelivered), 3, 2, 2, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := decodeTraceRecord(data)
		if err != nil {
			return
		}
		if len(rec.Items) > len(data) {
			t.Fatalf("%d items from %d bytes", len(rec.Items), len(data))
		}
		again, err := decodeTraceRecord(encodeTraceRecord(rec))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(rec, again) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", rec, again)
		}
	})
}
