package txn

import (
	"errors"
	"sort"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// What the broker's other paths ask of the family: retention's carry of
// the half messages it is about to delete, a topic deletion's roll-back
// of the topic's transactions, the last snapshot at close.

// Carry runs before retention deletes the CommitLog below cut: every
// unresolved transaction whose latest half record lies there is copied
// (same id, body, check count and next check: HalfCopy), a batch at a
// time.
func (s *Service) Carry(cut int64) error {
	if err := s.lockState(s.cfg.Background); err != nil {
		return err
	}
	var below []*Txn
	s.Each(func(t *Txn) {
		if t.Phys() < cut {
			below = append(below, t)
		}
	})
	s.Unlock()
	sort.Slice(below, func(i, j int) bool { return below[i].Phys() < below[j].Phys() })
	carried := 0
	for len(below) > 0 {
		next := below[:min(len(below), batch)]
		below = below[len(next):]
		n, err := s.carryBatch(next, cut)
		carried += n
		if err != nil {
			return err
		}
	}
	if carried > 0 {
		s.cfg.Log.Info().Int("transactions", carried).Int64("below", cut).Msg("unresolved transactions carried past retention")
	}
	return nil
}

func (s *Service) carryBatch(txns []*Txn, cut int64) (int, error) {
	for _, t := range txns {
		t.LockOp() // an operation under way finishes first
	}
	defer unlockOps(txns)
	s.Lock()
	var live []*Txn
	for _, t := range txns {
		if s.Get(t.ID()) == t && t.Phys() < cut {
			live = append(live, t)
		}
	}
	s.Unlock()
	copies := make([]*message.Message, 0, len(live))
	for _, t := range live {
		m, err := s.cfg.Store.Lookup(t.Phys())
		if storage.IsGone(err) || errors.Is(err, storage.ErrCorrupt) {
			s.cfg.Log.Error().Err(err).Str("transaction", t.ID()).Msg("half message lost before retention could carry it")
			continue
		}
		if err != nil {
			return 0, s.cfg.StoreError(err)
		}
		copies = append(copies, HalfCopy(m, t))
	}
	if len(copies) == 0 {
		return 0, nil
	}
	if err := s.cfg.Store.PutClass(storage.ClassReclaim, copies, make([]storage.PutResult, len(copies))); err != nil {
		return 0, s.cfg.StoreError(err)
	}
	return len(copies), s.settle()
}

// RollbackTopic rolls back the unresolved transactions of a deleted
// topic (one being committed or checked right now is rolled back when
// that finds the topic gone). The caller holds the topic gate (its write
// side).
func (s *Service) RollbackTopic(topic string) error {
	if err := s.lockState(s.cfg.Background); err != nil {
		return err
	}
	var taken []*Txn
	s.Each(func(t *Txn) {
		if t.Topic() == topic && t.TryLockOp() {
			taken = append(taken, t)
		}
	})
	s.Unlock()
	defer func() { unlockOps(taken) }() // those left when a write fails
	now := s.cfg.Clock.Now()
	for len(taken) > 0 {
		n := min(len(taken), batch)
		ops := make([]OpRecord, 0, n)
		for _, t := range taken[:n] {
			ops = append(ops, t.FinalOp(RolledBack, ReasonTopicDeleted, now))
		}
		if err := s.putOps(storage.ClassSystem, nil, ops...); err != nil {
			return err
		}
		s.count(func(st *Stats) { st.RolledBack += uint64(n) })
		if err := s.settle(); err != nil {
			return err
		}
		unlockOps(taken[:n])
		taken = taken[n:]
	}
	return nil
}

// Close catches the state up and writes its snapshot (the broker's
// workers have stopped; the store is still open).
func (s *Service) Close() error { return s.WriteSnapshot() }
