package commitlog

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAppendReadRoundTrip(t *testing.T) {
	t.Parallel()
	forEachConfig(t, func(t *testing.T, segSize int64, mode FlushMode) {
		l := mustOpen(t, testOptions(t, segSize, mode))
		rng := rand.New(rand.NewPCG(1, uint64(segSize)))
		w := appendRandom(t, l, rng, 60)

		require.Equal(t, w.results[len(w.results)-1].end(), l.Written(), describe(w))
		if mode == FlushSync {
			require.Equal(t, l.Written(), l.Flushed())
		}
		requireLogHolds(t, l, w)
		for i, r := range w.results {
			rec, err := l.Read(r.Offset, nil)
			require.NoError(t, err)
			requirePayload(t, w.payloads[i], rec.Payload)
		}
		require.Greater(t, len(l.Segments()), 1, "the sizes must force rolls")
	})
}

func TestAppendStampsOffset(t *testing.T) {
	t.Parallel()
	l := mustOpen(t, testOptions(t, 256, FlushSync))
	for range 10 {
		p := &payload{data: make([]byte, 100), stamp: true}
		res, err := l.Append(p)
		require.NoError(t, err)
		rec, err := l.Read(res.Offset, nil)
		require.NoError(t, err)
		require.Equal(t, uint64(res.Offset), binary.BigEndian.Uint64(rec.Payload))
	}
}

func TestAppendBatch(t *testing.T) {
	t.Parallel()
	forEachConfig(t, func(t *testing.T, segSize int64, mode FlushMode) {
		l := mustOpen(t, testOptions(t, segSize, mode))
		rng := rand.New(rand.NewPCG(2, uint64(segSize)))
		var w written
		for range 10 {
			n := rng.IntN(5) + 1
			es := make([]Encoder, n)
			res := make([]AppendResult, n)
			for i := range es {
				p := randomPayload(rng, rng.IntN(maxTestPayload(segSize)+1))
				es[i] = bytesPayload(p)
				w.payloads = append(w.payloads, p)
			}
			require.NoError(t, l.AppendBatch(es, res))
			if mode == FlushSync {
				require.GreaterOrEqual(t, l.Flushed(), res[n-1].end())
			}
			w.results = append(w.results, res...)
		}
		requireLogHolds(t, l, w)
	})
}

func TestAppendBatchErrors(t *testing.T) {
	t.Parallel()
	t.Run("ErrRecordTooLargeWritesNothing", func(t *testing.T) {
		t.Parallel()
		l := mustOpen(t, testOptions(t, 256, FlushSync))
		es := []Encoder{bytesPayload(make([]byte, 10)), bytesPayload(make([]byte, 500))}
		err := l.AppendBatch(es, make([]AppendResult, 2))
		require.ErrorIs(t, err, ErrRecordTooLarge)
		require.Zero(t, l.Written())
	})
	t.Run("ErrInvalidArgumentShortResults", func(t *testing.T) {
		t.Parallel()
		l := mustOpen(t, testOptions(t, 256, FlushSync))
		err := l.AppendBatch([]Encoder{bytesPayload(nil)}, nil)
		require.ErrorIs(t, err, ErrInvalidArgument)
	})
	t.Run("EmptyOK", func(t *testing.T) {
		t.Parallel()
		l := mustOpen(t, testOptions(t, 256, FlushSync))
		require.NoError(t, l.AppendBatch(nil, nil))
	})
}

