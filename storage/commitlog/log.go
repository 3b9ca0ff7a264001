package commitlog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Encoder writes one record's payload into the log's write buffer.
type Encoder interface {
	// Len is the payload length in bytes (excluding the frame header). It
	// must return the same value every time it is called for one append.
	Len() int
	// Encode writes the payload into dst (len(dst) == Len()). offset is the
	// frame's log offset, so the caller can stamp offsets, timestamps or
	// sequence numbers. It is called under the append lock and must not
	// retain dst.
	Encode(dst []byte, offset int64)
}

// AppendResult locates an appended record.
type AppendResult struct {
	Offset int64 // log offset of the frame
	Size   int32 // whole frame size including the header
}

// Record is a frame read back from the log.
type Record struct {
	Offset  int64  // log offset of the frame
	Size    int32  // whole frame size including the header
	Payload []byte // the payload, copied into the caller's buffer
}

// SegmentInfo describes one segment file, for retention decisions.
type SegmentInfo struct {
	Base int64 // log offset of the segment's first byte
	Size int64 // length of the segment file
	// Allocated is the disk space its blocks take (st_blocks; Size where
	// the file system does not say): segments are sparse, allocated
	// ahead of the writes.
	Allocated int64
	ModTime   time.Time // the file's modification time (zero if stat failed)
}

// RecoveryReport says what Open found.
type RecoveryReport struct {
	ScannedFrom    int64         // where frame validation started
	End            int64         // recovered end of the log (Written = Flushed = End)
	Records        int64         // records validated by the scan
	TruncatedBytes int64         // bytes cut off after End (copied to .broken files first)
	Torn           bool          // something after End was cut off
	Corrupt        bool          // End is below HighWater (only with AllowCorrupt)
	Reason         string        // why the scan stopped
	Quarantined    []string      // .broken files written (base names)
	Duration       time.Duration // time Open spent recovering
}

// Stats are cumulative counters, for metrics.
type Stats struct {
	Appends       int64         // records appended
	Flushes       int64         // successful flushes (fdatasync batches)
	FlushFailures int64         // write-path failures (a failed flush): 0 or 1, the log then goes read-only
	AllocFailures int64         // appends refused with ErrNoSpace (the next segment could not be created)
	FlushTime     time.Duration // total time spent in successful flushes
	MaxFlush      time.Duration // longest successful flush
	Rolls         int64         // segment rolls
	// FlushCounts counts successful flushes by duration: FlushCounts[i]
	// those that took at most FlushBuckets[i] (and more than the bucket
	// before), the last one those longer than every bucket.
	FlushCounts [len(FlushBuckets) + 1]int64
	// FlushRecordCounts counts successful flushes by the records appended
	// since the flush before: FlushRecordCounts[i] those of at most
	// FlushRecordBuckets[i] (and more than the bucket before), the last one
	// the larger ones; FlushRecords is their sum. An append is counted
	// once it is placed, so one placed while a flush began is counted in
	// the next.
	FlushRecordCounts [len(FlushRecordBuckets) + 1]int64
	FlushRecords      int64
}

// FlushRecordBuckets are the upper bounds of the records-per-flush
// histogram in Stats.FlushRecordCounts: how many appends one fdatasync
// covers (group commit).
var FlushRecordBuckets = [...]int64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}

