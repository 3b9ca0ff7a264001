package commitlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// TestFailedWriteIsFatal: in FlushSync (where frames are pwritten; see
// "Writes" in doc.go) a failing pwrite of a record makes the write path
// dead (the record's bytes may be half in the page cache), the append
// reports it, later ones are refused, and a restart finds every record
// acknowledged before.
func TestFailedWriteIsFatal(t *testing.T) {
	t.Parallel()
	opts, sw := faultyOptions(t, 4096, FlushSync, vfs.OpWrite)
	l := mustOpen(t, opts)
	acked := appendRandom(t, l, rand.New(rand.NewPCG(32, 1)), 20)
	require.NoError(t, l.Flush())

	sw.on.Store(true)
	_, err := l.Append(bytesPayload([]byte("refused")))
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, err, vfs.ErrInjected)
	sw.on.Store(false)
	_, err = l.Append(bytesPayload([]byte("later")))
	require.ErrorIs(t, err, ErrReadOnly, "the write path stays dead")
	requireRecords(t, l, acked)
	_ = l.Close()

	opts.FS = nil
	l2 := mustOpen(t, opts)
	requireLogHolds(t, l2, acked)
}

// TestEncoderPanicInBatch: a batch whose second Encoder panics writes
// nothing (the first record was only staged), leaves no gap, and the log
// takes the next append right after the last record before the batch.
func TestEncoderPanicInBatch(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 4096, FlushSync)
	l := mustOpen(t, opts)
	r1, err := l.Append(bytesPayload([]byte("before")))
	require.NoError(t, err)
	require.Panics(t, func() {
		_ = l.AppendBatch([]Encoder{bytesPayload([]byte("staged")), panicEncoder{}}, make([]AppendResult, 2))
	})
	require.Equal(t, r1.end(), l.Written())
	r2, err := l.Append(bytesPayload([]byte("after")))
	require.NoError(t, err)
	require.Equal(t, r1.end(), r2.Offset, "no gap where the batch was staged")
	want := written{payloads: [][]byte{[]byte("before"), []byte("after")}, results: []AppendResult{r1, r2}}
	requireLogHolds(t, l, want)
	require.NoError(t, l.Close())
	requireLogHolds(t, mustOpen(t, opts), want)
}

// TestSealedSegmentsCloseTheirFiles: the log keeps open only the files of
// segments it still writes or flushes, so a log of many small segments
// does not hold one descriptor per segment.
func TestSealedSegmentsCloseTheirFiles(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			opts := testOptions(t, 1000, mode)
			l := mustOpen(t, opts)
			appendRandom(t, l, rand.New(rand.NewPCG(33, 3)), 400) // hundreds of segments
			require.NoError(t, l.Flush())
			require.Greater(t, len(l.Segments()), 100)
			require.LessOrEqual(t, openFilesIn(t, opts.Dir), 4, "the active segment and those reserved ahead")
			require.NoError(t, l.Close())

			l2 := mustOpen(t, opts)
			require.LessOrEqual(t, openFilesIn(t, opts.Dir), 4, "after recovery too")
			_, err := l2.Append(bytesPayload([]byte("more")))
			require.NoError(t, err)
		})
	}
}

// openFilesIn counts this process's descriptors open on files in dir.
func openFilesIn(t *testing.T, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}

// TestReadersSeeWritesBeforeTheFlush: records written with pwrite are
// readable through the mapping as soon as Written covers them, before
// any flush (the page cache is shared).
func TestReadersSeeWritesBeforeTheFlush(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 1<<16, FlushAsync)
	opts.FlushInterval = 1 << 40 // no background flush
	l := mustOpen(t, opts)
	p := bytes.Repeat([]byte("visible "), 100)
	res, err := l.Append(bytesPayload(p))
	require.NoError(t, err)
	require.Zero(t, l.Flushed())
	rec, err := l.Read(res.Offset, nil)
	require.NoError(t, err)
	require.Equal(t, p, rec.Payload)
}

