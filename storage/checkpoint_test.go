package storage

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A checkpoint torn at any byte or with any bit flipped is rejected.
func TestCheckpointTornOrFlipped(t *testing.T) {
	c := checkpoint{Clean: true, Flushed: 123456, Dispatched: 120000, WrittenAt: 1700000000000}
	b := c.encode()
	got, err := decodeCheckpoint(b)
	require.NoError(t, err)
	require.Equal(t, c, got)
	for n := 0; n < len(b); n++ {
		_, err := decodeCheckpoint(b[:n])
		require.ErrorIs(t, err, errBadCheckpoint, "torn at %d", n)
	}
	for i := 0; i < len(b)*8; i++ {
		flipped := append([]byte(nil), b...)
		flipped[i/8] ^= 1 << (i % 8)
		_, err := decodeCheckpoint(flipped)
		require.ErrorIs(t, err, errBadCheckpoint, "bit %d", i)
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(checkpoint{Flushed: 1, Dispatched: 1}.encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCheckpoint(b)
		if err != nil {
			return
		}
		if got := c.encode(); string(got) != string(b) {
			t.Fatalf("decoded checkpoint re-encodes differently")
		}
	})
}