// FlushBuckets are the upper bounds of the flush-duration histogram in
// Stats.FlushCounts: a disk's fdatasync takes 0.1–1 ms, and its rare long
// ones are what a durable send's tail latency is made of.
var FlushBuckets = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// Log is a segmented, memory-mapped, append-only log. All methods are safe
// for concurrent use; appends are serialised.
//
// Lock order (a goroutine holding one may take only those after it):
//
//	mu (the append path) → segMu → segment.mu → flushMu
//	syncMu (one flush at a time) → mu → segMu → segment.mu → flushMu
//
// segMu is held only to find and pin a segment (pin returns with the
// segment's mu read-locked and segMu released); a segment's mu.Lock is
// taken only by release, with no other lock held; flushMu only guards
// the waiters' condition. A flush takes mu only to write what waiting
// appends left staged; nothing holding mu takes syncMu (Close releases mu
// before its final flush).
type Log struct {
	opts Options
	fs   vfs.FS
	log  zerolog.Logger

	// Append path, guarded by mu.
	mu       sync.Mutex
	active   *segment // the segment being written: the last of segments
	writePos int64    // end of the last frame written
	closed   bool
	// reserve holds created, never written segments that follow active
	// contiguously: an append takes what it needs before writing anything
	// (reserveLocked), so a roll inside it cannot fail.
	reserve []*segment
	// sizes and rolls are planLocked's scratch: the frame sizes of the
	// append in progress and whether each starts the next segment.
	sizes []int
	rolls []bool
	// allocPending: the allocator has a request outstanding (for the
	// segment after the last reserved one).
	allocPending bool
	// stage holds frames encoded and not yet written to the active
	// segment's file, from stageAt. Its first staged bytes are whole
	// frames of appends waiting for the next flush (FlushSync), which
	// writes them with one pwrite; the rest belong to the append in
	// progress.
	stage   []byte
	stageAt int64
	staged  int
	// zeroedTo: the active segment's blocks below it are written (frames,
	// or zeros written ahead by zeroAheadLocked); zeroFailed stops the
	// zeros after a failed write.
	zeroedTo   int64
	zeroFailed bool

	// segments is the ordered, contiguous list of mapped segments. Readers
	// hold segMu.RLock only while locating a segment and pinning it.
	segMu    sync.RWMutex
	segments []*segment

	written   atomic.Int64 // published writePos: frames below are complete
	flushed   atomic.Int64 // frames below are durable
	minOffset atomic.Int64
	isClosed  atomic.Bool

	// Group commit. syncMu serialises flushes; appenders waiting for
	// Flushed to pass their frame queue in waiters (under flushMu), and a
	// flush wakes only those it covers (wakeWaitersLocked): the appends that
	// arrived during a flush wait for the next one without being woken
	// in between.
	syncMu     sync.Mutex
	flushBytes int64 // under syncMu: the recent flushes' average size
	flushMu    sync.Mutex
	waiters    []*flushWaiter // guarded by flushMu
	waitDone   bool           // guarded by flushMu: Close has done its final flush
	failure    atomic.Pointer[failure]
	kick       chan struct{} // cap 1: appenders wake the flusher
	lazy       chan struct{} // cap 1: a no-wait append wants a flush within LazyFlushDelay
	notify     chan struct{} // cap 1: see Notify
	appended   chan struct{} // cap 1: see AppendSignal
	gw         groupWait     // appenders end the flusher's waitForGroup

	alloc *allocator
	// growSeg and growRel: the segment and relative write position
	// growActive allocates ahead of (set by growLocked).
	growSeg atomic.Pointer[segment]
	growRel atomic.Int64
	// noSpace[u]: the last append of Use u was refused with ErrNoSpace.
	noSpace [2]atomic.Bool
	// The allocator and the flusher: event-driven loops (woken by
	// requests and appends) on internal/worker's Service shape.
	allocWorker, flusher *worker.Service

	recovery RecoveryReport
	stats    struct {
		appends, flushes, flushFailures, allocFailures, flushNanos, maxFlushNanos, rolls atomic.Int64
		flushCounts                                                                      [len(FlushBuckets) + 1]atomic.Int64
		flushRecordCounts                                                                [len(FlushRecordBuckets) + 1]atomic.Int64
		flushRecords                                                                     atomic.Int64
	}
	// flushedAppends is stats.appends when the last flush began (guarded
	// by syncMu).
	flushedAppends int64
}

type failure struct{ err error }

// Open opens (or creates) the log in opts.Dir, recovers its end (see the
// package documentation) and starts the flusher and the segment
// preallocator.
func Open(opts Options) (*Log, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	l := &Log{
		opts:   opts,
		fs:     opts.FS,
		log:    opts.Logger.With().Str("component", "commitlog").Logger(),
		kick:   make(chan struct{}, 1),
		lazy:   make(chan struct{}, 1),
		notify: make(chan struct{}, 1),

		appended: make(chan struct{}, 1),
	}
	l.gw.full = make(chan struct{}, 1)
	if err := l.recover(); err != nil {
		return nil, err
	}
	l.alloc = newAllocator(l.fs, opts.Dir, opts.SegmentSize, opts.Reserve, l.log, l.growActive)
	l.alloc.request(l.active.end())
	l.allocPending = true
	l.growLocked()
	l.allocWorker = worker.New(func(ctx context.Context) { l.alloc.run(ctx.Done()) })
	l.flusher = worker.New(l.runFlusher)
	l.allocWorker.Start(context.Background())
	l.flusher.Start(context.Background())
	return l, nil
}

