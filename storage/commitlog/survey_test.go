package commitlog

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// surveyed runs SurveyDir and returns the records it walked, by offset.
func surveyed(t *testing.T, dir string, highWater int64) (SurveyResult, map[int64][]byte) {
	t.Helper()
	recs := map[int64][]byte{}
	res, err := SurveyDir(dir, highWater, 0, func(off int64, _ int32, p []byte, _ int) {
		recs[off] = bytes.Clone(p)
	})
	require.NoError(t, err)
	return res, recs
}

// FuzzSurveyPatch: whatever happens to the segment files of a log (a file
// deleted, truncated, a range zeroed or overwritten), PatchDir leaves a
// log that SurveyDir finds undamaged, that holds every record the first
// survey walked at the same offset with the same bytes, and that Open
// recovers with the old high-water mark, ending at or above it.
func FuzzSurveyPatch(f *testing.F) {
	f.Add(uint8(0), uint8(2), uint16(0), uint16(0), uint8(7))
	f.Add(uint8(1), uint8(1), uint16(1000), uint16(0), uint8(3))
	f.Add(uint8(2), uint8(4), uint16(700), uint16(3000), uint8(1))
	f.Add(uint8(3), uint8(0), uint16(21), uint16(40), uint8(255))
	f.Add(uint8(1), uint8(3), uint16(0), uint16(0), uint8(9))
	f.Add(uint8(3), uint8(2), uint16(300), uint16(0), uint8(64)) // one byte of a payload: left in place
	f.Fuzz(func(t *testing.T, kind, which uint8, at, n uint16, seed uint8) {
		const segSize = 4 << 10
		dir := t.TempDir()
		l, err := Open(Options{Dir: dir, SegmentSize: segSize})
		require.NoError(t, err)
		for i := 0; len(l.Segments()) < 5; i++ {
			size := 30 + (i*int(seed|1))%600
			_, err := l.Append(bytesPayload(bytes.Repeat([]byte{byte(i + 1)}, size)))
			require.NoError(t, err)
		}
		highWater := l.Flushed()
		require.NoError(t, l.Close())

		files, err := filepath.Glob(filepath.Join(dir, "[0-9]*[0-9]"))
		require.NoError(t, err)
		sort.Strings(files)
		path := files[int(which)%len(files)]
		st, err := os.Stat(path)
		require.NoError(t, err)
		off := int64(at) % (st.Size() + 1)
		switch kind % 4 {
		case 0:
			require.NoError(t, os.Remove(path))
		case 1:
			require.NoError(t, os.Truncate(path, off))
		default:
			fill := byte(0)
			if kind%4 == 3 {
				fill = seed | 1
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			end := min(off+int64(n)%2048+1, int64(len(b)))
			for i := off; i < end; i++ {
				b[i] = fill
			}
			require.NoError(t, os.WriteFile(path, b, 0o644))
		}

		before, kept := surveyed(t, dir, highWater)
		_, err = PatchDir(nil, dir, before)
		require.NoError(t, err)
		after, again := surveyed(t, dir, highWater)
		var lost []Range
		for _, d := range before.Damaged {
			if d.InPlace {
				lost = append(lost, Range{d.From, d.To})
			}
		}
		var left []Range
		for _, d := range after.Damaged {
			require.True(t, d.InPlace, "damage left after the patch: %+v (before: %+v)", after.Damaged, before.Damaged)
			left = append(left, Range{d.From, d.To})
		}
		require.Equal(t, lost, left, "only the records left in place are still damaged")
		require.Equal(t, kept, again, "the records walked before are there, unchanged")

		l, err = Open(Options{Dir: dir, SegmentSize: segSize, HighWater: highWater, Lost: lost})
		require.NoError(t, err, "before: %+v", before.Damaged)
		defer l.Close()
		require.GreaterOrEqual(t, l.Written(), highWater)
		for o, p := range kept {
			rec, err := l.Read(o, nil)
			require.NoError(t, err, "record at %d", o)
			require.Equal(t, p, rec.Payload)
		}
	})
}
