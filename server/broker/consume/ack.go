package consume

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage/offset"
)

// The receipt loop: Ack, ChangeLease and Nack check each receipt and act
// on its live lease under its pop state's lock.

// leaseRef is a valid receipt whose lease is live, handed to a receiptOp
// under the lease's pop state lock.
type leaseRef struct {
	index  int // position in the request
	state  *lease.PopState
	cursor *lease.Cursor
	lease  *lease.Lease
	r      receipt.Receipt
	key    offset.Key
}

// receiptOp acts on one live lease and returns the outcome for the client.
type receiptOp func(ref leaseRef, now time.Time) ReceiptStatus

// forEachReceipt validates each receipt and runs op on its live lease
// under the lease's lock. Invalid, stale and gone receipts get their
// status without op: a receipt whose message is already acknowledged is
// ok for an ack (idempotent) and expired for anything else. The receipt
// of a broadcasting group's instance names the instance's progress group
// (package instance): it settles that instance's lease, and counts as a
// request of the instance.
func (s *Service) forEachReceipt(group string, receipts []string, isAck bool, op receiptOp) []ReceiptResult {
	return s.forEachReceiptThen(group, receipts, isAck, op, nil, nil)
}

// forEachReceiptThen is forEachReceipt for requests whose op decides
// lease changes into ch (decide): each time it is about to release a pop
// state's lock it appends the changes decided under that lock as one
// lease record, staged in staged (the log holds them in the order they
// were decided), and applies them once appended (flush); a receipt whose
// lease has a change decided and not yet applied (the same receipt twice
// in one request) has them appended and applied first, so it is checked,
// and decided on, as the lease stands after them.
func (s *Service) forEachReceiptThen(group string, receipts []string, isAck bool, op receiptOp, ch *changes, staged *lease.Stages) []ReceiptResult {
	results := make([]ReceiptResult, len(receipts))
	now := s.cfg.Clock.Now()
	// Decode (and check the HMAC of) every receipt before taking any lock.
	decoded := make([]receipt.Receipt, len(receipts))
	valid := make([]bool, len(receipts))
	var instances map[string]struct{}
	for i, raw := range receipts {
		results[i].Receipt = raw
		r, err := s.cfg.Broker.Registry().Ring().Decode(raw)
		base, client := "", ""
		if err == nil {
			base, client = instance.Split(r.Group)
		}
		if err != nil || base != group {
			results[i].Status, results[i].Error = ReceiptInvalid, "malformed, forged, of another group, or signed by a receipt key that was rotated out or lost"
			continue
		}
		if client != "" {
			if instances == nil {
				instances = map[string]struct{}{}
			}
			instances[client] = struct{}{}
		}
		decoded[i], valid[i] = r, true
	}
	s.cfg.Broker.Instances().Touch(group, instances)
	// The receipts of one request are almost always of one (group,
	// topic): its pop state is locked once for the run of them, not once
	// per receipt, so an ack of 32 does not queue 32 times behind pulls.
	var held *lease.PopState
	heldGroup, heldTopic := "", ""
	release := func() {
		if held != nil {
			if ch != nil {
				s.flush(held, ch, staged)
			}
			held.Unlock()
			held = nil
		}
	}
	defer release()
	for i := range receipts {
		if !valid[i] {
			continue
		}
		r := decoded[i]
		key := offset.Key{Group: r.Group, Topic: r.Topic, QueueID: r.QueueID}
		if held == nil || heldTopic != r.Topic || heldGroup != r.Group {
			release()
			ps := s.Existing(r.Group, r.Topic)
			if ps == nil {
				results[i].Status, results[i].Error = s.goneStatus(key, r.Offset, isAck)
				continue
			}
			ps.Lock()
			held, heldGroup, heldTopic = ps, r.Group, r.Topic
		}
		c := held.Cursor(r.QueueID)
		var l *lease.Lease
		if c != nil {
			if ch != nil && ch.has(c, r.Offset) {
				s.flush(held, ch, staged)
			}
			l = c.Lease(r.Offset)
		}
		switch {
		case l == nil:
			results[i].Status, results[i].Error = s.goneStatus(key, r.Offset, isAck)
		case l.Epoch() != r.Epoch:
			results[i].Status, results[i].Error = ReceiptExpired, "the message was redelivered under a newer receipt"
		case l.SendingBack():
			results[i].Status, results[i].Error = ReceiptExpired, "the delivery failed (nack or lease expiry); its retry copy takes over"
		case l.Settling() && isAck:
			// The same ack is on its way to disk: ok once it got there
			// (Ack waits for it, after this lock is released).
			results[i].Status, results[i].settling = ReceiptOK, l.Settle()
		case l.Settling():
			results[i].Status, results[i].Error = ReceiptExpired, "the message is being acknowledged"
		default:
			results[i].Status = op(leaseRef{index: i, state: held, cursor: c, lease: l, r: r, key: key}, now)
		}
	}
	return results
}

