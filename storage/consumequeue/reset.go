package consumequeue

import (
	"fmt"
)

// Reset empties the queue and restarts it at offset: MinOffset and
// MaxOffset both become offset (persisted), and every data file is
// removed. The store uses it when a queue's files were lost and the oldest
// surviving CommitLog record of the queue carries a queue offset above
// zero (retention had already moved past the queue's start).
func (q *Queue) Reset(offset int64) error {
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if offset < 0 {
		return fmt.Errorf("%w: reset to negative offset %d", ErrOffsetTooSmall, offset)
	}
	if err := q.writeMeta(offset); err != nil {
		return fmt.Errorf("consumequeue: reset to %d: %w", offset, err)
	}
	q.mu.Lock()
	drop := q.files
	q.files = nil
	q.minOffset.Store(offset)
	q.maxOffset.Store(offset)
	q.mu.Unlock()
	for i := len(drop) - 1; i >= 0; i-- { // newest first: a crash midway leaves a contiguous run
		f := drop[i]
		if err := f.remove(); err != nil {
			return fmt.Errorf("consumequeue: reset to %d: %w", offset, err)
		}
	}
	if len(drop) > 0 {
		if err := q.fs.SyncDir(q.dir); err != nil {
			return fmt.Errorf("consumequeue: reset to %d: %w", offset, err)
		}
	}
	return nil
}
