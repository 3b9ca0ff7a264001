package broker

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The unresolved transactions (see txn.go). The state is derived from
// rmq_sys_TRANS_HALF/0 and rmq_sys_TRANS_OP/0 only: followTxns applies
// what was dispatched since its position, so every writer stores its
// records first and then follows (settleTxns); nothing is changed in
// memory that is not in the log.
//
// Locks: txnSet.mu guards the maps, the heaps and the position; txn.op
// serialises the operations on one transaction (commit, rollback, a check
// handed out, a carry) across their write. txn.op is always taken before
// txnSet.mu, and never waited for while holding it (takers under mu use
// TryLock).

// txnSnapshotFile is the snapshot of the unresolved transactions under
// <data>/config.
const txnSnapshotFile = "transactions.snapshot"

// txnBusyRetry is how soon a pass looks again at due transactions it
// found busy (an operation on them under way).
const txnBusyRetry = 50 * time.Millisecond

// txnFollowEvery is how often the transaction loop catches up with
// records nobody announced.
const txnFollowEvery = time.Second

// txn is one unresolved transaction.
type txn struct {
	op sync.Mutex // held across an operation's write (see above)

	id         string
	idOffset   int64 // the CommitLog offset its id names
	seq, phys  int64 // its latest half record: queue offset, CommitLog offset
	topic      string
	queue      int32
	group      string
	checkAfter time.Duration
	born       time.Time
	checks     int       // checks handed out
	next       time.Time // when the next check falls due
	// unsure: a commit of it failed with an unknown outcome (guarded by op).
	unsure bool

	heap *txnHeap // the heap it is in (nil: none)
	hi   int      // its index there
}

func (t *txn) view() Transaction {
	return Transaction{ID: t.id, State: TxnPending, ProducerGroup: t.group, Topic: t.topic, QueueID: t.queue, QueueOffset: -1,
		CheckTimes: t.checks, NextCheckAt: t.next.UTC(), CreatedAt: t.born.UTC()}
}

// finalOp is the op record ending t.
func (t *txn) finalOp(state, reason string, at time.Time) txnOpRecord {
	return txnOpRecord{ID: t.id, State: state, At: at.UTC(), CheckTimes: t.checks, Reason: reason,
		ProducerGroup: t.group, Topic: t.topic, QueueID: t.queue, BornMs: t.born.UnixMilli()}
}

// checkOp is the op record of a check of t handed out at now.
func (t *txn) checkOp(now time.Time, interval time.Duration) txnOpRecord {
	return txnOpRecord{ID: t.id, State: txnChecked, At: now.UTC(), CheckTimes: t.checks + 1,
		NextCheckMs: now.Add(interval).UnixMilli()}
}

// txnHeap orders transactions by next check, then id.
type txnHeap []*txn

func (h txnHeap) Len() int { return len(h) }
func (h txnHeap) Less(i, j int) bool {
	if !h[i].next.Equal(h[j].next) {
		return h[i].next.Before(h[j].next)
	}
	return h[i].idOffset < h[j].idOffset
}
func (h txnHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hi, h[j].hi = i, j
}
func (h *txnHeap) Push(v any) {
	t := v.(*txn)
	t.hi, t.heap = len(*h), h
	*h = append(*h, t)
}
func (h *txnHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.heap, t.hi = nil, -1
	return t
}

// nextDue is the head's due time (zero when empty).
func (h txnHeap) nextDue() time.Time {
	if len(h) == 0 {
		return time.Time{}
	}
	return h[0].next
}

// txnGroup is one producer group's unresolved transactions.
type txnGroup struct {
	heap     txnHeap // its transactions with checks left, by next check
	count    int     // its unresolved transactions
	reserved int     // sends of it being written or not yet followed
	waiters  int     // check pulls waiting
	// changed is closed (and replaced) when a transaction is placed in
	// heap: a waiting pull looks again.
	changed chan struct{}
}

func (g *txnGroup) signal() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// txnMark is the last record followed in a queue.
type txnMark struct {
	Seq  int64 `json:"seq"`
	Phys int64 `json:"phys"`
}

