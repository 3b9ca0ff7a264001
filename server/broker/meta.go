package broker

import (
	"fmt"
	"sort"
	"sync"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/registry"
)

// registrar runs the registry (package registry: topics, tombstones,
// groups and the receipt keyring, RocketMQ's topics.json and
// subscriptionGroup.json) on the broker's store. Each change is a record
// in the CommitLog before it is visible (metalog.go), so a created topic
// survives any crash and the loss of the files; config/topics.json and
// config/groups.json are snapshots of the registry.
//
// The state keeps the deletion record (tombstone) of every deleted topic
// name; in topics.json a name that was deleted (and possibly created again
// since) has a "Deleted" member, and a name that is only a tombstone has no
// queues. The state's maps are replaced, never changed in place, so a
// reader may keep one it got.
type registrar struct {
	files  metaFiles
	log    metaLog
	logger zerolog.Logger
	clock  clockwork.Clock // stamps CreatedAt and a group's deletion
	// mu guards state (but its receipt keyring, read without it) and
	// covered; a change holds it from its checks across its record's
	// write to its apply.
	mu      sync.RWMutex
	state   *registry.State
	covered int64 // the snapshots hold every rmq_sys_META record below this queue offset
	// quotas bound what puts may create (quota.go); set once at open.
	quotas Quotas
	// meet writes the start offsets of the topics a group change
	// subscribes to (package progress: MeetTopics) before the group record; set once
	// at open, nil in tests of the registry alone.
	meet func(old GroupConfig, exists bool, g GroupConfig, topics map[string]TopicConfig) (undo func(), err error)
}

// topicTombstone records a topic's deletion (registry.Tombstone).
type topicTombstone = registry.Tombstone

// metaFiles is the part of the store that keeps small metadata files.
type metaFiles interface {
	ReadMeta(name string) ([]byte, error)
	WriteMeta(name string, data []byte) error
}

// openRegistry recovers the registry from its snapshot files and the meta
// records of the CommitLog (metalog.go).
func openRegistry(files metaFiles, log metaLog, scan metaScan, clock clockwork.Clock, logger zerolog.Logger) (*registrar, error) {
	r := &registrar{files: files, log: log, logger: logger, clock: clock, state: registry.NewState()}
	if err := r.load(scan); err != nil {
		return nil, err
	}
	return r, nil
}

// save writes snapshot file name (encoded by the registry package).
func (r *registrar) save(name string, data []byte, err error) error {
	if err != nil {
		return err
	}
	return r.files.WriteMeta(name, data)
}

func (r *registrar) topic(name string) (TopicConfig, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.state.Topic(name)
}

func (r *registrar) group(name string) (GroupConfig, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.state.Group(name)
}

// putTopic stores t; create reports whether it was new. ifAbsent leaves an
// existing topic untouched (auto-create racing an explicit PUT).
func (r *registrar) putTopic(t TopicConfig, ifAbsent bool) (TopicConfig, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.state.Topic(t.Name)
	if exists && ifAbsent {
		return old, false, nil
	}
	if !exists {
		if err := r.checkTopicLocked(TopicConfig{}, false, t); err != nil {
			return t, false, err
		}
		t.CreatedAt = r.state.TopicCreatedAt(t.Name, r.clock.Now())
		return t, true, r.storeTopicLocked(t)
	}
	t, err := r.replaceTopicLocked(old, t)
	return t, false, err
}

