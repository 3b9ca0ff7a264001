package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The requests: a transactional send's checks and reservation, commit,
// rollback and describe. A commit writes, in one batch, the message to its
// topic and queue (CommittedCopy) and an op record saying Committed; a
// rollback writes the op record RolledBack alone. An op record names one
// transaction and carries UNIQ_KEY Key(id), so the newest one of a
// transaction is found by id through the store's key index: that is how a
// repeated commit or rollback learns how a finished transaction ended.
// Every operation on a pending transaction holds its op lock across its
// write and follows its records into the State before letting go.

// Send is what CheckSend reads of one message of a send.
type Send struct {
	// Transactional asks for a half message.
	Transactional bool
	// ProducerGroup and CheckAfterMs are its group and first check's
	// delay.
	ProducerGroup string
	CheckAfterMs  int64
	// Delayed: the message asks for a delay level, a delay or a delivery
	// time.
	Delayed bool
}

// CheckSend checks the transaction fields of one message of a send.
func (s *Service) CheckSend(in Send) error {
	if !in.Transactional {
		if in.ProducerGroup != "" || in.CheckAfterMs != 0 {
			return fmt.Errorf("%w: producerGroup and checkAfterMs belong to a transactional send (transactional: true)", s.cfg.InvalidArgument)
		}
		return nil
	}
	if in.ProducerGroup == "" {
		return fmt.Errorf("%w: a transactional send needs a producerGroup (the group asked about it when it is not resolved)", s.cfg.InvalidArgument)
	}
	if err := s.cfg.Names.Group(in.ProducerGroup); err != nil {
		return err
	}
	if in.CheckAfterMs != 0 && (in.CheckAfterMs < MinCheckAfter.Milliseconds() || in.CheckAfterMs > MaxCheckAfter.Milliseconds()) {
		return fmt.Errorf("%w: checkAfterMs %d must be between %d and %d", s.cfg.InvalidArgument, in.CheckAfterMs, MinCheckAfter.Milliseconds(), MaxCheckAfter.Milliseconds())
	}
	if in.Delayed {
		return fmt.Errorf("%w: a transactional message cannot be delayed (delayLevel, delayMs, deliverAt): commit it when it should be delivered", s.cfg.InvalidArgument)
	}
	return nil
}

// Reserve counts a transactional send of group being written against the
// quotas, which check is given (State.Reserve). The returned func ends the
// reservation: at once when nothing was stored, else when following sees
// the half record stored at phys (the send does not wait for it: every
// reader of the state follows first).
func (s *Service) Reserve(group string, check func(inGroup, all int) error) (release func(stored bool, phys int64), err error) {
	s.Lock()
	defer s.Unlock()
	if err := s.State.Reserve(group, check); err != nil {
		return nil, err
	}
	return func(stored bool, phys int64) {
		s.Lock()
		defer s.Unlock()
		s.Release(group, stored, phys)
	}, nil
}

// FindDedup finds the message a dedup id of topic names: stored in the
// topic, or a half message of a transaction for it.
func (s *Service) FindDedup(topic, id string, since int64) (*message.Message, error) {
	store := s.cfg.Store
	m, err := store.FindByDedupID(topic, id, since)
	if !errors.Is(err, storage.ErrNotFound) {
		return m, err
	}
	m, herr := store.FindByDedupID(HalfTopic, id, since)
	if herr == nil && m.Property(message.PropertyRealTopic) == topic {
		return m, nil
	}
	if herr != nil && !errors.Is(herr, storage.ErrNotFound) {
		return nil, herr
	}
	return nil, err
}

// parseID checks a client's transaction id.
func (s *Service) parseID(id string) (string, error) {
	mid, err := message.ParseID(id)
	if err != nil {
		return "", fmt.Errorf("%w: transaction id: %w", s.cfg.InvalidArgument, err)
	}
	return mid.String(), nil
}

// Commit ends a transaction by delivering its message to its topic and
// queue. Committing a committed transaction answers as the first commit
// did; one that was rolled back is a *FinishedError.
func (s *Service) Commit(ctx context.Context, id string) (View, error) {
	return s.end(ctx, id, true)
}

// Rollback ends a transaction by discarding its message; idempotent as
// Commit.
func (s *Service) Rollback(ctx context.Context, id string) (View, error) {
	return s.end(ctx, id, false)
}

func (s *Service) end(ctx context.Context, id string, commit bool) (View, error) {
	id, err := s.parseID(id)
	if err != nil {
		return View{}, err
	}
	t, err := s.lockTxn(ctx, id)
	if err != nil {
		return View{}, err
	}
	if t == nil {
		return s.finished(ctx, id, commit)
	}
	defer t.UnlockOp()
	if commit {
		return s.commit(t)
	}
	return s.rollback(t, ReasonProducer)
}

// finished answers a commit (or rollback) of a transaction that is not
// pending: how it ended, as an error when it ended the other way.
func (s *Service) finished(ctx context.Context, id string, commit bool) (View, error) {
	v, err := s.finishedView(ctx, id)
	if err != nil {
		return View{}, err
	}
	if (v.State == Committed) != commit {
		return View{}, &FinishedError{Transaction: v}
	}
	return v, nil
}

