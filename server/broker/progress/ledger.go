package progress

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Store is what the progress family needs of the store (*storage.Store
// has it): the system-class append of its records, the queues'
// bounds, times and counts its queries and start offsets read, and the
// snapshot file (SnapshotFile) under <data>/config.
type Store interface {
	PutClass(class storage.Class, msgs []*message.Message, res []storage.PutResult) error
	PutClassNoWait(class storage.Class, msgs []*message.Message, res []storage.PutResult) error
	MaxOffset(topic string, queueID int32) int64
	MinOffset(topic string, queueID int32) int64
	SearchOffsetByTime(topic string, queueID int32, ts int64) (int64, error)
	CountQueue(topic string, queueID int32, from, to int64, match func(tagsCode int64) bool, limit int64) (int64, bool, error)
	ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (storage.ReadResult, error)
	ReadMeta(name string) ([]byte, error)
	WriteMeta(name string, data []byte) error
}

// Config is what a Ledger is given by the broker at open.
type Config struct {
	// Store is where the records go and the queues are read.
	Store Store
	// Topic is the system topic of progress records (rmq_sys_OFFSET).
	Topic string
	// Now is the broker's clock: a record's born time.
	Now func() time.Time
	// StoreErr maps an error of the store onto the broker's errors.
	StoreErr func(error) error
	// InvalidArgument is the broker's sentinel of a refused argument,
	// which the errors of this package's arguments wrap.
	InvalidArgument error
	// MaxBatch bounds the entries of one record written for many keys at
	// once (a group's start offsets): the broker's MaxBatchItems.
	MaxBatch int
	// Broker is what the queries need of the broker.
	Broker Broker
	// Log is the broker's logger (a record that does not decode, the
	// recovery at Open).
	Log zerolog.Logger
	// Gone reports, at Open, whether a progress group's group is gone
	// (deleted before its forget record was written): its progress is
	// forgotten.
	Gone func(progressGroup string) bool
	// Following reports whether the broker applies another broker's log:
	// its snapshot then covers what Follow applied.
	Following func() bool
	// Deposed reports whether a replicated leader may lack in memory a
	// change its log holds (its store is fenced): no snapshot is written.
	Deposed func() bool
}

// Ledger writes consumer progress (acks, commits, advances, forgets: the
// rmq_sys_OFFSET records) and answers what it says (Progress, Backlog).
// It applies a record to the table only after the record is appended
// (Persist), and orders those appends against the snapshots and the
// follower's apply (Lock). Safe for concurrent use.
type Ledger struct {
	cfg   Config
	table *offset.Table
	// mu orders appends of progress records against snapshots (see
	// Persist): held shared by an append across its write and its apply,
	// exclusively by the offsets snapshot and the follower.
	mu sync.RWMutex
	// next is the next rmq_sys_OFFSET queue offset Follow applies; it is
	// changed under mu held exclusively (or by Open, alone).
	next int64
	// snapshotAt is the queue offset the last snapshot covers.
	snapshotAt atomic.Int64
}

// NewLedger returns the ledger of table, which it owns from then on
// (Open recovers the table and returns its ledger).
func NewLedger(table *offset.Table, cfg Config) *Ledger {
	return &Ledger{cfg: cfg, table: table}
}

// Table is the progress table the ledger applies its records to.
func (l *Ledger) Table() *offset.Table { return l.table }

// Message wraps a progress record as a message of topic (rmq_sys_OFFSET).
func Message(topic string, rec offset.Record, bornMs int64) (*message.Message, error) {
	body, err := offset.EncodeRecord(rec)
	if err != nil {
		return nil, err
	}
	return &message.Message{Topic: topic, Body: body, BornTimestamp: bornMs}, nil
}

// AckEntry is the progress entry acknowledging off of key.
func (l *Ledger) AckEntry(key offset.Key, off int64) offset.Entry {
	_, gen, _ := l.table.Get(key)
	return offset.Entry{Kind: offset.KindAck, Key: key, Generation: gen, Offsets: []int64{off}}
}

// Persist appends rec (after the messages in extra, in one batch and one
// flush) and only then applies it to the progress table: the table — and
// so every snapshot of it — never holds a change the log might not. The
// snapshot takes the ledger's lock exclusively (Lock), so it never sees a
// record that is appended but not yet applied either.
func (l *Ledger) Persist(rec offset.Record, extra []*message.Message) error {
	return l.persist(rec, extra, l.cfg.Store.PutClass)
}

// PersistNoWait is Persist without waiting for the flush
// (Store.PutClassNoWait): a pull's records, its grants (extra) and the
// offsets its filters passed over (rec), which outlive a crash of the
// process once it returns and a crash of the machine once the next flush
// lands (the next ack's or send's, at the latest commitlog.LazyFlushDelay
// later; always before any later reply that waited for a flush). A skip
// lost that way is derived again by the next pull past it; waiting would
// cost every pull a flush.
func (l *Ledger) PersistNoWait(rec offset.Record, extra []*message.Message) error {
	return l.persist(rec, extra, l.cfg.Store.PutClassNoWait)
}

func (l *Ledger) persist(rec offset.Record, extra []*message.Message, put func(storage.Class, []*message.Message, []storage.PutResult) error) error {
	if len(rec.Entries) == 0 && len(extra) == 0 {
		return nil
	}
	msgs := extra
	if len(rec.Entries) > 0 {
		m, err := Message(l.cfg.Topic, rec, l.cfg.Now().UnixMilli())
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	// Progress, and the records written with it (retry copies of failed
	// deliveries, a pull's grants), are system records: they go on above
	// the send ceiling, from the headroom below the system ceiling
	// (storage Class).
	if err := put(storage.ClassSystem, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return l.cfg.StoreErr(err)
	}
	l.table.Apply(rec)
	return nil
}

// AwaitApplied returns once every progress record appended before the
// call is applied to the progress table. A record is visible to readers of
// the log (the PostgreSQL mirror) as soon as it is flushed, a moment
// before Persist applies it; a caller that compares what a reader saw
// with Progress reads the reader first, then calls AwaitApplied, then
// Progress, and so never sees the reader ahead of the table. It waits for
// the appends in flight (at most one flush), as a snapshot does.
func (l *Ledger) AwaitApplied() {
	l.mu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier: it waits for the readers in Persist
	l.mu.Unlock()
}

// Lock takes the ledger's lock exclusively: no append is then between its
// write and its apply. The offsets snapshot holds it while it encodes the
// table, the follower while it applies records.
func (l *Ledger) Lock() { l.mu.Lock() }

// Unlock releases Lock.
func (l *Ledger) Unlock() { l.mu.Unlock() }

// Commit durably sets key's committed offset (a reset: a new generation;
// everything from off on is consumed again).
func (l *Ledger) Commit(key offset.Key, off int64) error {
	_, gen, _ := l.table.Get(key)
	return l.Persist(offset.Record{Entries: []offset.Entry{{Kind: offset.KindCommit, Key: key, Generation: gen + 1, Offset: off}}}, nil)
}

// Advance durably raises key's committed offset to at least off (retention
// deleted what lay below), keeping the acknowledgements above it.
func (l *Ledger) Advance(key offset.Key, off int64) error {
	return l.Persist(offset.Record{Entries: []offset.Entry{{Kind: offset.KindAdvance, Key: key, Offset: off}}}, nil)
}