// TestWaitingAppendsShareOnePwrite: in FlushSync the appends that arrive
// while a flush runs stay staged — not written, not visible (Written does
// not cover them) — and the next flush writes them all with one pwrite
// before its fdatasync; each is acknowledged once that fdatasync is done,
// and all of them are there after a restart.
func TestWaitingAppendsShareOnePwrite(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 1<<20, FlushSync)
	opts.ZeroAhead = -1 // count the frames' writes only
	var writes, syncs atomic.Int64
	hold, release := make(chan struct{}, 1), make(chan struct{})
	segment := func(path string) bool { // a segment's file: 20 digits, no .tmp
		name := filepath.Base(path)
		return len(name) == 20 && strings.Trim(name, "0123456789") == ""
	}
	opts.FS = vfs.NewErrorFS(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		switch {
		case op == vfs.OpWrite && segment(path):
			writes.Add(1)
		case op == vfs.OpSync && segment(path) && syncs.Add(1) == 1:
			hold <- struct{}{}
			<-release // the first flush waits until the test lets it go
		}
		return nil
	}))
	l := mustOpen(t, opts)
	var freed sync.Once
	free := func() { freed.Do(func() { close(release) }) }
	t.Cleanup(free) // before the log's Close, should the test fail early

	first := make(chan error, 1)
	go func() {
		_, err := l.Append(bytesPayload([]byte("first")))
		first <- err
	}()
	<-hold // the first append's flush: written, fdatasync under way
	require.Equal(t, int64(1), writes.Load())
	firstEnd := l.Written()

	const later = 16
	var wg sync.WaitGroup
	errs := make([]error, later)
	for i := range later {
		wg.Go(func() {
			_, errs[i] = l.Append(bytesPayload([]byte(fmt.Sprintf("later %02d", i))))
		})
	}
	require.Eventually(t, func() bool { return l.Stats().Appends == 1+later }, 10*time.Second, time.Millisecond)
	require.Equal(t, int64(1), writes.Load(), "the appends during the flush are staged, not written")
	require.Equal(t, firstEnd, l.Written(), "nor visible")

	free()
	require.NoError(t, <-first)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "append %d", i)
	}
	require.Equal(t, int64(2), writes.Load(), "one pwrite for the %d appends the second flush covers", later)
	require.Equal(t, l.Written(), l.Flushed())
	require.NoError(t, l.Close())

	opts.FS = nil
	l2 := mustOpen(t, opts)
	got := map[string]bool{}
	for off := l2.MinOffset(); off < l2.Written(); {
		rec, next, err := l2.Next(off, nil)
		require.NoError(t, err)
		got[string(rec.Payload)] = true
		off = next
	}
	require.Len(t, got, 1+later)
	require.True(t, got["first"])
	require.True(t, got["later 15"])
}

