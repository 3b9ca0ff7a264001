package txn

import (
	"container/heap"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage/message"
)

// Txn is one unresolved transaction. Its fields change only by applying
// records (State.ApplyHalf, State.ApplyOp, State.Install) under the
// state's lock; its op lock serialises the operations on it (a commit, a
// rollback, a check handed out, a carry) across their write.
type Txn struct {
	op sync.Mutex // held across an operation's write (see State)

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
	// unsure: a commit of it failed with an unknown outcome (guarded by
	// op; memory only).
	unsure bool

	heap *txnHeap // the heap it is in (nil: none)
	hi   int      // its index there
}

// ID is the transaction id (the send's message id).
func (t *Txn) ID() string { return t.id }

// IDOffset is the CommitLog offset its id names: where the send stored
// its first half record.
func (t *Txn) IDOffset() int64 { return t.idOffset }

// Phys is the CommitLog offset of its latest half record.
func (t *Txn) Phys() int64 { return t.phys }

// Topic and Queue are where its message goes when committed.
func (t *Txn) Topic() string { return t.topic }

// Queue is the queue of Topic its message goes to.
func (t *Txn) Queue() int32 { return t.queue }

// Group is its producer group.
func (t *Txn) Group() string { return t.group }

// CheckAfter is its first check's delay.
func (t *Txn) CheckAfter() time.Duration { return t.checkAfter }

// Born is when it was sent.
func (t *Txn) Born() time.Time { return t.born }

// Checks counts the checks handed out.
func (t *Txn) Checks() int { return t.checks }

// Next is when its next check falls due.
func (t *Txn) Next() time.Time { return t.next }

// LockOp takes its op lock. It is always taken before the state's lock,
// never while holding it (TryLockOp is).
func (t *Txn) LockOp() { t.op.Lock() }

// TryLockOp takes its op lock if it is free (allowed under the state's
// lock).
func (t *Txn) TryLockOp() bool { return t.op.TryLock() }

// UnlockOp lets go of its op lock.
func (t *Txn) UnlockOp() { t.op.Unlock() }

// Unsure reports that a commit of it failed with an unknown outcome (the
// message may be stored); the caller holds its op lock.
func (t *Txn) Unsure() bool { return t.unsure }

// SetUnsure records that a commit of it failed with an unknown outcome;
// the caller holds its op lock.
func (t *Txn) SetUnsure() { t.unsure = true }

// FinalOp is the op record ending t: state is Committed or RolledBack.
func (t *Txn) FinalOp(state, reason string, at time.Time) OpRecord {
	return OpRecord{ID: t.id, State: state, At: at.UTC(), CheckTimes: t.checks, Reason: reason,
		ProducerGroup: t.group, Topic: t.topic, QueueID: t.queue, BornMs: t.born.UnixMilli()}
}

// CheckOp is the op record of a check of t handed out at now, the next
// falling due interval later.
func (t *Txn) CheckOp(now time.Time, interval time.Duration) OpRecord {
	return OpRecord{ID: t.id, State: Checked, At: now.UTC(), CheckTimes: t.checks + 1,
		NextCheckMs: now.Add(interval).UnixMilli()}
}

// txnHeap orders transactions by next check, then id.
type txnHeap []*Txn

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
	t := v.(*Txn)
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

// Queue names one of the family's two queues in a Position.
type Queue int

// The two queues.
const (
	HalfQueue Queue = iota // queue 0 of HalfTopic
	OpQueue                // queue 0 of OpTopic
)

// State is the unresolved transactions: the records of HalfTopic and
// OpTopic applied in queue order up to its Position. It holds nothing
// that is not in those records but the reservations of sends being
// written (Reserve) and the signals of waiting check pulls.
//
// Locks: the state's lock (Lock) guards everything in it; a Txn's op lock
// serialises the operations on one transaction across their write. The
// op lock is always taken before the state's lock, and never waited for
// while holding it (takers under the state's lock use TryLockOp). Every
// method but Lock, Unlock and Wake needs the state's lock held.
type State struct {
	mu        sync.Mutex
	pending   map[string]*Txn
	groups    map[string]*txnGroup
	exhausted txnHeap // every check handed out, by next check
	reserved  int     // sends being written or not yet followed, all groups
	// stored maps the CommitLog offset of a half record a send stored to
	// its producer group, until ApplyHalf sees it and the send's
	// reservation becomes the transaction.
	stored    map[int64]string
	pos       Position
	maxChecks int

	wake chan struct{} // buffered(1): the exhausted heap may have changed
}

