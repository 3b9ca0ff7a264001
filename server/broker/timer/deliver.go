package timer

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// One goroutine delivers due timers: the real messages and the
// "delivered" status go in one batch; the records of a batch are in
// flight (invisible to list, cancel and reschedule) until the index has
// seen the status. A timer is never delivered early. A timer created
// before the last start (a batch a crash tore may have stored its
// delivery but not its status) or whose delivery failed is first looked
// up in its topic by its UNIQ_KEY, so it is not delivered twice. Before
// retention deletes a segment, pending timers recorded there are carried
// (re-appended), so a timer outlives the retention window.

// Loop delivers due timers until ctx (the broker's closing, or its
// demotion) ends: the leader's timer delivery. It runs on an
// internal/worker.Service; follow and DeliverDue are its passes.
func (s *Service) Loop(ctx context.Context) {
	clock := s.cfg.Clock
	retry := worker.NewBackoff(100*time.Millisecond, 5*time.Second)     // failed deliveries
	readRetry := worker.NewBackoff(100*time.Millisecond, 5*time.Second) // failed index reads
	wait := clock.NewTimer(time.Hour)
	defer wait.Stop()
	var next time.Time // the next due time, when known
	known := false
	for {
		_ = s.cfg.AwaitDispatch(ctx)
		s.mu.Lock()
		err := s.follow()
		switch {
		case err != nil:
			known = false
		case known:
			// Only what was born since can come sooner (a kill makes the
			// wait end early, harmlessly).
			if due, ok := s.state.TakeBornDue(); ok && (next.IsZero() || due < next.UnixMilli()) {
				next = time.UnixMilli(due)
			}
		default:
			next, err = s.nextLocked()
			known = err == nil
		}
		s.state.TakeBornDue()
		s.mu.Unlock()
		if err == nil {
			readRetry.Reset()
		}
		d := followEvery
		switch {
		case err != nil:
			d = readRetry.Next()
			s.cfg.Log.Error().Err(err).Dur("retryIn", d).Msg("reading the timer index failed; will retry")
		case !next.IsZero():
			d = min(d, max(0, clock.Until(next)))
		}
		wait.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			wait.Stop()
			continue
		case <-wait.Chan():
		}
		if next.IsZero() || clock.Now().Before(next) {
			known = false // every followEvery, look again
			continue
		}
		known = false
		if err := s.DeliverDue(clock.Now()); err != nil {
			d := retry.Next()
			s.cfg.Log.Error().Err(err).Dur("retryIn", d).Msg("delivering timers failed; will retry")
			if !worker.Sleep(ctx, d) {
				return
			}
			continue
		}
		retry.Reset()
	}
}

// dueTimer is a timer record picked for delivery.
type dueTimer struct {
	timerindex.Entry
	unsure bool // an earlier attempt's outcome is unknown
}

// DeliverDue delivers every timer due at now, in batches (the delivery
// loop's pass).
func (s *Service) DeliverDue(now time.Time) error {
	s.deliverMu.Lock()
	defer s.deliverMu.Unlock()
	for {
		s.mu.Lock()
		if err := s.follow(); err != nil {
			s.mu.Unlock()
			return err
		}
		var due []dueTimer
		_, _, err := s.index.Scan(timerindex.MinKey, "", 0, func(e timerindex.Entry) bool {
			if e.Due > now.UnixMilli() {
				return false
			}
			if s.state.Busy(e.Seq) {
				return true
			}
			due = append(due, dueTimer{Entry: e, unsure: s.state.Unsure(e.Seq)})
			return len(due) < batch
		})
		for _, d := range due {
			s.state.Deliver(d.Seq)
		}
		s.mu.Unlock()
		if err != nil {
			return err
		}
		if len(due) == 0 {
			return nil
		}
		err = s.deliver(due, now)
		s.settleDelivery(due, err == nil)
		if err != nil {
			return err
		}
	}
}

