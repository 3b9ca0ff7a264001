package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Transactional (half) messages, RocketMQ's TransactionMQProducer. A
// transactional send stores the message as a half message in the system
// topic rmq_sys_TRANS_HALF (queue 0), with its destination in REAL_TOPIC /
// REAL_QID and its producer group in TRAN_PGROUP; no group reads that
// topic, so the message is invisible until the transaction ends. Its id
// (the send's messageId) is the transaction id.
//
// A commit writes, in one batch, the message to its topic and queue — a
// copy of the half message with the same body, tag, keys and properties,
// carrying the transaction id (TRAN_ID, shown as its messageId, and
// UNIQ_KEY "txn:<id>") — and an op record to rmq_sys_TRANS_OP saying
// "committed"; a rollback writes the op record "rolled-back" alone. Each
// check handed out to the producer group writes an op record "checked"
// with the new check count and the next due time. An op record names one
// transaction and carries UNIQ_KEY "txn:<id>", so the newest one of a
// transaction is found by id through the store's key index: that is how a
// repeated commit or rollback learns how a finished transaction ended.
//
// The unresolved transactions are held in memory (package txn's State,
// followed in txnstate.go), bounded by the quotas on them: derived from
// the two queues as the timer index is (every half record is a birth or a
// copy, every op record a change), snapshotted to
// <data>/config/transactions.snapshot with the queue positions it covers,
// and rebuilt from the queues when the snapshot is missing or does not
// match them. Retention keeps the records the snapshot does not cover, and
// carries unresolved half messages past itself (a copy naming the
// transaction, with its check count and next check), so an unresolved
// transaction is never lost to retention.
//
// Checks: a transaction's first check falls due CheckAfterMs after the
// send, each later one max(CheckAfterMs, TransactionCheckInterval) after
// the previous was handed out. A producer group pulls the checks that are
// due (PullTransactionChecks); one that was handed out
// TransactionMaxChecks times and is due again is rolled back by the
// transaction loop (reason max-checks) and counted.

// The family's topics and half-message properties (package txn).
const (
	txnHalfTopic = txn.HalfTopic
	txnOpTopic   = txn.OpTopic

	propTxnID         = txn.PropID
	propTxnGroup      = txn.PropGroup
	propTxnCheckAfter = txn.PropCheckAfter
	propTxnChecks     = txn.PropChecks
	propTxnNextCheck  = txn.PropNextCheck
)

// Transaction limits and defaults.
const (
	// DefaultCheckAfter is a transactional send's checkAfterMs when it
	// gives none (RocketMQ's transactionTimeOut).
	DefaultCheckAfter = txn.DefaultCheckAfter
	// MinCheckAfter and MaxCheckAfter bound checkAfterMs.
	MinCheckAfter = txn.MinCheckAfter
	MaxCheckAfter = txn.MaxCheckAfter
	// DefaultTransactionMaxChecks is Options.TransactionMaxChecks when
	// zero (RocketMQ's transactionCheckMax).
	DefaultTransactionMaxChecks = 15
	// MaxTransactionMaxChecks bounds it.
	MaxTransactionMaxChecks = 1000
	// DefaultTransactionCheckInterval is Options.TransactionCheckInterval
	// when zero (RocketMQ's transactionCheckInterval).
	DefaultTransactionCheckInterval = time.Minute
	// MaxTransactionChecksPerPull is the most checks one pull hands out.
	MaxTransactionChecksPerPull = MaxPullMessages
	// MaxTransactionCheckWait is the longest a check pull may wait.
	MaxTransactionCheckWait = 30 * time.Second
)

// txnView describes pending transaction t; the caller holds the state's
// lock or t's op lock.
func txnView(t *txn.Txn) Transaction {
	return Transaction{ID: t.ID(), State: TxnPending, ProducerGroup: t.Group(), Topic: t.Topic(), QueueID: t.Queue(), QueueOffset: -1,
		CheckTimes: t.Checks(), NextCheckAt: t.Next().UTC(), CreatedAt: t.Born().UTC()}
}

// TransactionFinishedError is ErrTransactionFinished with how the
// transaction ended.
type TransactionFinishedError struct {
	Transaction Transaction
}

// Error says how the transaction ended.
func (e *TransactionFinishedError) Error() string {
	t := e.Transaction
	how := t.State
	if t.Reason != "" {
		how += " (" + t.Reason + ")"
	}
	return fmt.Sprintf("%v: transaction %s was %s", ErrTransactionFinished, t.ID, how)
}