// updateTopic replaces an existing topic with fn's answer, under the lock.
func (r *registrar) updateTopic(name string, fn func(TopicConfig) (TopicConfig, error)) (TopicConfig, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.state.Topic(name)
	if !exists {
		return TopicConfig{}, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	t, err := fn(old)
	if err != nil {
		return old, err
	}
	return r.replaceTopicLocked(old, t)
}

// replaceTopicLocked stores t in place of old; the caller holds r.mu.
func (r *registrar) replaceTopicLocked(old, t TopicConfig) (TopicConfig, error) {
	t.Name, t.CreatedAt = old.Name, old.CreatedAt
	if t.Queues < old.Queues {
		return old, &shrinkError{from: old.Queues, to: t.Queues}
	}
	if t == old {
		return old, nil
	}
	if err := r.checkTopicLocked(old, true, t); err != nil {
		return old, err
	}
	if err := r.storeTopicLocked(t); err != nil {
		return old, err
	}
	return t, nil
}

// storeTopicLocked records t, then publishes it; the caller holds r.mu.
func (r *registrar) storeTopicLocked(t TopicConfig) error {
	return r.commitLocked(registry.Record{Kind: registry.KindTopic, Topic: &t})
}

// shrinkError refuses to lower a topic's queue count (queue ids are
// spread over by sharding keys and offsets; RocketMQ refuses it too).
type shrinkError struct {
	from, to int
	// defaulted: the count was left out of a full replace and took the
	// default.
	defaulted bool
}

func (e *shrinkError) Error() string {
	if e.defaulted {
		return fmt.Sprintf("%v: PUT replaces the whole topic: queues defaults to %d when omitted and a topic's queue count cannot shrink (%d -> %d)",
			ErrInvalidArgument, e.to, e.from, e.to)
	}
	return fmt.Sprintf("%v: a topic's queue count cannot shrink (%d -> %d)", ErrInvalidArgument, e.from, e.to)
}

// Is classifies the error as ErrInvalidArgument and ErrQueueShrink.
func (e *shrinkError) Is(target error) bool {
	return target == ErrInvalidArgument || target == ErrQueueShrink
}

// deleteTopic removes a topic and records its tombstone, in one record.
func (r *registrar) deleteTopic(name string, tomb topicTombstone) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.state.Topic(name); !ok {
		return false, nil
	}
	if err := r.commitLocked(registry.Record{Kind: registry.KindTopicDeleted, Name: name, Tomb: &tomb}); err != nil {
		return false, err
	}
	return true, nil
}

// setTombstone replaces (nil: drops) the tombstone of name.
func (r *registrar) setTombstone(name string, tomb *topicTombstone) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitLocked(registry.Record{Kind: registry.KindTombstone, Name: name, Tomb: tomb})
}

// tombstone returns the deletion record of name, if it was ever deleted.
func (r *registrar) tombstone(name string) (topicTombstone, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.state.Tombstone(name)
}

// tombstones returns every deletion record.
func (r *registrar) tombstones() map[string]topicTombstone {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.state.Tombstones()
}

func (r *registrar) putGroup(g GroupConfig, ifAbsent bool) (GroupConfig, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.state.Group(g.Name)
	if exists && ifAbsent {
		return old, false, nil
	}
	if exists {
		g.CreatedAt = old.CreatedAt
	} else {
		g.CreatedAt = r.state.GroupCreatedAt(g.Name, r.clock.Now())
	}
	if err := r.checkGroupLocked(old, exists, g); err != nil {
		return old, false, err
	}
	if err := r.meetAndStoreLocked(old, exists, g); err != nil {
		return old, false, err
	}
	return g, !exists, nil
}

// updateGroup replaces an existing group with fn's answer, under the lock.
func (r *registrar) updateGroup(name string, fn func(GroupConfig) (GroupConfig, error)) (GroupConfig, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.state.Group(name)
	if !exists {
		return GroupConfig{}, fmt.Errorf("%w: %s", ErrGroupNotFound, name)
	}
	g, err := fn(old)
	if err != nil {
		return old, err
	}
	g.Name, g.CreatedAt = old.Name, old.CreatedAt
	if err := r.checkGroupLocked(old, true, g); err != nil {
		return old, err
	}
	if err := r.meetAndStoreLocked(old, true, g); err != nil {
		return old, err
	}
	return g, nil
}

// meetAndStoreLocked writes the start offsets of the topics g newly
// subscribes to (meet), then stores g; the caller holds r.mu.
func (r *registrar) meetAndStoreLocked(old GroupConfig, exists bool, g GroupConfig) error {
	var undo func()
	if r.meet != nil {
		var err error
		if undo, err = r.meet(old, exists, g, r.state.Topics()); err != nil {
			return err
		}
	}
	if err := r.storeGroupLocked(g); err != nil {
		if undo != nil {
			undo()
		}
		return err
	}
	return nil
}

// storeGroupLocked records g, then publishes it; the caller holds r.mu.
func (r *registrar) storeGroupLocked(g GroupConfig) error {
	return r.commitLocked(registry.Record{Kind: registry.KindGroup, Group: &g})
}

func (r *registrar) deleteGroup(name string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.state.Group(name); !ok {
		return false, nil
	}
	if err := r.commitLocked(registry.Record{Kind: registry.KindGroupDeleted, Name: name}); err != nil {
		return false, err
	}
	r.state.NoteGroupGone(name, r.clock.Now())
	return true, nil
}

func (r *registrar) listTopics() []TopicConfig {
	r.mu.RLock()
	topics := r.state.Topics()
	r.mu.RUnlock()
	out := make([]TopicConfig, 0, len(topics))
	for _, t := range topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *registrar) listGroups() []GroupConfig {
	r.mu.RLock()
	groups := r.state.Groups()
	r.mu.RUnlock()
	out := make([]GroupConfig, 0, len(groups))
	for _, g := range groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
