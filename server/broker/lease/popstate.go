package lease

import (
	"iter"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage/offset"
)

// Pop consumption (RocketMQ 5 POP, SQS, Pub/Sub pull). Per (group, topic)
// a PopState holds, for each queue, a Cursor (the next offset never
// handed out) and the in-flight leases. What was acknowledged lives in the
// durable progress table (storage/offset); every lease change is also a
// lease record (the Log), so leases survive a restart.
//
// A PopState's lock guards everything in it, its cursors and their leases
// included: every method below but Lock and Unlock is called with it held
// (doc.go, "Locks").

// PopState is one (group, topic)'s pop state: its cursors per queue, the
// round-robin position of its pulls, the lease changes noted under its
// lock and the offsets a pull's filters passed over, both appended before
// the lock is released, and the wake-up of its long polls.
type PopState struct {
	mu       sync.Mutex
	instance string // the client id of a broadcasting group's instance ("": the group's own)
	queues   map[int32]*Cursor
	rr       int
	wake     chan struct{} // closed when a deferred ordered message is freed
	notes    Notes         // lease changes to append before the lock is released
	// skips: offsets the filters passed over, appended with the grants
	// before the lock is released and applied as consumed once appended.
	skips offset.Record
}

// NewPopState is an empty pop state, of a broadcasting group's instance
// when instance is not "".
func NewPopState(instance string) *PopState {
	return &PopState{instance: instance, queues: make(map[int32]*Cursor)}
}

// Lock takes ps's lock.
func (ps *PopState) Lock() { ps.mu.Lock() }

// Unlock releases ps's lock.
func (ps *PopState) Unlock() { ps.mu.Unlock() }

// Instance is the client id of the broadcasting group's instance ps is
// of ("": a group's own).
func (ps *PopState) Instance() string { return ps.instance }

// Round is the queue a pull starts its round-robin at; each call moves on
// by one.
func (ps *PopState) Round() int {
	start := ps.rr
	ps.rr++
	return start
}

// Cursor is queue qid's cursor, nil when ps has none.
func (ps *PopState) Cursor(qid int32) *Cursor { return ps.queues[qid] }

// OpenCursor is queue qid's cursor, made at committed (the queue's
// committed offset, asked only then) when ps has none.
func (ps *PopState) OpenCursor(qid int32, committed func() int64) *Cursor {
	c := ps.queues[qid]
	if c == nil {
		c = &Cursor{next: committed(), inflight: make(map[int64]*Lease)}
		ps.queues[qid] = c
	}
	return c
}

// Cursors ranges over ps's cursors by queue id, in no order.
func (ps *PopState) Cursors() iter.Seq2[int32, *Cursor] {
	return func(yield func(int32, *Cursor) bool) {
		for qid, c := range ps.queues {
			if !yield(qid, c) {
				return
			}
		}
	}
}

// Drop forgets every cursor of ps (its leases with them) and the lease
// changes noted (a forgotten instance's pop state).
func (ps *PopState) Drop() {
	ps.queues = make(map[int32]*Cursor)
	ps.notes = Notes{}
}

// Notes is where the lease changes made under ps's lock are noted, to be
// appended before it is released (TakeNotes).
func (ps *PopState) Notes() *Notes { return &ps.notes }

// TakeNotes hands over the lease changes noted under ps's lock, nil when
// there are none.
func (ps *PopState) TakeNotes() *Notes {
	if ps.notes.Empty() {
		return nil
	}
	n := ps.notes
	ps.notes = Notes{}
	return &n
}

// Skip notes e, the offsets a pull's filters passed over, to be appended
// with the pull's grants and applied as consumed once appended
// (TakeSkips).
func (ps *PopState) Skip(e offset.Entry) { ps.skips.Entries = append(ps.skips.Entries, e) }

// TakeSkips hands over the skips noted under ps's lock.
func (ps *PopState) TakeSkips() offset.Record {
	s := ps.skips
	ps.skips = offset.Record{}
	return s
}

// Release frees key after its message at off, in c, is done (acked or
// dead), and wakes ps's long polls when a later message of the key waits.
func (ps *PopState) Release(c *Cursor, key string, off int64) {
	if key == "" || c.busy[key] != off {
		return
	}
	delete(c.busy, key)
	if len(c.deferred[key]) > 0 {
		ps.notify()
	}
}

