package consume

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/filter"
	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Store is what the consumer's requests use of the broker's store
// (*storage.Store has it): the queues' reads and bounds, the dispatcher's
// progress and its signals of new data, and a replica's commit.
type Store interface {
	ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (storage.ReadResult, error)
	MinOffset(topic string, queueID int32) int64
	MaxOffset(topic string, queueID int32) int64
	CaughtUp() bool
	AwaitDispatch(ctx context.Context) error
	NewDataSignal(topic string) <-chan struct{}
	Replicated() bool
	WriteOffset() int64
	WaitCommitted(end int64) error
}

// Broker is what the consumer's requests read of the broker's other
// families at the time of a request: the broker sets them up after the
// Service (its recovery opens them), so they are asked for, not held.
type Broker interface {
	// Registry is the registry family: topics and groups.
	Registry() *registry.Service
	// Ledger is the progress family's ledger (and through it the
	// progress table).
	Ledger() *progress.Ledger
	// Instances are the broadcasting groups' consumer instances.
	Instances() *instance.Service
}

// Errors are the broker's sentinels the consumer's requests wrap (their
// texts follow theirs).
type Errors struct {
	ShuttingDown     error
	InvalidArgument  error
	TopicNotFound    error
	GroupNotFound    error
	OffsetOutOfRange error
}

// Config is what the consumer's requests get from the broker: its store,
// clock and logger, the lease log, the retry family and the epoch
// counter; the broker's options and sentinels; and, as funcs, the rules
// and renderings that stay the broker's (the filters' compilers, a
// message as delivered, the client of a request, a topic's retry floor,
// the retry policy's draw) and its counters. server/broker fills it in
// (consume.go there).
type Config struct {
	Store  Store
	Clock  clockwork.Clock
	Log    zerolog.Logger
	Broker Broker
	// Leases is the lease log: the records of the lease changes.
	Leases *lease.Log
	// Retries is the retry family: the write of a send-back.
	Retries *retry.Service
	// Epoch is the lease epoch counter (unique across restarts).
	Epoch *atomic.Uint64
	// Closed reports that the broker is closing; Closing is closed then
	// (long polls end).
	Closed  func() bool
	Closing <-chan struct{}
	// MaxInvisible bounds a lease; DefaultInvisible is a pull's lease when
	// neither the pull nor its group says.
	MaxInvisible, DefaultInvisible time.Duration
	// AutoCreateGroups creates the group a pull names when it does not
	// exist (unless the pull says NoAutoCreate).
	AutoCreateGroups bool
	// DelayLevels are the delay levels' durations (level 1 first).
	DelayLevels []time.Duration
	// Errors are the broker's sentinels.
	Errors Errors
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// TagMatcher compiles a tag expression into a filter on the
	// ConsumeQueue's tag hash (nil accepts all); CompileSQL compiles the
	// SQL92 filter held in field ("" : none). Both are the broker's: a
	// group's subscriptions are checked by them too.
	TagMatcher func(expr string) (func(int64) bool, error)
	CompileSQL func(field, src string) (*filter.Expr, error)
	// Received renders a stored message as delivered (no receipt yet).
	Received func(m *message.Message) Message
	// Client is the consumer instance a request names ("" none).
	Client func(ctx context.Context) string
	// RetryFloor is the lowest CommitLog position of a topic's retries
	// still of its current incarnation (0: all).
	RetryFloor func(topic string) int64
	// RetryWait is how a delivery that failed after failures earlier ones
	// waits for its next attempt under policy p (package retry's Wait with
	// the broker's draw): a ladder level, or a delay.
	RetryWait func(p *retry.Policy, failures int32, level int, delay time.Duration) (int, time.Duration)
	// MaxClientBytes bounds a client id as an attempt history keeps it.
	MaxClientBytes int
	// MaxBatch bounds the receipts or items of one ack, nack or lease
	// change.
	MaxBatch int
	// CheckReason checks a nack's reason held in field (its length, its
	// encoding); CheckNackDelay a nack item's delay against its level
	// (package retry's CheckNackDelay, as the broker's error).
	CheckReason    func(field, reason string) error
	CheckNackDelay func(i, level int, delay time.Duration) error
	// Delivered counts a pull's messages and their body bytes for group;
	// Acked an ack's acknowledged messages; ClampedOffset a committed
	// offset lowered to its queue's end.
	Delivered     func(group string, messages, bytes int)
	Acked         func(group string, messages int)
	ClampedOffset func()
}

// Key names a pop state: a progress group (a group's, or an instance's)
// and a topic.
type Key struct{ Group, Topic string }

// Service is the consumer's requests over the pop states: the pull, the
// receipt loop (Ack, ChangeLease, Nack) and the lease reaper. It holds the
// map of pop states. Safe for concurrent use.
type Service struct {
	cfg Config
	// mu guards pops; it is never held while a pop state's lock is
	// taken.
	mu   sync.Mutex
	pops map[Key]*lease.PopState
}

// New is the consumer's requests over cfg.
func New(cfg Config) *Service {
	return &Service{cfg: cfg, pops: make(map[Key]*lease.PopState)}
}

// PopState is the pop state of a progress group's topic, made when it
// has none.
func (s *Service) PopState(group, topic string) *lease.PopState {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := Key{group, topic}
	ps := s.pops[key]
	if ps == nil {
		_, client := instance.Split(group)
		ps = lease.NewPopState(client)
		s.pops[key] = ps
	}
	return ps
}

// Existing is the pop state of a progress group's topic, nil when it has
// none.
func (s *Service) Existing(group, topic string) *lease.PopState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pops[Key{group, topic}]
}

// States is a copy of the map of pop states, for a walk that locks each
// pop state in turn.
func (s *Service) States() map[Key]*lease.PopState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.pops)
}

// DropWhere takes the pop states whose keys match out of the map and
// returns them (their leases are forgotten with them).
func (s *Service) DropWhere(match func(Key) bool) []*lease.PopState {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*lease.PopState
	for k, ps := range s.pops {
		if match(k) {
			out = append(out, ps)
			delete(s.pops, k)
		}
	}
	return out
}
