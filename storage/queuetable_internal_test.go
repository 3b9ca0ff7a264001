package storage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQueueTableRoundTrip(t *testing.T) {
	t.Parallel()
	in := queueTable{indexedPhy: 4096, queues: map[queueKey]queueBounds{
		{"orders", 0}:         {min: 0, max: 12, lastPhy: 999},
		{"orders", 3}:         {min: 5, max: 5, lastPhy: -1},
		{"%RETRY%billing", 0}: {min: 1, max: 2, lastPhy: 7},
	}}
	out, err := decodeQueueTable(in.encode())
	require.NoError(t, err)
	require.Equal(t, in, out)

	b := in.encode()
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x10
		_, err := decodeQueueTable(bad)
		require.Error(t, err, "byte %d flipped", i)
	}
	_, err = decodeQueueTable(b[:len(b)-1])
	require.Error(t, err)
}

// FuzzDecodeQueueTable: the decoder never panics, and whatever it accepts
// encodes back to the same bytes.
func FuzzDecodeQueueTable(f *testing.F) {
	f.Add(queueTable{indexedPhy: -1, queues: map[queueKey]queueBounds{}}.encode())
	f.Add(queueTable{indexedPhy: 7, queues: map[queueKey]queueBounds{{"t", 1}: {min: 1, max: 3, lastPhy: 64}}}.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, err := decodeQueueTable(b)
		if err != nil {
			return
		}
		require.Equal(t, b, tb.encode())
	})
}
