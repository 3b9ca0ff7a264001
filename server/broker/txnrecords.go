package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The transaction records (rmq_sys_TRANS_OP bodies), the snapshot of the
// unresolved set (config/transactions.snapshot) and how the set is opened
// from both; see txnstate.go for the set itself.

// txnOpRecord is the body of an rmq_sys_TRANS_OP record (one transaction
// per record).
type txnOpRecord struct {
	ID    string    `json:"id"`
	State string    `json:"state"` // checked, committed, rolled-back
	At    time.Time `json:"at"`
	// CheckTimes is the checks handed out (with this one, for checked).
	CheckTimes int `json:"checkTimes"`
	// NextCheckMs is when the next check falls due (checked; unix ms).
	NextCheckMs int64 `json:"nextCheckMs,omitempty"`
	// Reason says why a transaction was rolled back.
	Reason string `json:"reason,omitempty"`
	// ProducerGroup, Topic, QueueID and BornMs describe a finished
	// transaction (committed, rolled-back).
	ProducerGroup string `json:"producerGroup,omitempty"`
	Topic         string `json:"topic,omitempty"`
	QueueID       int32  `json:"queueId,omitempty"`
	BornMs        int64  `json:"bornMs,omitempty"`
}

// decodeTxnOp decodes and checks an op record's body.
func decodeTxnOp(body []byte) (txnOpRecord, error) {
	var rec txnOpRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		return rec, fmt.Errorf("transaction op record: %w", err)
	}
	if mid, err := message.ParseID(rec.ID); err != nil {
		return rec, fmt.Errorf("transaction op record: id: %w", err)
	} else if rec.ID != mid.String() {
		return rec, fmt.Errorf("transaction op record: id %s is not in its canonical form", QuoteValue(rec.ID))
	}
	switch rec.State {
	case txnChecked, TxnCommitted, TxnRolledBack:
	default:
		return rec, fmt.Errorf("transaction op record: state %s", QuoteValue(rec.State))
	}
	if rec.CheckTimes < 0 {
		return rec, fmt.Errorf("transaction op record: checkTimes %d", rec.CheckTimes)
	}
	return rec, nil
}

func txnOpMessage(rec txnOpRecord, now time.Time) *message.Message {
	body, err := json.Marshal(rec)
	if err != nil {
		panic(err) // plain fields always marshal
	}
	m := &message.Message{Topic: txnOpTopic, Body: body, BornTimestamp: now.UnixMilli()}
	m.SetProperty(message.PropertyUniqKey, txnKey(rec.ID))
	return m
}

// txnSnapshot is the snapshot of the unresolved transactions and the
// position it covers.
type txnSnapshot struct {
	Version int                 `json:"version"`
	Pos     txnPosition         `json:"pos"`
	Txns    []txnSnapshotRecord `json:"txns"`
}

type txnSnapshotRecord struct {
	ID           string `json:"id"`
	Seq          int64  `json:"seq"`
	Phys         int64  `json:"phys"`
	Topic        string `json:"topic"`
	QueueID      int32  `json:"queueId"`
	Group        string `json:"group"`
	CheckAfterMs int64  `json:"checkAfterMs"`
	BornMs       int64  `json:"bornMs"`
	Checks       int    `json:"checks"`
	NextMs       int64  `json:"nextMs"`
}

const txnSnapshotVersion = 1

// encodeTxnSnapshot encodes the state; the caller holds mu.
func (x *txnSet) encodeSnapshot() []byte {
	s := txnSnapshot{Version: txnSnapshotVersion, Pos: x.pos, Txns: make([]txnSnapshotRecord, 0, len(x.pending))}
	for _, t := range x.pending {
		s.Txns = append(s.Txns, txnSnapshotRecord{ID: t.id, Seq: t.seq, Phys: t.phys, Topic: t.topic, QueueID: t.queue,
			Group: t.group, CheckAfterMs: t.checkAfter.Milliseconds(), BornMs: t.born.UnixMilli(), Checks: t.checks, NextMs: t.next.UnixMilli()})
	}
	sort.Slice(s.Txns, func(i, j int) bool { return s.Txns[i].Seq < s.Txns[j].Seq })
	out, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain fields always marshal
	}
	return out
}

