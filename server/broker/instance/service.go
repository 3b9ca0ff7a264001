package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/offset"
)

// Broadcasting is the ConsumeMode of a group in which every consumer
// instance gets every message (registry.Broadcasting).
const Broadcasting = registry.Broadcasting

// SweepInterval is how often the leader looks for idle instances (Sweep).
const SweepInterval = time.Second

// Store is what the family needs of the store (*storage.Store has it):
// the queues' bounds and times an instance's start offsets are taken
// from, the retry topic a retry lag count reads, and the snapshot file.
type Store interface {
	MaxOffset(topic string, queueID int32) int64
	MinOffset(topic string, queueID int32) int64
	SearchOffsetByTime(topic string, queueID int32, ts int64) (int64, error)
	ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (storage.ReadResult, error)
	ReadMeta(name string) ([]byte, error)
	WriteMeta(name string, data []byte) error
}

// Broker is what the family needs of the broker beyond the store and the
// progress ledger; server/broker fills it in (broadcast.go).
type Broker interface {
	// Group is a group's configuration (the registry's word), found or
	// not; Lookup the same for a request, with the broker's errors (an
	// unknown group, a closed broker).
	Group(name string) (registry.GroupConfig, bool)
	Lookup(ctx context.Context, name string) (registry.GroupConfig, error)
	// Topic is a topic's configuration (the registry's word).
	Topic(name string) (registry.TopicConfig, bool)
	// AwaitDispatch waits (a second at most) until what was stored before
	// the call is in the ConsumeQueues: the queries read their writes.
	AwaitDispatch(ctx context.Context) error
	// CatchUp is the pulls' read-your-writes wait: an instance's start at
	// "last" includes what was sent before its first read.
	CatchUp(ctx context.Context) error
	// DropPopStates drops the pop states of a progress group (an
	// instance's: its cursors, leases and lease notes), under the pop
	// states' locks, which are the broker's.
	DropPopStates(progressGroup string)
	// ForgetDropped drops retention's counts of a progress group.
	ForgetDropped(progressGroup string)
}

// Config is what a Service is given by the broker at open.
type Config struct {
	// Store is where the queues are read and the snapshot file is kept.
	Store Store
	// Ledger writes the start offsets and the forget records
	// (rmq_sys_OFFSET) and holds the progress table they apply to.
	Ledger *progress.Ledger
	// Now is the broker's clock: last-seen times, the start offsets'
	// generation.
	Now func() time.Time
	// Log is the broker's logger.
	Log zerolog.Logger
	// StoreErr maps an error of the store onto the broker's errors.
	StoreErr func(error) error
	// InvalidArgument and ClientIDRequired are the broker's sentinels,
	// which this package's refusals wrap; CheckClientID is the broker's
	// rule for a client id (the transport's field name, the id).
	InvalidArgument  error
	ClientIDRequired error
	CheckClientID    func(field, id string) error
	// MaxPerGroup bounds a group's instances (Quotas.MaxInstancesPerGroup;
	// 0 unlimited); Quota is the broker's error for a new instance past
	// it (the limit, how many the group has).
	MaxPerGroup int
	Quota       func(limit, have int) error
	// MaxBatch bounds the entries of one record of start offsets: the
	// broker's MaxBatchItems.
	MaxBatch int
	// RetryTopic is a group's retry topic (%RETRY%<group>).
	RetryTopic func(group string) string
	// Broker is what else the family needs of the broker.
	Broker Broker
}

// Service is the broadcasting groups' consumer instances: the set of the
// known ones behind the instances lock, the requests' registration of an
// instance with its start offsets, the leader's sweep of idle ones, the
// snapshot file, and the queries. Safe for concurrent use.
type Service struct {
	cfg Config
	// mu is the instances lock (ARCHITECTURE.md, the lock order).
	mu  sync.Mutex
	set Set // guarded by mu
}

// NewService returns the service; Open fills it from the progress table.
func NewService(cfg Config) *Service { return &Service{cfg: cfg} }

