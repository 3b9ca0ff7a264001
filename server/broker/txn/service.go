package txn

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what the family uses of the broker's store (storage.Store
// has it all): reading the two queues, finding records by key, looking
// half messages up, writing its records and the snapshot file.
type Store interface {
	// Lookup reads the record at a CommitLog offset.
	Lookup(offset int64) (*message.Message, error)
	// PutClass writes messages in one batch, through the group commit.
	PutClass(class storage.Class, ms []*message.Message, res []storage.PutResult) error
	// FindByUniqKey finds the newest record of topic with a UNIQ_KEY.
	FindByUniqKey(topic, key string) (*message.Message, error)
	// FindByDedupID finds the record of topic with a dedup id stored
	// since a time (unix ms).
	FindByDedupID(topic, id string, since int64) (*message.Message, error)
	// ReadQueue, MinOffset and MaxOffset read a queue and bound it.
	storage.QueueBounds
	// WriteOffset is the CommitLog's end.
	WriteOffset() int64
	// AwaitDispatch waits until what was stored is dispatched.
	AwaitDispatch(ctx context.Context) error
	// ReadMeta and WriteMeta read and write a file under <data>/config.
	ReadMeta(name string) ([]byte, error)
	WriteMeta(name string, data []byte) error
}

// Config is what the family gets from the broker: its store, clock, log
// and options, and, as funcs, the few things it asks of the broker — the
// registry's word on a topic, the topic gate, the broker's sentinels.
// server/broker fills it in (txn.go there).
type Config struct {
	// Store is the broker's store.
	Store Store
	// Clock is the broker's clock: check times, send and finish times.
	Clock clockwork.Clock
	// Log is the broker's logger.
	Log zerolog.Logger
	// MaxChecks is how many checks of a transaction are handed out before
	// the roll-back loop ends it (≥ 1).
	MaxChecks int
	// CheckInterval: a check after the first falls due
	// max(CheckAfter, CheckInterval) after the previous was handed out.
	CheckInterval time.Duration
	// Names are the broker's name rules: a snapshot's names, a producer
	// group's.
	Names Names
	// InvalidArgument is the broker's sentinel of a refused request field,
	// which the requests' refusals wrap.
	InvalidArgument error
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// AwaitDispatch waits (briefly) until what was stored before the call
	// is dispatched: a request reads its own writes.
	AwaitDispatch func(ctx context.Context) error
	// Gate is the read side of the broker's topic gate: a topic's deletion
	// waits for its holders (a commit, a check pull) and holds it while it
	// rolls the topic's transactions back (RollbackTopic).
	Gate sync.Locker
	// TopicGone reports whether topic was deleted since the CommitLog
	// offset since (or does not exist); the caller holds Gate.
	TopicGone func(topic string, since int64) bool
	// Closing is closed when the broker starts closing: a waiting check
	// pull returns.
	Closing <-chan struct{}
	// Background is the context of the family's own waits (its writes'
	// dispatch, the loop's, retention's and a topic deletion's passes),
	// cancelled when the broker closes.
	Background context.Context
}

// Batching and pacing of the family's passes.
const (
	// followBatch is how many records following reads at a time.
	followBatch = 256
	// batch is how many transactions one write of a pass ends or carries.
	batch = 256
	// busyRetry is how soon a pass looks again at due transactions it
	// found busy (an operation on them under way).
	busyRetry = 50 * time.Millisecond
	// followEvery is how often the roll-back loop catches up with records
	// nobody announced.
	followEvery = time.Second
)

// Recovery describes the last open (tests, logs).
type Recovery struct {
	Rebuilt     bool
	Reason      string
	HalfRecords int64
	OpRecords   int64
	Pending     int
	Took        time.Duration
}

// Service is the transaction family at work: the State, followed from
// the two queues through the store, the requests on it, the leader's
// roll-back loop and retention's carry. Its embedded State's lock guards
// the State and the fields below unless said otherwise.
type Service struct {
	*State
	cfg       Config
	stats     Stats
	recovered Recovery
	followed  struct{ half, op int64 }
	// snapshotted is the position of the last snapshot written.
	snapshotted Position
	// snapHalf and snapOp are the queue offsets the snapshot on disk
	// covers: retention keeps every record from there on (atomic).
	snapHalf, snapOp atomic.Int64
	// startOffset is the CommitLog's end at open: a transaction whose id
	// lies below it may have been committed by a batch a crash tore (set
	// by Open, read-only after).
	startOffset int64
}

// New is the family over cfg's store with an empty State; Open recovers
// it.
func New(cfg Config) *Service {
	return &Service{State: NewState(cfg.MaxChecks), cfg: cfg}
}

// count updates the counters under the lock.
func (s *Service) count(f func(*Stats)) {
	s.Lock()
	f(&s.stats)
	s.Unlock()
}

// Recovered reports how the last Open went.
func (s *Service) Recovered() Recovery {
	s.Lock()
	defer s.Unlock()
	return s.recovered
}

// KeepFrom is the offset of queue q the snapshot on disk covers:
// retention keeps every record from there on.
func (s *Service) KeepFrom(q Queue) int64 {
	if q == HalfQueue {
		return s.snapHalf.Load()
	}
	return s.snapOp.Load()
}

// Status counts the unresolved transactions and what ended transactions
// since start.
func (s *Service) Status() Stats {
	s.Lock()
	defer s.Unlock()
	if err := s.Follow(); err != nil {
		s.cfg.Log.Error().Err(err).Msg("transactions not up to date")
	}
	st := s.stats
	st.Pending = s.Len()
	return st
}

// lockState takes the state's lock with the state up to date with every
// record stored before the call. On success the caller must unlock.
func (s *Service) lockState(ctx context.Context) error {
	if err := s.cfg.AwaitDispatch(ctx); err != nil {
		return err
	}
	s.Lock()
	if err := s.Follow(); err != nil {
		s.Unlock()
		return err
	}
	return nil
}

// settle waits until what the caller stored is dispatched and applies
// it.
func (s *Service) settle() error {
	if err := s.cfg.Store.AwaitDispatch(s.cfg.Background); err != nil {
		return s.cfg.StoreError(err)
	}
	s.Lock()
	defer s.Unlock()
	return s.Follow()
}

// lockTxn returns the pending transaction id with its op lock held, or
// nil when it is not pending.
func (s *Service) lockTxn(ctx context.Context, id string) (*Txn, error) {
	if err := s.lockState(ctx); err != nil {
		return nil, err
	}
	t := s.Get(id)
	s.Unlock()
	if t == nil {
		return nil, nil
	}
	t.LockOp()
	// The previous holder applied its records before it let go.
	s.Lock()
	still := s.Get(id) == t
	s.Unlock()
	if !still {
		t.UnlockOp()
		return nil, nil
	}
	return t, nil
}

// putOps appends op records (after extra messages) in one batch.
func (s *Service) putOps(class storage.Class, extra []*message.Message, ops ...OpRecord) error {
	now := s.cfg.Clock.Now()
	msgs := extra
	for _, op := range ops {
		msgs = append(msgs, OpMessage(op, now))
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := s.cfg.Store.PutClass(class, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return s.cfg.StoreError(err)
	}
	return nil
}

// putBack returns taken transactions whose write failed to their heaps
// (due again).
func (s *Service) putBack(taken []*Txn) {
	s.Lock()
	defer s.Unlock()
	s.PutBack(taken)
}

// unlockOps lets go of the op locks of taken.
func unlockOps(taken []*Txn) {
	for _, t := range taken {
		t.UnlockOp()
	}
}
