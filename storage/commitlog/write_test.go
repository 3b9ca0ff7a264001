package commitlog

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// TestZeroAhead: the appender keeps the active segment written with zeros
// ZeroAhead bytes past its records (a chunk at a time), never over a
// record; the zeros are not mistaken for data by recovery, which
// reopens at exactly the written end with nothing cut off.
func TestZeroAhead(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 8<<20, FlushSync)
	l := mustOpen(t, opts)
	rng := rand.New(rand.NewPCG(31, 7))
	var w written
	for range 3000 { // ~3 MiB: several chunks of zeros
		p := randomPayload(rng, 1000+rng.IntN(200))
		res, err := l.Append(bytesPayload(p))
		require.NoError(t, err)
		w.payloads, w.results = append(w.payloads, p), append(w.results, res)

		l.mu.Lock()
		rel, zeroed := l.writePos-l.active.base, l.active.zeroed
		l.mu.Unlock()
		require.GreaterOrEqual(t, zeroed-rel, int64(ZeroAhead/2), "zeros ahead of the records at %d", l.writePos)
		require.LessOrEqual(t, zeroed-rel, int64(ZeroAhead))
	}
	end := l.Written()
	path, base := segmentPath(t, l, end)
	rel := end - base
	require.NoError(t, l.Close())

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, -1, firstNonZero(b[rel:]), "nothing but zeros after the last record")

	l2 := mustOpen(t, opts)
	rep := l2.Recovery()
	require.Equal(t, end, rep.End)
	require.False(t, rep.Torn, rep.Reason)
	require.Empty(t, brokenFiles(t, opts.Dir))
	requireLogHolds(t, l2, w)
}

// TestFailedWriteIsFatal: a failing pwrite of a record makes the write
// path dead (the record's bytes may be half in the page cache), the
// append reports it, later ones are refused, and a restart finds every
// record acknowledged before.
func TestFailedWriteIsFatal(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			opts, sw := faultyOptions(t, 4096, mode, vfs.OpWrite)
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
		})
	}
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
