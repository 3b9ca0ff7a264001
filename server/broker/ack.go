package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/storage/offset"
)

// leaseRef is a valid receipt whose lease is live, handed to a receiptOp
// under the lease's popState lock.
type leaseRef struct {
	index  int // position in the request
	cursor *cursor
	lease  *lease
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
// (broadcast.go): it settles that instance's lease, and counts as a
// request of the instance.
func (b *Broker) forEachReceipt(group string, receipts []string, isAck bool, op receiptOp) []ReceiptResult {
	return b.forEachReceiptThen(group, receipts, isAck, op, nil)
}

// forEachReceiptThen is forEachReceipt calling beforeUnlock (when not nil)
// each time it is about to release a pop state's lock: a caller appends
// there the lease records of the changes op made under that lock, so the
// log holds them in the order they were made (stageLeases).
func (b *Broker) forEachReceiptThen(group string, receipts []string, isAck bool, op receiptOp, beforeUnlock func()) []ReceiptResult {
	results := make([]ReceiptResult, len(receipts))
	now := b.clock.Now()
	// Decode (and check the HMAC of) every receipt before taking any lock.
	decoded := make([]receipt.Receipt, len(receipts))
	valid := make([]bool, len(receipts))
	var instances map[string]struct{}
	for i, raw := range receipts {
		results[i].Receipt = raw
		r, err := b.receipts().Decode(raw)
		base, client := "", ""
		if err == nil {
			base, client = splitInstance(r.Group)
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
	b.touchInstances(group, instances)
	// The receipts of one request are almost always of one (group,
	// topic): its pop state is locked once for the run of them, not once
	// per receipt, so an ack of 32 does not queue 32 times behind pulls.
	var held *popState
	heldGroup, heldTopic := "", ""
	release := func() {
		if held != nil {
			if beforeUnlock != nil {
				beforeUnlock()
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
			ps := b.consume.Existing(r.Group, r.Topic)
			if ps == nil {
				results[i].Status, results[i].Error = b.goneStatus(key, r.Offset, isAck)
				continue
			}
			ps.Lock()
			held, heldGroup, heldTopic = ps, r.Group, r.Topic
		}
		c := held.Cursor(r.QueueID)
		var l *lease
		if c != nil {
			l = c.Lease(r.Offset)
		}
		switch {
		case l == nil:
			results[i].Status, results[i].Error = b.goneStatus(key, r.Offset, isAck)
		case l.Epoch != r.Epoch:
			results[i].Status, results[i].Error = ReceiptExpired, "the message was redelivered under a newer receipt"
		case l.SendingBack:
			results[i].Status, results[i].Error = ReceiptExpired, "the delivery failed (nack or lease expiry); its retry copy takes over"
		case l.Settling && isAck:
			// The same ack is on its way to disk: ok once it got there
			// (Ack waits for it, after this lock is released).
			results[i].Status, results[i].settling = ReceiptOK, l.Settle
		case l.Settling:
			results[i].Status, results[i].Error = ReceiptExpired, "the message is being acknowledged"
		default:
			results[i].Status = op(leaseRef{index: i, cursor: c, lease: l, r: r, key: key}, now)
		}
	}
	return results
}

func (b *Broker) goneStatus(key offset.Key, off int64, isAck bool) (ReceiptStatus, string) {
	switch {
	case b.progress.IsFailed(key, off):
		return ReceiptExpired, "the delivery failed (nack or lease expiry); its retry copy takes over"
	case b.progress.IsAcked(key, off) && isAck:
		return ReceiptOK, ""
	case b.progress.IsAcked(key, off):
		return ReceiptExpired, "the message is already acknowledged"
	}
	return ReceiptExpired, "the lease expired (or the broker restarted); the message will be delivered again"
}

func (b *Broker) checkBatch(group string, n int) error {
	if b.closed.Load() {
		return ErrShuttingDown
	}
	if err := ValidateGroupName(group); err != nil {
		return err
	}
	if n == 0 || n > MaxBatchItems {
		return fmt.Errorf("%w: 1 to %d items", ErrInvalidArgument, MaxBatchItems)
	}
	return nil
}

// Ack acknowledges leased messages. The acknowledgements are durable (in
// sync flush mode) before Ack returns: after any restart an acknowledged
// message is not delivered to the group again.
func (b *Broker) Ack(ctx context.Context, group string, receipts []string) ([]ReceiptResult, error) {
	if err := b.checkBatch(group, len(receipts)); err != nil {
		return nil, err
	}
	rec := offset.Record{Entries: make([]offset.Entry, 0, len(receipts))}
	settling := make([]leaseRef, 0, len(receipts))
	var settle *settleState // the outcome of this ack's one record, shared by its leases
	results := b.forEachReceipt(group, receipts, true, func(ref leaseRef, _ time.Time) ReceiptStatus {
		// The lease stays, marked, until the ack is durable and applied: a
		// repeated ack meanwhile waits for this one's outcome.
		if settle == nil {
			settle = &settleState{Done: make(chan struct{})}
		}
		ref.lease.Settling, ref.lease.Settle = true, settle
		settling = append(settling, ref)
		rec.Entries = append(rec.Entries, b.ackEntry(ref.key, ref.r.Offset))
		return ReceiptOK
	})
	err := b.persist(rec, nil)
	var held *popState
	heldGroup, heldTopic := "", ""
	for _, ref := range settling {
		if held == nil || heldTopic != ref.r.Topic || heldGroup != ref.r.Group {
			if held != nil {
				held.Unlock()
				held = nil
			}
			ps := b.consume.Existing(ref.r.Group, ref.r.Topic)
			if ps == nil {
				continue
			}
			ps.Lock()
			held, heldGroup, heldTopic = ps, ref.r.Group, ref.r.Topic
		}
		if err == nil && ref.cursor.RemoveIf(ref.r.Offset, ref.lease) {
			held.Release(ref.cursor, ref.lease.Key, ref.r.Offset)
		}
		ref.lease.Settling = false // on failure the lease is as it was
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
	b.metrics.addGroup(b.metrics.acked, group, len(rec.Entries))
	return results, nil
}

// ChangeLease extends or shortens leases (changeInvisibleTime). It never
// counts as a failed attempt: a lease shortened to 0 makes the message
// visible again with the same reconsume count.
func (b *Broker) ChangeLease(ctx context.Context, group string, items []LeaseItem) ([]ReceiptResult, error) {
	if err := b.checkBatch(group, len(items)); err != nil {
		return nil, err
	}
	receipts := make([]string, len(items))
	for i, it := range items {
		if it.Invisible < 0 || it.Invisible > b.opts.MaxInvisible {
			return nil, fmt.Errorf("%w: item %d: invisibility must be 0..%v", ErrInvalidArgument, i, b.opts.MaxInvisible)
		}
		receipts[i] = it.Receipt
	}
	var notes leaseNotes // the new deadlines, recorded before the answer (lease_log.go)
	var staged leaseStages
	until := make([]time.Time, len(items))
	results := b.forEachReceiptThen(group, receipts, false, func(ref leaseRef, now time.Time) ReceiptStatus {
		inv := items[ref.index].Invisible
		until[ref.index] = now.Add(inv)
		if inv == 0 && (ref.lease.Key != "" || ref.lease.Failures > 0) {
			// An ordered message stays with its key (an instance's retry
			// with its failure count): re-offered at once.
			ref.lease.Waiting, ref.lease.RetryAt = true, now
			ref.lease.Epoch = b.epoch.Add(1)
			b.noteLease(&notes, ref.key, ref.r.Offset, ref.lease)
			return ReceiptOK
		}
		if inv == 0 {
			// Visible again at once, as a postponement: not a failure, so
			// it is re-offered from the cursor rather than sent back.
			ref.cursor.Remove(ref.r.Offset)
			ref.cursor.Rewind(ref.r.Offset)
			b.noteReleased(&notes, ref.key, ref.r.Offset, ref.lease.Epoch)
			return ReceiptOK
		}
		ref.lease.Deadline = now.Add(inv)
		b.noteLease(&notes, ref.key, ref.r.Offset, ref.lease)
		return ReceiptOK
	}, func() { staged.stage(b, &notes) })
	if err := staged.wait(); err != nil {
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
func (b *Broker) Nack(ctx context.Context, group string, items []NackItem) ([]ReceiptResult, error) {
	if err := b.checkBatch(group, len(items)); err != nil {
		return nil, err
	}
	receipts := make([]string, len(items))
	for i, it := range items {
		if it.DelayLevel < -1 || it.DelayLevel > len(b.opts.DelayLevels) {
			// As a send with that level is: refused, not clamped.
			return nil, fmt.Errorf("%w: items[%d].delayLevel %d must be -1 (DLQ), 0 (the group's retry policy) or a delay level 1..%d",
				ErrInvalidArgument, i, it.DelayLevel, len(b.opts.DelayLevels))
		}
		if err := checkNackDelay(i, it.DelayLevel, it.Delay); err != nil {
			return nil, err
		}
		if err := checkReason(fmt.Sprintf("items[%d].reason", i), it.Reason); err != nil {
			return nil, err
		}
		receipts[i] = it.Receipt
	}
	var failed []consume.SendBack
	var waiting leaseNotes // ordered messages retried in place (lease_log.go)
	var staged leaseStages
	results := b.forEachReceiptThen(group, receipts, false, func(ref leaseRef, now time.Time) ReceiptStatus {
		it := items[ref.index]
		client := clientOf(ctx)
		if client == "" {
			client = ref.lease.Client
		}
		v := b.consume.View(ref.r.Group, ref.r.Topic, ref.r.QueueID, nil)
		if l := ref.lease; l.Key != "" || v.InPlace {
			// An ordered message is retried in place (package consume), and so
			// is a broadcasting group's instance's (broadcast.go).
			a := newAttempt(now, outcomeNack, client, it.Reason, it.DelayLevel)
			if b.consume.FailInPlace(l, v, it.DelayLevel, it.Delay, now, a) {
				l.SendingBack = true
				if ps := b.consume.Existing(ref.r.Group, ref.r.Topic); ps != nil {
					ps.Release(ref.cursor, l.Key, ref.r.Offset)
				}
				failed = append(failed, consume.DeadInPlace(v, ref.r.Offset, l, it.Reason, outcomeNack, client))
			} else {
				b.noteLease(&waiting, ref.key, ref.r.Offset, l)
			}
			return ReceiptOK
		}
		ref.lease.SendingBack = true
		failed = append(failed, consume.NackBack(v, ref.r.Offset, it.DelayLevel, it.Delay, it.Reason, client, ref.lease))
		return ReceiptOK
	}, func() { staged.stage(b, &waiting) })
	if err := errors.Join(staged.wait(), b.consume.SendBack(group, failed)); err != nil {
		return nil, err
	}
	return results, nil
}
