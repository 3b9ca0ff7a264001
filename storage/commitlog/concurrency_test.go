package commitlog

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConcurrentAppends has many goroutines append at once while a reader
// follows the log. Results must be distinct, contiguous and readable, and
// in FlushSync no Append may return before Flushed covers its record.
func TestConcurrentAppends(t *testing.T) {
	t.Parallel()
	forEachConfig(t, func(t *testing.T, segSize int64, mode FlushMode) {
		const writers, perWriter = 12, 40
		l := mustOpen(t, testOptions(t, segSize, mode))
		type appended struct {
			res     AppendResult
			payload []byte
		}
		results := make([][]appended, writers)
		var wg sync.WaitGroup
		var early atomic.Int64 // appends that returned before being flushed
		for g := range writers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), uint64(segSize)))
				for i := range perWriter {
					p := randomPayload(rng, 8+rng.IntN(maxTestPayload(segSize)-8))
					binary.BigEndian.PutUint32(p, uint32(g))
					binary.BigEndian.PutUint32(p[4:], uint32(i))
					var res AppendResult
					var err error
					if i%5 == 4 {
						rs := make([]AppendResult, 1)
						err = l.AppendBatch([]Encoder{bytesPayload(p)}, rs)
						res = rs[0]
					} else {
						res, err = l.Append(bytesPayload(p))
					}
					if err != nil {
						t.Error(err)
						return
					}
					if mode == FlushSync && l.Flushed() < res.end() {
						early.Add(1)
					}
					results[g] = append(results[g], appended{res, p})
				}
			})
		}
		// A reader follows the writers with Next, as the dispatcher does.
		total := writers * perWriter
		readerDone := make(chan int)
		go func() {
			seen, off := 0, int64(0)
			var buf []byte
			for seen < total {
				rec, next, err := l.Next(off, buf)
				if errors.Is(err, ErrNoData) {
					select { // wait for the writers, as the dispatcher does
					case <-l.Notify():
					case <-time.After(10 * time.Second):
						t.Errorf("no nudge while waiting at %d", off)
						readerDone <- seen
						return
					}
					continue
				}
				if err != nil {
					t.Error(err)
					break
				}
				buf, off = rec.Payload, next
				seen++
			}
			readerDone <- seen
		}()
		wg.Wait()
		require.Equal(t, total, <-readerDone)
		require.Zero(t, early.Load(), "appends returned before their flush")

		var all []appended
		for _, rs := range results {
			require.Len(t, rs, perWriter)
			all = append(all, rs...)
		}
		slices.SortFunc(all, func(a, b appended) int { return int(a.res.Offset - b.res.Offset) })
		var w written
		for _, a := range all {
			w.payloads, w.results = append(w.payloads, a.payload), append(w.results, a.res)
		}
		requireLogHolds(t, l, w) // distinct, contiguous (Next finds nothing between them), readable
	})
}

// TestDeleteSegmentsWhileReading deletes segments under readers that loop
// over Read: no crash (no SIGBUS from an unmapped segment), and reads of
// deleted ranges get ErrOffsetTooSmall.
func TestDeleteSegmentsWhileReading(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			opts := testOptions(t, 1000, mode)
			l := mustOpen(t, opts)
			w := appendRandom(t, l, rand.New(rand.NewPCG(12, 12)), 200)
			require.NoError(t, l.Flush())

			stop := make(chan struct{})
			var readers sync.WaitGroup
			var okReads, tooSmall atomic.Int64
			for r := range 4 {
				readers.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(r), 99))
					buf := make([]byte, 0, 4096)
					for {
						select {
						case <-stop:
							return
						default:
						}
						i := rng.IntN(len(w.results))
						rec, err := l.Read(w.results[i].Offset, buf)
						switch {
						case err == nil:
							if !slices.Equal(rec.Payload, w.payloads[i]) {
								t.Errorf("record %d: wrong payload", i)
								return
							}
							okReads.Add(1)
						case errors.Is(err, ErrOffsetTooSmall):
							if w.results[i].Offset >= l.MinOffset() {
								t.Errorf("record %d at %d: ErrOffsetTooSmall above MinOffset %d", i, w.results[i].Offset, l.MinOffset())
								return
							}
							tooSmall.Add(1)
						default:
							t.Errorf("record %d: %v", i, err)
							return
						}
					}
				})
			}
			deleted := 0
			for i := 10; i < len(w.results); i += 10 {
				n, err := l.DeleteSegmentsBelow(w.results[i].Offset)
				require.NoError(t, err)
				deleted += n
				// Keep appending meanwhile: the active segment moves on.
				_, err = l.Append(bytesPayload([]byte("more")))
				require.NoError(t, err)
			}
			// The deletions can outrun the readers (async appends do not
			// wait): let them run until both outcomes were seen.
			deadline := time.Now().Add(10 * time.Second)
			for (okReads.Load() == 0 || tooSmall.Load() == 0) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			close(stop)
			readers.Wait()
			require.Positive(t, deleted)
			require.Positive(t, okReads.Load())
			require.Positive(t, tooSmall.Load())

			// Removed from disk and from Segments; MinOffset is the oldest base.
			segs := l.Segments()
			require.Equal(t, segs[0].Base, l.MinOffset())
			entries, err := os.ReadDir(opts.Dir)
			require.NoError(t, err)
			for _, e := range entries {
				base, ok := parseSegmentName(e.Name())
				if ok {
					require.GreaterOrEqual(t, base, l.MinOffset(), e.Name())
				}
			}
			_, err = l.Read(0, nil)
			require.ErrorIs(t, err, ErrOffsetTooSmall)
			_, _, err = l.Next(0, nil)
			require.ErrorIs(t, err, ErrOffsetTooSmall)

			// Never the active segment, whatever the offset.
			_, err = l.DeleteSegmentsBelow(1 << 50)
			require.NoError(t, err)
			require.Len(t, l.Segments(), 1)
			_, err = l.Append(bytesPayload([]byte("still writable")))
			require.NoError(t, err)
			require.NoError(t, l.Close())

			// Reopen starts at the retained minimum.
			l2 := mustOpen(t, Options{Dir: opts.Dir, SegmentSize: 1000, FlushMode: mode})
			require.Equal(t, l.MinOffset(), l2.MinOffset())
			require.Equal(t, l.Written(), l2.Written())
			_, err = os.Stat(filepath.Join(opts.Dir, segmentName(0)))
			require.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

