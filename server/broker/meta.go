package broker

import (
	"context"
	"fmt"

	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Topics and groups: the facade of the registry family,
// server/broker/registry, which holds the META record codec, the State
// and its apply, the snapshot files, the registry lock, the changes with
// their quota checks, the replay at open and the follower's, retention's
// carry of the registry, the receipt key requests and the topic and group
// requests (server/broker/registry/doc.go). What stays here: the exported
// requests, which delegate; the family's Config, filled in from the broker
// (its store and clock, the replay of a system queue, the store errors'
// mapping, the other families' checks of a group — its
// instance idle time, ConsumeFrom, retry policy, subscriptions' filters —,
// the wait for dispatch, a group's start offsets, and what a group's
// deletion drops beside its record: its pop states, instances and
// progress); and a topic's deletion but its record (topicdelete.go).

// metaTopic carries registry changes (package registry).
const metaTopic = registry.Topic

// topicTombstone records a topic's deletion (registry.Tombstone).
type topicTombstone = registry.Tombstone

// openRegistry opens the registry family over b's store: its snapshot
// files and the records of rmq_sys_META after them.
func (b *Broker) openRegistry(ctx context.Context) (*registry.Service, error) {
	q := b.opts.Quotas
	svc, err := registry.Open(ctx, registry.Config{
		Store:      b.store,
		Scan:       b.scanMeta,
		Clock:      b.clock,
		Log:        b.log.With().Str("part", "registry").Logger(),
		StoreError: mapStoreErr,
		Quotas: registry.Quotas{MaxTopics: q.MaxTopics, MaxQueuesPerTopic: q.MaxQueuesPerTopic, MaxQueues: q.MaxQueues,
			MaxGroups: q.MaxGroups, MaxPushEndpoints: q.MaxPushEndpoints},
		InvalidArgument: ErrInvalidArgument,
		TopicNotFound:   ErrTopicNotFound,
		GroupNotFound:   ErrGroupNotFound,
		DefaultQueues:   b.opts.DefaultQueues,
		MaxInvisible:    b.opts.MaxInvisible,
		CheckGroup:      checkGroup,
		AwaitDispatch:   b.awaitDispatch,
		Meet:            b.meetTopics,
		DropGroup:       b.dropGroup,
	})
	return svc, err
}

// checkGroup runs the checks of a group that are other families' (the
// registry's Config.CheckGroup): its instance idle time (package
// instance), ConsumeFrom (package progress), retry policy (package retry)
// and its subscriptions' topic names and filters.
func checkGroup(g GroupConfig) (GroupConfig, error) {
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
	return g, nil
}

// scanMeta is the registry's Scan over the broker's store.
func (b *Broker) scanMeta(ctx context.Context, from int64, fn func(int64, []byte)) (int64, error) {
	end := b.store.MaxOffset(metaTopic, 0)
	if from > end {
		from = end // a snapshot ahead of the log (it lost a tail): replay what there is
	}
	err := b.scanSystemQueue(ctx, metaTopic, from, func(m *message.Message) { fn(m.QueueOffset, m.Body) })
	return end, err
}

// carryMeta runs before retention deletes the CommitLog below cut: when a
// meta record lies there, the whole registry is appended again.
func (b *Broker) carryMeta(cut int64) error { return b.registry.Carry(cut) }

// PutTopic creates or replaces a topic (idempotent): every field left zero
// takes its default, so a replace that omits queues asks for the default
// count, which fails when the topic has more (a queue count cannot shrink).
func (b *Broker) PutTopic(ctx context.Context, t TopicConfig) (TopicConfig, bool, error) {
	return b.registry.PutTopic(t)
}

// PatchTopic changes an existing topic: patch gets the current
// configuration and returns the new one, which is validated like a
// PutTopic. It runs under the registry's lock, so concurrent patches never
// lose each other's changes.
func (b *Broker) PatchTopic(ctx context.Context, name string, patch func(TopicConfig) (TopicConfig, error)) (TopicConfig, error) {
	return b.registry.PatchTopic(name, patch)
}

// GetTopic returns a topic's configuration.
func (b *Broker) GetTopic(ctx context.Context, name string) (TopicConfig, error) {
	return b.registry.GetTopic(name)
}

// ListTopics lists the user topics.
func (b *Broker) ListTopics(ctx context.Context) ([]TopicConfig, error) {
	return b.registry.ListTopics(), nil
}

// PutGroup creates or replaces a consumer group (idempotent). The topics
// it subscribes to for the first time get their start offsets by its
// ConsumeFrom (package progress: consumefrom.go).
func (b *Broker) PutGroup(ctx context.Context, g GroupConfig) (GroupConfig, bool, error) {
	return b.registry.PutGroup(ctx, g)
}

// PatchGroup changes an existing group: patch gets the current
// configuration and returns the new one, which is validated like a
// PutGroup, under the registry's lock (see PatchTopic).
func (b *Broker) PatchGroup(ctx context.Context, name string, patch func(GroupConfig) (GroupConfig, error)) (GroupConfig, error) {
	return b.registry.PatchGroup(ctx, name, patch)
}

// GetGroup returns a group's configuration.
func (b *Broker) GetGroup(ctx context.Context, name string) (GroupConfig, error) {
	return b.registry.GetGroup(name)
}

// ListGroups lists the consumer groups.
func (b *Broker) ListGroups(ctx context.Context) ([]GroupConfig, error) {
	return b.registry.ListGroups(), nil
}

// DeleteGroup removes a group with its progress and leases (dropGroup,
// after its record).
func (b *Broker) DeleteGroup(ctx context.Context, name string) error {
	return b.registry.DeleteGroup(name)
}

// dropGroup drops what the broker holds of a group whose deletion record
// was written (the registry's Config.DropGroup): its pop states, its
// consumer instances, its progress, its counters.
func (b *Broker) dropGroup(name string) {
	b.consume.DropWhere(func(k consume.Key) bool { return baseGroup(k.Group) == name }) // its own and its instances'
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
	b.retention.Forget(name)
}
