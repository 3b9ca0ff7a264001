package broker

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Deleting a topic removes its messages for every purpose, as SQS's
// DeleteQueue does: a topic created again under the same name starts empty
// for every group, old and new. The CommitLog is append-only, so the
// deletion is a tombstone (registry, topics.json) naming the CommitLog
// offset below which every message of the old topic lies, plus the
// schedule positions at the time, and everything that could still bring an
// old message back honours it:
//
//   - the topic's queues: their minimum offsets move up past the old
//     messages, durably (storage.PurgeTopic); queue offsets continue, so
//     a re-created topic never reuses one, and lookups by id and key treat
//     a message below its queue's minimum as gone;
//   - consumer progress: every group's committed offsets of the topic move
//     to the new minimums (and its retry view past the old retries) in one
//     progress record, which also refuses late acks of old leases; the
//     leases in flight are dropped;
//   - retries already in %RETRY%<group> stored before the deletion are
//     skipped by the pulls of the topic (retryFloor);
//   - retries and delayed messages still in the delay ladder are dropped
//     when they fall due (package retry's Sink), as are pending timers (cancelled
//     at once; retries waiting on a timer are cancelled when they fall
//     due, package timer's delivery) and idempotency keys;
//   - dead letters stay in their group's DLQ (an admin's record); resending
//     one delivers it to the topic's current incarnation.
//
// The tombstone is written first; a crash before the rest is finished at
// the next start (finishDeletions), which re-applies every tombstone. A
// tombstone is dropped once retention has deleted the CommitLog below it.
//
// topicGate orders the deletion against the writers of copies of stored
// messages (send-back of failed deliveries, the scheduler's and the timers'
// deliveries, resends): each either runs before the tombstone and its copy
// is below the floor, or after it and sees it.

// DeleteTopic removes a topic's configuration and its messages (see
// above).
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	if err := ValidateTopicName(name); err != nil {
		return err
	}
	if b.closed.Load() {
		return ErrShuttingDown
	}
	if _, ok := b.registry.Topic(name); !ok {
		return fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	b.topicGate.Lock()
	defer b.topicGate.Unlock()

	// Everything stored so far is below floor and in its queue.
	floor := b.store.WriteOffset()
	if err := b.store.Settle(ctx, floor); err != nil {
		return mapStoreErr(err)
	}
	tomb := topicTombstone{DeletedAt: b.clock.Now().UTC().Truncate(time.Millisecond), CommitLogOffset: floor}
	for level := 1; level <= len(b.opts.DelayLevels); level++ {
		tomb.ScheduleOffsets = append(tomb.ScheduleOffsets, b.store.MaxOffset(message.ScheduleTopic, int32(level-1)))
	}
	ok, err := b.registry.DeleteTopic(name, tomb)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	if err := b.store.PurgeTopic(name, floor); err != nil {
		return mapStoreErr(err)
	}
	b.dropTopicState(name)
	b.metrics.forgetTopic(name)
	b.retries.ResetLadder() // counted again, without the dropped entries
	if err := b.dropTopicProgress(name); err != nil {
		return err
	}
	if err := b.timers.CancelTopic(name); err != nil {
		return err
	}
	if err := b.rollbackTopicTxns(name); err != nil {
		return err
	}
	b.log.Info().Str("topic", name).Int64("below", floor).Msg("topic deleted with its messages")
	return nil
}

// dropTopicState forgets the leases and pop cursors of every group on the
// topic and its idempotency keys.
func (b *Broker) dropTopicState(name string) {
	b.consume.DropWhere(func(k consume.Key) bool { return k.Topic == name })
	b.sends.DropTopic(name)
}

// dropTopicProgress durably moves every group's committed offsets of the
// topic past its old messages: a queue to its new minimum, a retry view to
// the end of the group's retry topic (a commit starts a new generation, so
// an ack of an old lease changes nothing).
func (b *Broker) dropTopicProgress(name string) error {
	var rec offset.Record
	for _, k := range b.progress.Keys() {
		if k.Topic != name {
			continue
		}
		to := b.store.MinOffset(name, k.QueueID)
		if k.QueueID == retryQueueID {
			to = b.store.MaxOffset(RetryTopic(baseGroup(k.Group)), 0)
		}
		_, gen, _ := b.progress.Get(k)
		rec.Entries = append(rec.Entries, offset.Entry{Kind: offset.KindCommit, Key: k, Generation: gen + 1, Offset: to})
	}
	for len(rec.Entries) > 0 {
		n := min(len(rec.Entries), MaxBatchItems)
		if err := b.persist(offset.Record{Entries: rec.Entries[:n]}, nil); err != nil {
			return err
		}
		rec.Entries = rec.Entries[n:]
	}
	return nil
}

// originTopic is the topic a stored message belongs to: the original
// topic of a retry (RETRY_TOPIC), the destination of a delayed message or
// timer (REAL_TOPIC), else its own.
func originTopic(m *message.Message) string {
	if t := m.Property(message.PropertyRetryTopic); t != "" {
		return t
	}
	if t := m.Property(message.PropertyRealTopic); t != "" && !strings.HasPrefix(t, retryPrefix) {
		return t
	}
	return m.Topic
}

// deletedMessage reports whether m was stored before its topic was
// deleted (dead letters excepted: they stay an admin's record).
func (b *Broker) deletedMessage(m *message.Message) bool {
	if strings.HasPrefix(m.Topic, dlqPrefix) {
		return false
	}
	tomb, ok := b.registry.Tombstone(originTopic(m))
	return ok && m.PhysicalOffset < tomb.CommitLogOffset
}

// retryFloor is the CommitLog offset below which retries of topic in a
// retry topic belong to a deleted incarnation of it (0: none).
func (b *Broker) retryFloor(topic string) int64 {
	tomb, _ := b.registry.Tombstone(topic)
	return tomb.CommitLogOffset
}

// clampTombstone lowers the tombstone's positions to what the recovered
// store holds and reports whether it changed anything.
func (b *Broker) clampTombstone(tomb *topicTombstone, end int64) bool {
	changed := false
	if tomb.CommitLogOffset > end {
		tomb.CommitLogOffset, changed = end, true
	}
	offsets := append([]int64(nil), tomb.ScheduleOffsets...)
	for i, off := range offsets {
		if top := b.store.MaxOffset(message.ScheduleTopic, int32(i)); off > top {
			offsets[i], changed = top, true
		}
	}
	tomb.ScheduleOffsets = offsets
	return changed
}

// finishDeletions re-applies every tombstone at start-up (finishing a
// deletion a crash interrupted, or repairing queues rebuilt from the
// CommitLog) and drops the tombstones retention has made moot.
func (b *Broker) finishDeletions() error {
	end, low := b.store.WriteOffset(), b.store.Stats().CommitLogMin
	for name, tomb := range b.registry.Tombstones() {
		switch {
		case low >= tomb.CommitLogOffset:
			// Retention deleted everything the tombstone covers.
			if err := b.registry.SetTombstone(name, nil); err != nil {
				return err
			}
			continue
		case b.clampTombstone(&tomb, end):
			// An async-mode crash lost the log's tail: what is stored from
			// now on is not old.
			if err := b.registry.SetTombstone(name, &tomb); err != nil {
				return err
			}
		}
		if err := b.store.PurgeTopic(name, tomb.CommitLogOffset); err != nil {
			return fmt.Errorf("finish the deletion of topic %s: %w", name, err)
		}
	}
	return nil
}
