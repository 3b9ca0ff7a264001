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