// TestZeroAheadWhileFlushesAreSmall: while flushes are small, FlushSync
// keeps zeros written ahead of the last frame (at least half of ZeroAhead,
// never past the segment), frames written over them read back, and a
// restart finds every record; once flushes grow past zeroAheadMaxFlush no
// more zeros are written.
func TestZeroAheadWhileFlushesAreSmall(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 256<<10, FlushSync)
	opts.ZeroAhead = 64 << 10
	l := mustOpen(t, opts)
	ahead := func() (pos, zeroed int64, seg *segment) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.writePos, l.zeroedTo, l.active
	}
	var all written
	rng := rand.New(rand.NewPCG(41, 1))
	for i := range 300 { // about three segments of small flushes
		p := randomPayload(rng, 1+rng.IntN(2000))
		res, err := l.Append(bytesPayload(p))
		require.NoError(t, err)
		all.payloads, all.results = append(all.payloads, p), append(all.results, res)
		pos, zeroed, seg := ahead()
		require.GreaterOrEqual(t, zeroed, min(pos+opts.ZeroAhead/2, seg.end()), "append %d", i)
		require.LessOrEqual(t, zeroed, seg.end(), "never past the segment")
		require.Equal(t, make([]byte, zeroed-pos), seg.data[pos-seg.base:zeroed-seg.base], "zeros ahead of the frames")
	}
	requireLogHolds(t, l, all)

	// Big flushes: the average passes zeroAheadMaxFlush and the zeros stop.
	big := make([]Encoder, 40)
	for i := range big {
		big[i] = bytesPayload(randomPayload(rng, 4000))
	}
	for range 8 {
		require.NoError(t, l.AppendBatch(big, make([]AppendResult, len(big))))
	}
	l.syncMu.Lock()
	flushBytes := l.flushBytes
	l.syncMu.Unlock()
	require.GreaterOrEqual(t, flushBytes, int64(zeroAheadMaxFlush))
	pos, zeroed, _ := ahead()
	require.LessOrEqual(t, zeroed, pos, "no zeros written ahead of big flushes")
	require.NoError(t, l.Close())
	l2 := mustOpen(t, opts)
	n := 0
	for off := l2.MinOffset(); off < l2.Written(); n++ {
		_, next, err := l2.Next(off, nil)
		require.NoError(t, err)
		off = next
	}
	require.Equal(t, 300+8*len(big), n)
}

// TestFlushDurationsAreCounted: every successful flush lands in one bucket
// of Stats.FlushCounts, so the buckets sum to Flushes; a duration on a
// bucket's bound counts in that bucket, one past the last in the last.
func TestFlushDurationsAreCounted(t *testing.T) {
	l := mustOpen(t, testOptions(t, 1<<20, FlushSync))
	for i := range 20 {
		_, err := l.Append(bytesPayload([]byte(fmt.Sprintf("record %d", i))))
		require.NoError(t, err)
	}
	st := l.Stats()
	var sum int64
	for _, n := range st.FlushCounts {
		sum += n
	}
	require.Positive(t, st.Flushes)
	require.Equal(t, st.Flushes, sum)

	require.Equal(t, 0, flushBucket(0))
	require.Equal(t, 0, flushBucket(FlushBuckets[0]))
	require.Equal(t, 1, flushBucket(FlushBuckets[0]+1))
	last := FlushBuckets[len(FlushBuckets)-1]
	require.Equal(t, len(FlushBuckets)-1, flushBucket(last))
	require.Equal(t, len(FlushBuckets), flushBucket(last+1))
}

// TestFlushWakesOnlyTheAppendsItCovers: a flush wakes the waiters whose
// frames it made durable and leaves the later ones queued, unwoken, for
// the next flush; a failure or Close wakes every one.
func TestFlushWakesOnlyTheAppendsItCovers(t *testing.T) {
	l := mustOpen(t, testOptions(t, 1<<20, FlushSync))
	queue := func(ends ...int64) []*flushWaiter {
		var ws []*flushWaiter
		for _, end := range ends {
			w := &flushWaiter{end: end, wake: make(chan struct{}, 1)}
			ws = append(ws, w)
			l.waiters = append(l.waiters, w)
		}
		return ws
	}
	woken := func(w *flushWaiter) bool {
		select {
		case <-w.wake:
			return true
		default:
			return false
		}
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	ws := queue(30, 10, 20, 40)
	l.wakeWaitersLocked(20)
	require.False(t, woken(ws[0]))
	require.True(t, woken(ws[1]))
	require.True(t, woken(ws[2]))
	require.False(t, woken(ws[3]))
	require.Equal(t, []*flushWaiter{ws[0], ws[3]}, l.waiters)
	l.wakeWaitersLocked(-1)
	require.True(t, woken(ws[0]))
	require.True(t, woken(ws[3]))
	require.Empty(t, l.waiters)
}