// Open rebuilds the known instances from the progress keys (each
// registered instance has some) and their last-seen times from the
// snapshot; without one an instance counts as seen now. Over a set that
// knows them (a promotion) the known keep their times and requests.
func (s *Service) Open() {
	var seen map[string]time.Time
	if raw, err := s.cfg.Store.ReadMeta(SnapshotFile); err == nil {
		if snap, err := DecodeSnapshot(raw); err != nil {
			s.cfg.Log.Warn().Err(err).Msg("instances snapshot unreadable; every consumer instance's idle time counts from now")
		} else {
			seen = snap.LastSeen()
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		s.cfg.Log.Warn().Err(err).Msg("instances snapshot unreadable; every consumer instance's idle time counts from now")
	}
	now := s.cfg.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.cfg.Ledger.Table().Keys() {
		s.set.Restore(k.Group, k.Topic, seen, now)
	}
}

// WriteSnapshot writes the instances' last-seen times (SnapshotFile) when
// they changed since the last snapshot; a snapshot that fails is tried
// again by the next.
func (s *Service) WriteSnapshot() error {
	s.mu.Lock()
	snap, changed := s.set.Snapshot()
	s.mu.Unlock()
	if !changed {
		return nil
	}
	raw, err := EncodeSnapshot(snap)
	if err == nil {
		err = s.cfg.Store.WriteMeta(SnapshotFile, raw)
	}
	if err != nil {
		s.mu.Lock()
		s.set.MarkChanged()
		s.mu.Unlock()
	}
	return err
}

// Enter registers client as an instance of g when it is new (the instance
// limit is checked first, before anything is written) and writes its
// start offsets in the topics it meets for the first time; it counts the
// request as under way until leave. The caller has checked that g is
// broadcasting.
func (s *Service) Enter(g registry.GroupConfig, client string, topics ...registry.TopicConfig) (leave func(), err error) {
	if client == "" {
		return nil, fmt.Errorf("%w: group %s is broadcasting: every consumer instance names itself with X-Mqgate-Client-Id", s.cfg.ClientIDRequired, g.Name)
	}
	if err := s.cfg.CheckClientID("X-Mqgate-Client-Id", client); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.set.Get(g.Name, client)
	fresh := in == nil
	if fresh {
		if have, ok := s.set.Room(g.Name, s.cfg.MaxPerGroup); !ok {
			return nil, s.cfg.Quota(s.cfg.MaxPerGroup, have)
		}
		in = New(time.Time{})
	}
	var entries []offset.Entry
	var met []string
	for _, t := range topics {
		if in.Met[t.Name] {
			continue
		}
		es, err := s.starts(g, client, t, fresh)
		if err != nil {
			return nil, err
		}
		entries = append(entries, es...)
		met = append(met, t.Name)
	}
	for len(entries) > 0 {
		n := min(len(entries), s.cfg.MaxBatch)
		if err := s.cfg.Ledger.Persist(offset.Record{Entries: entries[:n]}, nil); err != nil {
			return nil, err
		}
		entries = entries[n:]
	}
	for _, t := range met {
		in.Met[t] = true
	}
	if fresh {
		s.set.Add(g.Name, client, in)
		s.cfg.Log.Info().Str("group", g.Name).Str("client", client).Msg("consumer instance registered")
	}
	s.set.Enter(in, s.cfg.Now())
	return func() {
		s.mu.Lock()
		s.set.Leave(in, s.cfg.Now())
		s.mu.Unlock()
	}, nil
}

// starts are the commit entries that start client's instance of g in
// topic t: each queue by g's ConsumeFrom, the retry view at the end of the
// group's retry topic. A fresh instance gets them all (whatever keys an
// earlier instance under its client id may have left); a known one only
// for the queues it has no offset for. The caller holds mu.
func (s *Service) starts(g registry.GroupConfig, client string, t registry.TopicConfig, fresh bool) ([]offset.Entry, error) {
	var at time.Time
	if g.ConsumeFrom != "" && g.ConsumeFrom != progress.ConsumeFromLast {
		var err error
		if at, err = time.Parse(time.RFC3339Nano, g.ConsumeFrom); err != nil {
			return nil, fmt.Errorf("%w: consumeFrom: %w", s.cfg.InvalidArgument, err)
		}
	}
	name := Key(g.Name, client)
	table, store := s.cfg.Ledger.Table(), s.cfg.Store
	var out []offset.Entry
	for q := int32(progress.RetryQueueID); q < int32(t.Queues); q++ {
		key := offset.Key{Group: name, Topic: t.Name, QueueID: q}
		_, gen, known := table.Get(key)
		if known && !fresh {
			continue
		}
		var start int64
		switch {
		case q == progress.RetryQueueID:
			start = store.MaxOffset(s.cfg.RetryTopic(g.Name), 0)
		case g.ConsumeFrom == "":
			start = store.MinOffset(t.Name, q)
		case at.IsZero():
			start = store.MaxOffset(t.Name, q)
		default:
			var err error
			if start, err = store.SearchOffsetByTime(t.Name, q, at.UnixMilli()); err != nil {
				return nil, s.cfg.StoreErr(err)
			}
		}
		out = append(out, offset.Entry{Kind: offset.KindCommit, Key: key, Generation: Generation(s.cfg.Now(), gen), Offset: start})
	}
	return out, nil
}

// Touch notes a request of the named instances of group (the ones
// receipts name); unknown ones are not registered by it.
func (s *Service) Touch(group string, clients map[string]struct{}) {
	if len(clients) == 0 {
		return
	}
	now := s.cfg.Now()
	s.mu.Lock()
	s.set.Touch(group, clients, now)
	s.mu.Unlock()
}

// Known reports whether a progress group is a group's own or a known
// instance's: a forgotten instance's late settlements are dropped.
func (s *Service) Known(name string) bool {
	group, client := Split(name)
	if client == "" {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set.Get(group, client) != nil
}

// Clients lists the client ids of group's known instances, sorted.
func (s *Service) Clients(group string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set.Clients(group)
}

// DropGroup forgets a deleted group's instances in memory (the group's
// forget record ended their progress).
func (s *Service) DropGroup(group string) {
	s.mu.Lock()
	s.set.DropGroup(group)
	s.mu.Unlock()
}

// HasOwnOffsets reports whether group has progress of its own (not only
// its instances'): a broadcasting group consumed by offset without a
// client id.
func (s *Service) HasOwnOffsets(group string) bool {
	for _, k := range s.cfg.Ledger.Table().Keys() {
		if k.Group == group {
			return true
		}
	}
	return false
}
