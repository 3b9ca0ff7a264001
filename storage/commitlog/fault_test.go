package commitlog

import (
	"errors"
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

// failSwitch is an injector that fails one kind of operation while on.
type failSwitch struct {
	op    vfs.Op
	flush bool // fail only flushes: not the fdatasync of a segment being created
	on    atomic.Bool
	calls atomic.Int64 // failed calls
}

func (f *failSwitch) MaybeError(op vfs.Op, path string) error {
	if op == f.op && f.on.Load() && !(f.flush && creating(op, path)) {
		f.calls.Add(1)
		return vfs.ErrInjected
	}
	return nil
}

// creating reports an fdatasync of a segment being created (its .tmp
// file): a failure there is a failed creation (ErrNoSpace), not a failed
// flush, so the flush tests leave those alone.
func creating(op vfs.Op, path string) bool {
	return op == vfs.OpSync && strings.HasSuffix(path, tmpSuffix)
}

func faultyOptions(t *testing.T, segSize int64, mode FlushMode, op vfs.Op) (Options, *failSwitch) {
	t.Helper()
	sw := &failSwitch{op: op}
	opts := testOptions(t, segSize, mode)
	opts.FS = vfs.NewErrorFS(vfs.OS(), sw)
	return opts, sw
}

// TestFailedSyncIsFatal: a failing flush (fdatasync) makes the waiting appends and all
// later ones fail with ErrReadOnly, even once the disk "recovers"
// (fsyncgate: never retry and report success).
func TestFailedSyncIsFatal(t *testing.T) {
	t.Parallel()
	for _, ss := range segmentSizeTests {
		t.Run(ss.name, func(t *testing.T) {
			t.Parallel()
			opts, sw := faultyOptions(t, ss.size, FlushSync, vfs.OpSync)
			sw.flush = true
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
	opts, sw := faultyOptions(t, 4096, FlushAsync, vfs.OpSync)
	sw.flush = true
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

// TestFailedSegmentCreationIsRetryable: when the next segment cannot be
// created (fallocate failing, as on a full disk), the append that needs
// it is refused with ErrNoSpace before any byte is written, the write
// path stays alive, and appends resume by themselves once creation works
// again; nothing appended before is lost.
func TestFailedSegmentCreationIsRetryable(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			const seg = 4096
			opts, sw := faultyOptions(t, seg, mode, vfs.OpPreallocate)
			l := mustOpen(t, opts)
			sw.on.Store(true)
			full := make([]byte, seg-HeaderSize) // one record per segment
			for i := range full {
				full[i] = byte(i%251 + 1)
			}
			var acked written
			var err error
			for i := 0; i < 4 && err == nil; i++ {
				var res AppendResult
				if res, err = l.Append(bytesPayload(full)); err == nil {
					acked.payloads, acked.results = append(acked.payloads, full), append(acked.results, res)
				}
			}
			require.ErrorIs(t, err, ErrNoSpace)
			require.ErrorIs(t, err, vfs.ErrInjected, "the cause is wrapped")
			require.NotErrorIs(t, err, ErrReadOnly)
			require.NoError(t, l.Err(), "a failed creation does not kill the write path")
			written := l.Written()

			// Refused again while creation fails, batches included, and
			// nothing of a refused append is written.
			_, err = l.Append(bytesPayload([]byte("small")))
			require.ErrorIs(t, err, ErrNoSpace)
			require.ErrorIs(t, l.AppendBatch([]Encoder{bytesPayload([]byte("a")), bytesPayload(full)}, make([]AppendResult, 2)), ErrNoSpace)
			require.Equal(t, written, l.Written())
			require.GreaterOrEqual(t, l.Stats().AllocFailures, int64(3))
			require.NoError(t, l.Flush())

			sw.on.Store(false) // space returns
			for range 3 {
				res, err := l.Append(bytesPayload(full))
				require.NoError(t, err)
				acked.payloads, acked.results = append(acked.payloads, full), append(acked.results, res)
			}
			requireLogHolds(t, l, acked)
			require.NoError(t, l.Close())
			opts.FS = nil
			requireLogHolds(t, mustOpen(t, opts), acked)
		})
	}
}

// TestBatchReservesEverySegmentFirst: a batch that rolls into several
// segments creates all of them before writing its first record, so a
// failed creation refuses the batch whole, never half.
func TestBatchReservesEverySegmentFirst(t *testing.T) {
	t.Parallel()
	const seg = 4096
	opts, sw := faultyOptions(t, seg, FlushSync, vfs.OpPreallocate)
	l := mustOpen(t, opts)
	first, err := l.Append(bytesPayload([]byte("first")))
	require.NoError(t, err)
	// Once the allocator has prepared the second segment (requested at
	// Open), the third cannot be created.
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(opts.Dir, segmentName(seg)))
		return err == nil
	}, 10*time.Second, time.Millisecond)
	sw.on.Store(true)
	full := make([]byte, seg-HeaderSize)
	batch := []Encoder{bytesPayload([]byte("x")), bytesPayload(full), bytesPayload(full)}
	res := make([]AppendResult, len(batch))
	require.ErrorIs(t, l.AppendBatch(batch, res), ErrNoSpace)
	require.Equal(t, first.end(), l.Written(), "no record of the refused batch was written")
	require.NoError(t, l.Err())

	sw.on.Store(false)
	require.NoError(t, l.AppendBatch(batch, res))
	want := written{payloads: [][]byte{[]byte("first"), []byte("x"), full, full}, results: append([]AppendResult{first}, res...)}
	requireLogHolds(t, l, want)
	require.Equal(t, int64(2*seg), res[2].Offset, "the batch filled the segments in order")
	require.NoError(t, l.Close())
	opts.FS = nil
	requireLogHolds(t, mustOpen(t, opts), want)
}