// Recovery reports what Open found.
func (l *Log) Recovery() RecoveryReport { return l.recovery }

// Written is the end of the appended data: every frame below it is complete
// in the file (and readable through the mapping).
func (l *Log) Written() int64 { return l.written.Load() }

// AppendSignal receives (capacity 1, so several raises may be one
// receive) after Written rose by an append: the Raft node loop of a
// replicated store proposes what the writers appended (storage/shard).
func (l *Log) AppendSignal() <-chan struct{} { return l.appended }

// Flushed is the end of the durable data.
func (l *Log) Flushed() int64 { return l.flushed.Load() }

// MinOffset is the base of the oldest retained segment.
func (l *Log) MinOffset() int64 { return l.minOffset.Load() }

// Notify returns a channel (capacity 1) that receives a nudge whenever
// Written (FlushAsync) or Flushed (FlushSync) advances. It is meant for a
// single consumer, the dispatcher.
func (l *Log) Notify() <-chan struct{} { return l.notify }

// FlushMode is the configured flush mode.
func (l *Log) FlushMode() FlushMode { return l.opts.FlushMode }

// SegmentSize is the size of new segment files.
func (l *Log) SegmentSize() int64 { return l.opts.SegmentSize }

// Err is non-nil (and wraps ErrReadOnly and the cause) once the write path
// is dead.
func (l *Log) Err() error {
	if f := l.failure.Load(); f != nil {
		return f.err
	}
	return nil
}

// Stats returns cumulative counters.
func (l *Log) Stats() Stats {
	var counts [len(FlushBuckets) + 1]int64
	for i := range counts {
		counts[i] = l.stats.flushCounts[i].Load()
	}
	var recs [len(FlushRecordBuckets) + 1]int64
	for i := range recs {
		recs[i] = l.stats.flushRecordCounts[i].Load()
	}
	return Stats{
		FlushCounts:       counts,
		FlushRecordCounts: recs,
		FlushRecords:      l.stats.flushRecords.Load(),
		Appends:           l.stats.appends.Load(),
		Flushes:           l.stats.flushes.Load(),
		FlushFailures:     l.stats.flushFailures.Load(),
		AllocFailures:     l.stats.allocFailures.Load(),
		FlushTime:         time.Duration(l.stats.flushNanos.Load()),
		MaxFlush:          time.Duration(l.stats.maxFlushNanos.Load()),
		Rolls:             l.stats.rolls.Load(),
	}
}

// Close flushes everything written, stops the background goroutines,
// unmaps and closes the segments. It is idempotent; it returns the final
// flush's error (or the error that made the log read-only).
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()

	l.flusher.Stop()
	l.allocWorker.Stop()

	var errs []error
	if _, err := l.flushOnce(); err != nil {
		errs = append(errs, err)
	}
	l.flushMu.Lock()
	l.waitDone = true
	l.wakeWaitersLocked(-1)
	l.flushMu.Unlock()

	l.isClosed.Store(true)
	if err := l.alloc.discard(); err != nil {
		errs = append(errs, fmt.Errorf("discard preallocated segment: %w", err))
	}
	if err := l.discardReserve(); err != nil {
		errs = append(errs, fmt.Errorf("discard reserved segments: %w", err))
	}
	l.segMu.Lock()
	segs := l.segments
	l.segments = nil
	l.segMu.Unlock()
	for _, s := range segs {
		if err := s.release(); err != nil {
			errs = append(errs, err)
		}
	}
	l.log.Info().Int64("written", l.written.Load()).Int64("flushed", l.flushed.Load()).Msg("closed")
	return errors.Join(errs...)
}