// notify wakes the long polls of ps (a deferred message became
// available).
func (ps *PopState) notify() {
	if ps.wake != nil {
		close(ps.wake)
		ps.wake = nil
	}
}

// WakeChan returns the channel closed when a deferred message of ps is
// freed.
func (ps *PopState) WakeChan() <-chan struct{} {
	if ps.wake == nil {
		ps.wake = make(chan struct{})
	}
	return ps.wake
}

// AppendLive appends every lease in ps's cursors to rec, one entry per
// queue and client, with the key's progress generation (gen) and the time
// at: a leader's leases snapshot (Config.Live).
func (ps *PopState) AppendLive(rec *Record, group, topic string, gen func(offset.Key) uint32, at int64) {
	for qid, c := range ps.queues {
		if len(c.inflight) == 0 {
			continue
		}
		key := offset.Key{Group: group, Topic: topic, QueueID: qid}
		g := gen(key)
		byClient := map[string]int{}
		for off, l := range c.inflight {
			i, ok := byClient[l.client]
			if !ok {
				i = len(rec.Entries)
				byClient[l.client] = i
				rec.Entries = append(rec.Entries, Entry{Key: Key(key), Generation: g, At: at, Client: l.client})
			}
			rec.Entries[i].Items = append(rec.Entries[i].Items, l.Item(off))
		}
	}
}

// Expired is a lease Expire found run out: Off its offset.
type Expired struct {
	Off   int64
	Lease *Lease
}

// Expire is the lease reaper's scan of c, one of ps's cursors, at now (a
// pull's too): a lease being acknowledged or sent back, or waiting in
// place, is left alone; one whose offset is done for the group (acked)
// is taken out of flight and its key released; one run out is sent back
// (marked SendingBack: its retry copy takes over) or, when it holds a
// sharding key or the view retries in place (inPlace), handed back to be
// retried in place (the caller decides, under the lock, whether it waits
// or is dead). It also returns the soonest deadline of the leases left
// held. The order of the leases returned is the scan's, which is none.
func (ps *PopState) Expire(c *Cursor, now time.Time, acked func(off int64) bool, inPlace bool) (back, retry []Expired, next time.Time) {
	for off, l := range c.inflight {
		switch {
		case l.settling, l.waiting, l.sendingBack:
			// being acknowledged or sent back, or an ordered retry waiting in place
		case acked(off):
			delete(c.inflight, off)
			ps.Release(c, l.key, off)
		case !now.Before(l.deadline) && (l.key != "" || inPlace):
			retry = append(retry, Expired{Off: off, Lease: l})
		case !now.Before(l.deadline):
			l.sendingBack = true
			back = append(back, Expired{Off: off, Lease: l})
		case next.IsZero() || l.deadline.Before(next):
			next = l.deadline
		}
	}
	return back, retry, next
}

// Cursor is one queue's cursor of a pop state: the next offset never
// handed out, the leases in flight by offset and, for an orderly group,
// the offset each busy sharding key holds and the later offsets of a key
// waiting for it, ascending. Its pop state's lock guards it.
type Cursor struct {
	next     int64
	inflight map[int64]*Lease
	busy     map[string]int64
	deferred map[string][]int64
}

// Next is the next offset c never handed out.
func (c *Cursor) Next() int64 { return c.next }

// SetNext moves c to next.
func (c *Cursor) SetNext(next int64) { c.next = next }

// Rewind moves c back to off when off is below its next offset (a
// message visible again).
func (c *Cursor) Rewind(off int64) {
	if off < c.next {
		c.next = off
	}
}

// Lease is the lease in flight on off, nil when there is none.
func (c *Cursor) Lease(off int64) *Lease { return c.inflight[off] }

// Leases ranges over the leases in flight by offset, in no order; the
// loop may take the one it is at out of flight (Remove).
func (c *Cursor) Leases() iter.Seq2[int64, *Lease] {
	return func(yield func(int64, *Lease) bool) {
		for off, l := range c.inflight {
			if !yield(off, l) {
				return
			}
		}
	}
}

// InFlight is how many leases c holds.
func (c *Cursor) InFlight() int { return len(c.inflight) }

// Remove takes the lease on off out of flight.
func (c *Cursor) Remove(off int64) { delete(c.inflight, off) }

// RemoveIf takes l out of flight on off when it is still the lease there,
// and reports whether it was.
func (c *Cursor) RemoveIf(off int64, l *Lease) bool {
	if c.inflight[off] != l {
		return false
	}
	delete(c.inflight, off)
	return true
}

