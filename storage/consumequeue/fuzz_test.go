package consumequeue

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func FuzzEntryDecode(f *testing.F) {
	f.Add(encoded(entryFor(3)))
	f.Add(make([]byte, EntrySize))
	f.Add(encoded(Entry{CommitLogOffset: -1, Size: 1}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			require.True(t, len(b) < EntrySize || e == Entry{})
			if len(b) >= EntrySize {
				raw := decodeEntry(b)
				require.False(t, raw.IsEmpty() || raw.valid(), "only invalid non-empty entries fail")
			}
			return
		}
		require.GreaterOrEqual(t, len(b), EntrySize)
		require.True(t, e.IsEmpty() || (e.Size > 0 && e.CommitLogOffset >= 0))
		again := make([]byte, EntrySize)
		e.Encode(again)
		require.True(t, bytes.Equal(b[:EntrySize], again), "re-encoding gives the same bytes")
	})
}
