package progress

import (
	"context"
	"errors"
	"os"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// SnapshotFile is the offsets snapshot under <data>/config: the table
// (storage/offset's snapshot codec) and the rmq_sys_OFFSET queue offset it
// covers. It is never the only copy of a fact: lost or unreadable, every
// retained record is applied again.
const SnapshotFile = "offsets.snapshot"

// Open recovers the progress table with the code a follower applies
// records with (Follow): from the snapshot, then every rmq_sys_OFFSET
// record after the position it covers (an unreadable snapshot is left
// aside with a warning and every retained record applied). The progress
// of the groups Config.Gone reports is then forgotten: a group deleted
// before its forget record was written. A record that does not decode is
// skipped, with an error in the log.
func Open(ctx context.Context, cfg Config) (*Ledger, error) {
	table, from, err := offset.NewTable(), int64(0), error(nil)
	if snap, rerr := cfg.Store.ReadMeta(SnapshotFile); rerr == nil {
		table, from, err = offset.DecodeSnapshot(snap)
	} else if !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	if errors.Is(err, offset.ErrBadSnap) {
		cfg.Log.Warn().Err(err).Msg("offset snapshot unreadable; replaying every retained offset record")
		table, from, err = offset.NewTable(), 0, nil
	}
	if err != nil {
		return nil, err
	}
	l := NewLedger(table, cfg)
	l.snapshotAt.Store(from)
	l.next = from
	start := cfg.Now()
	replayed, err := l.applyLocked(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range table.Keys() {
		if cfg.Gone != nil && cfg.Gone(k.Group) {
			table.Forget(k.Group)
		}
	}
	cfg.Log.Info().Int("records", replayed).Dur("took", cfg.Now().Sub(start)).Msg("consumer progress recovered")
	return l, nil
}

// Follow applies the rmq_sys_OFFSET records the store dispatched since the
// last call (or since Open): a follower's apply, and a new leader's
// before it leads. It holds the ledger's lock exclusively while it applies.
func (l *Ledger) Follow(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.applyLocked(ctx)
	return err
}

// applyLocked applies every record from l.next to the queue's end and
// moves l.next past them; it returns how many it applied. The caller
// holds the lock exclusively, or owns the ledger alone (Open).
func (l *Ledger) applyLocked(ctx context.Context) (int, error) {
	applied := 0
	next, err := storage.Replay(ctx, l.cfg.Store, l.cfg.Topic, l.next, func(m *message.Message) {
		rec, err := offset.DecodeRecord(m.Body)
		if err != nil {
			l.cfg.Log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping undecodable offset record")
			return
		}
		l.table.Apply(rec)
		applied++
	})
	l.next = next
	return applied, err
}

// WriteSnapshot writes the offsets snapshot (SnapshotFile), under the
// ledger's lock held exclusively: no record is then appended but not yet
// applied. It covers the records up to the queue's end, or, while
// Config.Following, those Follow applied. While Config.Deposed it writes
// nothing: a replicated leader that may have lost its lead (its store is
// fenced) may lack in memory a change the log holds.
func (l *Ledger) WriteSnapshot() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cfg.Deposed != nil && l.cfg.Deposed() {
		return nil
	}
	var from int64
	snap, err := l.table.EncodeSnapshot(func() int64 {
		from = l.cfg.Store.MaxOffset(l.cfg.Topic, 0)
		if l.cfg.Following != nil && l.cfg.Following() {
			from = l.next
		}
		return from
	})
	if err == nil {
		err = l.cfg.Store.WriteMeta(SnapshotFile, snap)
	}
	if err == nil {
		l.snapshotAt.Store(from)
	}
	return err
}

// SnapshotAt is the rmq_sys_OFFSET queue offset the last snapshot written
// (or read at Open) covers: retention keeps the records from there on.
func (l *Ledger) SnapshotAt() int64 { return l.snapshotAt.Load() }
