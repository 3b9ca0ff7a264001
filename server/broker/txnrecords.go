package broker

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
)

// The snapshot of the unresolved transactions (config/transactions.snapshot,
// encoded and decoded by package txn) and how the state is opened from it
// and the queues; see txnstate.go for the rest of the glue.

// txnSnapshotFile is the snapshot of the unresolved transactions under
// <data>/config.
const txnSnapshotFile = txn.SnapshotFile

// txnNames are the broker's and the store's rules for the names and queue
// ids a snapshot holds.
var txnNames = txn.Names{
	Topic:      ValidateTopicName,
	Group:      func(g string) error { return validateName("producer group", g, maxGroupLen) },
	MaxQueueID: storage.MaxQueueID,
}

// txnSnapshotMatches checks a snapshot's position against the queues: not
// beyond their ends, and its marks naming the records there (an
// async-mode power loss can take back records the snapshot saw).
func (b *Broker) txnSnapshotMatches(p txn.Position) error {
	for _, q := range []struct {
		topic string
		next  int64
		mark  txn.Mark
	}{{txnHalfTopic, p.Half, p.HalfMark}, {txnOpTopic, p.Op, p.OpMark}} {
		if end := b.store.MaxOffset(q.topic, 0); q.next > end {
			return fmt.Errorf("the transaction snapshot covers %s up to %d, beyond its end %d", q.topic, q.next, end)
		}
		if q.mark.Seq < 0 || q.mark.Seq < b.store.MinOffset(q.topic, 0) {
			continue
		}
		m, err := b.queueRecord(q.topic, q.mark.Seq)
		if isGone(err) {
			continue
		}
		if err != nil {
			return err
		}
		if m.PhysicalOffset != q.mark.Phys {
			return fmt.Errorf("the transaction snapshot saw %s offset %d at CommitLog offset %d, the queue holds %d", q.topic, q.mark.Seq, q.mark.Phys, m.PhysicalOffset)
		}
	}
	return nil
}

// openTxns loads the snapshot (or starts from the queues' beginning) and
// catches the state up with the queues.
func (b *Broker) openTxns(ctx context.Context) error {
	start := b.clock.Now()
	x := &b.txns
	x.startOffset = b.store.WriteOffset()
	rec := txnRecovery{}
	var snap txn.Snapshot
	data, err := b.store.ReadMeta(txnSnapshotFile)
	if err == nil {
		if snap, err = txn.DecodeSnapshot(data, txnNames); err == nil {
			err = b.txnSnapshotMatches(snap.Pos)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", txnSnapshotFile, err)
	}
	x.Lock()
	defer x.Unlock()
	if err != nil {
		rec.Rebuilt, rec.Reason = true, err.Error()
		if !errors.Is(err, os.ErrNotExist) {
			b.log.Warn().Err(err).Msg("transaction snapshot unusable; rebuilding the unresolved transactions from their queues")
		}
		x.SetPosition(txn.Position{Half: b.store.MinOffset(txnHalfTopic, 0), HalfMark: txn.NoMark, Op: b.store.MinOffset(txnOpTopic, 0), OpMark: txn.NoMark})
	} else {
		x.Install(snap)
	}
	pos := x.Position()
	x.snapshotted = pos
	x.snapHalf.Store(pos.Half)
	x.snapOp.Store(pos.Op)
	before := x.followed
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.followTxns(); err != nil {
		return fmt.Errorf("recover transactions: %w", err)
	}
	rec.HalfRecords, rec.OpRecords = x.followed.half-before.half, x.followed.op-before.op
	rec.Pending, rec.Took = x.Len(), b.clock.Since(start)
	x.recovered = rec
	b.log.Info().Bool("rebuilt", rec.Rebuilt).Int("pending", rec.Pending).Int64("halfRecords", rec.HalfRecords).
		Int64("opRecords", rec.OpRecords).Dur("took", rec.Took).Msg("transactions recovered")
	return nil
}

// snapshotTxns writes the snapshot when the position moved since the last.
func (b *Broker) snapshotTxns() error {
	x := &b.txns
	x.Lock()
	if err := b.followTxns(); err != nil {
		x.Unlock()
		return err
	}
	if x.Position() == x.snapshotted {
		x.Unlock()
		return nil
	}
	pos, data := x.Position(), x.EncodeSnapshot()
	x.Unlock()
	if err := b.store.WriteMeta(txnSnapshotFile, data); err != nil {
		return err
	}
	x.Lock()
	x.snapshotted = pos
	x.Unlock()
	x.snapHalf.Store(pos.Half)
	x.snapOp.Store(pos.Op)
	return nil
}
