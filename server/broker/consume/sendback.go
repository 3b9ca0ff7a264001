package consume

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage/offset"
)

// The consume-failure path (ARCHITECTURE.md, the life of a message;
// RocketMQ's sendMessageBack). A failed delivery — a nack, or a lease that
// expired — becomes a new message: package retry writes its retry or
// dead-letter copy with the ack of the failed delivery in one batch
// (retry.Service.Write); what is done here is the pop states' side: the
// failed leases stay in flight, marked SendingBack, until the copy is
// written (sentBack), and are offered again when it could not be
// (offerAgain). The lease reaper (reapExpired) sends back what expired
// without waiting for a pull.

// sendBack is one leased message that failed (nack or expired lease).
type sendBack struct {
	view    View
	offset  int64         // queue offset in view.StoreTopic/StoreQueue
	level   int           // -1 DLQ, 0 broker-controlled, >0 that level
	delay   time.Duration // > 0: retry on a timer after this long (a nack's delayMs)
	reason  string
	outcome string // "nack" or "expired"
	client  string // who failed it
	// Ordered messages dead after in-place retries (orderly.go) carry their
	// history and failure count here.
	history  []retry.Attempt
	failures int32
	lease    *lease.Lease // the failed lease, in flight (sendingBack) until the copy is written
}

// sendBack writes the retry (or dead-letter) copy of every failed delivery
// plus one progress record acknowledging the originals, in one batch
// (package retry's Service.Write), and then marks the originals done and
// takes their leases (marked sendingBack by the caller) out of flight.
func (s *Service) sendBack(group string, items []sendBack) error {
	if len(items) == 0 {
		return nil
	}
	err := s.cfg.Retries.Write(instance.Base(group), failures(items))
	s.sentBack(items)
	if err != nil {
		s.offerAgain(items)
	}
	return err
}

// failures are items as the retry family takes them.
func failures(items []sendBack) []retry.Failure {
	out := make([]retry.Failure, len(items))
	for i, it := range items {
		out[i] = retry.Failure{Key: it.view.Key, StoreTopic: it.view.StoreTopic, StoreQueue: it.view.StoreQueue,
			Offset: it.offset, Level: it.level, Delay: it.delay, Reason: it.reason, Outcome: it.outcome,
			Client: it.client, History: it.history, Failures: it.failures}
	}
	return out
}

// offerAgain makes failed deliveries whose send-back could not be written
// (a full disk refuses it; the write is retryable) visible to the group
// again, as a lease shortened to 0 would: they are neither in flight nor
// done, so without it they would wait for a restart. Ordered messages
// that failed in place keep their state (orderly.go).
func (s *Service) offerAgain(items []sendBack) {
	for _, it := range items {
		if len(it.history) > 0 {
			continue
		}
		ps := s.Existing(it.view.Key.Group, it.view.Key.Topic)
		if ps == nil {
			continue
		}
		ps.Lock()
		if c := ps.Cursor(it.view.Key.QueueID); c != nil {
			c.Rewind(it.offset)
		}
		ps.Unlock()
	}
}

// sentBack takes the leases of failed deliveries out of flight once their
// send-back is written (or failed: offerAgain then offers them again).
// Until then they stay in flight, marked sendingBack, so that a pull does
// not lease the same copy again (a restored lease lies at or above its
// cursor, which a pull re-reads).
func (s *Service) sentBack(items []sendBack) {
	var held *lease.PopState
	heldGroup, heldTopic := "", ""
	for _, it := range items {
		if it.lease == nil {
			continue
		}
		// The item's own progress group: group's, or an instance's.
		if held == nil || heldTopic != it.view.Key.Topic || heldGroup != it.view.Key.Group {
			if held != nil {
				held.Unlock()
			}
			held, heldGroup, heldTopic = s.Existing(it.view.Key.Group, it.view.Key.Topic), it.view.Key.Group, it.view.Key.Topic
			if held == nil {
				continue
			}
			held.Lock()
		}
		if c := held.Cursor(it.view.Key.QueueID); c != nil {
			c.RemoveIf(it.offset, it.lease)
		}
	}
	if held != nil {
		held.Unlock()
	}
}

// ReapExpired sends back every lease that expired, in every pop state, so
// a consume timeout starts its retry delay without waiting for a pull (the
// lease reaper, a leader service).
func (s *Service) ReapExpired() {
	states := s.States()
	now := s.cfg.Clock.Now()
	ch := changesPool.Get().(*changes)
	defer ch.release()
	for k, ps := range states {
		var failed []sendBack
		ps.Lock()
		for qid, c := range ps.Cursors() {
			if c.InFlight() == 0 {
				continue
			}
			expired, _ := s.takeExpired(ps, ch, c, s.View(k.Group, k.Topic, qid, nil), now)
			failed = append(failed, expired...)
		}
		var staged lease.Stages
		s.flush(ps, ch, &staged) // the ordered messages failed in place
		ps.Unlock()
		if err := staged.Wait(); err != nil {
			s.cfg.Log.Error().Err(err).Str("group", k.Group).Msg("recording ordered retries failed")
		}
		if err := s.sendBack(k.Group, failed); err != nil {
			s.cfg.Log.Error().Err(err).Str("group", k.Group).Msg("sending back expired leases failed")
		}
	}
}

// progress is the progress table; ledger, the progress family's ledger,
// writes it.
func (s *Service) progress() *offset.Table  { return s.cfg.Broker.Ledger().Table() }
func (s *Service) ledger() *progress.Ledger { return s.cfg.Broker.Ledger() }

func (s *Service) cursor(ps *lease.PopState, key offset.Key) *lease.Cursor {
	return ps.OpenCursor(key.QueueID, func() int64 {
		committed, _, _ := s.progress().Get(key)
		return committed
	})
}