var noTxnMark = txnMark{Seq: -1, Phys: -1}

// txnPosition is what followTxns has applied: the next queue offsets and
// the last records.
type txnPosition struct {
	Half     int64   `json:"half"`
	HalfMark txnMark `json:"halfMark"`
	Op       int64   `json:"op"`
	OpMark   txnMark `json:"opMark"`
}

// txnRecovery describes the last start-up (tests, logs).
type txnRecovery struct {
	Rebuilt     bool
	Reason      string
	HalfRecords int64
	OpRecords   int64
	Pending     int
	Took        time.Duration
}

// txnSet is the broker's transaction state.
type txnSet struct {
	mu        sync.Mutex
	pending   map[string]*txn
	groups    map[string]*txnGroup
	exhausted txnHeap // every check handed out, by next check
	reserved  int     // sends being written or not yet followed, all groups
	// stored maps the CommitLog offset of a half record a send stored to
	// its producer group, until followTxns sees it and the send's
	// reservation becomes the transaction.
	stored    map[int64]string
	pos       txnPosition
	maxChecks int
	stats     TransactionStats
	recovered txnRecovery
	followed  struct{ half, op int64 }
	// snapshotted is the position of the last snapshot written.
	snapshotted txnPosition
	// snapHalf and snapOp are the queue offsets the snapshot on disk
	// covers: retention keeps every record from there on.
	snapHalf, snapOp atomic.Int64
	// startOffset is the CommitLog's end at open: a transaction whose id
	// lies below it may have been committed by a batch a crash tore.
	startOffset int64

	wake chan struct{} // buffered(1): the exhausted heap may have changed
}

func (x *txnSet) init(maxChecks int) {
	x.pending = make(map[string]*txn)
	x.groups = make(map[string]*txnGroup)
	x.stored = make(map[int64]string)
	x.maxChecks = maxChecks
	x.wake = make(chan struct{}, 1)
}

func (x *txnSet) nudge() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// count updates the counters under the lock.
func (x *txnSet) count(f func(*TransactionStats)) {
	x.mu.Lock()
	f(&x.stats)
	x.mu.Unlock()
}

// group returns the entry of a producer group, creating it; the caller
// holds mu.
func (x *txnSet) group(name string) *txnGroup {
	g := x.groups[name]
	if g == nil {
		g = &txnGroup{changed: make(chan struct{})}
		x.groups[name] = g
	}
	return g
}

// dropIfIdle forgets a group with nothing left; the caller holds mu.
func (x *txnSet) dropIfIdle(name string) {
	if g := x.groups[name]; g != nil && g.count == 0 && g.reserved == 0 && g.waiters == 0 {
		delete(x.groups, name)
	}
}

// place puts t in the heap its check count says: its group's, or the
// exhausted one; the caller holds mu.
func (x *txnSet) place(t *txn) {
	g := x.group(t.group)
	want := &g.heap
	if t.checks >= x.maxChecks {
		want = &x.exhausted
	}
	if t.heap == want {
		heap.Fix(want, t.hi)
	} else {
		x.unplace(t)
		heap.Push(want, t)
	}
	if want == &g.heap {
		g.signal()
	} else if t.hi == 0 {
		x.nudge()
	}
}

// unplace takes t out of its heap; the caller holds mu.
func (x *txnSet) unplace(t *txn) {
	if t.heap != nil {
		heap.Remove(t.heap, t.hi)
	}
}

// takeDue takes the transactions of h due at now whose op lock is free,
// up to limit, out of h with their op locks held; busy reports due ones
// left because an operation holds them. The caller holds mu.
func (x *txnSet) takeDue(h *txnHeap, limit int, now time.Time) (taken []*txn, busy bool) {
	var skipped []*txn
	for h.Len() > 0 && len(taken) < limit && !(*h)[0].next.After(now) {
		t := heap.Pop(h).(*txn)
		if t.op.TryLock() {
			taken = append(taken, t)
		} else {
			skipped = append(skipped, t)
		}
	}
	for _, t := range skipped {
		heap.Push(h, t)
	}
	return taken, len(skipped) > 0
}

