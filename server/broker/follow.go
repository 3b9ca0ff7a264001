package broker

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// A follower (ARCHITECTURE.md, "The broker as a state machine") is a
// broker opened with Options.NoPromote on a store that receives another
// broker's frames (Store.AppendFrames). It writes nothing of its own: every
// change of its state comes from applying the records its store holds,
// with the code that applies them at open — the registry's apply, the
// progress ledger's Follow (package progress), the lease fold, the dead-letter status table,
// the timer and transaction followers. Follow applies what was dispatched
// since the last call; the leases it folds wait, in the fold, until
// Promote puts them into their cursors (installLeases, as at open; the
// fold is package lease's Log's).
//
// What a broker decides as leader and writes as records (a receipt key
// for a new store, the end of a topic deletion, offsets lowered after a
// lost tail, the mark where the message trace starts) is decided at
// Promote, after the log is applied, never at a follower's open; so is
// retention, whose carries write records.

// ErrLeading: Follow was called on a broker that leads (or led: a
// demoted broker does not follow yet).
var ErrLeading = errors.New("the broker leads; only a follower applies another broker's log")

// following is the broker's follower side.
type following struct {
	mu sync.Mutex
	// on: the broker has not led since it opened; Follow applies the log.
	on atomic.Bool
	// cuts: the next rmq_sys_CUT record to apply (package retention).
	cuts int64
}

// Following reports whether the broker applies another broker's log
// (it was opened with NoPromote and has not been promoted).
func (b *Broker) Following() bool { return b.follow.on.Load() }

// Follow applies the records the store dispatched since the last call
// (or since open): registry changes first (the other records name its
// topics and groups), then consumer progress, leases, dead-letter
// statuses, retention cuts, timers and transactions. It fails with ErrLeading once the
// broker has been promoted.
func (b *Broker) Follow(ctx context.Context) error {
	f := &b.follow
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on.Load() {
		return ErrLeading
	}
	return b.applyLogLocked(ctx)
}

// applyLogLocked is Follow's work; the caller holds follow.mu.
func (b *Broker) applyLogLocked(ctx context.Context) error {
	f := &b.follow
	if err := b.registry.Follow(ctx); err != nil {
		return err
	}

	if err := b.ledger.Follow(ctx); err != nil {
		return err
	}

	if err := b.leases.Follow(ctx); err != nil {
		return err
	}

	if err := b.deadLetters.Follow(ctx); err != nil {
		return err
	}

	// Cuts last: the records above delete nothing the ones before them
	// needed, and what a cut deletes was carried forward before it.
	next, err := b.retention.Apply(ctx, f.cuts)
	f.cuts = next
	if err != nil {
		return err
	}

	err = b.timers.Follow()
	if err != nil {
		return err
	}
	b.txns.Lock()
	err = b.followTxns()
	b.txns.Unlock()
	return err
}

// takeOver is Promote's first step: it applies what the log holds beyond
// the follower's position, makes the leader's decisions of an open (the
// receipt key, topic deletions, offsets above a lost tail, the trace's
// start) and puts the folded leases into their cursors. It does nothing
// once done.
func (b *Broker) takeOver(ctx context.Context) error {
	f := &b.follow
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on.Load() {
		return nil
	}
	if err := b.store.AwaitDispatch(ctx); err != nil {
		return mapStoreErr(err)
	}
	if err := b.applyLogLocked(ctx); err != nil {
		return err
	}
	if err := b.registry.EnsureReceiptKey(b.store.WriteOffset() > 0, b.clock.Now().UnixMilli(), b.log); err != nil {
		return err
	}
	if err := b.finishDeletions(); err != nil {
		return err
	}
	if err := b.clampOffsets(); err != nil {
		return err
	}
	b.openInstances()
	if top := b.leases.Top(); top >= b.epoch.Load() {
		b.epoch.Store(top) // the next lease takes top+1
	}
	restored, expired := b.consume.Install(b.leases.Owed(), b.clock.Now())
	b.log.Info().Int("leases", restored).Int("expired", expired).Msg("leases put back into their cursors")
	if err := b.resumeTrace(); err != nil {
		return err
	}
	// On a replicated store the fold goes on, of the committed records
	// only: a replicated leader's lease snapshots are written from it
	// (package lease's Log.Snapshot).
	b.leases.Lead(b.store.Replicated(), restored, expired)
	f.on.Store(false)
	b.store.SetRetentionPolicy(retentionPolicy{b: b})
	return nil
}