// Unwrap makes errors.Is(err, ErrTransactionFinished) hold.
func (e *TransactionFinishedError) Unwrap() error { return ErrTransactionFinished }

// checkTxnSend checks the transaction fields of one message of a send.
func (b *Broker) checkTxnSend(in *SendMessage) error {
	if !in.Transactional {
		if in.ProducerGroup != "" || in.CheckAfterMs != 0 {
			return fmt.Errorf("%w: producerGroup and checkAfterMs belong to a transactional send (transactional: true)", ErrInvalidArgument)
		}
		return nil
	}
	if in.ProducerGroup == "" {
		return fmt.Errorf("%w: a transactional send needs a producerGroup (the group asked about it when it is not resolved)", ErrInvalidArgument)
	}
	if err := validateName("producer group", in.ProducerGroup, maxGroupLen); err != nil {
		return err
	}
	if in.CheckAfterMs != 0 && (in.CheckAfterMs < MinCheckAfter.Milliseconds() || in.CheckAfterMs > MaxCheckAfter.Milliseconds()) {
		return fmt.Errorf("%w: checkAfterMs %d must be between %d and %d", ErrInvalidArgument, in.CheckAfterMs, MinCheckAfter.Milliseconds(), MaxCheckAfter.Milliseconds())
	}
	if in.DelayLevel != 0 || in.DelayMs != 0 || !in.DeliverAt.IsZero() {
		return fmt.Errorf("%w: a transactional message cannot be delayed (delayLevel, delayMs, deliverAt): commit it when it should be delivered", ErrInvalidArgument)
	}
	return nil
}