// TestSegmentBoundaries places records exactly at the edges of the
// placement invariant in a 4 KiB segment.
func TestSegmentBoundaries(t *testing.T) {
	t.Parallel()
	const seg = 4096
	frame := func(size int) *payload {
		return bytesPayload(randomPayload(rand.New(rand.NewPCG(3, uint64(size))), size-HeaderSize))
	}
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			t.Run("FillsSegmentExactly", func(t *testing.T) {
				t.Parallel()
				l := mustOpen(t, testOptions(t, seg, mode))
				r1, err := l.Append(frame(1000))
				require.NoError(t, err)
				r2, err := l.Append(frame(seg - 1000))
				require.NoError(t, err)
				require.Equal(t, int64(1000), r2.Offset)
				require.Equal(t, int64(seg), r2.end())
				r3, err := l.Append(frame(100))
				require.NoError(t, err)
				require.Equal(t, int64(seg), r3.Offset, "next record starts the next segment, no blank")
				_, _, err = l.Next(r1.Offset, nil)
				require.NoError(t, err)
				rec, next, err := l.Next(r2.Offset, nil)
				require.NoError(t, err)
				require.Equal(t, r2.Offset, rec.Offset)
				require.Equal(t, int64(seg), next)
				rec, _, err = l.Next(next, nil)
				require.NoError(t, err)
				require.Equal(t, r3.Offset, rec.Offset)
			})
			for left := 1; left < HeaderSize; left++ {
				t.Run("WouldLeave"+strconv.Itoa(left)+"BytesGoesToNextSegment", func(t *testing.T) {
					t.Parallel()
					l := mustOpen(t, testOptions(t, seg, mode))
					_, err := l.Append(frame(1000))
					require.NoError(t, err)
					r2, err := l.Append(frame(seg - 1000 - left))
					require.NoError(t, err)
					require.Equal(t, int64(seg), r2.Offset)
					_, err = l.Read(1000, nil)
					require.ErrorIs(t, err, ErrEndOfSegment)
					rec, next, err := l.Next(1000, nil)
					require.NoError(t, err)
					require.Equal(t, r2.Offset, rec.Offset)
					require.Equal(t, r2.end(), next)
				})
			}
			t.Run("LeavesExactlyHeaderSize", func(t *testing.T) {
				t.Parallel()
				l := mustOpen(t, testOptions(t, seg, mode))
				_, err := l.Append(frame(1000))
				require.NoError(t, err)
				r2, err := l.Append(frame(seg - 1000 - HeaderSize))
				require.NoError(t, err)
				require.Equal(t, int64(1000), r2.Offset)
				r3, err := l.Append(frame(HeaderSize)) // empty payload fills the segment
				require.NoError(t, err)
				require.Equal(t, r2.end(), r3.Offset)
				require.Equal(t, int64(seg), r3.end())
				rec, err := l.Read(r3.Offset, nil)
				require.NoError(t, err)
				require.Empty(t, rec.Payload)
			})
			t.Run("NeedsBlank", func(t *testing.T) {
				t.Parallel()
				l := mustOpen(t, testOptions(t, seg, mode))
				_, err := l.Append(frame(3000))
				require.NoError(t, err)
				r2, err := l.Append(frame(2000))
				require.NoError(t, err)
				require.Equal(t, int64(seg), r2.Offset)
				_, err = l.Read(3000, nil)
				require.ErrorIs(t, err, ErrEndOfSegment)
				require.NoError(t, l.Close())
				l2 := mustOpen(t, Options{Dir: l.opts.Dir, SegmentSize: seg, FlushMode: mode})
				require.Equal(t, r2.end(), l2.Written())
				require.Equal(t, int64(2), l2.Recovery().Records)
			})
			t.Run("ErrRecordTooLarge", func(t *testing.T) {
				t.Parallel()
				l := mustOpen(t, testOptions(t, seg, mode))
				for _, size := range []int{seg + 1, seg - 1, seg - HeaderSize + 1, 1 << 20} {
					_, err := l.Append(frame(size))
					require.ErrorIs(t, err, ErrRecordTooLarge, "frame %d", size)
				}
				_, err := l.Append(frame(seg - HeaderSize))
				require.NoError(t, err)
				_, err = l.Append(frame(seg))
				require.NoError(t, err)
				require.Equal(t, int64(2*seg), l.Written())
			})
		})
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	t.Parallel()
	forEachConfig(t, func(t *testing.T, segSize int64, mode FlushMode) {
		opts := testOptions(t, segSize, mode)
		l, err := Open(opts)
		require.NoError(t, err)
		rng := rand.New(rand.NewPCG(4, uint64(segSize)))
		w := appendRandom(t, l, rng, 40)
		end := l.Written()
		require.NoError(t, l.Close())
		require.NoError(t, l.Close(), "Close is idempotent")

		// Only segment files remain: the unused preallocated one is gone.
		entries, err := os.ReadDir(opts.Dir)
		require.NoError(t, err)
		for _, e := range entries {
			_, ok := parseSegmentName(e.Name())
			require.True(t, ok, e.Name())
		}

		l2 := mustOpen(t, opts)
		rep := l2.Recovery()
		require.Equal(t, end, rep.End)
		require.Equal(t, int64(len(w.results)), rep.Records)
		require.False(t, rep.Torn)
		require.Equal(t, end, l2.Written())
		require.Equal(t, end, l2.Flushed())
		requireLogHolds(t, l2, w)

		// Appends continue where the log ended.
		more := appendRandom(t, l2, rng, 10)
		w.payloads = append(w.payloads, more.payloads...)
		w.results = append(w.results, more.results...)
		requireLogHolds(t, l2, w)
		require.NoError(t, l2.Close())

		// RecoverFrom = end trusts everything before it: nothing is scanned.
		opts.RecoverFrom, opts.HighWater = l2.Written(), l2.Written()
		l3 := mustOpen(t, opts)
		require.Equal(t, l2.Written(), l3.Written())
		require.Zero(t, l3.Recovery().Records)
		require.Equal(t, l2.Written(), l3.Recovery().ScannedFrom)
		requireLogHolds(t, l3, w)
	})
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	l := mustOpen(t, testOptions(t, 256, FlushSync))
	r1, err := l.Append(bytesPayload(make([]byte, 50)))
	require.NoError(t, err)
	t.Run("ErrNoData", func(t *testing.T) {
		_, err := l.Read(l.Written(), nil)
		require.ErrorIs(t, err, ErrNoData)
		_, _, err = l.Next(l.Written()+1000, nil)
		require.ErrorIs(t, err, ErrNoData)
	})
	t.Run("ErrOffsetTooSmall", func(t *testing.T) {
		_, err := l.Read(-1, nil)
		require.ErrorIs(t, err, ErrOffsetTooSmall)
	})
	t.Run("ErrCorruptNotAFrameStart", func(t *testing.T) {
		_, err := l.Read(r1.Offset+3, nil)
		require.ErrorIs(t, err, ErrCorrupt)
	})
	t.Run("ErrClosed", func(t *testing.T) {
		require.NoError(t, l.Close())
		_, err := l.Read(r1.Offset, nil)
		require.ErrorIs(t, err, ErrClosed)
		_, err = l.Append(bytesPayload(nil))
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, l.Flush(), ErrClosed)
		_, err = l.DeleteSegmentsBelow(1 << 40)
		require.ErrorIs(t, err, ErrClosed)
	})
}

