package commitlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestTruncateFromIsNeverHavingWritten: a log that appends a suffix, cuts
// it off with TruncateFrom (at its start or at any frame boundary inside
// it, then at its start) and goes on appending holds, byte for byte, the
// segment files of a log that never wrote the suffix — across rolls,
// Blank frames, cuts at a segment's base and cuts that remove whole
// segments — and reopens to the same end.
func TestTruncateFromIsNeverHavingWritten(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		segSize := rapid.SampledFrom([]int64{128, 1000, 4 << 10}).Draw(rt, "segment")
		mode := rapid.SampledFrom(flushModes).Draw(rt, "mode")
		dirA, err := os.MkdirTemp(t.TempDir(), "a")
		require.NoError(rt, err)
		dirB, err := os.MkdirTemp(t.TempDir(), "b")
		require.NoError(rt, err)
		a, err := Open(Options{Dir: dirA, SegmentSize: segSize, FlushMode: mode})
		require.NoError(rt, err)
		b, err := Open(Options{Dir: dirB, SegmentSize: segSize, FlushMode: mode})
		require.NoError(rt, err)
		defer func() { _ = a.Close(); _ = b.Close() }()
		maxPayload := maxTestPayload(segSize)
		batch := func(label string) []Encoder {
			sizes := rapid.SliceOfN(rapid.IntRange(0, maxPayload), 1, 4).Draw(rt, label)
			es := make([]Encoder, len(sizes))
			for i, n := range sizes {
				p := make([]byte, n)
				for j := range p {
					p[j] = byte(len(label) + i + j + 1)
				}
				es[i] = &payload{data: p, stamp: true}
			}
			return es
		}
		appendTo := func(l *Log, es []Encoder) []AppendResult {
			res := make([]AppendResult, len(es))
			require.NoError(rt, l.AppendBatch(es, res))
			return res
		}
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			es := batch("common")
			appendTo(a, es)
			appendTo(b, es)
			require.Equal(rt, b.Written(), a.Written())
			if !rapid.Bool().Draw(rt, "suffix") {
				continue
			}
			mark := a.Written()
			var starts []int64
			for k := rapid.IntRange(1, 6).Draw(rt, "suffix batches"); k > 0; k-- {
				for _, r := range appendTo(a, batch("suffix")) {
					starts = append(starts, r.Offset)
				}
			}
			if rapid.Bool().Draw(rt, "cut inside first") {
				at := rapid.SampledFrom(starts).Draw(rt, "inner cut")
				require.NoError(rt, a.TruncateFrom(at, nil))
				require.Equal(rt, at, a.Written())
			}
			require.NoError(rt, a.TruncateFrom(mark, nil))
			require.Equal(rt, mark, a.Written())
			require.LessOrEqual(rt, a.Flushed(), mark)
			if rapid.Bool().Draw(rt, "reopen") {
				require.NoError(rt, a.Close())
				a, err = Open(Options{Dir: dirA, SegmentSize: segSize, FlushMode: mode})
				require.NoError(rt, err)
				require.Equal(rt, mark, a.Written(), "reopened at the cut")
			}
		}
		end := a.Written()
		require.NoError(rt, a.Close())
		require.NoError(rt, b.Close())
		requireSameSegments(rt, dirA, dirB, end)
		a, err = Open(Options{Dir: dirA, SegmentSize: segSize, FlushMode: mode})
		require.NoError(rt, err)
		require.Equal(rt, end, a.Written())
		b, err = Open(Options{Dir: dirB, SegmentSize: segSize, FlushMode: mode})
		require.NoError(rt, err)
	})
}

// requireSameSegments: the two directories hold the same segment files
// with the same bytes, up to the segment that holds end (a log makes the
// next segment ahead of its writes, in the background: one may have it
// when the other does not yet).
func requireSameSegments(t require.TestingT, dirA, dirB string, end int64) {
	list := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			if base, ok := parseSegmentName(e.Name()); ok && (base < end || base == 0) {
				names = append(names, e.Name())
			}
		}
		return names
	}
	names := list(dirA)
	require.Equal(t, list(dirB), names)
	for _, name := range names {
		x, err := os.ReadFile(filepath.Join(dirA, name))
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(dirB, name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(x, y), "segment %s differs", name)
	}
}

// TestTruncateFromRefuses: a cut that is not a frame start, outside the
// log, or on a closed log is refused and changes nothing.
func TestTruncateFromRefuses(t *testing.T) {
	t.Parallel()
	l := mustOpen(t, testOptions(t, 4<<10, FlushSync))
	res := make([]AppendResult, 3)
	require.NoError(t, l.AppendBatch([]Encoder{bytesPayload(make([]byte, 100)), bytesPayload(make([]byte, 100)), bytesPayload(make([]byte, 100))}, res))
	end := l.Written()
	for _, at := range []int64{res[1].Offset + 1, end + 1, -1} {
		require.ErrorIs(t, l.TruncateFrom(at, nil), ErrInvalidArgument, "at %d", at)
		require.Equal(t, end, l.Written())
	}
	require.NoError(t, l.TruncateFrom(res[1].Offset, nil))
	stream, err := l.ReadFrameRange(0, res[1].Offset, nil)
	require.NoError(t, err)
	require.Len(t, stream, int(res[0].Size))
	_, err = l.ReadFrameRange(0, end, nil)
	require.True(t, errors.Is(err, ErrNoData), "%v", err)
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.TruncateFrom(0, nil), ErrClosed)
}

// TestStreamExtent: the extent of a stream cut by ReadFrames is the range
// it was cut from, Blank frames included; a stream whose frames do not
// follow one another is refused.
func TestStreamExtent(t *testing.T) {
	t.Parallel()
	l := mustOpen(t, testOptions(t, 1000, FlushSync))
	res := make([]AppendResult, 12)
	es := make([]Encoder, 12)
	for i := range es {
		es[i] = bytesPayload(make([]byte, 150+i*10))
	}
	require.NoError(t, l.AppendBatch(es, res))
	for from := 0; from < len(res); from++ {
		for to := from + 1; to <= len(res); to++ {
			stream, err := l.ReadFrameRange(res[from].Offset, res[to-1].end(), nil)
			require.NoError(t, err)
			start, end, err := StreamExtent(stream)
			require.NoError(t, err)
			require.Equal(t, res[from].Offset, start)
			require.Equal(t, res[to-1].end(), end)
		}
	}
	one, err := l.ReadFrameRange(res[0].Offset, res[0].end(), nil)
	require.NoError(t, err)
	three, err := l.ReadFrameRange(res[2].Offset, res[2].end(), nil)
	require.NoError(t, err)
	_, _, err = StreamExtent(append(one, three...))
	require.ErrorIs(t, err, ErrCorrupt)
	_, _, err = StreamExtent(one[:HeaderSize-1])
	require.ErrorIs(t, err, ErrCorrupt)
}