// asHalf wraps a message for the half topic.
func asHalf(m *message.Message, in *SendMessage) {
	after := in.CheckAfterMs
	if after == 0 {
		after = DefaultCheckAfter.Milliseconds()
	}
	m.SetProperty(message.PropertyRealTopic, m.Topic)
	m.SetProperty(message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.SetProperty(propTxnGroup, in.ProducerGroup)
	m.SetProperty(propTxnCheckAfter, strconv.FormatInt(after, 10))
	m.Topic, m.QueueID = txnHalfTopic, 0
}

// committedCopy is the message a commit of t delivers: the half message
// on its topic and queue, named by the transaction id.
func committedCopy(half *message.Message, t *txn.Txn) *message.Message {
	out := copyOf(half, t.Topic(), message.PropertyRealTopic, message.PropertyRealQueueID, propTxnGroup,
		propTxnCheckAfter, propTxnChecks, propTxnNextCheck)
	out.QueueID = t.Queue()
	out.SetProperty(propTxnID, t.ID())
	out.SetProperty(message.PropertyUniqKey, txn.Key(t.ID()))
	return out
}

// halfCopy is a copy of half record m carrying t past retention.
func halfCopy(m *message.Message, t *txn.Txn) *message.Message {
	c := copyOf(m, txnHalfTopic)
	c.SetProperty(propTxnID, t.ID())
	c.SetProperty(message.PropertyUniqKey, txn.Key(t.ID()))
	c.SetProperty(propTxnChecks, strconv.Itoa(t.Checks()))
	c.SetProperty(propTxnNextCheck, strconv.FormatInt(t.Next().UnixMilli(), 10))
	return c
}

// dedupResult is the send result a stored message answers a duplicate
// send with: a half message (or a committed one) by its transaction id.
func dedupResult(m *message.Message) SendResult {
	r := SendResult{MessageID: message.NewID(m.StoreHost, m.PhysicalOffset).String(), QueueID: m.QueueID, QueueOffset: m.QueueOffset}
	switch {
	case m.Topic == txnHalfTopic:
		qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
		r = SendResult{MessageID: txn.IDOf(m), QueueID: int32(qid), QueueOffset: -1}
		r.TransactionID = r.MessageID
	case m.Property(propTxnID) != "":
		r.MessageID = m.Property(propTxnID)
		r.TransactionID = r.MessageID
	}
	return r
}

// findDedup finds the message a dedup id of topic names: stored in the
// topic, or a half message of a transaction for it.
func (b *Broker) findDedup(topic, id string, since int64) (*message.Message, error) {
	m, err := b.store.FindByDedupID(topic, id, since)
	if !errors.Is(err, storage.ErrNotFound) {
		return m, err
	}
	m, herr := b.store.FindByDedupID(txnHalfTopic, id, since)
	if herr == nil && m.Property(message.PropertyRealTopic) == topic {
		return m, nil
	}
	if herr != nil && !errors.Is(herr, storage.ErrNotFound) {
		return nil, herr
	}
	return nil, err
}

// parseTxnID checks a client's transaction id.
func parseTxnID(id string) (string, error) {
	mid, err := message.ParseID(id)
	if err != nil {
		return "", fmt.Errorf("%w: transaction id: %w", ErrInvalidArgument, err)
	}
	return mid.String(), nil
}

// CommitTransaction ends a transaction by delivering its message to its
// topic and queue. Committing a committed transaction answers as the
// first commit did; one that was rolled back is a
// *TransactionFinishedError.
func (b *Broker) CommitTransaction(ctx context.Context, id string) (Transaction, error) {
	return b.endTransaction(ctx, id, true)
}

// RollbackTransaction ends a transaction by discarding its message;
// idempotent as CommitTransaction.
func (b *Broker) RollbackTransaction(ctx context.Context, id string) (Transaction, error) {
	return b.endTransaction(ctx, id, false)
}

func (b *Broker) endTransaction(ctx context.Context, id string, commit bool) (Transaction, error) {
	if b.closed.Load() {
		return Transaction{}, ErrShuttingDown
	}
	id, err := parseTxnID(id)
	if err != nil {
		return Transaction{}, err
	}
	t, err := b.lockTxn(ctx, id)
	if err != nil {
		return Transaction{}, err
	}
	if t == nil {
		return b.finishedTxn(ctx, id, commit)
	}
	defer t.UnlockOp()
	if commit {
		return b.commitTxn(t)
	}
	return b.rollbackTxn(t, TxnReasonProducer)
}

// finishedTxn answers a commit (or rollback) of a transaction that is not
// pending: how it ended, as an error when it ended the other way.
func (b *Broker) finishedTxn(ctx context.Context, id string, commit bool) (Transaction, error) {
	v, err := b.finishedView(ctx, id)
	if err != nil {
		return Transaction{}, err
	}
	if (v.State == TxnCommitted) != commit {
		return Transaction{}, &TransactionFinishedError{Transaction: v}
	}
	return v, nil
}

// finishedView describes a finished transaction from its last op record.
func (b *Broker) finishedView(ctx context.Context, id string) (Transaction, error) {
	if err := b.awaitDispatch(ctx); err != nil {
		return Transaction{}, err
	}
	m, err := b.store.FindByUniqKey(txnOpTopic, txn.Key(id))
	if errors.Is(err, storage.ErrNotFound) {
		return Transaction{}, fmt.Errorf("%w: %s (never sent, or finished before retention removed its records)", ErrTransactionNotFound, id)
	}
	if err != nil {
		return Transaction{}, mapStoreErr(err)
	}
	rec, err := txn.DecodeOp(m.Body)
	if err != nil || rec.ID != id || (rec.State != TxnCommitted && rec.State != TxnRolledBack) {
		return Transaction{}, fmt.Errorf("%w: %s (its last record does not say how it ended)", ErrTransactionNotFound, id)
	}
	v := Transaction{ID: id, State: rec.State, Reason: rec.Reason, ProducerGroup: rec.ProducerGroup, Topic: rec.Topic,
		QueueID: rec.QueueID, QueueOffset: -1, CheckTimes: rec.CheckTimes, CreatedAt: time.UnixMilli(rec.BornMs).UTC(), FinishedAt: rec.At}
	if v.State == TxnCommitted {
		if c, err := b.store.FindByUniqKey(rec.Topic, txn.Key(id)); err == nil {
			v.QueueID, v.QueueOffset = c.QueueID, c.QueueOffset
		}
	}
	return v, nil
}

// GetTransaction describes a transaction: pending (with its checks and
// the next one's due time) or how it ended.
func (b *Broker) GetTransaction(ctx context.Context, id string) (Transaction, error) {
	id, err := parseTxnID(id)
	if err != nil {
		return Transaction{}, err
	}
	x := &b.txns
	if err := b.lockTxns(ctx); err != nil {
		return Transaction{}, err
	}
	t := x.Get(id)
	var v Transaction
	if t != nil {
		v = txnView(t)
	}
	x.Unlock()
	if t != nil {
		return v, nil
	}
	return b.finishedView(ctx, id)
}

// commitTxn delivers t's message; the caller holds t's op lock.
func (b *Broker) commitTxn(t *txn.Txn) (Transaction, error) {
	half, err := b.store.Lookup(t.Phys())
	if err != nil {
		if isGone(err) || errors.Is(err, storage.ErrCorrupt) {
			b.log.Error().Err(err).Str("transaction", t.ID()).Msg("half message lost; the transaction is rolled back")
			return b.rolledBackInstead(t, TxnReasonLost)
		}
		return Transaction{}, mapStoreErr(err)
	}
	b.topicGate.RLock() // see topicdelete.go
	defer b.topicGate.RUnlock()
	if b.txnTopicGone(t) {
		return b.rolledBackInstead(t, TxnReasonTopicDeleted)
	}
	now := b.clock.Now()
	op := t.FinalOp(TxnCommitted, "", now)
	if done, err := b.committedBefore(t); err != nil {
		return Transaction{}, err
	} else if done != nil {
		// Delivered by a commit whose op record a crash (or an error)
		// lost: record the outcome only.
		if err := b.putTxnOps(storage.ClassSystem, nil, op); err != nil {
			return Transaction{}, err
		}
		return b.settledCommit(t, op, done.QueueID, done.QueueOffset)
	}
	out := committedCopy(half, t)
	res := make([]storage.PutResult, 2)
	if err := b.store.PutClass(storage.ClassSend, []*message.Message{out, txn.OpMessage(op, now)}, res); err != nil {
		t.SetUnsure() // the message may be stored: look for it before the next attempt
		return Transaction{}, mapStoreErr(err)
	}
	return b.settledCommit(t, op, res[0].QueueID, res[0].QueueOffset)
}

// settledCommit applies a commit's records and describes the outcome.
func (b *Broker) settledCommit(t *txn.Txn, op txn.OpRecord, queue int32, offset int64) (Transaction, error) {
	v := txnView(t)
	v.State, v.FinishedAt, v.NextCheckAt = TxnCommitted, op.At, time.Time{}
	v.QueueID, v.QueueOffset = queue, offset
	b.txns.count(func(s *TransactionStats) { s.Committed++ })
	return v, b.settleTxns()
}

// committedBefore looks for the committed message of a transaction whose
// earlier commit may have been stored without its op record (it existed
// before this start, or a commit of it failed with an unknown outcome).
func (b *Broker) committedBefore(t *txn.Txn) (*message.Message, error) {
	if !t.Unsure() && t.IDOffset() >= b.txns.startOffset {
		return nil, nil
	}
	m, err := b.store.FindByUniqKey(t.Topic(), txn.Key(t.ID()))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, mapStoreErr(err)
	}
	return m, nil
}