// NewState is an empty state (at position zero) whose transactions are
// exhausted after maxChecks checks.
func NewState(maxChecks int) *State {
	return &State{
		pending:   make(map[string]*Txn),
		groups:    make(map[string]*txnGroup),
		stored:    make(map[int64]string),
		maxChecks: maxChecks,
		wake:      make(chan struct{}, 1),
	}
}

// Lock takes the state's lock.
func (s *State) Lock() { s.mu.Lock() }

// Unlock lets go of the state's lock.
func (s *State) Unlock() { s.mu.Unlock() }

// Wake receives when the exhausted transactions may have changed (a new
// head, a check count reaching the maximum): the roll-back loop looks
// again.
func (s *State) Wake() <-chan struct{} { return s.wake }

// Nudge signals Wake.
func (s *State) Nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Position is what the state has applied.
func (s *State) Position() Position { return s.pos }

// SetPosition places an empty state at p (where following starts when
// there is no snapshot).
func (s *State) SetPosition(p Position) { s.pos = p }

// Followed records that the records of q before next were applied, the
// last of them at last (a skip over records retention deleted keeps the
// mark).
func (s *State) Followed(q Queue, next int64, last Mark) {
	if q == HalfQueue {
		s.pos.Half, s.pos.HalfMark = next, last
	} else {
		s.pos.Op, s.pos.OpMark = next, last
	}
}

// Len counts the unresolved transactions.
func (s *State) Len() int { return len(s.pending) }

// Get is the unresolved transaction id (nil: none).
func (s *State) Get(id string) *Txn { return s.pending[id] }

// Each calls f with every unresolved transaction, in no order.
func (s *State) Each(f func(*Txn)) {
	for _, t := range s.pending {
		f(t)
	}
}

// group returns the entry of a producer group, creating it.
func (s *State) group(name string) *txnGroup {
	g := s.groups[name]
	if g == nil {
		g = &txnGroup{changed: make(chan struct{})}
		s.groups[name] = g
	}
	return g
}

// dropIfIdle forgets a group with nothing left.
func (s *State) dropIfIdle(name string) {
	if g := s.groups[name]; g != nil && g.count == 0 && g.reserved == 0 && g.waiters == 0 {
		delete(s.groups, name)
	}
}

// place puts t in the heap its check count says: its group's, or the
// exhausted one.
func (s *State) place(t *Txn) {
	g := s.group(t.group)
	want := &g.heap
	if t.checks >= s.maxChecks {
		want = &s.exhausted
	}
	if t.heap == want {
		heap.Fix(want, t.hi)
	} else {
		s.unplace(t)
		heap.Push(want, t)
	}
	if want == &g.heap {
		g.signal()
	} else if t.hi == 0 {
		s.Nudge()
	}
}

// unplace takes t out of its heap.
func (s *State) unplace(t *Txn) {
	if t.heap != nil {
		heap.Remove(t.heap, t.hi)
	}
}