// Clear takes every lease out of flight (the group's offset was lowered
// under them).
func (c *Cursor) Clear() { c.inflight = make(map[int64]*Lease) }

// KeyBusy reports whether a message of the sharding key is leased or
// waiting.
func (c *Cursor) KeyBusy(key string) bool {
	_, ok := c.busy[key]
	return ok
}

// hold marks key busy with its message at off (Apply: a lease holds its
// key from the record that makes it on).
func (c *Cursor) hold(key string, off int64) {
	if c.busy == nil {
		c.busy = make(map[string]int64)
	}
	c.busy[key] = off
}

// Defer queues off behind key's busy message (once).
func (c *Cursor) Defer(key string, off int64) {
	if c.deferred == nil {
		c.deferred = make(map[string][]int64)
	}
	for _, o := range c.deferred[key] {
		if o == off {
			return
		}
	}
	c.deferred[key] = append(c.deferred[key], off)
}

// Busy ranges over the busy keys and the offsets holding them, in no
// order.
func (c *Cursor) Busy() iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		for k, off := range c.busy {
			if !yield(k, off) {
				return
			}
		}
	}
}

// Deferred ranges over the keys with deferred offsets and those offsets,
// in no order; the loop may take a key's first one (TakeDeferred).
func (c *Cursor) Deferred() iter.Seq2[string, []int64] {
	return func(yield func(string, []int64) bool) {
		for k, offs := range c.deferred {
			if !yield(k, offs) {
				return
			}
		}
	}
}

// TakeDeferred takes key's first deferred offset off its queue (offs,
// what Deferred gave for it, not empty) and returns it.
func (c *Cursor) TakeDeferred(key string, offs []int64) int64 {
	if len(offs) == 1 {
		delete(c.deferred, key)
	} else {
		c.deferred[key] = offs[1:]
	}
	return offs[0]
}

// Settle is the outcome of one ack settling leases (one record for all
// of them): Err (nil: the ack is durable) is set before Done is closed.
type Settle struct {
	Done chan struct{}
	Err  error
}

// Lease is one lease in flight. Its pop state's lock guards it: its
// methods are called under that lock, by the pop state's own bookkeeping
// and by the requests that decide with it (package consume). Its fields
// are read through methods and changed by applying a lease record's item
// (PopState.Apply: granted, offered again, extended, waiting or failed
// in place, released) and otherwise only by the moves below, none of
// which is recorded: its in-place attempt history kept (KeepHistory),
// being acknowledged (StartSettling, EndSettling) or sent back
// (SendBack), claims the request that makes them settles itself.
type Lease struct {
	epoch    uint64
	deadline time.Time
	client   string // who holds the lease (X-Mqgate-Client-Id), for the attempt history
	// settling: an ack of this lease is being made durable. A repeated ack
	// waits for it (settle: Done closed, Err its error) and answers ok
	// only once it is durable — committed, on a replica — and fails with
	// its error otherwise; nothing else may touch the lease meanwhile.
	settling bool
	settle   *Settle
	// sendingBack: the delivery failed and its retry (or dead-letter) copy
	// is being written; the lease stays in flight meanwhile, so the same
	// copy is not offered again, and its receipts are expired.
	sendingBack bool
	deliveries  int32 // how often this stored message was handed out

	// Orderly groups (and a broadcasting group's instance): the sharding
	// key the lease holds, and the in-place retry state of a failed
	// delivery.
	key      string
	waiting  bool      // failed; re-offered at retryAt
	retryAt  time.Time // when a waiting lease is due
	failures int32     // in-place failures so far
	// history is the in-place attempt history, for the DLQ: package
	// retry's attempts, which this package does not import (retry is
	// above it in ARCHITECTURE.md's list); kept in memory only, and set
	// and read as a whole by package consume (History, KeepHistory).
	history any
}

// Epoch is the lease's epoch: its receipts name it.
func (l *Lease) Epoch() uint64 { return l.epoch }

// Deadline is when the lease runs out (a held lease's).
func (l *Lease) Deadline() time.Time { return l.deadline }

// Client is who holds (or last held) the lease.
func (l *Lease) Client() string { return l.client }

// Key is the sharding key the lease holds ("" none).
func (l *Lease) Key() string { return l.key }