// TestFailedDirSyncLeavesNoSegmentBehind: a creation that fails after the
// rename removes the file, so the retry can create it.
func TestFailedDirSyncLeavesNoSegmentBehind(t *testing.T) {
	t.Parallel()
	const seg = 4096
	opts := testOptions(t, seg, FlushSync)
	third := filepath.Join(opts.Dir, segmentName(2*seg))
	var failed atomic.Int64
	opts.FS = vfs.NewErrorFS(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		// Fail the directory fsync of the third segment's creation, once.
		if op != vfs.OpSyncDir {
			return nil
		}
		if _, err := os.Stat(third); err == nil && failed.CompareAndSwap(0, 1) {
			return vfs.ErrInjected
		}
		return nil
	}))
	l := mustOpen(t, opts)
	full := make([]byte, seg-HeaderSize)
	for range 2 {
		_, err := l.Append(bytesPayload(full))
		require.NoError(t, err)
	}
	_, err := l.Append(bytesPayload(full)) // needs the third segment
	require.ErrorIs(t, err, ErrNoSpace)
	require.Equal(t, int64(1), failed.Load())
	_, err = l.Append(bytesPayload(full))
	require.NoError(t, err, "the retry is not blocked by a leftover file")
	require.Len(t, l.Segments(), 3)
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

// gateSync is an injector that holds every flush (fdatasync of a segment)
// until the gate opens.
type gateSync struct {
	gate    chan struct{}
	entered chan struct{} // one send per flush that reached the gate
}

func (g *gateSync) MaybeError(op vfs.Op, path string) error {
	if op == vfs.OpSync && !creating(op, path) {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.gate
	}
	return nil
}

// TestAppendBatchNoWait: in FlushSync, AppendBatchNoWait returns before
// its flush (the record is readable and Written covers it, Flushed not
// yet, while the lazy flush it armed is held in fdatasync), and that flush
// then covers it without any other append; an append that waits
// afterwards covers it too.
func TestAppendBatchNoWait(t *testing.T) {
	t.Parallel()
	g := &gateSync{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	opts := testOptions(t, 1<<16, FlushSync)
	opts.FS = vfs.NewErrorFS(vfs.OS(), g)
	l := mustOpen(t, opts)
	t.Cleanup(func() {
		select {
		case <-g.gate:
		default:
			close(g.gate)
		}
	})

	res := make([]AppendResult, 2)
	require.NoError(t, l.AppendBatchNoWait([]Encoder{bytesPayload([]byte("lease-1")), bytesPayload([]byte("lease-2"))}, res))
	end := res[1].Offset + int64(res[1].Size)
	require.Equal(t, end, l.Written())
	rec, err := l.Read(res[1].Offset, nil)
	require.NoError(t, err)
	require.Equal(t, "lease-2", string(rec.Payload), "readable before its flush")
	select {
	case <-g.entered: // the kicked flusher is inside fdatasync, held by the gate
	case <-time.After(10 * time.Second):
		t.Fatal("AppendBatchNoWait did not lead to a flush")
	}
	require.Less(t, l.Flushed(), end, "the flush is still held")

	// A waiting append placed now is covered by the flush after the held one.
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(bytesPayload([]byte("ack")))
		done <- err
	}()
	close(g.gate)
	require.NoError(t, <-done)
	require.GreaterOrEqual(t, l.Flushed(), end)

	// With nothing else appended, the lazy flush alone covers a no-wait batch.
	require.NoError(t, l.AppendBatchNoWait([]Encoder{bytesPayload([]byte("lease-3"))}, res[:1]))
	end = res[0].Offset + int64(res[0].Size)
	require.Eventually(t, func() bool { return l.Flushed() >= end }, 10*time.Second, time.Millisecond)
	require.NoError(t, l.AppendBatchNoWait(nil, nil), "an empty batch is a no-op")
	require.ErrorIs(t, l.AppendBatchNoWait([]Encoder{bytesPayload(nil)}, nil), ErrInvalidArgument)
}
