package commitlog

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// LazyFlushDelay bounds how long a record appended without waiting
// (AppendBatchNoWait) stays unflushed in FlushSync when no waiting
// append flushes it first. Under load a waiting append (an ack, a send)
// comes sooner and covers it, so no-wait records add no flush of their
// own; when they come alone, one flush covers all of this window's.
const LazyFlushDelay = 10 * time.Millisecond

// runFlusher is the flusher goroutine. FlushSync: it flushes whenever an
// appender kicks it; appenders that arrive during a flush are covered by
// the next one (group commit); a no-wait append arms a flush within
// LazyFlushDelay. With one P (GOMAXPROCS=1) a kicked flush first lets the
// runnable appenders in (gather) and waits briefly for the rest of the
// last group (waitForGroup). FlushAsync: it flushes every FlushInterval.
func (l *Log) runFlusher(ctx context.Context) {
	var tick <-chan time.Time
	if l.opts.FlushMode == FlushAsync {
		t := time.NewTicker(l.opts.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	lazyTimer := time.NewTimer(LazyFlushDelay)
	lazyTimer.Stop()
	defer lazyTimer.Stop()
	armed := false
	var gs groupState
	gs.timer = time.NewTimer(time.Hour)
	gs.timer.Stop()
	defer gs.timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.lazy:
			if !armed {
				armed = true
				lazyTimer.Reset(LazyFlushDelay)
			}
			continue
		case <-lazyTimer.C:
			armed = false
		case <-l.kick:
			if gs.kicks%onePCheckEvery == 0 {
				gs.oneP = runtime.GOMAXPROCS(0) == 1
			}
			gs.kicks++
			if gs.oneP {
				l.gather()
				l.waitForGroup(ctx, &gs)
			}
		case <-tick:
		}
		taken := l.stats.appends.Load()
		res, _ := l.flushOnce() // a failure is recorded in l.failure and logged
		gs.group, gs.taken, gs.took = taken-gs.taken, taken, res.Took
	}
}

// maxGroupWait bounds waitForGroup's wait.
const maxGroupWait = 2 * time.Millisecond

// onePCheckEvery is how often (in kicks) the flusher asks the runtime
// for GOMAXPROCS, which takes the scheduler's lock; the runtime changes
// it at most once a second, when the CPU limit changes.
const onePCheckEvery = 64

// groupState is what the flusher goroutine remembers of its last flush.
type groupState struct {
	kicks uint64        // kicks so far
	oneP  bool          // GOMAXPROCS was 1 at the last check
	taken int64         // appends placed when it took its batch
	group int64         // appends since the flush before
	took  time.Duration // its fdatasync
	timer *time.Timer
}

// groupWait is how appenders end the flusher's waitForGroup early.
type groupWait struct {
	target atomic.Int64  // the count of appends that ends the wait; 0: no wait
	full   chan struct{} // cap 1
}

// waitForGroup, with one P (the caller checks), waits before a kicked
// flush until most of the last group has appended again, at most as long
// as the last fdatasync took (and maxGroupWait). With one P, sends from
// many connections come back to back: when the flush that covered them
// wakes them, the first request to come in kicks the flusher, which would
// flush it alone while the others are still being answered and read, then
// flush them as the next group: two fdatasyncs where one does, each
// holding the only P. Waiting lets the P answer them and read their next
// requests (the network poller runs while the flusher waits), and ends as
// soon as three quarters of the last group are staged. A wait that runs
// out costs one fdatasync's time, as the flush of the early ones alone
// would have.
func (l *Log) waitForGroup(ctx context.Context, gs *groupState) {
	if gs.group < 4 {
		return
	}
	target := gs.taken + gs.group*3/4
	l.gw.target.Store(target)
	if l.stats.appends.Load() < target {
		gs.timer.Reset(min(gs.took, maxGroupWait))
		select {
		case <-l.gw.full:
		case <-gs.timer.C:
		case <-ctx.Done():
		}
		gs.timer.Stop()
	}
	l.gw.target.Store(0)
	select {
	case <-l.gw.full:
	default:
	}
}

