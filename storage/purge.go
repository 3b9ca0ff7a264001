package storage

import (
	"context"
	"fmt"

	"github.com/mqgate/mqgate/storage/message"
)

// Purging a topic (the broker's topic deletion). The CommitLog is never
// rewritten: the messages of a deleted topic become unreadable instead.
// PurgeTopic raises the minimum offset of each of the topic's
// ConsumeQueues above them — persisted in MINOFFSET before any file goes,
// exactly as retention does (consumequeue.DeleteBelowPhysical) — so a
// re-dispatch after a crash skips them (an entry below a queue's minimum
// is never written back) and queue offsets continue where they were. The
// lookups by id and by key treat a message below its queue's minimum as
// gone (purged).

// WriteOffset is the CommitLog offset the next record will be stored at:
// every record stored so far lies below it.
func (s *Store) WriteOffset() int64 { return s.commitLog.Written() }

// Settle flushes the CommitLog and waits until every record below offset
// (a WriteOffset taken before) is in its ConsumeQueue, or ctx ends.
func (s *Store) Settle(ctx context.Context, offset int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.commitLog.Flush(); err != nil {
		return s.mapAppendErr(err)
	}
	// The flush put the dispatch limit at or beyond offset.
	if err := s.AwaitDispatch(ctx); err != nil {
		return err
	}
	if d := s.dispatched.Load(); d < offset {
		return fmt.Errorf("storage: dispatched %d, short of %d", d, offset)
	}
	return nil
}

// PurgeTopic drops the messages of topic stored below CommitLog offset
// below from its ConsumeQueues for good (see above). The caller makes sure
// they are dispatched (Settle; at start-up Open has re-dispatched
// everything). It is idempotent and never lowers a minimum.
func (s *Store) PurgeTopic(topic string, below int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	for _, id := range s.QueueIDs(topic) {
		q, err := s.queue(topic, id, false)
		if err != nil || q == nil {
			return err
		}
		if _, err := q.DeleteBelowPhysical(below); err != nil {
			return fmt.Errorf("purge %s/%d below %d: %w", topic, id, below, err)
		}
	}
	return nil
}

// purged reports whether m lies below its queue's minimum offset: a
// topic deletion or retention took it out of its queue, and the lookups
// by id and key do not find it either.
func (s *Store) purged(m *message.Message) bool {
	q, _ := s.queue(m.Topic, m.QueueID, false)
	return q != nil && m.QueueOffset < q.MinOffset()
}
