package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The transaction family (package txn: the op record and snapshot codecs,
// the state of the unresolved transactions and its apply) is glued to the
// broker here: following rmq_sys_TRANS_HALF/0 and rmq_sys_TRANS_OP/0
// through the store into the state (followTxns applies what was
// dispatched since its position, so every writer stores its records first
// and then follows: settleTxns; nothing is changed in memory that is not
// in the log), the leader's roll-back loop, retention's carry and the
// sends' reservations; the requests are in txn.go, the snapshot file in
// txnrecords.go.
//
// Locks: the state's lock (txns.Lock) guards the state and the fields of
// txnState below it; a transaction's op lock (txn.Txn.LockOp) serialises
// the operations on it across their write, and is always taken before the
// state's lock, never waited for while holding it (package txn's doc).

// txnBusyRetry is how soon a pass looks again at due transactions it
// found busy (an operation on them under way).
const txnBusyRetry = 50 * time.Millisecond

// txnFollowEvery is how often the transaction loop catches up with
// records nobody announced.
const txnFollowEvery = time.Second

// txnRecovery describes the last start-up (tests, logs).
type txnRecovery struct {
	Rebuilt     bool
	Reason      string
	HalfRecords int64
	OpRecords   int64
	Pending     int
	Took        time.Duration
}

// txnState is the broker's transaction state: package txn's State and
// what the broker keeps beside it (memory only), guarded by the state's
// lock unless said otherwise.
type txnState struct {
	*txn.State
	stats     TransactionStats
	recovered txnRecovery
	followed  struct{ half, op int64 }
	// snapshotted is the position of the last snapshot written.
	snapshotted txn.Position
	// snapHalf and snapOp are the queue offsets the snapshot on disk
	// covers: retention keeps every record from there on (atomic).
	snapHalf, snapOp atomic.Int64
	// startOffset is the CommitLog's end at open: a transaction whose id
	// lies below it may have been committed by a batch a crash tore (set
	// by openTxns, read-only after).
	startOffset int64
}

func (x *txnState) init(maxChecks int) { x.State = txn.NewState(maxChecks) }

// count updates the counters under the lock.
func (x *txnState) count(f func(*TransactionStats)) {
	x.Lock()
	f(&x.stats)
	x.Unlock()
}

// lockTxns takes the state's lock with the state up to date with every
// record stored before the call. On success the caller must unlock.
func (b *Broker) lockTxns(ctx context.Context) error {
	if err := b.awaitDispatch(ctx); err != nil {
		return err
	}
	b.txns.Lock()
	if err := b.followTxns(); err != nil {
		b.txns.Unlock()
		return err
	}
	return nil
}

// settleTxns waits until what the caller stored is dispatched and applies
// it.
func (b *Broker) settleTxns() error {
	if err := b.store.AwaitDispatch(b.closingCtx); err != nil {
		return mapStoreErr(err)
	}
	b.txns.Lock()
	defer b.txns.Unlock()
	return b.followTxns()
}

// lockTxn returns the pending transaction id with its op lock held, or
// nil when it is not pending.
func (b *Broker) lockTxn(ctx context.Context, id string) (*txn.Txn, error) {
	x := &b.txns
	if err := b.lockTxns(ctx); err != nil {
		return nil, err
	}
	t := x.Get(id)
	x.Unlock()
	if t == nil {
		return nil, nil
	}
	t.LockOp()
	// The previous holder applied its records before it let go.
	x.Lock()
	still := x.Get(id) == t
	x.Unlock()
	if !still {
		t.UnlockOp()
		return nil, nil
	}
	return t, nil
}

// followTxns applies the half and op records dispatched since the
// position; the caller holds the state's lock.
func (b *Broker) followTxns() error {
	x := &b.txns
	// The op queue's end first: every half record an op before it names
	// is then below the half queue's end.
	opEnd := b.store.MaxOffset(txnOpTopic, 0)
	halfEnd := b.store.MaxOffset(txnHalfTopic, 0)
	n, err := b.followTxnQueue(txn.HalfQueue, halfEnd, b.applyHalf)
	x.followed.half += n
	if err != nil {
		return err
	}
	n, err = b.followTxnQueue(txn.OpQueue, opEnd, b.applyOp)
	x.followed.op += n
	return err
}

// followTxnQueue reads queue 0 of q's topic from the state's position to
// end, applying each record; it returns how many it read.
func (b *Broker) followTxnQueue(q txn.Queue, end int64, apply func(*message.Message)) (int64, error) {
	x := &b.txns
	topic, next, mark := txnHalfTopic, x.Position().Half, x.Position().HalfMark
	if q == txn.OpQueue {
		topic, next, mark = txnOpTopic, x.Position().Op, x.Position().OpMark
	}
	var n int64
	for next < end {
		res, err := b.store.ReadQueue(topic, 0, next, followBatch, nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			if low := b.store.MinOffset(topic, 0); low > next {
				next = low // deleted by retention meanwhile (kept from the snapshot's position on)
				x.Followed(q, next, mark)
				continue
			}
		}
		if err != nil {
			return n, fmt.Errorf("follow %s at %d: %w", topic, next, err)
		}
		if res.Next == next {
			break
		}
		for _, m := range res.Messages {
			apply(m)
			mark = txn.Mark{Seq: m.QueueOffset, Phys: m.PhysicalOffset}
		}
		n += int64(len(res.Messages))
		next = res.Next
		x.Followed(q, next, mark)
	}
	return n, nil
}

// applyHalf applies a half record: a new transaction, or a copy of a
// pending one (carried past retention).
func (b *Broker) applyHalf(m *message.Message) {
	if err := b.txns.ApplyHalf(txn.ReadHalf(m)); err != nil {
		b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping a half message with a bad transaction id")
	}
}

// applyOp applies an op record to its transaction (when pending).
func (b *Broker) applyOp(m *message.Message) {
	rec, err := txn.DecodeOp(m.Body)
	if err != nil {
		b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping an undecodable transaction op record")
		return
	}
	b.txns.ApplyOp(rec)
}

// txnLoop rolls back the transactions whose checks all went unanswered
// when they fall due, until ctx (the broker's closing) ends. It runs on an
// internal/worker.Service; rollBackExhausted is its pass.
func (b *Broker) txnLoop(ctx context.Context) {
	x := &b.txns
	retry := worker.NewBackoff(100*time.Millisecond, 5*time.Second)
	wait := b.clock.NewTimer(time.Hour)
	defer wait.Stop()
	for {
		next, err := b.rollBackExhausted(b.clock.Now())
		d := txnFollowEvery
		if err != nil {
			d = retry.Next()
			if ctx.Err() == nil {
				b.log.Error().Err(err).Dur("retryIn", d).Msg("rolling back unanswered transactions failed; will retry")
			}
		} else {
			retry.Reset()
			if !next.IsZero() {
				d = min(d, max(0, b.clock.Until(next)))
			}
		}
		wait.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-x.Wake():
			wait.Stop()
		case <-wait.Chan():
		}
	}
}