// Deliveries counts how often the stored message was handed out under
// the lease.
func (l *Lease) Deliveries() int32 { return l.deliveries }

// Failures counts the lease's failed deliveries retried in place.
func (l *Lease) Failures() int32 { return l.failures }

// Waiting reports a lease waiting in place until RetryAt.
func (l *Lease) Waiting() bool { return l.waiting }

// RetryAt is when a waiting lease is offered again.
func (l *Lease) RetryAt() time.Time { return l.retryAt }

// Settling reports an ack of the lease on its way to disk; Settle is that
// ack's outcome.
func (l *Lease) Settling() bool  { return l.settling }
func (l *Lease) Settle() *Settle { return l.settle }

// SendingBack reports a failed delivery whose copy is being written.
func (l *Lease) SendingBack() bool { return l.sendingBack }

// History is the in-place attempt history (package consume's, opaque
// here).
func (l *Lease) History() any { return l.history }

// KeepHistory sets the in-place attempt history, with its latest failure
// (kept in memory only: the record holds the failure count).
func (l *Lease) KeepHistory(history any) { l.history = history }

// SendBack marks the lease's delivery failed, its copy being written.
func (l *Lease) SendBack() { l.sendingBack = true }

// StartSettling marks the lease being acknowledged, by the ack whose
// outcome is s; EndSettling unmarks it (the ack is applied, or failed).
func (l *Lease) StartSettling(s *Settle) { l.settling, l.settle = true, s }
func (l *Lease) EndSettling()            { l.settling = false }

// Item is the record of l, the lease on off: held until its deadline, or
// waiting until its retry time.
func (l *Lease) Item(off int64) Item {
	it := HeldItem(off, l.epoch, l.deadline, l.failures)
	if l.waiting {
		it.Deadline, it.State = MilliCeil(l.retryAt), Waiting
	}
	return it
}

// HeldItem is the record of a lease on off held until deadline under
// epoch, after failures in-place failures: a grant's item.
func HeldItem(off int64, epoch uint64, deadline time.Time, failures int32) Item {
	return Item{Offset: off, Epoch: epoch, Deadline: MilliCeil(deadline), Failures: uint16(min(max(failures, 0), 1<<16-1)), State: Held}
}

// WaitingItem is the record of a lease on off waiting in place until at
// under epoch, after failures in-place failures: an ordered message's
// failed delivery, or a lease of one changed to 0.
func WaitingItem(off int64, epoch uint64, at time.Time, failures int32) Item {
	it := HeldItem(off, epoch, at, failures)
	it.State = Waiting
	return it
}

// Apply puts a lease record's item into c, one of ps's cursors: it, the
// lease on it.Offset, held by client and holding the sharding key key
// ("" none). It is the one way a lease enters a cursor or changes state —
// a pull's grants, a lease changed, an ordered message failed in place,
// each once its record is appended, and the folded leases still owed
// when the broker takes over (package consume) — so the cursors hold
// what the lease records say. A lease not in flight is made (one
// delivery, its key held); one in flight takes the item's epoch,
// deadline, failures and client, and one delivery more when the item
// holds it under a new epoch (offered again). A held item runs until its
// deadline; a waiting one is offered again at it; a released one (of
// the epoch in flight) is taken out of flight, its key freed and the
// cursor moved back to it: visible again. It returns the lease on
// it.Offset, nil after a release.
func (ps *PopState) Apply(c *Cursor, it Item, client, key string) *Lease {
	l := c.inflight[it.Offset]
	if it.State == Released {
		if l != nil && l.epoch == it.Epoch {
			delete(c.inflight, it.Offset)
			ps.Release(c, l.key, it.Offset)
			c.Rewind(it.Offset)
		}
		return nil
	}
	if l == nil {
		l = &Lease{key: key}
		c.inflight[it.Offset] = l
		if key != "" {
			c.hold(key, it.Offset)
		}
	} else if it.State == Held && it.Epoch != l.epoch {
		l.deliveries++
	}
	if l.deliveries == 0 {
		l.deliveries = 1
	}
	deadline := time.UnixMilli(it.Deadline)
	l.epoch, l.client, l.failures, l.deadline = it.Epoch, client, int32(it.Failures), deadline
	l.waiting, l.retryAt = it.State == Waiting, time.Time{}
	if l.waiting {
		l.retryAt = deadline
	}
	return l
}