// decodeTxnSnapshot decodes and checks a snapshot.
func decodeTxnSnapshot(data []byte) (txnSnapshot, error) {
	var s txnSnapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("transaction snapshot: %w", err)
	}
	bad := func(format string, args ...any) (txnSnapshot, error) {
		return txnSnapshot{}, fmt.Errorf("transaction snapshot: "+format, args...)
	}
	if s.Version != txnSnapshotVersion {
		return bad("version %d", s.Version)
	}
	p := s.Pos
	if p.Half < 0 || p.Op < 0 || p.HalfMark.Seq < -1 || p.OpMark.Seq < -1 || p.HalfMark.Seq >= p.Half || p.OpMark.Seq >= p.Op {
		return bad("position %+v", p)
	}
	seen := make(map[string]struct{}, len(s.Txns))
	for i, r := range s.Txns {
		mid, err := message.ParseID(r.ID)
		if err != nil {
			return bad("txns[%d]: id: %v", i, err)
		}
		if r.ID != mid.String() {
			return bad("txns[%d]: id %s is not in its canonical form", i, QuoteValue(r.ID))
		}
		if _, dup := seen[r.ID]; dup {
			return bad("txns[%d]: %s twice", i, r.ID)
		}
		seen[r.ID] = struct{}{}
		switch {
		case r.Seq < 0 || r.Seq >= p.Half || r.Phys < 0:
			return bad("txns[%d]: record %d at %d outside the position", i, r.Seq, r.Phys)
		case ValidateTopicName(r.Topic) != nil || validateName("producer group", r.Group, maxGroupLen) != nil:
			return bad("txns[%d]: topic %s or group %s", i, QuoteValue(r.Topic), QuoteValue(r.Group))
		case r.QueueID < 0 || r.QueueID > storage.MaxQueueID || r.CheckAfterMs <= 0 || r.CheckAfterMs > MaxCheckAfter.Milliseconds() || r.Checks < 0:
			return bad("txns[%d]: queue %d, checkAfterMs %d, checks %d", i, r.QueueID, r.CheckAfterMs, r.Checks)
		}
	}
	return s, nil
}

// install replaces the state with a snapshot's; the caller holds mu.
func (x *txnSet) install(s txnSnapshot) {
	x.pos = s.Pos
	for _, r := range s.Txns {
		mid, _ := message.ParseID(r.ID) // checked by decodeTxnSnapshot
		x.add(&txn{id: r.ID, idOffset: mid.Offset(), seq: r.Seq, phys: r.Phys, topic: r.Topic, queue: r.QueueID,
			group: r.Group, checkAfter: time.Duration(r.CheckAfterMs) * time.Millisecond, born: time.UnixMilli(r.BornMs),
			checks: r.Checks, next: time.UnixMilli(r.NextMs), hi: -1})
	}
}

// txnSnapshotMatches checks a snapshot's position against the queues: not
// beyond their ends, and its marks naming the records there (an
// async-mode power loss can take back records the snapshot saw).
func (b *Broker) txnSnapshotMatches(p txnPosition) error {
	for _, q := range []struct {
		topic string
		next  int64
		mark  txnMark
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
	var snap txnSnapshot
	data, err := b.store.ReadMeta(txnSnapshotFile)
	if err == nil {
		if snap, err = decodeTxnSnapshot(data); err == nil {
			err = b.txnSnapshotMatches(snap.Pos)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", txnSnapshotFile, err)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil {
		rec.Rebuilt, rec.Reason = true, err.Error()
		if !errors.Is(err, os.ErrNotExist) {
			b.log.Warn().Err(err).Msg("transaction snapshot unusable; rebuilding the unresolved transactions from their queues")
		}
		x.pos = txnPosition{Half: b.store.MinOffset(txnHalfTopic, 0), HalfMark: noTxnMark, Op: b.store.MinOffset(txnOpTopic, 0), OpMark: noTxnMark}
	} else {
		x.install(snap)
	}
	x.snapshotted = x.pos
	x.snapHalf.Store(x.pos.Half)
	x.snapOp.Store(x.pos.Op)
	before := x.followed
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.followTxns(); err != nil {
		return fmt.Errorf("recover transactions: %w", err)
	}
	rec.HalfRecords, rec.OpRecords = x.followed.half-before.half, x.followed.op-before.op
	rec.Pending, rec.Took = len(x.pending), b.clock.Since(start)
	x.recovered = rec
	b.log.Info().Bool("rebuilt", rec.Rebuilt).Int("pending", rec.Pending).Int64("halfRecords", rec.HalfRecords).
		Int64("opRecords", rec.OpRecords).Dur("took", rec.Took).Msg("transactions recovered")
	return nil
}

// snapshotTxns writes the snapshot when the position moved since the last.
func (b *Broker) snapshotTxns() error {
	x := &b.txns
	x.mu.Lock()
	if err := b.followTxns(); err != nil {
		x.mu.Unlock()
		return err
	}
	if x.pos == x.snapshotted {
		x.mu.Unlock()
		return nil
	}
	pos, data := x.pos, x.encodeSnapshot()
	x.mu.Unlock()
	if err := b.store.WriteMeta(txnSnapshotFile, data); err != nil {
		return err
	}
	x.mu.Lock()
	x.snapshotted = pos
	x.mu.Unlock()
	x.snapHalf.Store(pos.Half)
	x.snapOp.Store(pos.Op)
	return nil
}
