package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
)

// A store whose log is a Raft log (package raftlog) may have to give up a
// suffix of it: entries its leader does not have. Those are above the
// commit point, and the dispatcher never passes that point (HoldDispatch,
// SetDispatchLimit), so no ConsumeQueue entry, index key or consumer has
// seen them: cutting them is cutting the CommitLog and taking back the
// queue offsets they were given.

// ErrTruncate is returned by TruncateFrom for a cut it may not make.
var ErrTruncate = errors.New("storage: cannot truncate the log there")

// SetDispatchLimit moves the limit of a store opened with HoldDispatch:
// the dispatcher makes records below offset visible (it never goes back:
// a lower limit only stops it where it is).
func (s *Store) SetDispatchLimit(offset int64) {
	if !s.opts.HoldDispatch {
		return
	}
	s.dispatchCap.Store(offset)
	if s.opts.Replicated {
		s.advanceCommit(offset)
	}
	select { // wake the dispatcher (its loop also serves rebuilds)
	case s.repairs.wake <- struct{}{}:
	default:
	}
}

// DispatchLimit is the limit of a store opened with HoldDispatch
// (math.MaxInt64 without).
func (s *Store) DispatchLimit() int64 { return s.dispatchCap.Load() }

// TruncateFrom cuts the CommitLog back to offset, a frame start: the log
// is then as it was when offset was its end (commitlog.TruncateFrom), and
// every queue's next offset is what it was then — the first queue offset
// a cut record of that queue held, since a queue's records lie in the log
// in queue-offset order. Only a store opened with HoldDispatch truncates,
// and only at or above its dispatch limit and where the dispatcher is:
// what was dispatched is never cut (ErrTruncate). Appends must not run
// concurrently. A scrubber past the cut resumes at it.
//
// The checkpoint is rewritten first with the high-water mark at offset,
// so that a crash in the middle of the cut is a torn tail at the next
// start, never corruption below the mark.
func (s *Store) TruncateFrom(offset int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.truncMu.Lock()
	defer s.truncMu.Unlock()
	if !s.opts.HoldDispatch {
		return fmt.Errorf("%w: the store does not hold its dispatcher (HoldDispatch)", ErrTruncate)
	}
	if limit, d := s.dispatchCap.Load(), s.dispatched.Load(); offset < limit || offset < d {
		return fmt.Errorf("%w: at %d, below the dispatch limit %d or the dispatched offset %d", ErrTruncate, offset, limit, d)
	}
	end := s.commitLog.Written()
	if offset >= end {
		if offset > end {
			return fmt.Errorf("%w: at %d, past the end %d", ErrTruncate, offset, end)
		}
		return nil
	}
	c := checkpoint{Flushed: min(s.commitLog.Flushed(), offset), Dispatched: min(s.dispatched.Load(), offset), WrittenAt: time.Now().UnixMilli()}
	if err := writeCheckpoint(s.opts.FS, s.opts.Dir, c); err != nil {
		return fmt.Errorf("truncate at %d: checkpoint: %w", offset, err)
	}
	var d message.DispatchInfo
	err := s.commitLog.TruncateFrom(offset, func(_ int64, payload []byte) {
		// Under the append lock, where putEncoder assigns them.
		if message.DecodeDispatch(payload, &d) != nil {
			return
		}
		key := queueKey{string(d.Topic), d.QueueID}
		if next, ok := s.queueOffsets[key]; ok && d.QueueOffset < next {
			s.queueOffsets[key] = d.QueueOffset
		}
	})
	if err != nil {
		if errors.Is(err, commitlog.ErrInvalidArgument) {
			return fmt.Errorf("%w: %w", ErrTruncate, err)
		}
		return s.mapAppendErr(err)
	}
	// The scrubber resumes at the cut, a frame start, not inside what is
	// appended next.
	s.scrub.mu.Lock()
	if s.scrub.status.Position > offset {
		s.scrub.status.Position = offset
	}
	s.scrub.mu.Unlock()
	if s.opts.Replicated {
		s.cutTail(offset)
	}
	s.log.Info().Int64("offset", offset).Int64("cut", end-offset).Msg("truncated the log")
	return nil
}

// countUndispatched raises every queue's next offset above the records
// the dispatcher has not reached (at Open, with HoldDispatch: the
// ConsumeQueues stop at the limit, the log goes on).
func (s *Store) countUndispatched() error {
	var d message.DispatchInfo
	end := s.commitLog.Written()
	for off := s.dispatched.Load(); off < end; {
		rec, next, err := s.commitLog.Next(off, nil)
		if errors.Is(err, commitlog.ErrNoData) {
			break
		}
		if err != nil && !errors.Is(err, commitlog.ErrChecksum) {
			return fmt.Errorf("count queue offsets at %d: %w", off, err)
		}
		if err == nil && message.DecodeDispatch(rec.Payload, &d) == nil {
			key := queueKey{string(d.Topic), d.QueueID}
			if n := d.QueueOffset + 1; n > s.queueOffsets[key] {
				s.queueOffsets[key] = n
			}
		}
		off = next
	}
	return nil
}

// ReadFrameRange appends to dst the frame stream of the CommitLog range
// [from, to), both frame boundaries at or below WriteOffset (it does not
// wait for the flush; see commitlog.ReadFrameRange).
func (s *Store) ReadFrameRange(from, to int64, dst []byte) ([]byte, error) {
	if s.closed.Load() {
		return dst, ErrClosed
	}
	b, err := s.commitLog.ReadFrameRange(from, to, dst)
	switch {
	case errors.Is(err, commitlog.ErrCorrupt):
		return b, fmt.Errorf("%w: %w", ErrCorrupt, err)
	case errors.Is(err, commitlog.ErrOffsetTooSmall):
		return b, fmt.Errorf("%w: %w", ErrOffsetTooSmall, err)
	}
	return b, s.mapAppendErr(err)
}
