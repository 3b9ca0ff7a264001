package instance

import (
	"time"

	"github.com/mqgate/mqgate/storage/offset"
)

// Sweep forgets every instance idle longer than its group's InstanceIdle
// with no request under way: the pass of the leader's instance sweep
// (every SweepInterval). An instance that cannot be forgotten (its forget
// record not written) is logged and tried again by the next pass. It
// returns how many it forgot.
func (s *Service) Sweep(now time.Time) (forgotten int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idle := func(group string) time.Duration {
		g, _ := s.cfg.Broker.Group(group)
		return Idle(g.InstanceIdle)
	}
	for _, r := range s.set.Idle(now, idle) {
		if err := s.forgetLocked(r.Group, r.Client); err != nil {
			s.cfg.Log.Error().Err(err).Str("group", r.Group).Str("client", r.Client).Msg("forgetting an idle consumer instance failed; the next sweep tries again")
			continue
		}
		forgotten++
		s.cfg.Log.Info().Str("group", r.Group).Str("client", r.Client).Time("lastSeen", r.LastSeen).Dur("idle", r.Idle).
			Msg("consumer instance forgotten after being idle")
	}
	return forgotten
}

// forgetLocked drops an instance's leases and pop states (the broker's)
// and ends its progress with a forget record; the caller holds mu.
func (s *Service) forgetLocked(group, client string) error {
	name := Key(group, client)
	s.cfg.Broker.DropPopStates(name)
	if err := s.cfg.Ledger.Persist(offset.Record{Entries: []offset.Entry{{Kind: offset.KindForget, Key: offset.Key{Group: name}}}}, nil); err != nil {
		return err
	}
	s.cfg.Broker.ForgetDropped(name)
	s.set.Remove(group, client)
	return nil
}
