package registry

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what the family uses of the broker's store (*storage.Store has
// it all): the snapshot files under <data>/config, appending rmq_sys_META
// records, and, for retention's carry, where the topic's first kept record
// lies.
type Store interface {
	// ReadMeta and WriteMeta read and write a file under <data>/config
	// (written "tmp, fsync, rename, fsync dir").
	ReadMeta(name string) ([]byte, error)
	WriteMeta(name string, data []byte) error
	// PutClass writes messages in one batch, through the group commit.
	PutClass(class storage.Class, ms []*message.Message, res []storage.PutResult) error
	// MinOffset and MaxOffset are a queue's first kept and next offset.
	MinOffset(topic string, queueID int32) int64
	MaxOffset(topic string, queueID int32) int64
	// ReadQueue reads up to max records of a queue from offset.
	ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (storage.ReadResult, error)
}

// Scan calls fn, in order, for every rmq_sys_META record from queue
// offset from to the queue's end, which it returns (from is lowered to
// the end when it is past it: a snapshot ahead of a log that lost its
// tail).
type Scan func(ctx context.Context, from int64, fn func(queueOffset int64, body []byte)) (end int64, err error)

// Config is what the family gets from the broker: its store, clock and
// log, the broker's sentinels and defaults, and, as funcs, what it asks
// of the broker — the replay of a system queue, the store errors'
// mapping, the other families' checks of a group, the
// wait for dispatch, a group's start offsets (written under the registry
// lock) and what a group's deletion drops beside its record.
// server/broker fills it in (meta.go there).
type Config struct {
	// Store is the broker's store.
	Store Store
	// Scan replays rmq_sys_META (the broker's replay of a system queue).
	Scan Scan
	// Clock is the broker's clock: a configuration's CreatedAt, a group's
	// deletion time (memory only), a record's born time, a key's time.
	Clock clockwork.Clock
	// Log is the family's logger.
	Log zerolog.Logger
	// Quotas bound what puts may create (quota.go).
	Quotas Quotas
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// InvalidArgument, TopicNotFound and GroupNotFound are the broker's
	// sentinels, which a refused argument and a missing name wrap.
	InvalidArgument error
	TopicNotFound   error
	GroupNotFound   error
	// DefaultQueues is the queue count of a topic put without one;
	// MaxInvisible bounds a group's default lease.
	DefaultQueues int
	MaxInvisible  time.Duration
	// CheckGroup runs the checks of a group that are other families':
	// its instance idle time, ConsumeFrom, retry policy and its
	// subscriptions' topic names and filters, in that order; it returns
	// the group with those fields normalized.
	CheckGroup func(GroupConfig) (GroupConfig, error)
	// AwaitDispatch waits until what was stored is dispatched (a group's
	// start offsets include what was sent just before).
	AwaitDispatch func(ctx context.Context) error
	// Meet writes the start offsets of the topics a group change
	// subscribes to (package progress: Ledger.MeetTopics) before the
	// group's record, under the registry lock; undo takes them back when
	// the record fails. Nil: none are written.
	Meet func(old GroupConfig, exists bool, g GroupConfig, topics map[string]TopicConfig) (undo func(), err error)
	// DropGroup drops what the broker holds of a deleted group (its pop
	// states, instances and progress), after its record, outside the
	// registry lock. Nil: nothing.
	DropGroup func(name string)
}

// Service runs the registry on the broker's store. Each change is a
// record in the CommitLog before it is visible (log.go), so a created
// topic survives any crash and the loss of the files; config/topics.json,
// config/groups.json and config/receipt-keys.json are snapshots.
//
// The State keeps the deletion record (tombstone) of every deleted topic
// name; in topics.json a name that was deleted (and possibly created
// again since) has a "Deleted" member, and a name that is only a
// tombstone has no queues. The State's maps are replaced, never changed
// in place, so a reader may keep one it got.
type Service struct {
	cfg Config
	// mu is the registry lock: it guards state (but its receipt keyring,
	// read without it) and covered; a change holds it from its checks
	// across its record's write to its apply (doc.go, "Locks").
	mu      sync.RWMutex
	state   *State
	covered int64 // the snapshots hold every rmq_sys_META record below this queue offset
}

// Open recovers the registry from its snapshot files and the records of
// rmq_sys_META after them (log.go).
func Open(ctx context.Context, cfg Config) (*Service, error) {
	s := &Service{cfg: cfg, state: NewState()}
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Topic returns the configuration of topic name.
func (s *Service) Topic(name string) (TopicConfig, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state.Topic(name)
}

// Group returns the configuration of group name.
func (s *Service) Group(name string) (GroupConfig, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state.Group(name)
}

// Tombstone returns the deletion record of topic name, if it was ever
// deleted.
func (s *Service) Tombstone(name string) (Tombstone, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state.Tombstone(name)
}

// Tombstones returns every deletion record (the caller must not change
// the map).
func (s *Service) Tombstones() map[string]Tombstone {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.state.Tombstones()
}

// Ring returns the receipt keyring (nil before the first key); it takes
// no lock.
func (s *Service) Ring() *receipt.Ring { return s.state.Ring() }

// View calls fn with the State under the registry lock's read side; fn
// must not change it nor keep it.
func (s *Service) View(fn func(*State)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.state)
}

// ListTopics lists the topics by name.
func (s *Service) ListTopics() []TopicConfig {
	s.mu.RLock()
	topics := s.state.Topics()
	s.mu.RUnlock()
	out := make([]TopicConfig, 0, len(topics))
	for _, t := range topics {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ListGroups lists the groups by name.
func (s *Service) ListGroups() []GroupConfig {
	s.mu.RLock()
	groups := s.state.Groups()
	s.mu.RUnlock()
	out := make([]GroupConfig, 0, len(groups))
	for _, g := range groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
