package broker

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// timerBatch is how many timers one delivery batch (and one carry batch)
// writes.
const timerBatch = 256

// timerFollowEvery is how often the timer loop catches the index up with
// records nobody announced (carries, records written while it slept).
const timerFollowEvery = time.Second

// timerLoop delivers due timers until ctx (the broker's closing) ends. It
// runs on an internal/worker.Service; followTimers and deliverDueTimers
// are its passes.
func (b *Broker) timerLoop(ctx context.Context) {
	t := &b.timers
	retry := worker.NewBackoff(100*time.Millisecond, 5*time.Second)     // failed deliveries
	readRetry := worker.NewBackoff(100*time.Millisecond, 5*time.Second) // failed index reads
	wait := b.clock.NewTimer(time.Hour)
	defer wait.Stop()
	var next time.Time // the next due time, when known
	known := false
	for {
		_ = b.awaitDispatch(ctx)
		t.mu.Lock()
		err := b.followTimers()
		switch {
		case err != nil:
			known = false
		case known:
			// Only what was born since can come sooner (a kill makes the
			// wait end early, harmlessly).
			if due, ok := t.state.TakeBornDue(); ok && (next.IsZero() || due < next.UnixMilli()) {
				next = time.UnixMilli(due)
			}
		default:
			next, err = b.nextTimerLocked()
			known = err == nil
		}
		t.state.TakeBornDue()
		t.mu.Unlock()
		if err == nil {
			readRetry.Reset()
		}
		d := timerFollowEvery
		switch {
		case err != nil:
			d = readRetry.Next()
			b.log.Error().Err(err).Dur("retryIn", d).Msg("reading the timer index failed; will retry")
		case !next.IsZero():
			d = min(d, max(0, b.clock.Until(next)))
		}
		wait.Reset(d)
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
			wait.Stop()
			continue
		case <-wait.Chan():
		}
		if next.IsZero() || b.clock.Now().Before(next) {
			known = false // every timerFollowEvery, look again
			continue
		}
		known = false
		if err := b.deliverDueTimers(b.clock.Now()); err != nil {
			d := retry.Next()
			b.log.Error().Err(err).Dur("retryIn", d).Msg("delivering timers failed; will retry")
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

// deliverDueTimers delivers every timer due at now, in batches.
func (b *Broker) deliverDueTimers(now time.Time) error {
	t := &b.timers
	t.deliverMu.Lock()
	defer t.deliverMu.Unlock()
	for {
		t.mu.Lock()
		if err := b.followTimers(); err != nil {
			t.mu.Unlock()
			return err
		}
		var batch []dueTimer
		_, _, err := t.index.Scan(timerindex.MinKey, "", 0, func(e timerindex.Entry) bool {
			if e.Due > now.UnixMilli() {
				return false
			}
			if t.state.Busy(e.Seq) {
				return true
			}
			batch = append(batch, dueTimer{Entry: e, unsure: t.state.Unsure(e.Seq)})
			return len(batch) < timerBatch
		})
		for _, d := range batch {
			t.state.Deliver(d.Seq)
		}
		t.mu.Unlock()
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		err = b.deliverTimers(batch, now)
		b.settleDelivery(batch, err == nil)
		if err != nil {
			return err
		}
	}
}

// settleDelivery waits for the index to see the batch's status and ends
// its flight: a record still pending after a failed write may be retried
// (unsure); one whose batch was stored stays in flight until its status
// is applied.
func (b *Broker) settleDelivery(batch []dueTimer, stored bool) {
	t := &b.timers
	if stored {
		_ = b.awaitDispatch(b.closingCtx)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := b.followTimers(); err != nil {
		b.log.Error().Err(err).Msg("timer index not up to date after a delivery")
	}
	for _, d := range batch {
		t.state.Delivered(d.Seq, t.index.Live(d.Seq), stored)
	}
}

// deliverTimers stores the real messages of a batch and its status.
func (b *Broker) deliverTimers(batch []dueTimer, now time.Time) error {
	b.topicGate.RLock() // see topicdelete.go
	defer b.topicGate.RUnlock()
	msgs := make([]*message.Message, 0, len(batch)+1)
	recs := make([]timer.StatusRecord, 0, len(batch))
	for _, d := range batch {
		m, err := b.queueRecord(timerTopic, d.Seq)
		if isGone(err) {
			b.log.Error().Int64("seq", d.Seq).Msg("timer record lost; it cannot be delivered")
			seq := d.Seq
			recs = append(recs, timer.StatusRecord{Status: timer.Delivered, At: now.UTC(), Seq: &seq, Topic: d.Topic})
			continue
		}
		if err != nil {
			return mapStoreErr(err)
		}
		id := timer.ID(m)
		mid, err := message.ParseID(id)
		if err == nil && mid.Offset() < b.retryFloor(originTopic(m)) {
			// Its topic (a retry's original topic) was deleted after it
			// was scheduled.
			recs = append(recs, timer.Settle(m, timer.Cancelled, now))
			continue
		}
		recs = append(recs, timer.Settle(m, timer.Delivered, now))
		// A timer that existed before this process started may have been
		// delivered by a batch a crash tore (its status lost): look for
		// the delivery first, as after a failed write.
		if d.unsure || err == nil && mid.Offset() < b.timers.startOffset {
			done, err := b.store.FindByUniqKey(d.Topic, timer.Key(id))
			if err == nil && done != nil {
				continue // delivered by a batch whose status a crash or an error lost
			}
			if err != nil && !errors.Is(err, storage.ErrNotFound) {
				return mapStoreErr(err)
			}
		}
		out := copyOf(m, d.Topic, timer.DeliveryDrops...)
		out.SetProperty(message.PropertyUniqKey, timer.Key(id))
		if qid, err := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32); err == nil {
			out.QueueID = int32(qid)
		}
		msgs = append(msgs, out)
		b.metrics.late(now.Sub(time.UnixMilli(d.Due)))
	}
	status, err := timer.StatusMessage(recs, now)
	if err != nil {
		return err
	}
	msgs = append(msgs, status)
	if err := b.store.PutClass(storage.ClassSystem, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return mapStoreErr(err)
	}
	return nil
}

// carryTimers runs before retention deletes the CommitLog below cut:
// pending timers recorded there are re-appended (same id and due time;
// each copy supersedes the record it copies), a batch at a time while
// deliveries go on; a last pass, with no delivery under way, carries what
// a delivery had in flight and did not settle, so that no delivery is
// left reading a record retention deletes.
func (b *Broker) carryTimers(cut int64) error {
	t := &b.timers
	_ = b.awaitDispatch(b.closingCtx)
	carried, err := b.carryBelow(cut)
	if err == nil {
		t.deliverMu.Lock()
		var more int
		more, err = b.carryBelow(cut)
		t.deliverMu.Unlock()
		carried += more
	}
	if carried > 0 {
		b.log.Info().Int("timers", carried).Int64("below", cut).Msg("pending timers carried past retention")
	}
	return err
}

// carryBelow copies the pending records below cut that are not in flight.
func (b *Broker) carryBelow(cut int64) (int, error) {
	t := &b.timers
	carried := 0
	for from, done := int64(0), false; !done; {
		t.mu.Lock()
		if err := b.followTimers(); err != nil {
			t.mu.Unlock()
			return carried, err
		}
		var copies []*message.Message
		for len(copies) < timerBatch {
			seq, ok := t.index.NextLive(from)
			if !ok {
				done = true
				break
			}
			from = seq + 1
			if t.state.Busy(seq) {
				continue // being delivered
			}
			m, err := b.queueRecord(timerTopic, seq)
			if isGone(err) {
				continue
			}
			if err != nil {
				t.mu.Unlock()
				return carried, mapStoreErr(err)
			}
			if m.PhysicalOffset >= cut {
				done = true
				break
			}
			copies = append(copies, timerCopy(m, timer.Due(m)))
			b.noteCarried(m)
		}
		var err error
		if len(copies) > 0 {
			if err = b.store.PutClass(storage.ClassReclaim, copies, make([]storage.PutResult, len(copies))); err == nil {
				carried += len(copies)
				err = b.settleOwnWrite()
			}
		}
		t.mu.Unlock()
		if err != nil {
			return carried, mapStoreErr(err)
		}
	}
	return carried, nil
}