// txnTopicGone reports whether t's topic was deleted since its send.
func (b *Broker) txnTopicGone(t *txn.Txn) bool {
	if _, ok := b.registry.topic(t.Topic()); !ok {
		return true
	}
	return t.IDOffset() < b.retryFloor(t.Topic())
}

// rolledBackInstead rolls t back for reason and reports it as finished
// the other way (a commit that could not deliver).
func (b *Broker) rolledBackInstead(t *txn.Txn, reason string) (Transaction, error) {
	v, err := b.rollbackTxn(t, reason)
	if err != nil {
		return Transaction{}, err
	}
	return Transaction{}, &TransactionFinishedError{Transaction: v}
}

// rollbackTxn discards t's message; the caller holds t's op lock.
func (b *Broker) rollbackTxn(t *txn.Txn, reason string) (Transaction, error) {
	if done, err := b.committedBefore(t); err != nil {
		return Transaction{}, err
	} else if done != nil {
		op := t.FinalOp(TxnCommitted, "", b.clock.Now())
		if err := b.putTxnOps(storage.ClassSystem, nil, op); err != nil {
			return Transaction{}, err
		}
		v, err := b.settledCommit(t, op, done.QueueID, done.QueueOffset)
		if err != nil {
			return Transaction{}, err
		}
		return Transaction{}, &TransactionFinishedError{Transaction: v}
	}
	op := t.FinalOp(TxnRolledBack, reason, b.clock.Now())
	if err := b.putTxnOps(storage.ClassSystem, nil, op); err != nil {
		return Transaction{}, err
	}
	v := txnView(t)
	v.State, v.Reason, v.FinishedAt, v.NextCheckAt = TxnRolledBack, reason, op.At, time.Time{}
	b.txns.count(func(s *TransactionStats) {
		s.RolledBack++
		if reason == TxnReasonMaxChecks {
			s.MaxChecksRolledBack++
		}
	})
	return v, b.settleTxns()
}

