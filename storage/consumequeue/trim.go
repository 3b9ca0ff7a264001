package consumequeue

import (
	"fmt"
)

// TruncateFrom drops the entries at and beyond offset: the files wholly
// beyond it are deleted (last first), the rest of the file holding it is
// zeroed and msynced, and MaxOffset becomes offset. An offset beyond
// MaxOffset is ErrGap; one below MinOffset empties the queue and lowers
// MinOffset to it (persisted). On an I/O error the queue should be closed
// and rebuilt.
func (q *Queue) TruncateFrom(offset int64) error {
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if err := q.truncateFromLocked(offset); err != nil {
		return fmt.Errorf("consumequeue: truncate from %d: %w", offset, err)
	}
	return nil
}

// truncateFromLocked implements TruncateFrom; the caller holds writeMu.
func (q *Queue) truncateFromLocked(offset int64) error {
	minOffset, maxOffset := q.minOffset.Load(), q.maxOffset.Load()
	switch {
	case offset < 0:
		return fmt.Errorf("%w: negative offset", ErrOffsetTooSmall)
	case offset > maxOffset:
		return fmt.Errorf("%w: max is %d", ErrGap, maxOffset)
	case offset == maxOffset:
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	// Publish the new bounds first: whatever fails below, no reader looks
	// past offset any more.
	q.maxOffset.Store(offset)
	if offset < minOffset {
		q.minOffset.Store(offset)
	}
	removed := false
	for n := len(q.files); n > 0 && q.files[n-1].first >= offset; n = len(q.files) {
		f := q.files[n-1]
		q.files = q.files[:n-1]
		removed = true
		if err := f.remove(); err != nil {
			return err
		}
	}
	if removed {
		if err := q.fs.SyncDir(q.dir); err != nil {
			return err
		}
	}
	if err := q.zeroRange(offset, maxOffset); err != nil {
		return err
	}
	if offset < minOffset {
		return q.writeMeta(offset)
	}
	return nil
}

// TruncateByPhysical drops the trailing entries whose CommitLogOffset is
// at or beyond end, the end of the recovered CommitLog (RocketMQ's
// truncateDirtyLogicFiles), and returns the new MaxOffset. It relies on
// commit log offsets increasing with the queue offset and searches
// [MinOffset, MaxOffset) only.
func (q *Queue) TruncateByPhysical(end int64) (int64, error) {
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	if q.closed {
		return 0, ErrClosed
	}
	from := q.searchPhysical(end)
	if err := q.truncateFromLocked(from); err != nil {
		return 0, fmt.Errorf("consumequeue: truncate by physical offset %d: %w", end, err)
	}
	return q.maxOffset.Load(), nil
}

// DeleteBelowPhysical applies retention: MinOffset moves up to the first
// entry whose CommitLogOffset is at least minPhy (or to MaxOffset when
// there is none), the new minimum is persisted, and the files wholly below
// it are deleted, except the last file, which is kept for appends. It
// returns the new MinOffset and never lowers it. Readers are excluded while
// files are unlinked from the queue, so none touches a removed mapping.
func (q *Queue) DeleteBelowPhysical(minPhy int64) (int64, error) {
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	if q.closed {
		return 0, ErrClosed
	}
	minOffset := q.minOffset.Load()
	newMin := q.searchPhysical(minPhy)
	if newMin <= minOffset {
		return minOffset, nil
	}
	// MINOFFSET first: a crash before the deletions leaves files below the
	// minimum, which Open removes; the other order could resurrect them.
	if err := q.writeMeta(newMin); err != nil {
		return minOffset, fmt.Errorf("consumequeue: delete below physical offset %d: %w", minPhy, err)
	}

	q.mu.Lock()
	q.minOffset.Store(newMin)
	n := 0
	for n < len(q.files)-1 && q.files[n].first+q.entriesPerFile <= newMin {
		n++
	}
	drop := q.files[:n:n]
	q.files = q.files[n:]
	q.mu.Unlock()

	if len(drop) == 0 {
		return newMin, nil
	}
	for _, f := range drop { // oldest first: a crash midway leaves a contiguous run
		if err := f.remove(); err != nil {
			return newMin, fmt.Errorf("consumequeue: delete below physical offset %d: %w", minPhy, err)
		}
	}
	if err := q.fs.SyncDir(q.dir); err != nil {
		return newMin, fmt.Errorf("consumequeue: delete below physical offset %d: %w", minPhy, err)
	}
	return newMin, nil
}

// searchPhysical returns the first offset in [MinOffset, MaxOffset) whose
// entry's CommitLogOffset is at least phy, or MaxOffset. The caller holds
// writeMu.
func (q *Queue) searchPhysical(phy int64) int64 {
	lo, hi := q.minOffset.Load(), q.maxOffset.Load()
	for lo < hi {
		mid := lo + (hi-lo)/2
		if q.entryAt(mid).CommitLogOffset >= phy {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
