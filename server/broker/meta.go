package broker

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/receipt"
)

// registry holds topic and group configuration (RocketMQ's topics.json and
// subscriptionGroup.json). Each change is a record in the CommitLog before
// it is visible (metalog.go), so a created topic survives any crash and
// the loss of the files; config/topics.json and config/groups.json are
// snapshots of the registry.
//
// The registry also keeps the deletion record (tombstone) of every deleted
// topic name; in topics.json a name that was deleted (and possibly created
// again since) has a "Deleted" member, and a name that is only a tombstone
// has no queues. Maps are replaced, never changed in place, so a reader
// may keep one it got.
type registry struct {
	files  metaFiles
	log    metaLog
	logger zerolog.Logger
	clock  clockwork.Clock // stamps CreatedAt
	mu     sync.RWMutex
	topics map[string]TopicConfig
	tombs  map[string]topicTombstone
	groups map[string]GroupConfig
	// goneAt is when this process last deleted each group (memory only):
	// a group re-created under the name gets a later CreatedAt, so the
	// deleted namesake's leases, all stamped at or before its deletion,
	// never pass for the new group's (owedLeases compares the two
	// times), even when the deletion and the re-creation fall in one
	// millisecond. After a restart the restart itself separates them.
	// Read and written under mu, never handed out (so changed in place).
	goneAt  map[string]time.Time
	covered int64 // the snapshots hold every rmq_sys_META record below this queue offset
	// ring is the receipt keyring (package receipt; receiptkeys.go),
	// applied from the same records; replaced whole, read without r.mu.
	ring atomic.Pointer[receipt.Ring]
	// quotas bound what puts may create (quota.go); set once at open.
	quotas Quotas
	// meet writes the start offsets of the topics a group change
	// subscribes to (consumefrom.go) before the group record; set once
	// at open, nil in tests of the registry alone.
	meet func(old GroupConfig, exists bool, g GroupConfig, topics map[string]TopicConfig) (undo func(), err error)
}

// topicTombstone records a topic's deletion (topicdelete.go): every message
// of the deleted topic lies below CommitLogOffset, and every schedule entry
// for it at delay level L below ScheduleOffsets[L-1].
type topicTombstone struct {
	DeletedAt       time.Time
	CommitLogOffset int64
	ScheduleOffsets []int64
}

// topicEntry is one member of topics.json.
type topicEntry struct {
	TopicConfig
	Deleted *topicTombstone `json:",omitempty"`
}

const (
	topicsFile = "topics.json"
	groupsFile = "groups.json"
)

// metaFiles is the part of the store that keeps small metadata files.
type metaFiles interface {
	ReadMeta(name string) ([]byte, error)
	WriteMeta(name string, data []byte) error
}

// openRegistry recovers the registry from its snapshot files and the meta
// records of the CommitLog (metalog.go).
func openRegistry(files metaFiles, log metaLog, scan metaScan, clock clockwork.Clock, logger zerolog.Logger) (*registry, error) {
	r := &registry{files: files, log: log, logger: logger, clock: clock,
		topics: map[string]TopicConfig{}, tombs: map[string]topicTombstone{}, groups: map[string]GroupConfig{}}
	if err := r.load(scan); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *registry) save(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return r.files.WriteMeta(name, b)
}

func (r *registry) topic(name string) (TopicConfig, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.topics[name]
	return t, ok
}

func (r *registry) group(name string) (GroupConfig, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.groups[name]
	return g, ok
}

// putTopic stores t; create reports whether it was new. ifAbsent leaves an
// existing topic untouched (auto-create racing an explicit PUT).
func (r *registry) putTopic(t TopicConfig, ifAbsent bool) (TopicConfig, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.topics[t.Name]
	if exists && ifAbsent {
		return old, false, nil
	}
	if !exists {
		if err := r.checkTopicLocked(TopicConfig{}, false, t); err != nil {
			return t, false, err
		}
		t.CreatedAt = r.clock.Now().UTC().Truncate(time.Millisecond)
		if tomb, ok := r.tombs[t.Name]; ok && !t.CreatedAt.After(tomb.DeletedAt) {
			// After its deleted namesake, as for groups (goneAt).
			t.CreatedAt = tomb.DeletedAt.Add(time.Millisecond)
		}
		return t, true, r.storeTopicLocked(t)
	}
	t, err := r.replaceTopicLocked(old, t)
	return t, false, err
}

// updateTopic replaces an existing topic with fn's answer, under the lock.
func (r *registry) updateTopic(name string, fn func(TopicConfig) (TopicConfig, error)) (TopicConfig, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.topics[name]
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
func (r *registry) replaceTopicLocked(old, t TopicConfig) (TopicConfig, error) {
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
func (r *registry) storeTopicLocked(t TopicConfig) error {
	return r.commitLocked(metaRecord{Kind: metaTopicPut, Topic: &t})
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
func (r *registry) deleteTopic(name string, tomb topicTombstone) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.topics[name]; !ok {
		return false, nil
	}
	if err := r.commitLocked(metaRecord{Kind: metaTopicDeleted, Name: name, Tomb: &tomb}); err != nil {
		return false, err
	}
	return true, nil
}

// setTombstone replaces (nil: drops) the tombstone of name.
func (r *registry) setTombstone(name string, tomb *topicTombstone) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitLocked(metaRecord{Kind: metaTombstone, Name: name, Tomb: tomb})
}

// tombstone returns the deletion record of name, if it was ever deleted.
func (r *registry) tombstone(name string) (topicTombstone, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tombs[name]
	return t, ok
}

// tombstones returns every deletion record.
func (r *registry) tombstones() map[string]topicTombstone {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.tombs
}

func (r *registry) putGroup(g GroupConfig, ifAbsent bool) (GroupConfig, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.groups[g.Name]
	if exists && ifAbsent {
		return old, false, nil
	}
	if exists {
		g.CreatedAt = old.CreatedAt
	} else {
		g.CreatedAt = r.clock.Now().UTC().Truncate(time.Millisecond)
		if gone, ok := r.goneAt[g.Name]; ok && !g.CreatedAt.After(gone) {
			g.CreatedAt = gone.Add(time.Millisecond)
		}
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
func (r *registry) updateGroup(name string, fn func(GroupConfig) (GroupConfig, error)) (GroupConfig, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.groups[name]
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
func (r *registry) meetAndStoreLocked(old GroupConfig, exists bool, g GroupConfig) error {
	var undo func()
	if r.meet != nil {
		var err error
		if undo, err = r.meet(old, exists, g, r.topics); err != nil {
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
func (r *registry) storeGroupLocked(g GroupConfig) error {
	return r.commitLocked(metaRecord{Kind: metaGroupPut, Group: &g})
}

func (r *registry) deleteGroup(name string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.groups[name]; !ok {
		return false, nil
	}
	if err := r.commitLocked(metaRecord{Kind: metaGroupDeleted, Name: name}); err != nil {
		return false, err
	}
	if r.goneAt == nil {
		r.goneAt = map[string]time.Time{}
	}
	r.goneAt[name] = r.clock.Now().UTC().Truncate(time.Millisecond)
	return true, nil
}

func (r *registry) listTopics() []TopicConfig {
	r.mu.RLock()
	out := make([]TopicConfig, 0, len(r.topics))
	for _, t := range r.topics {
		out = append(out, t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *registry) listGroups() []GroupConfig {
	r.mu.RLock()
	out := make([]GroupConfig, 0, len(r.groups))
	for _, g := range r.groups {
		out = append(out, g)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
