package broker

import (
	"context"
	"time"
)

// QueueStatus is one queue of a topic as the store holds it (mqadmin
// topicStatus): the offsets of its first retained message and of the next
// one to be stored, and the store time of its newest message.
type QueueStatus struct {
	QueueID int32
	// MinOffset is the offset of the first message retention kept.
	MinOffset int64
	// MaxOffset is the offset the next message will get.
	MaxOffset int64
	// LastStoredAt is the store time of the newest message; zero when
	// the queue holds none.
	LastStoredAt time.Time
}

// TopicStatus reports each queue of topic after what was stored before
// the call is dispatched (read-your-writes, as progress is).
func (b *Broker) TopicStatus(ctx context.Context, topic string) ([]QueueStatus, error) {
	t, err := b.GetTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := b.awaitDispatch(ctx); err != nil {
		return nil, err
	}
	out := make([]QueueStatus, 0, t.Queues)
	for q := int32(0); q < int32(t.Queues); q++ {
		s := QueueStatus{QueueID: q, MinOffset: b.store.MinOffset(topic, q), MaxOffset: b.store.MaxOffset(topic, q)}
		if s.MaxOffset > s.MinOffset {
			if res, err := b.store.ReadQueue(topic, q, s.MaxOffset-1, 1, nil); err == nil && len(res.Messages) == 1 && !b.deletedMessage(res.Messages[0]) {
				s.LastStoredAt = time.UnixMilli(res.Messages[0].StoreTimestamp).UTC()
			}
		}
		out = append(out, s)
	}
	return out, nil
}
