package timer

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what the family uses of the broker's store (storage.Store
// has it all): reading the two queues, finding a timer's records by key
// and by id, writing its records and the deliveries.
type Store interface {
	// ReadQueue reads up to max records of a queue from offset.
	ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (storage.ReadResult, error)
	// FindByUniqKey finds the newest record of topic with a UNIQ_KEY.
	FindByUniqKey(topic, key string) (*message.Message, error)
	// LookupID reads the record a message id names.
	LookupID(id message.ID) (*message.Message, error)
	// PutClass writes messages in one batch, through the group commit.
	PutClass(class storage.Class, ms []*message.Message, res []storage.PutResult) error
	// AwaitDispatch waits until what was stored is dispatched.
	AwaitDispatch(ctx context.Context) error
	// MinOffset and MaxOffset are a queue's first kept and next offset.
	MinOffset(topic string, queueID int32) int64
	MaxOffset(topic string, queueID int32) int64
	// WriteOffset is the CommitLog's end.
	WriteOffset() int64
}

// Config is what the family gets from the broker: its store, clock, log
// and options, and, as funcs, the few things it asks of the broker — the
// topic gate, the registry's word on a deleted topic, which properties
// are the broker's, the counters and the trace. server/broker fills it
// in (timer.go there).
type Config struct {
	// Store is the broker's store.
	Store Store
	// Clock is the broker's clock: due times, settlement times, the
	// loops' waits.
	Clock clockwork.Clock
	// Log is the broker's logger.
	Log zerolog.Logger
	// Index are the timer index's options (its directory under the data
	// dir, its buffer, its logger).
	Index timerindex.Options
	// MaxDelay caps how far ahead a timer may be due.
	MaxDelay time.Duration
	// CheckpointEvery is how often IndexLoop checkpoints the index.
	CheckpointEvery time.Duration
	// InvalidArgument and NotFound are the broker's sentinels of a
	// refused request field and of a missing message, which the requests'
	// refusals wrap.
	InvalidArgument, NotFound error
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// AwaitDispatch waits (briefly) until what was stored before the call
	// is dispatched: a request reads its own writes.
	AwaitDispatch func(ctx context.Context) error
	// Gate is the read side of the broker's topic gate: a delivery holds
	// it while it writes, and a topic's deletion, under its write side,
	// cancels the topic's timers (CancelTopic).
	Gate sync.Locker
	// Deleted reports whether the topic timer record m belongs to (a
	// retry's original topic) was deleted after the CommitLog offset
	// since; the caller holds Gate.
	Deleted func(m *message.Message, since int64) bool
	// IsRetry reports whether a timer's destination is a retry topic (a
	// retry waiting on a timer is not cancelled, only rescheduled).
	IsRetry func(topic string) bool
	// SystemProperty reports whether a property is the broker's: a View
	// shows the others.
	SystemProperty func(name string) bool
	// Late counts a delivered timer's lateness.
	Late func(time.Duration)
	// Carried notes, for the message trace, a timer record a carry copies.
	Carried func(m *message.Message)
	// Background is the context of the family's own waits (its writes'
	// dispatch, retention's and a topic deletion's passes, a delivery's
	// settling), cancelled when the broker closes.
	Background context.Context
}

// Batching and pacing of the family's passes.
const (
	// batch is how many timers one delivery batch, one carry batch and
	// one status record of a topic's deletion write.
	batch = 256
	// followBatch is how many queue records one step of following reads.
	followBatch = 256
	// followEvery is how often the delivery loop catches the index up
	// with records nobody announced (carries, records written while it
	// slept).
	followEvery = time.Second
	// listStep bounds the index entries one step of a listing examines
	// under the timer lock.
	listStep = 1 << 16
)

// Recovery describes how the timer index was opened (tests, logs).
type Recovery struct {
	Rebuilt  bool          // the index was built from the queues
	Reason   string        // why (empty when it opened)
	Births   int64         // timer records read from the timer queue
	Statuses int64         // status records read
	Took     time.Duration // opening and catching up
}

// Service is the timer family at work: the index and the State beside
// it, followed from the two queues through the store, the requests on
// them, the leader's delivery loop, the index's maintenance and
// retention's carry.
type Service struct {
	cfg Config

	// deliverMu is held by a delivery pass; a retention carry takes it
	// for its last pass, when no delivery reads a record it carries.
	deliverMu sync.Mutex

	mu    sync.Mutex // the timer lock: guards what follows and orders timer operations
	index *timerindex.Index
	// state holds the records written before the index (by id), the
	// earliest due time born since the delivery loop last looked, and the
	// records being delivered.
	state *State
	// floor is the timer queue's minimum the index was last given.
	floor int64
	// startOffset is the CommitLog's end when the broker opened: a timer
	// whose id lies below it may have been delivered before a crash.
	startOffset int64
	// recovered describes the last start-up (tests, logs).
	recovered Recovery
	// followed counts the records following has read.
	followed struct{ births, statuses int64 }

	wake chan struct{} // buffered(1): something to deliver may have changed
}

// New is the family over cfg's store, with no index yet: Open opens it.
func New(cfg Config) *Service {
	return &Service{cfg: cfg, state: NewState(), wake: make(chan struct{}, 1)}
}

// Nudge tells the delivery loop that something to deliver may have
// changed (a timer stored, a retry put on a timer).
func (s *Service) Nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Recovered reports how the index was last opened.
func (s *Service) Recovered() Recovery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recovered
}

// IndexStats reports the index's size.
func (s *Service) IndexStats() timerindex.Stats { return s.index.Stats() }

// lock takes the timer lock with the index up to date with every record
// stored before the call. On success the caller must unlock.
func (s *Service) lock(ctx context.Context) error {
	if err := s.cfg.AwaitDispatch(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.follow(); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// settleOwnWrite waits until what the caller stored is dispatched and
// applies it to the index; the caller holds the timer lock.
func (s *Service) settleOwnWrite() error {
	// Not Config.AwaitDispatch, which gives up quietly after a second: a
	// caller that went on with its write unapplied would copy a timer
	// twice.
	if err := s.cfg.Store.AwaitDispatch(s.cfg.Background); err != nil {
		return s.cfg.StoreError(err)
	}
	return s.follow()
}

// timerCopy is a new record of timer record m due at at, superseding m.
func timerCopy(m *message.Message, at time.Time) *message.Message {
	c := m.CopyTo(Topic)
	MarkCopy(c, m, at)
	return c
}
