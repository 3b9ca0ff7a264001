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

const maxQueues = 1024

// PutTopic creates or replaces a topic (idempotent): every field left zero
// takes its default, so a replace that omits queues asks for the default
// count, which fails when the topic has more (a queue count cannot shrink).
func (b *Broker) PutTopic(ctx context.Context, t TopicConfig) (TopicConfig, bool, error) {
	defaulted := t.Queues == 0
	t, err := b.normalizeTopic(t)
	if err != nil {
		return t, false, err
	}
	out, created, err := b.registry.putTopic(t, false)
	var shrink *shrinkError
	if errors.As(err, &shrink) && defaulted {
		shrink.defaulted = true
	}
	return out, created, err
}

// PatchTopic changes an existing topic: patch gets the current
// configuration and returns the new one, which is validated like a
// PutTopic. It runs under the registry's lock, so concurrent patches never
// lose each other's changes.
func (b *Broker) PatchTopic(ctx context.Context, name string, patch func(TopicConfig) (TopicConfig, error)) (TopicConfig, error) {
	if err := ValidateTopicName(name); err != nil {
		return TopicConfig{}, err
	}
	return b.registry.updateTopic(name, func(old TopicConfig) (TopicConfig, error) {
		t, err := patch(old)
		if err != nil {
			return old, err
		}
		t.Name = name
		return b.normalizeTopic(t)
	})
}

// normalizeTopic validates t and fills in its defaults.
func (b *Broker) normalizeTopic(t TopicConfig) (TopicConfig, error) {
	if err := ValidateTopicName(t.Name); err != nil {
		return t, err
	}
	if t.Queues == 0 {
		t.Queues = b.opts.DefaultQueues
	}
	if t.Queues < 1 || t.Queues > maxQueues {
		return t, fmt.Errorf("%w: queues must be 1..%d", ErrInvalidArgument, maxQueues)
	}
	if t.RetentionHours < 0 {
		return t, fmt.Errorf("%w: retentionHours must be >= 0", ErrInvalidArgument)
	}
	switch t.Perm {
	case "":
		t.Perm = "rw"
	case "rw", "r", "w":
	default:
		return t, fmt.Errorf("%w: perm must be rw, r or w", ErrInvalidArgument)
	}
	t.CreatedAt = time.Time{}
	return t, nil
}

