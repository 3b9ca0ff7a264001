package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func sampleRecord() Record {
	return Record{Entries: []Entry{
		{Key: Key{Group: "g", Topic: "t", QueueID: 3}, Generation: 2, At: 1700000000123, Client: "worker-1",
			Items: []Item{{Offset: 7, Epoch: 1 << 60, Deadline: 1700000060123, State: Held}, {Offset: 9, Epoch: 5, Deadline: 1, Failures: 2, State: Waiting}}},
		{Key: Key{Group: "g", Topic: "t", QueueID: RetryQueueID}, Items: []Item{{Offset: 0, Epoch: 1, State: Released}}},
	}}
}

func TestRecordRoundTrip(t *testing.T) {
	rec := sampleRecord()
	b, err := EncodeRecord(rec)
	require.NoError(t, err)
	got, err := DecodeRecord(b)
	require.NoError(t, err)
	require.Equal(t, rec, got)
	for n := 0; n < len(b); n++ {
		_, err := DecodeRecord(b[:n])
		require.ErrorIs(t, err, ErrBadRecord, "a record cut to %d bytes", n)
	}
	_, err = DecodeRecord(append(b, 0))
	require.ErrorIs(t, err, ErrBadRecord, "trailing byte")

	snap, err := EncodeSnapshot(42, 99, rec)
	require.NoError(t, err)
	off, epoch, srec, err := DecodeSnapshot(snap)
	require.NoError(t, err)
	require.Equal(t, int64(42), off)
	require.Equal(t, uint64(99), epoch)
	require.Equal(t, rec, srec)
	snap[len(snap)-1] ^= 1
	_, _, _, err = DecodeSnapshot(snap)
	require.ErrorIs(t, err, ErrBadRecord, "a flipped bit fails the checksum")
}

// TestDecodeRefuses: what EncodeRecord would not write, DecodeRecord
// refuses.
func TestDecodeRefuses(t *testing.T) {
	for name, r := range map[string]Record{
		"queue below the retry view": {Entries: []Entry{{Key: Key{Group: "g", Topic: "t", QueueID: -2}}}},
		"no group":                   {Entries: []Entry{{Key: Key{Topic: "t"}}}},
		"no topic":                   {Entries: []Entry{{Key: Key{Group: "g"}}}},
		"negative offset":            {Entries: []Entry{{Key: Key{Group: "g", Topic: "t"}, Items: []Item{{Offset: -1, State: Held}}}}},
		"state 0":                    {Entries: []Entry{{Key: Key{Group: "g", Topic: "t"}, Items: []Item{{}}}}},
		"state 4":                    {Entries: []Entry{{Key: Key{Group: "g", Topic: "t"}, Items: []Item{{State: 4}}}}},
	} {
		b, err := EncodeRecord(r)
		require.NoError(t, err, name)
		_, err = DecodeRecord(b)
		require.ErrorIs(t, err, ErrBadRecord, name)
	}
	long := string(make([]byte, 256))
	_, err := EncodeRecord(Record{Entries: []Entry{{Key: Key{Group: long, Topic: "t"}}}})
	require.ErrorIs(t, err, ErrBadRecord, "a name over 255 bytes")
	_, _, _, err = DecodeSnapshot([]byte("MQLS"))
	require.ErrorIs(t, err, ErrBadRecord, "a short snapshot")
}

func TestMilliCeil(t *testing.T) {
	require.Equal(t, int64(1700000000123), MilliCeil(time.UnixMilli(1700000000123)))
	require.Equal(t, int64(1700000000124), MilliCeil(time.UnixMilli(1700000000123).Add(time.Nanosecond)))
}