// takeDue takes the transactions of h due at now whose op lock is free,
// up to limit, out of h with their op locks held; busy reports due ones
// left because an operation holds them.
func takeDue(h *txnHeap, limit int, now time.Time) (taken []*Txn, busy bool) {
	var skipped []*Txn
	for h.Len() > 0 && len(taken) < limit && !(*h)[0].next.After(now) {
		t := heap.Pop(h).(*Txn)
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

// TakeDue takes up to limit of group's transactions with checks left that
// are due at now and whose op lock is free, out of its heap with their op
// locks held; busy reports due ones left because an operation holds them.
// changed is closed when a transaction is next placed in the group's
// heap; next is when its head falls due (zero: none).
func (s *State) TakeDue(group string, limit int, now time.Time) (taken []*Txn, busy bool, changed <-chan struct{}, next time.Time) {
	g := s.group(group)
	taken, busy = takeDue(&g.heap, limit, now)
	return taken, busy, g.changed, g.heap.nextDue()
}

// TakeExhausted takes up to limit of the transactions whose every check
// was handed out that are due at now, as TakeDue does; next is when the
// head of the rest falls due (zero: none).
func (s *State) TakeExhausted(limit int, now time.Time) (taken []*Txn, busy bool, next time.Time) {
	taken, busy = takeDue(&s.exhausted, limit, now)
	return taken, busy, s.exhausted.nextDue()
}

// PutBack returns taken transactions whose write failed to their heaps
// (due again).
func (s *State) PutBack(taken []*Txn) {
	for _, t := range taken {
		if s.pending[t.id] == t {
			s.place(t)
		}
	}
}

// Wait counts a check pull of group waiting (the group's entry, and its
// change signal, stay until Unwait).
func (s *State) Wait(group string) { s.group(group).waiters++ }

// Unwait ends Wait.
func (s *State) Unwait(group string) {
	if g := s.groups[group]; g != nil {
		g.waiters--
		s.dropIfIdle(group)
	}
}

// Reserve counts a transactional send of group being written. check is
// given the unresolved transactions and reservations of the group and of
// all groups; an error from it refuses the reservation and is returned.
// Release ends the reservation.
func (s *State) Reserve(group string, check func(inGroup, all int) error) error {
	g := s.group(group)
	if err := check(g.count+g.reserved, len(s.pending)+s.reserved); err != nil {
		s.dropIfIdle(group)
		return err
	}
	g.reserved++
	s.reserved++
	return nil
}

// Release ends a send's reservation: at once when nothing was stored (or
// the half record stored at phys was already applied), else when
// ApplyHalf applies that record.
func (s *State) Release(group string, stored bool, phys int64) {
	if stored && phys > s.pos.HalfMark.Phys {
		s.stored[phys] = group // not applied yet
		return
	}
	s.unreserve(group)
}

// unreserve ends a send's reservation.
func (s *State) unreserve(group string) {
	if g := s.groups[group]; g != nil {
		g.reserved--
		s.reserved--
		s.dropIfIdle(group)
	}
}

// add records a new unresolved transaction.
func (s *State) add(t *Txn) {
	s.pending[t.id] = t
	s.group(t.group).count++
	s.place(t)
}

// remove forgets a finished transaction.
func (s *State) remove(t *Txn) {
	s.unplace(t)
	delete(s.pending, t.id)
	if g := s.groups[t.group]; g != nil {
		g.count--
		s.dropIfIdle(t.group)
	}
}

// ApplyHalf applies a half record: a new transaction, or a copy of a
// pending one (carried past retention: its later check count and next
// check replace the transaction's). A record whose id is not a message
// id changes nothing and is an error. It does not move the Position
// (Followed does).
func (s *State) ApplyHalf(h Half) error {
	if t := s.pending[h.ID]; t != nil {
		t.seq, t.phys = h.Seq, h.Phys
		if h.Checks > t.checks {
			t.checks, t.next = h.Checks, time.UnixMilli(h.NextCheckMs)
			s.place(t)
		}
		return nil
	}
	mid, err := message.ParseID(h.ID)
	if err != nil {
		return err
	}
	afterMs := h.CheckAfterMs
	if afterMs <= 0 {
		afterMs = DefaultCheckAfter.Milliseconds()
	}
	t := &Txn{id: h.ID, idOffset: mid.Offset(), seq: h.Seq, phys: h.Phys, hi: -1,
		topic: h.Topic, queue: h.Queue, group: h.Group,
		checkAfter: time.Duration(afterMs) * time.Millisecond, born: time.UnixMilli(h.BornMs)}
	t.next = t.born.Add(t.checkAfter)
	if h.Checks > 0 {
		t.checks, t.next = h.Checks, time.UnixMilli(h.NextCheckMs)
	}
	s.add(t)
	if group, ok := s.stored[h.Phys]; ok {
		delete(s.stored, h.Phys)
		s.unreserve(group) // counted as a transaction from now on
	}
	return nil
}

// ApplyOp applies a decoded op record to its transaction (when pending).
// It does not move the Position (Followed does).
func (s *State) ApplyOp(rec OpRecord) {
	t := s.pending[rec.ID]
	if t == nil {
		return // finished, or unknown
	}
	switch rec.State {
	case Checked:
		if rec.CheckTimes > t.checks {
			t.checks, t.next = rec.CheckTimes, time.UnixMilli(rec.NextCheckMs)
		}
		s.place(t)
	case Committed, RolledBack:
		s.remove(t)
	}
}