// putTxnOps appends op records (after extra messages) in one batch.
func (b *Broker) putTxnOps(class storage.Class, extra []*message.Message, ops ...txn.OpRecord) error {
	now := b.clock.Now()
	msgs := extra
	for _, op := range ops {
		msgs = append(msgs, txn.OpMessage(op, now))
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := b.store.PutClass(class, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return mapStoreErr(err)
	}
	return nil
}

// halfView renders a half message as a pull would, named by its
// transaction.
func halfView(m *message.Message, t *txn.Txn) ReceivedMessage {
	rm := toReceived(m)
	rm.MessageID, rm.Topic, rm.QueueID, rm.QueueOffset = t.ID(), t.Topic(), t.Queue(), -1
	return rm
}

// PullTransactionChecks hands out up to limit checks of group's unresolved
// transactions that are due, waiting up to wait for one to fall due. Each
// handed-out check counts (checkTimes) and schedules the next.
func (b *Broker) PullTransactionChecks(ctx context.Context, group string, limit int, wait time.Duration) ([]TransactionCheck, error) {
	if b.closed.Load() {
		return nil, ErrShuttingDown
	}
	if err := validateName("producer group", group, maxGroupLen); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxTransactionChecksPerPull {
		return nil, fmt.Errorf("%w: maxMessages %d must be between 1 and %d", ErrInvalidArgument, limit, MaxTransactionChecksPerPull)
	}
	if wait < 0 || wait > MaxTransactionCheckWait {
		return nil, fmt.Errorf("%w: waitMs %d must be between 0 and %d", ErrInvalidArgument, wait.Milliseconds(), MaxTransactionCheckWait.Milliseconds())
	}
	deadline := b.clock.Now().Add(wait)
	timer := b.clock.NewTimer(time.Hour)
	defer timer.Stop()
	x := &b.txns
	x.Lock()
	x.Wait(group)
	x.Unlock()
	defer func() {
		x.Lock()
		x.Unwait(group)
		x.Unlock()
	}()
	for {
		checks, changed, next, err := b.handOutChecks(ctx, group, limit, b.clock.Now())
		if err != nil || len(checks) > 0 {
			return checks, err
		}
		now := b.clock.Now()
		if !now.Before(deadline) {
			return nil, nil
		}
		d := deadline.Sub(now)
		if !next.IsZero() {
			d = min(d, max(time.Millisecond, next.Sub(now)))
		}
		timer.Reset(d)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-b.closing:
			return nil, nil
		case <-changed:
			timer.Stop()
		case <-timer.Chan():
		}
	}
}

// handOutChecks takes up to limit due checks of group and makes them
// durable. With none due it returns the group's change signal and when
// its next check falls due (zero: none known).
func (b *Broker) handOutChecks(ctx context.Context, group string, limit int, now time.Time) ([]TransactionCheck, <-chan struct{}, time.Time, error) {
	x := &b.txns
	if err := b.lockTxns(ctx); err != nil {
		return nil, nil, time.Time{}, err
	}
	taken, busy, changed, next := x.TakeDue(group, limit, now)
	if busy {
		next = now.Add(txnBusyRetry)
	}
	x.Unlock()
	if len(taken) == 0 {
		return nil, changed, next, nil
	}
	defer func() {
		for _, t := range taken {
			t.UnlockOp()
		}
	}()
	var ops []txn.OpRecord
	var checks []TransactionCheck
	rolledBack := 0
	b.topicGate.RLock()
	for _, t := range taken {
		half, err := b.store.Lookup(t.Phys())
		switch {
		case err != nil && (isGone(err) || errors.Is(err, storage.ErrCorrupt)):
			b.log.Error().Err(err).Str("transaction", t.ID()).Msg("half message lost; the transaction is rolled back")
			ops = append(ops, t.FinalOp(TxnRolledBack, TxnReasonLost, now))
			rolledBack++
		case err != nil:
			b.topicGate.RUnlock()
			b.putBack(taken)
			return nil, nil, time.Time{}, mapStoreErr(err)
		case b.txnTopicGone(t):
			ops = append(ops, t.FinalOp(TxnRolledBack, TxnReasonTopicDeleted, now))
			rolledBack++
		default:
			op := t.CheckOp(now, b.txnCheckInterval(t))
			ops = append(ops, op)
			v := txnView(t)
			v.CheckTimes, v.NextCheckAt = op.CheckTimes, time.UnixMilli(op.NextCheckMs).UTC()
			checks = append(checks, TransactionCheck{Transaction: v, Message: halfView(half, t)})
		}
	}
	b.topicGate.RUnlock()
	if err := b.putTxnOps(storage.ClassSystem, nil, ops...); err != nil {
		b.putBack(taken)
		return nil, nil, time.Time{}, err
	}
	x.count(func(s *TransactionStats) {
		s.ChecksHandedOut += uint64(len(checks))
		s.RolledBack += uint64(rolledBack)
	})
	if err := b.settleTxns(); err != nil {
		return nil, nil, time.Time{}, err
	}
	x.Nudge() // a check count may have reached the maximum
	return checks, nil, time.Time{}, nil
}

