package consume

import (
	"sync"

	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage/offset"
)

// Lease changes are decided, written, then applied. A request decides
// them under a pop state's lock (decide: each a lease record's item,
// noted in the pop state's notes), appends their record before the lock
// is released, and only once it is appended applies them to the cursors
// (PopState.Apply, the code that installs the folded leases when the
// broker takes over). A refused append applies nothing. A pull appends
// its changes with its skips (popOnce); a receipt request and the
// reaper stage theirs (flush).

// changes are the lease changes a request decided under one pop state's
// lock and has not applied yet, and, for a pull, where each cursor it
// read was before it (undo).
type changes struct {
	list []pending
	from []cursorAt
}

// pending is one decided change: item, the lease on item.Offset of c,
// held by client, holding the sharding key key; history, an in-place
// failure's attempt history (nil: unchanged); inFlight: the lease was in
// flight when it was decided (a pull's undo leaves the cursor there).
type pending struct {
	c        *lease.Cursor
	item     lease.Item
	client   string
	key      string
	history  []retry.Attempt
	inFlight bool
}

type cursorAt struct {
	c    *lease.Cursor
	next int64
}

// changesPool keeps the requests' changes for the next requests: a pull
// would otherwise allocate them each time.
var changesPool = sync.Pool{New: func() any { return &changes{list: make([]pending, 0, MaxMessages)} }}

// release empties ch (dropping what it points to) and gives it back to
// changesPool.
func (ch *changes) release() {
	ch.reset()
	clear(ch.from)
	ch.from = ch.from[:0]
	changesPool.Put(ch)
}

func (ch *changes) reset() {
	clear(ch.list)
	ch.list = ch.list[:0]
}

// decide notes it, the new state of the lease on it.Offset of c (key's
// queue), in ps's notes and adds it to ch; the caller holds ps's lock.
func (s *Service) decide(ps *lease.PopState, ch *changes, key offset.Key, c *lease.Cursor, it lease.Item, client, shardingKey string, history []retry.Attempt, inFlight bool) {
	s.cfg.Leases.Note(ps.Notes(), key, client, it)
	ch.list = append(ch.list, pending{c: c, item: it, client: client, key: shardingKey, history: history, inFlight: inFlight})
}

// touch notes where c was before the pull read it.
func (ch *changes) touch(c *lease.Cursor) { ch.from = append(ch.from, cursorAt{c, c.Next()}) }

// holds reports whether a lease decided in ch holds the sharding key key
// of c: a later message of the key waits behind it, as behind a lease
// applied before.
func (ch *changes) holds(c *lease.Cursor, key string) bool {
	for _, p := range ch.list {
		if p.c == c && p.key == key && p.item.State != lease.Released {
			return true
		}
	}
	return false
}

// has reports whether ch holds a change of the lease on off of c.
func (ch *changes) has(c *lease.Cursor, off int64) bool {
	for _, p := range ch.list {
		if p.c == c && p.item.Offset == off {
			return true
		}
	}
	return false
}

// apply applies ch's changes to ps's cursors (PopState.Apply), in the
// order they were decided, and empties ch; the caller holds ps's lock.
func (ch *changes) apply(ps *lease.PopState) {
	for _, p := range ch.list {
		if l := ps.Apply(p.c, p.item, p.client, p.key); l != nil && p.history != nil {
			l.KeepHistory(p.history)
		}
	}
	ch.reset()
}

// undo moves each cursor a refused pull read back to where it was and
// to the offsets it was to lease anew (deferred ordered messages lie
// below it): the next pull reads them again, passes over the same
// offsets and records them. Nothing of ch was applied: a lease offered
// again or failed in place stays as it was, due at once.
func (ch *changes) undo() {
	for _, at := range ch.from {
		at.c.Rewind(at.next)
	}
	for _, p := range ch.list {
		if !p.inFlight {
			p.c.Rewind(p.item.Offset)
		}
	}
	ch.reset()
}

// flush appends the changes decided under ps's lock (its notes) as one
// lease record, staged in staged (whose Wait the request answers after),
// and applies them once appended; the caller holds ps's lock. A refused
// append applies nothing (staged's Wait returns its error).
func (s *Service) flush(ps *lease.PopState, ch *changes, staged *lease.Stages) {
	if staged.Stage(s.cfg.Leases, ps.TakeNotes()) == nil {
		ch.apply(ps)
	}
	ch.reset()
}