func (s *Service) goneStatus(key offset.Key, off int64, isAck bool) (ReceiptStatus, string) {
	switch {
	case s.progress().IsFailed(key, off):
		return ReceiptExpired, "the delivery failed (nack or lease expiry); its retry copy takes over"
	case s.progress().IsAcked(key, off) && isAck:
		return ReceiptOK, ""
	case s.progress().IsAcked(key, off):
		return ReceiptExpired, "the message is already acknowledged"
	}
	return ReceiptExpired, "the lease ended (it ran out or was released, or the broker restarted); the message will be delivered again"
}

func (s *Service) checkBatch(group string, n int) error {
	if s.cfg.Closed() {
		return s.cfg.Errors.ShuttingDown
	}
	if err := registry.ValidateGroupName(group); err != nil {
		return err
	}
	if n == 0 || n > s.cfg.MaxBatch {
		return fmt.Errorf("%w: 1 to %d items", s.cfg.Errors.InvalidArgument, s.cfg.MaxBatch)
	}
	return nil
}

// Ack acknowledges leased messages. The acknowledgements are durable (in
// sync flush mode) before Ack returns: after any restart an acknowledged
// message is not delivered to the group again.
func (s *Service) Ack(ctx context.Context, group string, receipts []string) ([]ReceiptResult, error) {
	if err := s.checkBatch(group, len(receipts)); err != nil {
		return nil, err
	}
	rec := offset.Record{Entries: make([]offset.Entry, 0, len(receipts))}
	settling := make([]leaseRef, 0, len(receipts))
	var settle *lease.Settle // the outcome of this ack's one record, shared by its leases
	results := s.forEachReceipt(group, receipts, true, func(ref leaseRef, _ time.Time) ReceiptStatus {
		// The lease stays, marked, until the ack is durable and applied: a
		// repeated ack meanwhile waits for this one's outcome.
		if settle == nil {
			settle = &lease.Settle{Done: make(chan struct{})}
		}
		ref.lease.StartSettling(settle)
		settling = append(settling, ref)
		rec.Entries = append(rec.Entries, s.ledger().AckEntry(ref.key, ref.r.Offset))
		return ReceiptOK
	})
	err := s.ledger().Persist(rec, nil)
	var held *lease.PopState
	heldGroup, heldTopic := "", ""
	for _, ref := range settling {
		if held == nil || heldTopic != ref.r.Topic || heldGroup != ref.r.Group {
			if held != nil {
				held.Unlock()
				held = nil
			}
			ps := s.Existing(ref.r.Group, ref.r.Topic)
			if ps == nil {
				continue
			}
			ps.Lock()
			held, heldGroup, heldTopic = ps, ref.r.Group, ref.r.Topic
		}
		if err == nil && ref.cursor.RemoveIf(ref.r.Offset, ref.lease) {
			held.Release(ref.cursor, ref.lease.Key(), ref.r.Offset)
		}
		ref.lease.EndSettling() // on failure the lease is as it was
	}
	if held != nil {
		held.Unlock()
	}
	if settle != nil {
		settle.Err = err
		close(settle.Done)
	}
	if err != nil {
		return nil, err
	}
	// A repeated ack is ok only once the ack it repeats is durable (on a
	// replica: committed); if that one failed, so does this request (the
	// lease is as it was: the client acks again).
	for i := range results {
		st := results[i].settling
		if st == nil {
			continue
		}
		results[i].settling = nil
		select {
		case <-st.Done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if st.Err != nil {
			return nil, st.Err
		}
	}
	s.cfg.Acked(group, len(rec.Entries))
	return results, nil
}

// ChangeLease extends or shortens leases (changeInvisibleTime). It never
// counts as a failed attempt: a lease shortened to 0 makes the message
// visible again with the same reconsume count.
func (s *Service) ChangeLease(ctx context.Context, group string, items []LeaseItem) ([]ReceiptResult, error) {
	if err := s.checkBatch(group, len(items)); err != nil {
		return nil, err
	}
	receipts := make([]string, len(items))
	for i, it := range items {
		if it.Invisible < 0 || it.Invisible > s.cfg.MaxInvisible {
			return nil, fmt.Errorf("%w: item %d: invisibility must be 0..%v", s.cfg.Errors.InvalidArgument, i, s.cfg.MaxInvisible)
		}
		receipts[i] = it.Receipt
	}
	// The new deadlines are decided, recorded and then applied (decide,
	// flush), before the answer.
	ch := changesPool.Get().(*changes)
	defer ch.release()
	var staged lease.Stages
	until := make([]time.Time, len(items))
	results := s.forEachReceiptThen(group, receipts, false, func(ref leaseRef, now time.Time) ReceiptStatus {
		inv := items[ref.index].Invisible
		l, off := ref.lease, ref.r.Offset
		at := now.Add(inv).Truncate(time.Millisecond) // as the answer and the record give it
		until[ref.index] = at
		switch {
		case inv == 0 && (l.Key() != "" || l.Failures() > 0):
			// An ordered message stays with its key (an instance's retry
			// with its failure count): re-offered at once.
			s.decide(ref.state, ch, ref.key, ref.cursor, lease.WaitingItem(off, s.cfg.Epoch.Add(1), at, l.Failures()), l.Client(), l.Key(), nil, true)
		case inv == 0:
			// Visible again at once, as a postponement: not a failure, so
			// it is re-offered from the cursor rather than sent back.
			s.decide(ref.state, ch, ref.key, ref.cursor, lease.Item{Offset: off, Epoch: l.Epoch(), State: lease.Released}, "", "", nil, true)
		default:
			s.decide(ref.state, ch, ref.key, ref.cursor, lease.HeldItem(off, l.Epoch(), at, l.Failures()), l.Client(), l.Key(), nil, true)
		}
		return ReceiptOK
	}, ch, &staged)
	if err := staged.Wait(); err != nil {
		return nil, err
	}
	for i := range results {
		if results[i].Status == ReceiptOK {
			results[i].LeaseUntil = until[i]
		}
	}
	return results, nil
}

// Nack gives leased messages back as failed: each goes to the group's
// retry topic through the delay-level scheduler or a timer (the item's
// level or delay, else the group's retry policy: package retry), or to
// the dead-letter queue when the item says -1 or the message has used up
// the group's retryMaxTimes.
func (s *Service) Nack(ctx context.Context, group string, items []NackItem) ([]ReceiptResult, error) {
	if err := s.checkBatch(group, len(items)); err != nil {
		return nil, err
	}
	receipts := make([]string, len(items))
	for i, it := range items {
		if it.DelayLevel < -1 || it.DelayLevel > len(s.cfg.DelayLevels) {
			// As a send with that level is: refused, not clamped.
			return nil, fmt.Errorf("%w: items[%d].delayLevel %d must be -1 (DLQ), 0 (the group's retry policy) or a delay level 1..%d",
				s.cfg.Errors.InvalidArgument, i, it.DelayLevel, len(s.cfg.DelayLevels))
		}
		if err := s.cfg.CheckNackDelay(i, it.DelayLevel, it.Delay); err != nil {
			return nil, err
		}
		if err := s.cfg.CheckReason(fmt.Sprintf("items[%d].reason", i), it.Reason); err != nil {
			return nil, err
		}
		receipts[i] = it.Receipt
	}
	var failed []sendBack
	ch := changesPool.Get().(*changes) // ordered messages retried in place
	defer ch.release()
	var staged lease.Stages
	results := s.forEachReceiptThen(group, receipts, false, func(ref leaseRef, now time.Time) ReceiptStatus {
		it := items[ref.index]
		client := s.cfg.Client(ctx)
		if client == "" {
			client = ref.lease.Client()
		}
		v := s.View(ref.r.Group, ref.r.Topic, ref.r.QueueID, nil)
		if l := ref.lease; l.Key() != "" || v.InPlace {
			// An ordered message is retried in place (package consume), and so
			// is a broadcasting group's instance's (package instance).
			a := retry.NewAttempt(now, retry.OutcomeNack, client, it.Reason, it.DelayLevel, s.cfg.MaxClientBytes)
			item, history, dead := s.failInPlace(l, ref.r.Offset, v, it.DelayLevel, it.Delay, now, a)
			if dead {
				failed = append(failed, deadInPlace(ref.state, ref.cursor, v, ref.r.Offset, l, history, it.Reason, retry.OutcomeNack, client))
			} else {
				s.decide(ref.state, ch, ref.key, ref.cursor, item, l.Client(), l.Key(), history, true)
			}
			return ReceiptOK
		}
		ref.lease.SendBack()
		failed = append(failed, sendBack{
			view:    v,
			offset:  ref.r.Offset,
			level:   it.DelayLevel,
			delay:   it.Delay,
			reason:  it.Reason,
			outcome: retry.OutcomeNack,
			client:  client,
			lease:   ref.lease,
		})
		return ReceiptOK
	}, ch, &staged)
	if err := errors.Join(staged.Wait(), s.sendBack(group, failed)); err != nil {
		return nil, err
	}
	return results, nil
}
