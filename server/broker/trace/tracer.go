package trace

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Topic carries trace records, RocketMQ's RMQ_SYS_TRACE_TOPIC. Part of
// the on-disk format.
const Topic = "rmq_sys_TRACE"

// ErrNoMessage: the id a trace asks for names no message, nor a copy of
// one (the broker answers its ErrMessageNotFound).
var ErrNoMessage = errors.New("trace: no such message")

// Store is what the trace reads and writes of the store (*storage.Store):
// the records a trace is made of, found by id, UNIQ_KEY, origin and KEYS;
// the lease and progress queues the follower reads; the trace records it
// appends.
type Store interface {
	LookupID(id message.ID) (*message.Message, error)
	Topics() []string
	FindByUniqKey(topic, key string) (*message.Message, error)
	FindByOrigin(id string, max int) ([]*message.Message, bool, error)
	QueryByKey(topic, key string, begin, end int64, max int) ([]*message.Message, error)
	ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (storage.ReadResult, error)
	MinOffset(topic string, queueID int32) int64
	MaxOffset(topic string, queueID int32) int64
	PhysicalOffset(topic string, queueID int32, off int64) (int64, error)
	PutClass(class storage.Class, ms []*message.Message, res []storage.PutResult) error
	NewDataSignal(topic string) <-chan struct{}
	AwaitDispatch(ctx context.Context) error
}

// Broker is what the trace needs of the broker it traces, whose rules
// these are (server/broker fills it in).
type Broker interface {
	// Hidden reports whether m is no message a trace starts from: one of
	// the broker's bookkeeping records, or a message stored before its
	// topic was deleted.
	Hidden(m *message.Message) bool
	// MessageID is the id a stored message is known by: its own, or a
	// committed transactional message's transaction's.
	MessageID(m *message.Message) string
	// ScheduleEntry parses the level and queue offset of the schedule
	// entry out of a delivered entry's UNIQ_KEY.
	ScheduleEntry(uniqKey string) (level int, offset int64, ok bool)
	// DeadLetterStatus is the status of group's dead letter id.
	DeadLetterStatus(group, id string) (dlq.StatusRecord, bool)
	// Receipt decodes a receipt with the receipt keyring of the moment.
	Receipt(text string) (receipt.Receipt, error)
	// AwaitDispatch waits, a moment at most, until what was stored before
	// the call is in the ConsumeQueues.
	AwaitDispatch(ctx context.Context) error
	// StoreErr is a store error as the broker reports it.
	StoreErr(err error) error
}

// Names are the broker's names the trace reads in its records.
type Names struct {
	// RetryPrefix starts a group's retry topic ("%RETRY%").
	RetryPrefix string
	// Attempts is the property of a copy's attempt history ("ATTEMPTS",
	// package retry's Attempt).
	Attempts string
	// OffsetTopic carries the progress records ("rmq_sys_OFFSET").
	OffsetTopic string
}

// Config is what a Tracer is made of; every field but Off is required.
type Config struct {
	Store  Store
	Broker Broker
	Names  Names
	// Clock is the broker's clock: a push outcome's time, a record's born
	// time, the follower's batching and a trace's wait.
	Clock  clockwork.Clock
	Logger zerolog.Logger
	// Off: tracing is off (the broker's Options.NoMessageTrace): no
	// follower, no push outcomes, no carry.
	Off bool
	// Closing is closed, and ClosingCtx cancelled, when the broker starts
	// closing: a trace stops waiting, a pass stops waiting for its
	// records' dispatch.
	Closing    <-chan struct{}
	ClosingCtx context.Context
}