// carryTxns runs before retention deletes the CommitLog below cut: every
// unresolved transaction whose latest half record lies there is copied
// (same id, body, check count and next check), a batch at a time.
func (b *Broker) carryTxns(cut int64) error {
	x := &b.txns
	if err := b.lockTxns(b.closingCtx); err != nil {
		return err
	}
	var below []*txn.Txn
	x.Each(func(t *txn.Txn) {
		if t.Phys() < cut {
			below = append(below, t)
		}
	})
	x.Unlock()
	sort.Slice(below, func(i, j int) bool { return below[i].Phys() < below[j].Phys() })
	carried := 0
	for len(below) > 0 {
		batch := below[:min(len(below), timerBatch)]
		below = below[len(batch):]
		n, err := b.carryTxnBatch(batch, cut)
		carried += n
		if err != nil {
			return err
		}
	}
	if carried > 0 {
		b.log.Info().Int("transactions", carried).Int64("below", cut).Msg("unresolved transactions carried past retention")
	}
	return nil
}

func (b *Broker) carryTxnBatch(batch []*txn.Txn, cut int64) (int, error) {
	x := &b.txns
	for _, t := range batch {
		t.LockOp() // an operation under way finishes first
	}
	defer func() {
		for _, t := range batch {
			t.UnlockOp()
		}
	}()
	x.Lock()
	var live []*txn.Txn
	for _, t := range batch {
		if x.Get(t.ID()) == t && t.Phys() < cut {
			live = append(live, t)
		}
	}
	x.Unlock()
	copies := make([]*message.Message, 0, len(live))
	for _, t := range live {
		m, err := b.store.Lookup(t.Phys())
		if isGone(err) || errors.Is(err, storage.ErrCorrupt) {
			b.log.Error().Err(err).Str("transaction", t.ID()).Msg("half message lost before retention could carry it")
			continue
		}
		if err != nil {
			return 0, mapStoreErr(err)
		}
		copies = append(copies, halfCopy(m, t))
	}
	if len(copies) == 0 {
		return 0, nil
	}
	if err := b.store.PutClass(storage.ClassReclaim, copies, make([]storage.PutResult, len(copies))); err != nil {
		return 0, mapStoreErr(err)
	}
	return len(copies), b.settleTxns()
}

// reserveTxn counts a transactional send of group being written against
// the quotas. The returned func ends the reservation: at once when
// nothing was stored, else when followTxns sees the half record stored at
// phys (the send does not wait for it: every reader of the state follows
// first).
func (b *Broker) reserveTxn(group string) (release func(stored bool, phys int64), err error) {
	x := &b.txns
	q := b.opts.Quotas
	x.Lock()
	defer x.Unlock()
	err = x.Reserve(group, func(have, all int) error {
		if err := over("transactionsPerProducerGroup", "unresolved transactions of producer group "+group, "--max-transactions-per-producer-group",
			q.MaxTransactionsPerProducerGroup, have, have+1); err != nil {
			return err
		}
		return over("pendingTransactions", "unresolved transactions", "--max-pending-transactions", q.MaxPendingTransactions, all, all+1)
	})
	if err != nil {
		return nil, err
	}
	return func(stored bool, phys int64) {
		x.Lock()
		defer x.Unlock()
		x.Release(group, stored, phys)
	}, nil
}

// closeTxns catches the state up and writes its snapshot (the workers
// have stopped; the store is still open).
func (b *Broker) closeTxns() error {
	if b.txns.State == nil {
		return nil
	}
	return b.snapshotTxns()
}
