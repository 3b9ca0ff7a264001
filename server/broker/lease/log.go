package lease

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Store is what the lease log uses of the broker's store (*storage.Store
// has it all): reading rmq_sys_LEASE back, appending lease records, and the
// snapshot file under config/.
type Store interface {
	// ReadQueue, MinOffset and MaxOffset read a queue and bound it.
	storage.QueueBounds
	// PutClassStaged appends without waiting for the flush; wait does.
	PutClassStaged(class storage.Class, ms []*message.Message, res []storage.PutResult) (wait func() error, err error)
	// ReadMeta and WriteMeta read and write a file under config/.
	ReadMeta(name string) ([]byte, error)
	WriteMeta(name string, data []byte) error
	// Replicated reports whether the store is a replica of a shard.
	Replicated() bool
}

// Place is where a folded lease's offset is read: the store's topic and
// queue behind the view it was granted through, and whether that view is
// orderly (the lease holds its message's sharding key).
type Place struct {
	Topic   string
	Queue   int32
	Orderly bool
}

// Owed is a folded lease still owed to its holder, with the place its
// offset is read at.
type Owed struct {
	At    At
	Lease Folded
	Place Place
}

// Recovery describes the restore at open and the install at Promote.
type Recovery struct {
	Records  int // lease records replayed after the snapshot
	Leases   int // leases put back into their cursors
	Expired  int // of them, already over (taken by the retry path)
	FromSnap int // leases the snapshot held
}

// Config is what the lease log gets from the broker: its store, clock and
// log, and as funcs what it asks of the broker — a key's progress
// generation, the mapping of the store's errors, where a folded lease is read and whether it
// is still owed, the broker's epoch counter and the leases in its
// cursors. server/broker fills it in (lease_log.go there).
type Config struct {
	// Store is the broker's store.
	Store Store
	// Clock is the broker's clock: the time a record and a snapshot's
	// entries are written at, the time a restore took.
	Clock clockwork.Clock
	// Log is the broker's logger.
	Log zerolog.Logger
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// Generation is the key's progress generation (the progress table's),
	// which an entry of a record carries.
	Generation func(offset.Key) uint32
	// Owed is where a folded lease's offset is read, and false when the
	// lease is owed no more: its group or topic is gone (or it is a
	// deleted namesake's), it is done for its group (acked, failed,
	// skipped), before a reset, or retention deleted its message. It reads
	// the registry, the progress table and the store.
	Owed func(At, Folded) (Place, bool)
	// Epoch is the broker's epoch counter (the last epoch given out).
	Epoch func() uint64
	// Live is every lease in the broker's cursors, as one record (a
	// leader's snapshot of a store that is not replicated); it takes the
	// pop states' locks.
	Live func() Record
}

// Log is the broker's lease log: it notes lease changes and writes their
// records (Note, Stages, GrantsMessage), folds the records at open and
// while the broker follows another broker's log (Open, Follow), says
// which folded leases are still owed when the broker takes over (Owed,
// Lead), and writes config/leases.snapshot (Snapshot) with the offset
// retention keeps the lease records from (KeepFrom). The leases
// themselves live in the broker's pop states' cursors. Safe for
// concurrent use.
type Log struct {
	cfg Config
	// snapFrom is the lease-record queue offset the last leases snapshot
	// covers (-1: none written since open); retention keeps the lease
	// records from keepFrom on.
	snapFrom atomic.Int64
	keepFrom atomic.Int64

	// mu, the fold lock, guards the fields below.
	mu sync.Mutex
	// fold is every lease on record, folded: a follower's (following),
	// then, on a replicated store, the leader's fold of the committed
	// records; nil once a leader of a store that is not replicated
	// installed it.
	fold *Fold
	// following: the broker has not led since it opened.
	following bool
	// next is the next rmq_sys_LEASE queue offset to fold.
	next int64
	// recovered is what the open restored and the takeover installed.
	recovered Recovery
}

// New is the lease log of a broker that has not led yet, with an empty
// fold: Open folds the snapshot and the records after it.
func New(cfg Config) *Log {
	l := &Log{cfg: cfg, fold: NewFold(), following: true}
	l.snapFrom.Store(-1)
	return l
}

// KeepFrom is the rmq_sys_LEASE queue offset retention keeps the lease
// records from (the last snapshot's, or the open's replay start).
func (l *Log) KeepFrom() int64 { return l.keepFrom.Load() }

// Recovered is what the last open restored and the takeover installed.
func (l *Log) Recovered() Recovery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recovered
}