// settleDelivery waits for the index to see the batch's status and ends
// its flight: a record still pending after a failed write may be retried
// (unsure); one whose batch was stored stays in flight until its status
// is applied.
func (s *Service) settleDelivery(due []dueTimer, stored bool) {
	if stored {
		_ = s.cfg.AwaitDispatch(s.cfg.Background)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.follow(); err != nil {
		s.cfg.Log.Error().Err(err).Msg("timer index not up to date after a delivery")
	}
	for _, d := range due {
		s.state.Delivered(d.Seq, s.index.Live(d.Seq), stored)
	}
}

// deliver stores the real messages of a batch and its status, under the
// topic gate.
func (s *Service) deliver(due []dueTimer, now time.Time) error {
	s.cfg.Gate.Lock() // the read side: a topic's deletion waits
	defer s.cfg.Gate.Unlock()
	msgs := make([]*message.Message, 0, len(due)+1)
	recs := make([]StatusRecord, 0, len(due))
	for _, d := range due {
		m, err := storage.RecordAt(s.cfg.Store, Topic, d.Seq)
		if storage.IsGone(err) {
			s.cfg.Log.Error().Int64("seq", d.Seq).Msg("timer record lost; it cannot be delivered")
			seq := d.Seq
			recs = append(recs, StatusRecord{Status: Delivered, At: now.UTC(), Seq: &seq, Topic: d.Topic})
			continue
		}
		if err != nil {
			return s.cfg.StoreError(err)
		}
		id := ID(m)
		mid, err := message.ParseID(id)
		if err == nil && s.cfg.Deleted(m, mid.Offset()) {
			// Its topic (a retry's original topic) was deleted after it
			// was scheduled.
			recs = append(recs, Settle(m, Cancelled, now))
			continue
		}
		recs = append(recs, Settle(m, Delivered, now))
		// A timer that existed before this process started may have been
		// delivered by a batch a crash tore (its status lost): look for
		// the delivery first, as after a failed write.
		if d.unsure || err == nil && mid.Offset() < s.startOffset {
			done, err := s.cfg.Store.FindByUniqKey(d.Topic, Key(id))
			if err == nil && done != nil {
				continue // delivered by a batch whose status a crash or an error lost
			}
			if err != nil && !errors.Is(err, storage.ErrNotFound) {
				return s.cfg.StoreError(err)
			}
		}
		out := m.CopyTo(d.Topic, DeliveryDrops...)
		out.SetProperty(message.PropertyUniqKey, Key(id))
		if qid, err := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32); err == nil {
			out.QueueID = int32(qid)
		}
		msgs = append(msgs, out)
		s.cfg.Late(now.Sub(time.UnixMilli(d.Due)))
	}
	status, err := StatusMessage(recs, now)
	if err != nil {
		return err
	}
	msgs = append(msgs, status)
	if err := s.cfg.Store.PutClass(storage.ClassSystem, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return s.cfg.StoreError(err)
	}
	return nil
}

// Carry runs before retention deletes the CommitLog below cut: pending
// timers recorded there are re-appended (same id and due time; each copy
// supersedes the record it copies), a batch at a time while deliveries
// go on; a last pass, with no delivery under way, carries what a
// delivery had in flight and did not settle, so that no delivery is left
// reading a record retention deletes.
func (s *Service) Carry(cut int64) error {
	_ = s.cfg.AwaitDispatch(s.cfg.Background)
	carried, err := s.carryBelow(cut)
	if err == nil {
		s.deliverMu.Lock()
		var more int
		more, err = s.carryBelow(cut)
		s.deliverMu.Unlock()
		carried += more
	}
	if carried > 0 {
		s.cfg.Log.Info().Int("timers", carried).Int64("below", cut).Msg("pending timers carried past retention")
	}
	return err
}

// carryBelow copies the pending records below cut that are not in flight.
func (s *Service) carryBelow(cut int64) (int, error) {
	carried := 0
	for from, done := int64(0), false; !done; {
		s.mu.Lock()
		if err := s.follow(); err != nil {
			s.mu.Unlock()
			return carried, err
		}
		var copies []*message.Message
		for len(copies) < batch {
			seq, ok := s.index.NextLive(from)
			if !ok {
				done = true
				break
			}
			from = seq + 1
			if s.state.Busy(seq) {
				continue // being delivered
			}
			m, err := storage.RecordAt(s.cfg.Store, Topic, seq)
			if storage.IsGone(err) {
				continue
			}
			if err != nil {
				s.mu.Unlock()
				return carried, s.cfg.StoreError(err)
			}
			if m.PhysicalOffset >= cut {
				done = true
				break
			}
			copies = append(copies, timerCopy(m, Due(m)))
			s.cfg.Carried(m)
		}
		var err error
		if len(copies) > 0 {
			if err = s.cfg.Store.PutClass(storage.ClassReclaim, copies, make([]storage.PutResult, len(copies))); err == nil {
				carried += len(copies)
				err = s.settleOwnWrite()
			}
		}
		s.mu.Unlock()
		if err != nil {
			return carried, s.cfg.StoreError(err)
		}
	}
	return carried, nil
}