// TestDeleteNeverRemovesUnflushedData: in FlushAsync the offset is capped
// at Flushed.
func TestDeleteNeverRemovesUnflushedData(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 256, FlushAsync)
	opts.FlushInterval = 1 << 40 // only explicit flushes
	l := mustOpen(t, opts)
	appendRandom(t, l, rand.New(rand.NewPCG(13, 13)), 20)
	n, err := l.DeleteSegmentsBelow(l.Written())
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, l.Flush())
	n, err = l.DeleteSegmentsBelow(l.Written())
	require.NoError(t, err)
	require.Positive(t, n)
}

// TestScrubWhileAppending: the scrubber verifies the active segment up to
// the flushed offset while appends go on in both flush modes; it never
// reports a frame that is only being written (run with -race).
func TestScrubWhileAppending(t *testing.T) {
	t.Parallel()
	for _, mode := range []FlushMode{FlushSync, FlushAsync} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			o := testOptions(t, 16<<10, mode)
			o.FlushInterval = time.Millisecond
			l := mustOpen(t, o)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range 2000 {
					if _, err := l.Append(bytesPayload(make([]byte, 50+i%300))); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			pos, passes := l.MinOffset(), 0
			for running := true; running; {
				select {
				case <-done:
					running = false
				default:
				}
				r, err := l.Scrub(pos, 2000)
				require.NoError(t, err)
				require.Empty(t, r.Bad)
				require.LessOrEqual(t, r.Next, l.Flushed())
				pos = r.Next
				if r.Done {
					passes++
					pos = l.MinOffset()
				}
			}
			require.Positive(t, passes)
		})
	}
}

// TestGroupCommitWithOneP has many appenders wait for their flushes with
// GOMAXPROCS=1, as in a container limited to one CPU, and checks that the
// flushes are shared: each carries most of the appenders, not one or two.
// Without the flusher's gather, the first appender's kick ran the
// flusher ahead of the other runnable appenders (the P's runnext slot),
// and the flushes alternated between a group of one and the rest (about
// a third of the appenders a flush on average). It counts records per
// flush, not time, and every Append must still return only once flushed.
// Not parallel: GOMAXPROCS is the process's.
func TestGroupCommitWithOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const appenders, perAppender = 16, 40
	l := mustOpen(t, testOptions(t, 1<<20, FlushSync))
	var wg sync.WaitGroup
	var early atomic.Int64
	p := bytesPayload(make([]byte, 100))
	for range appenders {
		wg.Go(func() {
			for range perAppender {
				res, err := l.Append(p)
				if err != nil {
					t.Error(err)
					return
				}
				if l.Flushed() < res.end() {
					early.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, early.Load(), "appends returned before their flush")
	st := l.Stats()
	require.Equal(t, int64(appenders*perAppender), st.Appends)
	perFlush := float64(st.Appends) / float64(st.Flushes)
	t.Logf("%d appends, %d flushes: %.1f records a flush", st.Appends, st.Flushes, perFlush)
	require.GreaterOrEqual(t, perFlush, 0.75*appenders, "flushes of %d appenders with one P are not shared", appenders)

	// One appender left alone: the first flush waits for a group that
	// does not come back (at most one fdatasync's time), and the ones
	// after it do not wait at all.
	for range 20 {
		res, err := l.Append(p)
		require.NoError(t, err)
		require.GreaterOrEqual(t, l.Flushed(), res.end())
	}
	require.Equal(t, st.Flushes+20, l.Stats().Flushes, "a lone appender's appends are flushed one by one")
}