// add records a new unresolved transaction; the caller holds mu.
func (x *txnSet) add(t *txn) {
	x.pending[t.id] = t
	x.group(t.group).count++
	x.place(t)
}

// remove forgets a finished transaction; the caller holds mu.
func (x *txnSet) remove(t *txn) {
	x.unplace(t)
	delete(x.pending, t.id)
	if g := x.groups[t.group]; g != nil {
		g.count--
		x.dropIfIdle(t.group)
	}
}

// lockTxns takes the transaction lock with the state up to date with
// every record stored before the call. On success the caller must unlock.
func (b *Broker) lockTxns(ctx context.Context) error {
	if err := b.awaitDispatch(ctx); err != nil {
		return err
	}
	b.txns.mu.Lock()
	if err := b.followTxns(); err != nil {
		b.txns.mu.Unlock()
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
	b.txns.mu.Lock()
	defer b.txns.mu.Unlock()
	return b.followTxns()
}

// lockTxn returns the pending transaction id with its op lock held, or
// nil when it is not pending.
func (b *Broker) lockTxn(ctx context.Context, id string) (*txn, error) {
	x := &b.txns
	if err := b.lockTxns(ctx); err != nil {
		return nil, err
	}
	t := x.pending[id]
	x.mu.Unlock()
	if t == nil {
		return nil, nil
	}
	t.op.Lock()
	// The previous holder applied its records before it let go.
	x.mu.Lock()
	still := x.pending[id] == t
	x.mu.Unlock()
	if !still {
		t.op.Unlock()
		return nil, nil
	}
	return t, nil
}

// followTxns applies the half and op records dispatched since the
// position; the caller holds mu.
func (b *Broker) followTxns() error {
	x := &b.txns
	// The op queue's end first: every half record an op before it names
	// is then below the half queue's end.
	opEnd := b.store.MaxOffset(txnOpTopic, 0)
	halfEnd := b.store.MaxOffset(txnHalfTopic, 0)
	n, err := b.followTxnQueue(txnHalfTopic, &x.pos.Half, &x.pos.HalfMark, halfEnd, b.applyHalf)
	x.followed.half += n
	if err != nil {
		return err
	}
	n, err = b.followTxnQueue(txnOpTopic, &x.pos.Op, &x.pos.OpMark, opEnd, b.applyOp)
	x.followed.op += n
	return err
}

// followTxnQueue reads queue 0 of topic from *next to end, applying each
// record; it returns how many it read.
func (b *Broker) followTxnQueue(topic string, next *int64, mark *txnMark, end int64, apply func(*message.Message)) (int64, error) {
	var n int64
	for *next < end {
		res, err := b.store.ReadQueue(topic, 0, *next, followBatch, nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			if low := b.store.MinOffset(topic, 0); low > *next {
				*next = low // deleted by retention meanwhile (kept from the snapshot's position on)
				continue
			}
		}
		if err != nil {
			return n, fmt.Errorf("follow %s at %d: %w", topic, *next, err)
		}
		if res.Next == *next {
			break
		}
		for _, m := range res.Messages {
			apply(m)
			*mark = txnMark{Seq: m.QueueOffset, Phys: m.PhysicalOffset}
		}
		n += int64(len(res.Messages))
		*next = res.Next
	}
	return n, nil
}

// applyHalf applies a half record: a new transaction, or a copy of a
// pending one (carried past retention).
func (b *Broker) applyHalf(m *message.Message) {
	x := &b.txns
	id := txnIDOf(m)
	checks, _ := strconv.Atoi(m.Property(propTxnChecks))
	nextMs, _ := strconv.ParseInt(m.Property(propTxnNextCheck), 10, 64)
	if t := x.pending[id]; t != nil {
		t.seq, t.phys = m.QueueOffset, m.PhysicalOffset
		if checks > t.checks {
			t.checks, t.next = checks, time.UnixMilli(nextMs)
			x.place(t)
		}
		return
	}
	mid, err := message.ParseID(id)
	if err != nil {
		b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping a half message with a bad transaction id")
		return
	}
	qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
	afterMs, err := strconv.ParseInt(m.Property(propTxnCheckAfter), 10, 64)
	if err != nil || afterMs <= 0 {
		afterMs = DefaultCheckAfter.Milliseconds()
	}
	t := &txn{id: id, idOffset: mid.Offset(), seq: m.QueueOffset, phys: m.PhysicalOffset, hi: -1,
		topic: m.Property(message.PropertyRealTopic), queue: int32(qid), group: m.Property(propTxnGroup),
		checkAfter: time.Duration(afterMs) * time.Millisecond, born: time.UnixMilli(m.BornTimestamp)}
	t.next = t.born.Add(t.checkAfter)
	if checks > 0 {
		t.checks, t.next = checks, time.UnixMilli(nextMs)
	}
	x.add(t)
	if group, ok := x.stored[m.PhysicalOffset]; ok {
		delete(x.stored, m.PhysicalOffset)
		x.unreserve(group) // counted as a transaction from now on
	}
}

// applyOp applies an op record to its transaction (when pending).
func (b *Broker) applyOp(m *message.Message) {
	x := &b.txns
	rec, err := decodeTxnOp(m.Body)
	if err != nil {
		b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping an undecodable transaction op record")
		return
	}
	t := x.pending[rec.ID]
	if t == nil {
		return // finished, or unknown
	}
	switch rec.State {
	case txnChecked:
		if rec.CheckTimes > t.checks {
			t.checks, t.next = rec.CheckTimes, time.UnixMilli(rec.NextCheckMs)
		}
		x.place(t)
	case TxnCommitted, TxnRolledBack:
		x.remove(t)
	}
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
		case <-x.wake:
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
	var below []*txn
	for _, t := range x.pending {
		if t.phys < cut {
			below = append(below, t)
		}
	}
	x.mu.Unlock()
	sort.Slice(below, func(i, j int) bool { return below[i].phys < below[j].phys })
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

func (b *Broker) carryTxnBatch(batch []*txn, cut int64) (int, error) {
	x := &b.txns
	for _, t := range batch {
		t.op.Lock() // an operation under way finishes first
	}
	defer func() {
		for _, t := range batch {
			t.op.Unlock()
		}
	}()
	x.mu.Lock()
	var live []*txn
	for _, t := range batch {
		if x.pending[t.id] == t && t.phys < cut {
			live = append(live, t)
		}
	}
	x.mu.Unlock()
	copies := make([]*message.Message, 0, len(live))
	for _, t := range live {
		m, err := b.store.Lookup(t.phys)
		if isGone(err) || errors.Is(err, storage.ErrCorrupt) {
			b.log.Error().Err(err).Str("transaction", t.id).Msg("half message lost before retention could carry it")
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
	x.mu.Lock()
	defer x.mu.Unlock()
	g := x.group(group)
	have := g.count + g.reserved
	if err := over("transactionsPerProducerGroup", "unresolved transactions of producer group "+group, "--max-transactions-per-producer-group",
		q.MaxTransactionsPerProducerGroup, have, have+1); err != nil {
		x.dropIfIdle(group)
		return nil, err
	}
	all := len(x.pending) + x.reserved
	if err := over("pendingTransactions", "unresolved transactions", "--max-pending-transactions", q.MaxPendingTransactions, all, all+1); err != nil {
		x.dropIfIdle(group)
		return nil, err
	}
	g.reserved++
	x.reserved++
	return func(stored bool, phys int64) {
		x.mu.Lock()
		defer x.mu.Unlock()
		if stored && phys > x.pos.HalfMark.Phys {
			x.stored[phys] = group // not followed yet
			return
		}
		x.unreserve(group)
	}, nil
}

// unreserve ends a send's reservation; the caller holds mu.
func (x *txnSet) unreserve(group string) {
	if g := x.groups[group]; g != nil {
		g.reserved--
		x.reserved--
		x.dropIfIdle(group)
	}
}

// closeTxns catches the state up and writes its snapshot (the workers
// have stopped; the store is still open).
func (b *Broker) closeTxns() error {
	if b.txns.pending == nil {
		return nil
	}
	return b.snapshotTxns()
}