// Bounds of the follower and its records.
const (
	// followInterval is the least time between two passes that new
	// records start (a trace query starts one at once).
	followInterval = 100 * time.Millisecond
	// followBatch is how many records of each queue one pass reads.
	followBatch = 256
	// recordItems, recordKeys and recordBytes (its strings, about)
	// bound one trace record.
	recordItems = 2048
	recordKeys  = 512
	recordBytes = 32 << 10
	// maxPending bounds the push outcomes waiting for a pass.
	maxPending = 1 << 16
	// resumeScan is how many trace records Resume looks back for the
	// follower's position.
	resumeScan = 64
)

// Tracer is the message trace of one broker: the query (Query), the
// follower that writes trace records (Run, RunOnce), the push outcomes it
// is told of (Pushed) and retention's carry of traces (NoteCarried,
// NoteLivesBelow, Carry).
type Tracer struct {
	store  Store
	broker Broker
	names  Names
	clock  clockwork.Clock
	log    zerolog.Logger

	off        bool
	closing    <-chan struct{}
	closingCtx context.Context
	kick       chan struct{} // a trace query wants a pass now
	note       chan struct{} // a push outcome was noted

	// next: the queue offsets the follower reads from (its goroutine only,
	// and Resume).
	leaseNext, offsetNext int64

	mu sync.Mutex
	// done: the events of the records below these offsets are in trace
	// records that are visible to lookups (-1 before the first pass).
	leaseDone, offsetDone int64
	changed               chan struct{} // closed when done moves
	pending               []pushNote
	carried               []string // lives whose copies retention carries (Carry)
	surviving             []string // lives whose carried events retention deletes (NoteLivesBelow)

	dropped, events, records atomic.Uint64
	logged                   time.Time
}

// pushNote is a push outcome waiting for the follower.
type pushNote struct {
	group, receipt, result string
	status                 int
	at                     int64
}

// New readies the trace of a broker at its open; Resume, when the broker
// takes over, finds where the follower resumes.
func New(cfg Config) *Tracer {
	return &Tracer{store: cfg.Store, broker: cfg.Broker, names: cfg.Names, clock: cfg.Clock, log: cfg.Logger,
		off: cfg.Off, closing: cfg.Closing, closingCtx: cfg.ClosingCtx,
		kick: make(chan struct{}, 1), note: make(chan struct{}, 1), changed: make(chan struct{}),
		leaseDone: -1, offsetDone: -1}
}

// Off reports whether tracing is off (no follower to run).
func (t *Tracer) Off() bool { return t.off }

// Stats describes message tracing.
type Stats struct {
	// Enabled is false with --message-trace=false.
	Enabled bool
	// Events and Records count what the follower appended since start.
	Events, Records uint64
	// Dropped counts push outcomes dropped because the buffer was full.
	Dropped uint64
	// Lag counts the lease and progress records not yet followed.
	Lag int64
}

// Stats reports the follower's counters.
func (t *Tracer) Stats() Stats {
	st := Stats{Enabled: !t.off, Events: t.events.Load(), Records: t.records.Load(), Dropped: t.dropped.Load()}
	if !t.off {
		t.mu.Lock()
		ld, od := t.leaseDone, t.offsetDone
		t.mu.Unlock()
		st.Lag = max(0, t.store.MaxOffset(lease.Topic, 0)-max(ld, 0)) + max(0, t.store.MaxOffset(t.names.OffsetTopic, 0)-max(od, 0))
	}
	return st
}

// Pushed notes the outcome of one webhook delivery (package
// server/push): the lease of receipt, the endpoint's HTTP status (0
// without an answer) and the result. It never blocks; when the buffer is
// full the outcome is dropped and counted.
func (t *Tracer) Pushed(group, receipt string, status int, result string) {
	if t.off {
		return
	}
	t.mu.Lock()
	if len(t.pending) >= maxPending {
		t.mu.Unlock()
		t.dropped.Add(1)
		return
	}
	t.pending = append(t.pending, pushNote{group: group, receipt: receipt, result: result, status: status, at: t.clock.Now().UnixMilli()})
	t.mu.Unlock()
	select {
	case t.note <- struct{}{}:
	default:
	}
}