// maxGatherYields bounds the yields of one gather.
const maxGatherYields = 8

// gather lets the appenders that can run now stage their records before a
// kicked flush takes its batch, when the process has one P (GOMAXPROCS=1,
// as in a container limited to one CPU; the caller checks). There the kick
// of the first appender after a flush readies the flusher ahead of every
// other runnable goroutine (the P's runnext slot), and the appenders the
// last flush woke, or whose requests have just been read, wait behind it:
// the flush takes a group of one, and its fdatasync holds the only P until
// the runtime's monitor takes it back, so the others cannot even stage
// their records meanwhile. runtime.Gosched puts the flusher behind them;
// it yields again while they keep appending (at most maxGatherYields
// times), so it never waits for an append that is not already runnable.
// With more Ps the others run beside the flusher and there is nothing to
// gather this way.
func (l *Log) gather() {
	n := l.stats.appends.Load()
	for range maxGatherYields {
		runtime.Gosched()
		m := l.stats.appends.Load()
		if m == n {
			return
		}
		n = m
	}
}

// flushResult describes one flush, for tests and logs.
type flushResult struct {
	From, To int64
	Took     time.Duration
}

// Flush makes everything written so far durable. It is used at Close and
// by the checkpointer; in FlushSync mode appends need not call it.
func (l *Log) Flush() error {
	if l.isClosed.Load() {
		return ErrClosed
	}
	_, err := l.flushOnce()
	return err
}

// flushOnce writes what waiting appends left staged (publishing Written),
// fdatasyncs the segments holding [Flushed, Written), then publishes
// Flushed and wakes the appenders it covers. A failure is fatal to the
// write path (ARCHITECTURE.md, crash-consistency rule 9): the range is never retried, since
// Linux may have marked the failed pages clean.
func (l *Log) flushOnce() (flushResult, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if f := l.failure.Load(); f != nil {
		return flushResult{}, f.err
	}
	l.mu.Lock()
	err := l.writeStagedLocked()
	if err == nil && l.opts.FlushMode == FlushSync && l.flushBytes < zeroAheadMaxFlush {
		l.zeroAheadLocked()
	}
	l.mu.Unlock()
	if err != nil {
		return flushResult{}, err
	}
	from, to := l.flushed.Load(), l.written.Load()
	if to <= from {
		return flushResult{From: from, To: from}, nil
	}
	l.flushBytes = (3*l.flushBytes + (to - from)) / 4
	appends := l.stats.appends.Load()
	records := max(appends-l.flushedAppends, 0)
	l.flushedAppends = appends
	start := time.Now()
	for pos := from; pos < to; {
		s, err := l.pin(pos)
		if err != nil {
			return flushResult{}, l.fail(fmt.Errorf("flush at %d: %w", pos, err))
		}
		stop := min(to, s.end())
		err = s.file.Sync()
		s.mu.RUnlock()
		if err != nil {
			return flushResult{}, l.fail(fmt.Errorf("flush [%d,%d): %w", pos, stop, err))
		}
		if stop == s.end() { // sealed: the appender has moved on for good
			if err := s.closeFile(); err != nil {
				l.log.Warn().Err(err).Msg("closing a sealed segment")
			}
		}
		pos = stop
	}
	took := time.Since(start)

	l.flushed.Store(to)
	l.flushMu.Lock()
	l.wakeWaitersLocked(to)
	l.flushMu.Unlock()
	if l.opts.FlushMode == FlushSync {
		l.nudge()
	}

	l.stats.flushes.Add(1)
	l.stats.flushNanos.Add(int64(took))
	l.stats.flushCounts[flushBucket(took)].Add(1)
	l.stats.flushRecordCounts[flushRecordBucket(records)].Add(1)
	l.stats.flushRecords.Add(records)
	if int64(took) > l.stats.maxFlushNanos.Load() {
		l.stats.maxFlushNanos.Store(int64(took)) // only flushOnce writes it, under syncMu
	}
	if took > l.opts.SlowFlush {
		l.log.Warn().Dur("took", took).Int64("from", from).Int64("to", to).Msg("slow flush")
	}
	return flushResult{From: from, To: to, Took: took}, nil
}