// finishedView describes a finished transaction from its last op record.
func (s *Service) finishedView(ctx context.Context, id string) (View, error) {
	if err := s.cfg.AwaitDispatch(ctx); err != nil {
		return View{}, err
	}
	m, err := s.cfg.Store.FindByUniqKey(OpTopic, Key(id))
	if errors.Is(err, storage.ErrNotFound) {
		return View{}, fmt.Errorf("%w: %s (never sent, or finished before retention removed its records)", ErrNotFound, id)
	}
	if err != nil {
		return View{}, s.cfg.StoreError(err)
	}
	rec, err := DecodeOp(m.Body)
	if err != nil || rec.ID != id || (rec.State != Committed && rec.State != RolledBack) {
		return View{}, fmt.Errorf("%w: %s (its last record does not say how it ended)", ErrNotFound, id)
	}
	v := View{ID: id, State: rec.State, Reason: rec.Reason, ProducerGroup: rec.ProducerGroup, Topic: rec.Topic,
		QueueID: rec.QueueID, QueueOffset: -1, CheckTimes: rec.CheckTimes, CreatedAt: time.UnixMilli(rec.BornMs).UTC(), FinishedAt: rec.At}
	if v.State == Committed {
		if c, err := s.cfg.Store.FindByUniqKey(rec.Topic, Key(id)); err == nil {
			v.QueueID, v.QueueOffset = c.QueueID, c.QueueOffset
		}
	}
	return v, nil
}

// Describe describes a transaction: pending (with its checks and the
// next one's due time) or how it ended.
func (s *Service) Describe(ctx context.Context, id string) (View, error) {
	id, err := s.parseID(id)
	if err != nil {
		return View{}, err
	}
	if err := s.lockState(ctx); err != nil {
		return View{}, err
	}
	t := s.Get(id)
	var v View
	if t != nil {
		v = viewOf(t)
	}
	s.Unlock()
	if t != nil {
		return v, nil
	}
	return s.finishedView(ctx, id)
}

// commit delivers t's message; the caller holds t's op lock.
func (s *Service) commit(t *Txn) (View, error) {
	half, err := s.cfg.Store.Lookup(t.Phys())
	if err != nil {
		if storage.IsGone(err) || errors.Is(err, storage.ErrCorrupt) {
			s.cfg.Log.Error().Err(err).Str("transaction", t.ID()).Msg("half message lost; the transaction is rolled back")
			return s.rolledBackInstead(t, ReasonLost)
		}
		return View{}, s.cfg.StoreError(err)
	}
	s.cfg.Gate.Lock() // the topic gate's read side
	defer s.cfg.Gate.Unlock()
	if s.topicGone(t) {
		return s.rolledBackInstead(t, ReasonTopicDeleted)
	}
	now := s.cfg.Clock.Now()
	op := t.FinalOp(Committed, "", now)
	if done, err := s.committedBefore(t); err != nil {
		return View{}, err
	} else if done != nil {
		// Delivered by a commit whose op record a crash (or an error)
		// lost: record the outcome only.
		if err := s.putOps(storage.ClassSystem, nil, op); err != nil {
			return View{}, err
		}
		return s.settledCommit(t, op, done.QueueID, done.QueueOffset)
	}
	out := CommittedCopy(half, t)
	res := make([]storage.PutResult, 2)
	if err := s.cfg.Store.PutClass(storage.ClassSend, []*message.Message{out, OpMessage(op, now)}, res); err != nil {
		t.SetUnsure() // the message may be stored: look for it before the next attempt
		return View{}, s.cfg.StoreError(err)
	}
	return s.settledCommit(t, op, res[0].QueueID, res[0].QueueOffset)
}

// settledCommit applies a commit's records and describes the outcome.
func (s *Service) settledCommit(t *Txn, op OpRecord, queue int32, offset int64) (View, error) {
	v := viewOf(t)
	v.State, v.FinishedAt, v.NextCheckAt = Committed, op.At, time.Time{}
	v.QueueID, v.QueueOffset = queue, offset
	s.count(func(st *Stats) { st.Committed++ })
	return v, s.settle()
}

// committedBefore looks for the committed message of a transaction whose
// earlier commit may have been stored without its op record (it existed
// before this start, or a commit of it failed with an unknown outcome).
func (s *Service) committedBefore(t *Txn) (*message.Message, error) {
	if !t.Unsure() && t.IDOffset() >= s.startOffset {
		return nil, nil
	}
	m, err := s.cfg.Store.FindByUniqKey(t.Topic(), Key(t.ID()))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, s.cfg.StoreError(err)
	}
	return m, nil
}

// topicGone reports whether t's topic was deleted since its send; the
// caller holds the topic gate.
func (s *Service) topicGone(t *Txn) bool { return s.cfg.TopicGone(t.Topic(), t.IDOffset()) }

// rolledBackInstead rolls t back for reason and reports it as finished
// the other way (a commit that could not deliver).
func (s *Service) rolledBackInstead(t *Txn, reason string) (View, error) {
	v, err := s.rollback(t, reason)
	if err != nil {
		return View{}, err
	}
	return View{}, &FinishedError{Transaction: v}
}

// rollback discards t's message; the caller holds t's op lock.
func (s *Service) rollback(t *Txn, reason string) (View, error) {
	if done, err := s.committedBefore(t); err != nil {
		return View{}, err
	} else if done != nil {
		op := t.FinalOp(Committed, "", s.cfg.Clock.Now())
		if err := s.putOps(storage.ClassSystem, nil, op); err != nil {
			return View{}, err
		}
		v, err := s.settledCommit(t, op, done.QueueID, done.QueueOffset)
		if err != nil {
			return View{}, err
		}
		return View{}, &FinishedError{Transaction: v}
	}
	op := t.FinalOp(RolledBack, reason, s.cfg.Clock.Now())
	if err := s.putOps(storage.ClassSystem, nil, op); err != nil {
		return View{}, err
	}
	v := viewOf(t)
	v.State, v.Reason, v.FinishedAt, v.NextCheckAt = RolledBack, reason, op.At, time.Time{}
	s.count(func(st *Stats) {
		st.RolledBack++
		if reason == ReasonMaxChecks {
			st.MaxChecksRolledBack++
		}
	})
	return v, s.settle()
}
