package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// CommitOffsets sets committed offsets (offset-mode consumers, resets),
// resetting the pop cursors of the queues it commits (package consume's
// CommitOffsets; a broadcasting group's instance commits its own).
func (b *Broker) CommitOffsets(ctx context.Context, group string, commits []OffsetCommit) error {
	return b.consume.CommitOffsets(ctx, group, commits)
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