// flushWaiter is an appender waiting for Flushed to reach end: wake
// (capacity 1) gets one value when a flush covers end, the write path
// fails or Close has done its final flush. Waiters are pooled, so a wait
// does not allocate.
type flushWaiter struct {
	end  int64
	wake chan struct{}
}

var flushWaiters = sync.Pool{New: func() any { return &flushWaiter{wake: make(chan struct{}, 1)} }}

// waitFlushed kicks the flusher and waits until Flushed >= end, the write
// path fails, or Close has done its final flush.
func (l *Log) waitFlushed(end int64) error {
	select {
	case l.kick <- struct{}{}:
	default:
	}
	if t := l.gw.target.Load(); t > 0 && l.stats.appends.Load() >= t {
		select {
		case l.gw.full <- struct{}{}:
		default:
		}
	}
	if l.flushed.Load() >= end {
		return nil
	}
	w := flushWaiters.Get().(*flushWaiter)
	w.end = end
	l.flushMu.Lock()
	// Checked under flushMu: a flush, a failure or Close that happened
	// before is seen here; one after finds w in the queue.
	err := l.waitErrLocked(end)
	queued := err == nil && l.flushed.Load() < end
	if queued {
		l.waiters = append(l.waiters, w)
	}
	l.flushMu.Unlock()
	if queued {
		<-w.wake
		if l.flushed.Load() < end { // woken by a failure or Close
			err = l.waitErr(end)
		}
	}
	flushWaiters.Put(w)
	return err
}

// waitErrLocked is what a wait for end returns now: nil once Flushed
// reaches end, else the write path's failure or ErrClosed after Close's
// final flush; nil too while none of these holds (keep waiting).
func (l *Log) waitErrLocked(end int64) error {
	if l.flushed.Load() >= end {
		return nil
	}
	if f := l.failure.Load(); f != nil {
		return f.err
	}
	if l.waitDone {
		return ErrClosed
	}
	return nil
}

// waitErr is waitErrLocked for a waiter woken before end was flushed: the
// write path failed or the log closed.
func (l *Log) waitErr(end int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.waitErrLocked(end)
}

// wakeWaitersLocked wakes the waiters whose end is at or below flushed,
// keeping the others queued; flushed < 0 wakes them all (a failure,
// Close). The caller holds flushMu.
func (l *Log) wakeWaitersLocked(flushed int64) {
	keep := l.waiters[:0]
	for _, w := range l.waiters {
		if flushed < 0 || w.end <= flushed {
			w.wake <- struct{}{}
		} else {
			keep = append(keep, w)
		}
	}
	clear(l.waiters[len(keep):])
	l.waiters = keep
}

// fail makes the write path dead for good: it records the first cause,
// wakes every waiting appender and returns the error they all get.
func (l *Log) fail(cause error) error {
	f := &failure{err: fmt.Errorf("%w: %w", ErrReadOnly, cause)}
	if l.failure.CompareAndSwap(nil, f) {
		l.stats.flushFailures.Add(1)
		l.log.Error().Err(cause).Msg("write path failed; the log is read-only until restart")
	}
	l.flushMu.Lock()
	l.wakeWaitersLocked(-1)
	l.flushMu.Unlock()
	return l.failure.Load().err
}

// flushBucket is the index in Stats.FlushCounts of a flush that took d.
func flushBucket(d time.Duration) int {
	for i, b := range FlushBuckets {
		if d <= b {
			return i
		}
	}
	return len(FlushBuckets)
}

// flushRecordBucket is the index in Stats.FlushRecordCounts of a flush
// that covered n records.
func flushRecordBucket(n int64) int {
	for i, b := range FlushRecordBuckets {
		if n <= b {
			return i
		}
	}
	return len(FlushRecordBuckets)
}
