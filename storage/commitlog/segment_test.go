package commitlog

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

func TestSegmentNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "00000000001073741824", segmentName(1<<30))
	for name, want := range map[string]int64{"00000000000000000000": 0, "00000000001073741824": 1 << 30} {
		base, ok := parseSegmentName(name)
		require.True(t, ok, name)
		require.Equal(t, want, base)
	}
	for _, name := range []string{"", "0", "0000000000000000000a", "00000000000000000000.tmp", "000000000000000000000", "-0000000000000000001", "99999999999999999999"} {
		_, ok := parseSegmentName(name)
		require.False(t, ok, name)
	}
}

// TestNonZeroSpan checks the hole-skipping scan against a plain one, with
// data in written pages, pages only in the page cache, and pages read in
// as zeros (which SEEK_DATA reports as data).
func TestNonZeroSpan(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 17))
		dir := t.TempDir()
		s, err := createSegment(vfs.OS(), dir, 0, size, size)
		require.NoError(t, err)
		var marks []int
		for range rng.IntN(4) {
			at := rng.IntN(size)
			s.data[at] = byte(rng.IntN(255) + 1)
			marks = append(marks, at)
		}
		if seed%2 == 0 {
			require.NoError(t, s.mapping.Sync(0, size))
		}
		_ = firstNonZero(s.data[size/2 : size/2+64<<10]) // fault zero pages in
		f, err := vfs.OS().OpenReadWrite(filepath.Join(dir, segmentName(0)))
		require.NoError(t, err)
		for _, from := range []int64{0, int64(rng.IntN(size)), size - 1} {
			first, end, ok, err := nonZeroSpan(f, s.data, from)
			require.NoError(t, err)
			wantFirst, wantEnd, wantOK, err := nonZeroSpan(nil, s.data, from)
			require.NoError(t, err)
			require.Equal(t, []any{wantFirst, wantEnd, wantOK}, []any{first, end, ok}, "seed %d from %d", seed, from)
		}
		first, end, ok, err := nonZeroSpan(f, s.data, 0)
		require.NoError(t, err)
		require.Equal(t, len(marks) > 0, ok)
		if ok {
			require.Equal(t, int64(slices.Min(marks)), first)
			require.Equal(t, int64(slices.Max(marks))+1, end)
		}
		require.NoError(t, f.Close())
		require.NoError(t, s.release())
	}
}
