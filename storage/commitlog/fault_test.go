package commitlog

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mqgate/mqgate/storage/internal/vfs"
	"github.com/stretchr/testify/require"
)

// failSwitch is an injector that fails one kind of operation while on.
type failSwitch struct {
	op    vfs.Op
	on    atomic.Bool
	calls atomic.Int64 // failed calls
}

func (f *failSwitch) MaybeError(op vfs.Op, path string) error {
	if op == f.op && f.on.Load() {
		f.calls.Add(1)
		return vfs.ErrInjected
	}
	return nil
}

func faultyOptions(t *testing.T, segSize int64, mode FlushMode, op vfs.Op) (Options, *failSwitch) {
	t.Helper()
	sw := &failSwitch{op: op}
	opts := testOptions(t, segSize, mode)
	opts.FS = vfs.NewErrorFS(vfs.OS(), sw)
	return opts, sw
}

// TestFailedSyncIsFatal: a failing msync makes the waiting appends and all
// later ones fail with ErrReadOnly, even once the disk "recovers"
// (fsyncgate: never retry and report success).
func TestFailedSyncIsFatal(t *testing.T) {
	t.Parallel()
	for _, ss := range segmentSizeTests {
		t.Run(ss.name, func(t *testing.T) {
			t.Parallel()
			opts, sw := faultyOptions(t, ss.size, FlushSync, vfs.OpMsync)
			l, err := Open(opts)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(14, uint64(ss.size)))
			acked := appendRandom(t, l, rng, 10)
			flushedBefore := l.Flushed()

			sw.on.Store(true)
			const appenders = 8
			errs := make([]error, appenders)
			var wg sync.WaitGroup
			for i := range appenders {
				wg.Go(func() {
					_, errs[i] = l.Append(bytesPayload(randomPayload(rand.New(rand.NewPCG(uint64(i), 1)), 30)))
				})
			}
			wg.Wait()
			for i, err := range errs {
				require.ErrorIs(t, err, ErrReadOnly, "appender %d", i)
			}
			require.ErrorIs(t, l.Err(), ErrReadOnly)
			require.ErrorIs(t, l.Err(), vfs.ErrInjected, "Err reports the cause")
			require.Equal(t, flushedBefore, l.Flushed(), "Flushed never covers the failed range")
			require.Positive(t, sw.calls.Load())

			sw.on.Store(false) // the disk "recovers": the log must stay dead
			_, err = l.Append(bytesPayload([]byte("later")))
			require.ErrorIs(t, err, ErrReadOnly)
			require.ErrorIs(t, l.AppendBatch([]Encoder{bytesPayload(nil)}, make([]AppendResult, 1)), ErrReadOnly)
			require.ErrorIs(t, l.Flush(), ErrReadOnly)
			require.Equal(t, flushedBefore, l.Flushed())
			require.Equal(t, int64(1), l.Stats().FlushFailures)

			// Reads still work (the store stays readable), Close reports the failure.
			requireRecords(t, l, acked)
			require.ErrorIs(t, l.Close(), ErrReadOnly)

			// A restart re-reads the files: every acknowledged record is there.
			opts.FS, opts.HighWater = nil, flushedBefore
			requireRecords(t, mustOpen(t, opts), acked)
		})
	}
}

// TestFailedBackgroundFlushIsFatal: in FlushAsync a failed periodic flush
// makes later appends fail.
func TestFailedBackgroundFlushIsFatal(t *testing.T) {
	t.Parallel()
	opts, sw := faultyOptions(t, 4096, FlushAsync, vfs.OpMsync)
	opts.FlushInterval = 1 << 40 // the test drives the flush
	l := mustOpen(t, opts)
	_, err := l.Append(bytesPayload([]byte("buffered")))
	require.NoError(t, err)
	sw.on.Store(true)
	require.ErrorIs(t, l.Flush(), ErrReadOnly)
	sw.on.Store(false)
	_, err = l.Append(bytesPayload([]byte("refused")))
	require.ErrorIs(t, err, ErrReadOnly)
	require.Error(t, l.Err())
	require.Zero(t, l.Flushed())
}

// TestFailedSegmentCreationIsFatal: when the next segment cannot be
// preallocated, the append that needs it and all later ones fail.
func TestFailedSegmentCreationIsFatal(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			const seg = 4096
			opts, sw := faultyOptions(t, seg, mode, vfs.OpPreallocate)
			l := mustOpen(t, opts)
			sw.on.Store(true)
			full := make([]byte, seg-HeaderSize) // one record per segment
			var err error
			for i := 0; i < 3 && err == nil; i++ {
				_, err = l.Append(bytesPayload(full))
			}
			require.ErrorIs(t, err, ErrReadOnly)
			require.ErrorIs(t, l.Err(), vfs.ErrInjected)
			sw.on.Store(false)
			_, err = l.Append(bytesPayload([]byte("small")))
			require.ErrorIs(t, err, ErrReadOnly)
		})
	}
}

// TestOpenFailures: errors while opening are returned, not hidden, and
// leave nothing running.
func TestOpenFailures(t *testing.T) {
	t.Parallel()
	for _, op := range []vfs.Op{vfs.OpPreallocate, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir, vfs.OpMap, vfs.OpReadDir} {
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			opts, sw := faultyOptions(t, 4096, FlushSync, op)
			sw.on.Store(true)
			_, err := Open(opts)
			require.ErrorIs(t, err, vfs.ErrInjected)
		})
	}
	t.Run("MapExistingSegment", func(t *testing.T) {
		t.Parallel()
		opts, sw := faultyOptions(t, 4096, FlushSync, vfs.OpMap)
		l, err := Open(opts)
		require.NoError(t, err)
		appendRandom(t, l, rand.New(rand.NewPCG(15, 15)), 5)
		require.NoError(t, l.Close())
		sw.on.Store(true)
		_, err = Open(opts)
		require.True(t, errors.Is(err, vfs.ErrInjected), err)
	})
}