// GetTopic returns a topic's configuration.
func (b *Broker) GetTopic(ctx context.Context, name string) (TopicConfig, error) {
	if err := ValidateTopicName(name); err != nil {
		return TopicConfig{}, err
	}
	t, ok := b.registry.topic(name)
	if !ok {
		return t, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	return t, nil
}

// ListTopics lists the user topics.
func (b *Broker) ListTopics(ctx context.Context) ([]TopicConfig, error) {
	return b.registry.listTopics(), nil
}

// PutGroup creates or replaces a consumer group (idempotent). The topics
// it subscribes to for the first time get their start offsets by its
// ConsumeFrom (package progress: consumefrom.go).
func (b *Broker) PutGroup(ctx context.Context, g GroupConfig) (GroupConfig, bool, error) {
	g, err := b.normalizeGroup(g)
	if err != nil {
		return g, false, err
	}
	if g.ConsumeFrom != "" {
		// The backlog a start skips includes what was sent just before.
		if err := b.awaitDispatch(ctx); err != nil {
			return g, false, err
		}
	}
	return b.registry.putGroup(g, false)
}

// PatchGroup changes an existing group: patch gets the current
// configuration and returns the new one, which is validated like a
// PutGroup, under the registry's lock (see PatchTopic).
func (b *Broker) PatchGroup(ctx context.Context, name string, patch func(GroupConfig) (GroupConfig, error)) (GroupConfig, error) {
	if err := ValidateGroupName(name); err != nil {
		return GroupConfig{}, err
	}
	if err := b.awaitDispatch(ctx); err != nil { // as PutGroup
		return GroupConfig{}, err
	}
	return b.registry.updateGroup(name, func(old GroupConfig) (GroupConfig, error) {
		g, err := patch(old)
		if err != nil {
			return old, err
		}
		g.Name = name
		return b.normalizeGroup(g)
	})
}

// normalizeGroup validates g and fills in its defaults.
func (b *Broker) normalizeGroup(g GroupConfig) (GroupConfig, error) {
	if err := ValidateGroupName(g.Name); err != nil {
		return g, err
	}
	switch g.ConsumeMode {
	case "":
		g.ConsumeMode = "clustering"
	case "clustering", "broadcasting":
	default:
		return g, fmt.Errorf("%w: consumeMode must be clustering or broadcasting", ErrInvalidArgument)
	}
	if g.RetryMaxTimes == 0 {
		g.RetryMaxTimes = 16
	}
	if g.RetryMaxTimes < 0 || g.RetryMaxTimes > 64 {
		return g, fmt.Errorf("%w: retryMaxTimes must be 1..64", ErrInvalidArgument)
	}
	if g.Invisible < 0 || g.Invisible > b.opts.MaxInvisible {
		return g, fmt.Errorf("%w: invisibility must be 0..%v", ErrInvalidArgument, b.opts.MaxInvisible)
	}
	if err := checkInstanceIdle(g.InstanceIdle); err != nil {
		return g, err
	}
	var err error
	if g.ConsumeFrom, err = normalizeConsumeFrom(g.ConsumeFrom); err != nil {
		return g, err
	}
	if g.RetryPolicy, err = normalizeRetryPolicy(g.RetryPolicy); err != nil {
		return g, err
	}
	for i, s := range g.Subscriptions {
		if err := ValidateTopicName(s.Topic); err != nil {
			return g, fmt.Errorf("subscription %d: %w", i, err)
		}
		if _, err := tagMatcher(s.TagExpression); err != nil {
			return g, fmt.Errorf("subscription %d: %w", i, err)
		}
		if _, err := compileSQL(fmt.Sprintf("subscriptions[%d].sql", i), s.SQL); err != nil {
			return g, err
		}
	}
	g.CreatedAt = time.Time{}
	return g, nil
}

// GetGroup returns a group's configuration.
func (b *Broker) GetGroup(ctx context.Context, name string) (GroupConfig, error) {
	if err := ValidateGroupName(name); err != nil {
		return GroupConfig{}, err
	}
	g, ok := b.registry.group(name)
	if !ok {
		return g, fmt.Errorf("%w: %s", ErrGroupNotFound, name)
	}
	return g, nil
}

// ListGroups lists the consumer groups.
func (b *Broker) ListGroups(ctx context.Context) ([]GroupConfig, error) {
	return b.registry.listGroups(), nil
}

// DeleteGroup removes a group with its progress and leases.
func (b *Broker) DeleteGroup(ctx context.Context, name string) error {
	if err := ValidateGroupName(name); err != nil {
		return err
	}
	ok, err := b.registry.deleteGroup(name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrGroupNotFound, name)
	}
	b.popsMu.Lock()
	for k := range b.pops {
		if baseGroup(k.group) == name { // its own and its instances'
			delete(b.pops, k)
		}
	}
	b.popsMu.Unlock()
	b.dropGroupInstances(name)
	// The group's progress goes durably too (a forget record): replayed
	// after a restart, the old group's acks and commits would otherwise
	// apply to a group re-created under the name. A crash before it is
	// harmless: Open drops the progress of groups the registry lacks.
	if err := b.persist(offset.Record{Entries: []offset.Entry{{Kind: offset.KindForget, Key: offset.Key{Group: name}}}}, nil); err != nil {
		b.log.Error().Err(err).Str("group", name).Msg("the deleted group's progress is forgotten in memory only; a group re-created under its name before a restart may inherit it")
	}
	b.progress.Forget(name)
	b.metrics.forgetGroup(name)
	b.dropped.forget(name)
	return nil
}

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
	g, err := b.groupForPull(group, true)
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
		ps := b.popState(keyGroup, c.Topic)
		ps.mu.Lock()
		err := b.commit(key, c.Offset)
		if cur := ps.queues[c.QueueID]; cur != nil {
			cur.next = c.Offset
			cur.inflight = make(map[int64]*lease)
		}
		ps.mu.Unlock()
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
