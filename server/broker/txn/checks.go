package txn

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/storage"
)

// Checks: a transaction's first check falls due CheckAfter after the
// send, each later one max(CheckAfter, Config.CheckInterval) after the
// previous was handed out. A producer group pulls the checks that are due
// (PullChecks); one that was handed out Config.MaxChecks times and is due
// again is rolled back by the leader's roll-back loop (Loop; reason
// ReasonMaxChecks) and counted.

// Bounds of a check pull.
const (
	// MaxChecksPerPull is the most checks one pull hands out (as many as
	// a pull of messages takes: server/broker's MaxPullMessages).
	MaxChecksPerPull = 32
	// MaxCheckWait is the longest a check pull may wait.
	MaxCheckWait = 30 * time.Second
)

// PullChecks hands out up to limit checks of group's unresolved
// transactions that are due, waiting up to wait for one to fall due. Each
// handed-out check counts (CheckTimes) and schedules the next.
func (s *Service) PullChecks(ctx context.Context, group string, limit int, wait time.Duration) ([]Check, error) {
	if err := s.cfg.Names.Group(group); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxChecksPerPull {
		return nil, fmt.Errorf("%w: maxMessages %d must be between 1 and %d", s.cfg.InvalidArgument, limit, MaxChecksPerPull)
	}
	if wait < 0 || wait > MaxCheckWait {
		return nil, fmt.Errorf("%w: waitMs %d must be between 0 and %d", s.cfg.InvalidArgument, wait.Milliseconds(), MaxCheckWait.Milliseconds())
	}
	clock := s.cfg.Clock
	deadline := clock.Now().Add(wait)
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	s.Lock()
	s.Wait(group)
	s.Unlock()
	defer func() {
		s.Lock()
		s.Unwait(group)
		s.Unlock()
	}()
	for {
		checks, changed, next, err := s.handOutChecks(ctx, group, limit, clock.Now())
		if err != nil || len(checks) > 0 {
			return checks, err
		}
		now := clock.Now()
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
		case <-s.cfg.Closing:
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
func (s *Service) handOutChecks(ctx context.Context, group string, limit int, now time.Time) ([]Check, <-chan struct{}, time.Time, error) {
	if err := s.lockState(ctx); err != nil {
		return nil, nil, time.Time{}, err
	}
	taken, busy, changed, next := s.TakeDue(group, limit, now)
	if busy {
		next = now.Add(busyRetry)
	}
	s.Unlock()
	if len(taken) == 0 {
		return nil, changed, next, nil
	}
	defer unlockOps(taken)
	var ops []OpRecord
	var checks []Check
	rolledBack := 0
	s.cfg.Gate.Lock()
	for _, t := range taken {
		half, err := s.cfg.Store.Lookup(t.Phys())
		switch {
		case err != nil && (storage.IsGone(err) || errors.Is(err, storage.ErrCorrupt)):
			s.cfg.Log.Error().Err(err).Str("transaction", t.ID()).Msg("half message lost; the transaction is rolled back")
			ops = append(ops, t.FinalOp(RolledBack, ReasonLost, now))
			rolledBack++
		case err != nil:
			s.cfg.Gate.Unlock()
			s.putBack(taken)
			return nil, nil, time.Time{}, s.cfg.StoreError(err)
		case s.topicGone(t):
			ops = append(ops, t.FinalOp(RolledBack, ReasonTopicDeleted, now))
			rolledBack++
		default:
			op := t.CheckOp(now, s.checkInterval(t))
			ops = append(ops, op)
			v := viewOf(t)
			v.CheckTimes, v.NextCheckAt = op.CheckTimes, time.UnixMilli(op.NextCheckMs).UTC()
			checks = append(checks, Check{View: v, Half: half})
		}
	}
	s.cfg.Gate.Unlock()
	if err := s.putOps(storage.ClassSystem, nil, ops...); err != nil {
		s.putBack(taken)
		return nil, nil, time.Time{}, err
	}
	s.count(func(st *Stats) {
		st.ChecksHandedOut += uint64(len(checks))
		st.RolledBack += uint64(rolledBack)
	})
	if err := s.settle(); err != nil {
		return nil, nil, time.Time{}, err
	}
	s.Nudge() // a check count may have reached the maximum
	return checks, nil, time.Time{}, nil
}

// checkInterval is how long after a handed-out check of t the next falls
// due.
func (s *Service) checkInterval(t *Txn) time.Duration {
	return max(t.CheckAfter(), s.cfg.CheckInterval)
}

// Loop rolls back the transactions whose checks all went unanswered when
// they fall due, until ctx (the broker's closing, or its demotion) ends.
// It is a leader-only service, run on an internal/worker.Service;
// rollBackExhausted is its pass.
func (s *Service) Loop(ctx context.Context) {
	clock := s.cfg.Clock
	retry := worker.NewBackoff(100*time.Millisecond, 5*time.Second)
	wait := clock.NewTimer(time.Hour)
	defer wait.Stop()
	for {
		next, err := s.rollBackExhausted(clock.Now())
		d := followEvery
		if err != nil {
			d = retry.Next()
			if ctx.Err() == nil {
				s.cfg.Log.Error().Err(err).Dur("retryIn", d).Msg("rolling back unanswered transactions failed; will retry")
			}
		} else {
			retry.Reset()
			if !next.IsZero() {
				d = min(d, max(0, clock.Until(next)))
			}
		}
		wait.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-s.Wake():
			wait.Stop()
		case <-wait.Chan():
		}
	}
}

// rollBackExhausted rolls back the transactions whose every check went
// unanswered, up to a batch; it returns when the next of them falls due.
func (s *Service) rollBackExhausted(now time.Time) (time.Time, error) {
	if err := s.lockState(s.cfg.Background); err != nil {
		return time.Time{}, err
	}
	taken, busy, next := s.TakeExhausted(batch, now)
	if busy || len(taken) == batch {
		next = now.Add(busyRetry)
	}
	s.Unlock()
	if len(taken) == 0 {
		return next, nil
	}
	defer unlockOps(taken)
	ops := make([]OpRecord, 0, len(taken))
	for _, t := range taken {
		ops = append(ops, t.FinalOp(RolledBack, ReasonMaxChecks, now))
	}
	if err := s.putOps(storage.ClassSystem, nil, ops...); err != nil {
		s.putBack(taken)
		return time.Time{}, err
	}
	s.count(func(st *Stats) {
		st.RolledBack += uint64(len(taken))
		st.MaxChecksRolledBack += uint64(len(taken))
	})
	for _, t := range taken {
		s.cfg.Log.Warn().Str("transaction", t.ID()).Str("producerGroup", t.Group()).Int("checks", t.Checks()).
			Msg("transaction rolled back: no answer to its checks")
	}
	return next, s.settle()
}