// Open, at the broker's open, folds the leases snapshot and the lease
// records after it; the takeover puts the leases that survived into
// their cursors (Owed) and raises the epoch counter above every epoch on
// record (Top).
func (l *Log) Open(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.cfg.Clock.Now()
	st := l.cfg.Store
	var from int64
	if raw, err := st.ReadMeta(SnapshotFile); err == nil {
		off, epoch, rec, derr := DecodeSnapshot(raw)
		if derr != nil {
			l.cfg.Log.Warn().Err(derr).Msg("lease snapshot unreadable; replaying every retained lease record")
		} else {
			from = off
			l.fold.Apply(rec)
			l.fold.Raise(epoch)
			l.recovered.FromSnap = l.fold.Len()
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// After an async-mode crash the queue may end below the snapshot's
	// offset: the records written from its new end on must be replayed
	// next time, so the next snapshot is written whatever it finds.
	from = min(from, st.MaxOffset(Topic, 0))
	l.snapFrom.Store(-1)
	replayed := 0
	next, err := l.replay(ctx, from, func(m *message.Message) {
		if l.foldRecord(m) {
			replayed++
		}
	})
	l.next = next
	if err != nil {
		return err
	}
	l.keepFrom.Store(from)
	l.recovered.Records = replayed
	l.cfg.Log.Info().Int("records", replayed).Int("folded", l.fold.Len()).Dur("took", l.cfg.Clock.Since(start)).
		Msg("lease records folded")
	return nil
}

// Follow folds the lease records the store dispatched since the last
// call (a follower's step; the broker calls it under its follower lock).
func (l *Log) Follow(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.following {
		return nil
	}
	next, err := l.replay(ctx, l.next, func(m *message.Message) { l.foldRecord(m) })
	l.next = next
	return err
}

// foldRecord folds one rmq_sys_LEASE record (at open and while
// following); the caller holds l.mu.
func (l *Log) foldRecord(m *message.Message) bool {
	rec, err := DecodeRecord(m.Body)
	if err != nil {
		l.cfg.Log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping undecodable lease record")
		return false
	}
	l.fold.Apply(rec)
	return true
}

// replay calls fn, in order, for every lease record from queue offset
// from (or the queue's retained minimum) to the queue's end, and returns
// the offset it stopped at: the next record to fold.
func (l *Log) replay(ctx context.Context, from int64, fn func(*message.Message)) (int64, error) {
	return storage.Replay(ctx, l.cfg.Store, Topic, from, fn)
}

// Top is the highest epoch the fold has seen (0 once the fold is gone).
func (l *Log) Top() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fold == nil {
		return 0
	}
	return l.fold.Top()
}

// Owed is every folded lease still owed — neither released nor done for
// its group (Config.Owed), nor lost with the log's tail — in offset order
// per key: what the takeover puts into the cursors.
func (l *Log) Owed() []Owed {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fold == nil {
		return nil
	}
	var owed []Owed
	for _, k := range l.fold.Unreleased() {
		f, _ := l.fold.Get(k)
		p, ok := l.cfg.Owed(k, f)
		if !ok {
			continue
		}
		if k.Off >= l.cfg.Store.MaxOffset(p.Topic, p.Queue) {
			continue // lost with the log's tail
		}
		owed = append(owed, Owed{At: k, Lease: f, Place: p})
	}
	return owed
}

// Lead ends the following once the broker has put the owed leases into
// their cursors (restored of them, expired already over): on a
// replicated store the fold goes on, of the committed records only, and
// the leader's snapshots are written from it; otherwise it is dropped.
func (l *Log) Lead(replicated bool, restored, expired int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recovered.Leases, l.recovered.Expired = restored, expired
	if !l.following {
		return
	}
	l.following = false
	if !replicated {
		l.fold = nil
	}
}

// Snapshot writes config/leases.snapshot when lease records were written
// since the last one: a follower's from its fold, at the position Follow
// folded; a replicated leader's from the fold of the committed records
// (never its cursors: a grant is made in memory before its record is
// committed, and a deposed leader's tail is cut); any other leader's
// from its cursors (Config.Live). Every change is made in memory before
// its record is appended, so the cursors read after the queue's end hold
// every record below it; replaying records the snapshot already reflects
// again changes nothing (newest epoch wins).
func (l *Log) Snapshot() error {
	l.mu.Lock()
	switch {
	case l.following:
		defer l.mu.Unlock()
		return l.snapshotFoldLocked(l.next)
	case l.fold != nil:
		defer l.mu.Unlock()
		return l.snapshotCommittedLocked()
	case l.cfg.Store.Replicated():
		l.mu.Unlock()
		return nil // closing
	}
	l.mu.Unlock()
	from := l.cfg.Store.MaxOffset(Topic, 0)
	if from == l.snapFrom.Load() {
		return nil
	}
	epoch := l.cfg.Epoch()
	return l.writeSnapshot(from, epoch, l.cfg.Live())
}

// snapshotFoldLocked prunes the fold and writes it as the snapshot
// covering the records below from; the caller holds l.mu.
func (l *Log) snapshotFoldLocked(from int64) error {
	if from == l.snapFrom.Load() {
		return nil
	}
	l.fold.Prune(func(k At, f Folded) bool { _, ok := l.cfg.Owed(k, f); return ok })
	return l.writeSnapshot(from, l.fold.Top(), l.fold.Record())
}

// snapshotCommittedLocked folds the lease records committed since the
// last snapshot into the fold and writes it; the caller holds l.mu.
func (l *Log) snapshotCommittedLocked() error {
	// Not the closing context: Close snapshots after cancelling it. The
	// records are local and a snapshot interval's worth.
	next, err := l.replay(context.Background(), l.next, func(m *message.Message) {
		if rec, err := DecodeRecord(m.Body); err == nil {
			l.fold.Apply(rec)
		}
	})
	l.next = next
	if err != nil {
		return err
	}
	return l.snapshotFoldLocked(next)
}

// writeSnapshot writes config/leases.snapshot: rec, covering the lease
// records below queue offset from, epochs up to epoch.
func (l *Log) writeSnapshot(from int64, epoch uint64, rec Record) error {
	snap, err := EncodeSnapshot(from, epoch, rec)
	if err != nil {
		return err
	}
	if err := l.cfg.Store.WriteMeta(SnapshotFile, snap); err != nil {
		return err
	}
	l.snapFrom.Store(from)
	l.keepFrom.Store(from)
	return nil
}

// WithFold calls fn with the fold under the fold lock: nil once a leader
// of a store that is not replicated dropped it (tests, digests).
func (l *Log) WithFold(fn func(*Fold)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(l.fold)
}
