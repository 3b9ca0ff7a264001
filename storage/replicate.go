package storage

import (
	"errors"
	"fmt"
	"sync"
)

// A replicated store (Options.Replicated) is one replica of a Raft group
// whose log is the CommitLog (packages raftlog and shard). Its writers —
// the broker, as on a single node — append as usual while this replica
// leads; the shard's node loop proposes what they appended, in log order,
// and a write is answered only once the commit point passed it:
//
//   - Appends are refused (ErrNotLeader) while the store is fenced. A
//     replicated store opens fenced; its owner lifts the fence once this
//     replica leads and has applied its log (Unfence), and the node loop
//     fences it again the moment it stops leading (Fence), which waits
//     for the appends in flight.
//   - An append that waits for its flush (Put, PutClass, PutClassStaged's
//     wait, WaitDurable) waits after it for the commit point to pass its
//     end (SetDispatchLimit moves both the dispatcher and that point).
//   - A fence, and a cut of the log's tail (TruncateFrom), answer every
//     waiter still above the commit point with ErrUnknownOutcome: its
//     records may or may not be committed by the next leader.
//
// PutClassNoWait does not wait for the commit point; WaitCommitted does
// (a pull's answer waits for its lease record, which proves the replica
// still led when it granted).

// ErrNotLeader refuses an append to a replicated store that is fenced:
// this replica does not lead (or has not applied its log yet). Nothing
// was written; the request belongs on the leader.
var ErrNotLeader = errors.New("storage: this replica does not lead")

// ErrUnknownOutcome answers a write to a replicated store that was
// appended but not committed when this replica stopped leading or cut
// its tail: the next leader may or may not hold it. Retryable with the
// same idempotency key; never a success.
var ErrUnknownOutcome = errors.New("storage: write outcome unknown (the leadership changed before the commit)")

// commitGate is the replicated store's commit point and fence.
type commitGate struct {
	// fenceMu: appends hold it shared; Fence takes it exclusively, so
	// that once Fence returns no append is in flight.
	fenceMu sync.RWMutex
	mu      sync.Mutex
	fenced  bool
	epoch   uint64 // raised by every Fence and cut: older appends' waits fail
	commit  int64
	waiters []*gateWaiter
}

type gateWaiter struct {
	end  int64
	done chan error // capacity 1
}

// Replicated reports whether the store was opened with
// Options.Replicated.
func (s *Store) Replicated() bool { return s.opts.Replicated }

// Fence refuses appends from now on (ErrNotLeader, with cause) and waits
// for those in flight; every write waiting above the commit point gets
// ErrUnknownOutcome. The node loop fences when this replica stops leading.
func (s *Store) Fence() {
	if !s.opts.Replicated {
		return
	}
	g := &s.gate
	g.fenceMu.Lock()
	g.mu.Lock()
	g.fenced = true
	g.epoch++
	g.failAboveLocked(g.commit)
	g.mu.Unlock()
	g.fenceMu.Unlock()
}

// Unfence accepts appends again: this replica leads and has applied its
// log.
func (s *Store) Unfence() {
	if !s.opts.Replicated {
		return
	}
	g := &s.gate
	g.mu.Lock()
	g.fenced = false
	g.mu.Unlock()
}

// Fenced reports whether a replicated store refuses appends.
func (s *Store) Fenced() bool {
	if !s.opts.Replicated {
		return false
	}
	g := &s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fenced
}

// CommitOffset is a replicated store's commit point: the CommitLog offset
// where the committed entries end (WriteOffset on a store that is not
// replicated).
func (s *Store) CommitOffset() int64 {
	if !s.opts.Replicated {
		return s.WriteOffset()
	}
	g := &s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.commit
}

// WaitCommitted waits until the commit point passes end (at once on a
// store that is not replicated). It fails with ErrUnknownOutcome when
// the store is fenced or its tail cut before that.
func (s *Store) WaitCommitted(end int64) error {
	if !s.opts.Replicated {
		return nil
	}
	g := &s.gate
	g.mu.Lock()
	epoch := g.epoch
	g.mu.Unlock()
	return s.waitCommit(end, epoch)
}

// appendEpoch enters an append: it holds the fence shared (release it
// with the returned func) and says the epoch the append belongs to; a
// fenced store refuses it.
func (s *Store) appendEpoch() (uint64, func(), error) {
	if !s.opts.Replicated {
		return 0, func() {}, nil
	}
	g := &s.gate
	g.fenceMu.RLock()
	g.mu.Lock()
	fenced, epoch := g.fenced, g.epoch
	g.mu.Unlock()
	if fenced {
		g.fenceMu.RUnlock()
		return 0, nil, ErrNotLeader
	}
	return epoch, g.fenceMu.RUnlock, nil
}

// waitCommit waits until the commit point reaches end, for an append of
// epoch.
func (s *Store) waitCommit(end int64, epoch uint64) error {
	if !s.opts.Replicated || end < 0 {
		return nil
	}
	g := &s.gate
	g.mu.Lock()
	if g.commit >= end {
		g.mu.Unlock()
		return nil
	}
	if g.epoch != epoch {
		g.mu.Unlock()
		return ErrUnknownOutcome
	}
	w := &gateWaiter{end: end, done: make(chan error, 1)}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	select {
	case err := <-w.done:
		return err
	case <-s.closing:
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.commit >= end {
			return nil
		}
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrClosed)
	}
}

// advanceCommit raises the commit point (SetDispatchLimit) and answers
// the waiters it passed.
func (s *Store) advanceCommit(offset int64) {
	g := &s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if offset <= g.commit {
		return
	}
	g.commit = offset
	keep := g.waiters[:0]
	for _, w := range g.waiters {
		if w.end <= offset {
			w.done <- nil
		} else {
			keep = append(keep, w)
		}
	}
	clear(g.waiters[len(keep):])
	g.waiters = keep
}

// cutTail is TruncateFrom's part: the appends of the epoch are over, and
// the waiters above the cut will not see their records committed here.
func (s *Store) cutTail(offset int64) {
	g := &s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.epoch++
	g.failAboveLocked(offset)
}

// failAboveLocked answers ErrUnknownOutcome to every waiter whose end is
// above offset.
func (g *commitGate) failAboveLocked(offset int64) {
	keep := g.waiters[:0]
	for _, w := range g.waiters {
		if w.end > offset {
			w.done <- ErrUnknownOutcome
		} else {
			keep = append(keep, w)
		}
	}
	clear(g.waiters[len(keep):])
	g.waiters = keep
}

// AppendSignal receives (capacity 1) after WriteOffset rose by an append
// of the store's writers: the Raft node loop proposes their frames.
func (s *Store) AppendSignal() <-chan struct{} { return s.commitLog.AppendSignal() }