func TestReadReusesBuffer(t *testing.T) {
	l := mustOpen(t, testOptions(t, 4096, FlushAsync))
	res, err := l.Append(bytesPayload(make([]byte, 100)))
	require.NoError(t, err)
	buf := make([]byte, 0, 512)
	allocs := testing.AllocsPerRun(100, func() {
		rec, err := l.Read(res.Offset, buf)
		if err != nil || len(rec.Payload) != 100 {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

func TestAppendDoesNotAllocate(t *testing.T) {
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			l := mustOpen(t, testOptions(t, 1<<20, mode))
			p := bytesPayload(make([]byte, 100))
			allocs := testing.AllocsPerRun(200, func() {
				if _, err := l.Append(p); err != nil {
					t.Fatal(err)
				}
			})
			require.Zero(t, allocs)
		})
	}
}

func TestNotify(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			l := mustOpen(t, testOptions(t, 4096, mode))
			select {
			case <-l.Notify():
				t.Fatal("nudge before any append")
			default:
			}
			_, err := l.Append(bytesPayload([]byte("x")))
			require.NoError(t, err)
			if mode == FlushAsync {
				<-l.Notify() // Written advanced
				return
			}
			<-l.Notify() // Flushed advanced (the append returned after the flush)
			require.Equal(t, l.Written(), l.Flushed())
		})
	}
}

func TestFlushModeParse(t *testing.T) {
	t.Parallel()
	for _, m := range flushModes {
		got, err := ParseFlushMode(m.String())
		require.NoError(t, err)
		require.Equal(t, m, got)
	}
	got, err := ParseFlushMode(" ASYNC ")
	require.NoError(t, err)
	require.Equal(t, FlushAsync, got)
	_, err = ParseFlushMode("sometimes")
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, o := range map[string]Options{
		"NoDir":           {},
		"SegmentTooSmall": {Dir: dir, SegmentSize: MinSegmentSize - 1},
		"SegmentTooLarge": {Dir: dir, SegmentSize: MaxSegmentSize + 1},
		"BadFlushMode":    {Dir: dir, FlushMode: 7},
		"NegativeMark":    {Dir: dir, HighWater: -1},
	} {
		require.ErrorIs(t, o.Validate(), ErrInvalidArgument, name)
		_, err := Open(o)
		require.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	require.NoError(t, Options{Dir: dir}.Validate())
}

func TestOpenNewLogLayout(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 4096, FlushSync)
	l := mustOpen(t, opts)
	require.Equal(t, []SegmentInfo{{Base: 0, Size: 4096, Allocated: 4096}}, stripTimes(t, l.Segments()))
	st, err := os.Stat(filepath.Join(opts.Dir, "00000000000000000000"))
	require.NoError(t, err)
	require.Equal(t, int64(4096), st.Size())
	require.Equal(t, FlushSync, l.FlushMode())
	require.Equal(t, int64(4096), l.SegmentSize())
	require.NoError(t, l.Err())
}

func stripTimes(t *testing.T, infos []SegmentInfo) []SegmentInfo {
	t.Helper()
	for i := range infos {
		require.False(t, infos[i].ModTime.IsZero())
		infos[i].ModTime = time.Time{}
	}
	return infos
}

type panicEncoder struct{}

func (panicEncoder) Len() int             { return 10 }
func (panicEncoder) Encode([]byte, int64) { panic("encoder bug") }

// TestEncoderPanicLeavesLogUsable: a panicking Encoder (recovered by an
// HTTP middleware, say) must not leave the append lock held or publish a
// half-written frame.
func TestEncoderPanicLeavesLogUsable(t *testing.T) {
	t.Parallel()
	l := mustOpen(t, testOptions(t, 256, FlushSync))
	r1, err := l.Append(bytesPayload([]byte("before")))
	require.NoError(t, err)
	require.Panics(t, func() { _, _ = l.Append(panicEncoder{}) })
	require.Equal(t, r1.end(), l.Written())
	r2, err := l.Append(bytesPayload([]byte("after")))
	require.NoError(t, err)
	requireLogHolds(t, l, written{payloads: [][]byte{[]byte("before"), []byte("after")}, results: []AppendResult{r1, r2}})
}
