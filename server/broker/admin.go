package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// CommitOffsets sets committed offsets (offset-mode consumers, resets).
// A commit also resets the group's pop cursor and drops its leases on that
// queue, so pop consumers continue from the committed offset. For a
// broadcasting group, a client id in ctx commits that consumer instance's
// offsets (registering it first: broadcast.go); without one the group's
// own.
func (b *Broker) CommitOffsets(ctx context.Context, group string, commits []OffsetCommit) error {
	if b.closed.Load() {
		return ErrShuttingDown
	}
	g, err := b.consume.GroupForPull(group, true)
	if err != nil {
		return err
	}
	if len(commits) == 0 || len(commits) > MaxBatchItems {
		return fmt.Errorf("%w: 1 to %d commits", ErrInvalidArgument, MaxBatchItems)
	}
	var topics []TopicConfig
	for i, c := range commits {
		t, err := b.GetTopic(ctx, c.Topic)
		if err != nil {
			return fmt.Errorf("commit %d: %w", i, err)
		}
		if c.QueueID < 0 || int(c.QueueID) >= t.Queues {
			return fmt.Errorf("%w: commit %d: queue %d does not exist", ErrInvalidArgument, i, c.QueueID)
		}
		if min, top := b.store.MinOffset(c.Topic, c.QueueID), b.store.MaxOffset(c.Topic, c.QueueID); c.Offset < min || c.Offset > top {
			return fmt.Errorf("%w: commit %d: offset %d outside [%d, %d]", ErrOffsetOutOfRange, i, c.Offset, min, top)
		}
		if !slices.ContainsFunc(topics, func(have TopicConfig) bool { return have.Name == t.Name }) {
			topics = append(topics, t)
		}
	}
	keyGroup := group
	if client := clientOf(ctx); client != "" && g.ConsumeMode == ConsumeBroadcasting {
		leave, err := b.enterInstance(g, client, topics...)
		if err != nil {
			return err
		}
		defer leave()
		keyGroup = instanceKey(group, client)
	}
	for _, c := range commits {
		key := offset.Key{Group: keyGroup, Topic: c.Topic, QueueID: c.QueueID}
		ps := b.consume.PopState(keyGroup, c.Topic)
		ps.Lock()
		err := b.commit(key, c.Offset)
		if cur := ps.Cursor(c.QueueID); cur != nil {
			cur.SetNext(c.Offset)
			cur.Clear()
		}
		ps.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// ResetOffset moves the group's offsets of topic (every topic of the group
// when topic is "") to the first message stored at or after t
// (resetOffsetByTime).
func (b *Broker) ResetOffset(ctx context.Context, group, topic string, t time.Time) ([]QueueProgress, error) {
	g, err := b.GetGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	topics := []string{topic}
	if topic == "" {
		topics = b.groupTopics(g)
	}
	var commits []OffsetCommit
	for _, name := range topics {
		cfg, err := b.GetTopic(ctx, name)
		if err != nil {
			if topic == "" && errors.Is(err, ErrTopicNotFound) {
				continue // a deleted topic the group once consumed
			}
			return nil, err
		}
		for q := int32(0); q < int32(cfg.Queues); q++ {
			off, err := b.store.SearchOffsetByTime(name, q, t.UnixMilli())
			if err != nil {
				return nil, mapStoreErr(err)
			}
			commits = append(commits, OffsetCommit{Topic: name, QueueID: q, Offset: off})
		}
	}
	if len(commits) > 0 {
		if err := b.resetCommits(ctx, g, commits); err != nil {
			return nil, err
		}
	}
	all, err := b.Progress(ctx, group)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, p := range all {
		if topic == "" || p.Topic == topic {
			out = append(out, p)
		}
	}
	return out, nil
}

// ReadQueue reads messages by offset (offset-mode consumers); nothing is
// leased. It returns the next offset to read.
func (b *Broker) ReadQueue(ctx context.Context, topic string, queueID int32, from int64, max int) ([]QueueMessage, int64, error) {
	if _, err := b.checkReadQueue(ctx, topic, queueID, max); err != nil {
		return nil, from, err
	}
	return b.readQueue(ctx, topic, queueID, from, max, nil, nil)
}

// checkReadQueue checks a read by offset of topic's queue queueID.
func (b *Broker) checkReadQueue(ctx context.Context, topic string, queueID int32, max int) (TopicConfig, error) {
	cfg, err := b.GetTopic(ctx, topic)
	if err != nil {
		return cfg, err
	}
	if cfg.Perm == "w" {
		return cfg, fmt.Errorf("%w: topic %s is write-only (perm w)", ErrInvalidArgument, topic)
	}
	if queueID < 0 || int(queueID) >= cfg.Queues {
		return cfg, fmt.Errorf("%w: queue %d does not exist", ErrInvalidArgument, queueID)
	}
	if max <= 0 || max > maxReadQueueMessages {
		return cfg, fmt.Errorf("%w: max must be 1..%d", ErrInvalidArgument, maxReadQueueMessages)
	}
	return cfg, nil
}

// readQueue reads up to max messages from from on, keeping those whose
// tag code match and whose message accept take (nil: all).
func (b *Broker) readQueue(ctx context.Context, topic string, queueID int32, from int64, max int, match func(int64) bool, accept func(*message.Message) bool) ([]QueueMessage, int64, error) {
	if err := b.store.AwaitDispatch(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return nil, from, mapStoreErr(err)
	}
	res, err := b.store.ReadQueue(topic, queueID, from, max, match)
	if err != nil {
		return nil, from, mapStoreErr(err)
	}
	out := make([]QueueMessage, 0, len(res.Messages))
	for _, m := range res.Messages {
		if accept == nil || accept(m) {
			out = append(out, toReceived(m))
		}
	}
	return out, res.Next, nil
}

// GetMessage looks a message up by id.
func (b *Broker) GetMessage(ctx context.Context, id string) (ReceivedMessage, error) {
	mid, err := message.ParseID(id)
	if err != nil {
		return ReceivedMessage{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	m, err := b.store.LookupID(mid)
	if err != nil {
		if errors.Is(err, storage.ErrCorrupt) {
			return ReceivedMessage{}, fmt.Errorf("%w: %s", ErrMessageNotFound, id)
		}
		return ReceivedMessage{}, mapStoreErr(err)
	}
	if m.Topic == txnHalfTopic {
		// A transaction's id: its committed message, once committed.
		m, err = b.store.FindByUniqKey(m.Property(message.PropertyRealTopic), txn.Key(txn.IDOf(m)))
		if err != nil {
			return ReceivedMessage{}, fmt.Errorf("%w: %s (a transaction not committed)", ErrMessageNotFound, id)
		}
	}
	if bookkeeping(m.Topic) || b.deletedMessage(m) {
		return ReceivedMessage{}, fmt.Errorf("%w: %s", ErrMessageNotFound, id)
	}
	return toReceived(m), nil
}

// QueryByKey finds messages of topic by business key, newest first.
func (b *Broker) QueryByKey(ctx context.Context, topic, key string, max int) ([]ReceivedMessage, error) {
	if _, err := b.GetTopic(ctx, topic); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, fmt.Errorf("%w: key is required", ErrInvalidArgument)
	}
	if max <= 0 || max > 256 {
		max = 32
	}
	// Read-your-writes: the key index is built by the dispatcher.
	if err := b.store.AwaitDispatch(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return nil, mapStoreErr(err)
	}
	ms, err := b.store.QueryByKey(topic, key, 0, 0, max)
	if err != nil {
		return nil, mapStoreErr(err)
	}
	out := make([]ReceivedMessage, len(ms))
	for i, m := range ms {
		out[i] = toReceived(m)
	}
	return out, nil
}