// txnCheckInterval is how long after a handed-out check of t the next
// falls due.
func (b *Broker) txnCheckInterval(t *txn.Txn) time.Duration {
	return max(t.CheckAfter(), b.opts.TransactionCheckInterval)
}

// putBack returns taken transactions whose write failed to their heaps
// (due again).
func (b *Broker) putBack(taken []*txn.Txn) {
	x := &b.txns
	x.Lock()
	defer x.Unlock()
	x.PutBack(taken)
}

// rollBackExhausted rolls back the transactions whose every check went
// unanswered, up to a batch; it returns when the next of them falls due.
func (b *Broker) rollBackExhausted(now time.Time) (time.Time, error) {
	x := &b.txns
	if err := b.lockTxns(b.closingCtx); err != nil {
		return time.Time{}, err
	}
	taken, busy, next := x.TakeExhausted(timerBatch, now)
	if busy || len(taken) == timerBatch {
		next = now.Add(txnBusyRetry)
	}
	x.Unlock()
	if len(taken) == 0 {
		return next, nil
	}
	defer func() {
		for _, t := range taken {
			t.UnlockOp()
		}
	}()
	ops := make([]txn.OpRecord, 0, len(taken))
	for _, t := range taken {
		ops = append(ops, t.FinalOp(TxnRolledBack, TxnReasonMaxChecks, now))
	}
	if err := b.putTxnOps(storage.ClassSystem, nil, ops...); err != nil {
		b.putBack(taken)
		return time.Time{}, err
	}
	x.count(func(s *TransactionStats) {
		s.RolledBack += uint64(len(taken))
		s.MaxChecksRolledBack += uint64(len(taken))
	})
	for _, t := range taken {
		b.log.Warn().Str("transaction", t.ID()).Str("producerGroup", t.Group()).Int("checks", t.Checks()).
			Msg("transaction rolled back: no answer to its checks")
	}
	return next, b.settleTxns()
}

// rollbackTopicTxns rolls back the unresolved transactions of a deleted
// topic (one being committed or checked right now is rolled back when
// that finds the topic gone). The caller holds topicGate.
func (b *Broker) rollbackTopicTxns(topic string) error {
	x := &b.txns
	if err := b.lockTxns(b.closingCtx); err != nil {
		return err
	}
	var taken []*txn.Txn
	x.Each(func(t *txn.Txn) {
		if t.Topic() == topic && t.TryLockOp() {
			taken = append(taken, t)
		}
	})
	x.Unlock()
	defer func() {
		for _, t := range taken {
			t.UnlockOp()
		}
	}()
	now := b.clock.Now()
	for len(taken) > 0 {
		n := min(len(taken), timerBatch)
		ops := make([]txn.OpRecord, 0, n)
		for _, t := range taken[:n] {
			ops = append(ops, t.FinalOp(TxnRolledBack, TxnReasonTopicDeleted, now))
		}
		if err := b.putTxnOps(storage.ClassSystem, nil, ops...); err != nil {
			return err
		}
		x.count(func(s *TransactionStats) { s.RolledBack += uint64(n) })
		if err := b.settleTxns(); err != nil {
			return err
		}
		for _, t := range taken[:n] {
			t.UnlockOp()
		}
		taken = taken[n:]
	}
	return nil
}

// TransactionStatus counts the unresolved transactions and what ended
// transactions since start.
func (b *Broker) TransactionStatus() TransactionStats {
	x := &b.txns
	x.Lock()
	defer x.Unlock()
	if err := b.followTxns(); err != nil {
		b.log.Error().Err(err).Msg("transactions not up to date")
	}
	st := x.stats
	st.Pending = x.Len()
	return st
}
