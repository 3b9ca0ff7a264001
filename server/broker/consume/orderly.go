package consume

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage/message"
)

// Orderly groups. Messages sent with a shardingKey land in
// queue hash(key) mod queues; in a group marked orderly each key has at
// most one message leased or waiting at a time. Later messages of a busy
// key are deferred (the committed offset stays below them, so a restart
// re-reads them in order) and offered, in queue order, once the key is
// free. A failed delivery — nack or expired lease — is retried in place
// after its delay level instead of going through %RETRY%, so nothing of
// the same key overtakes it; other keys of the same queue keep flowing
// (RocketMQ parks the whole queue; we park only the key). After
// retryMaxTimes failures it goes to the DLQ with its key and queue offset
// (ORDER_SEQ) recorded. Messages without a key flow as in any group.
//
// Leases and the in-place retry state (when a failed message is due, its
// failure count) are recorded like every lease (the lease log, package lease), so a
// restart keeps the order: a leased or waiting message still holds its key
// and is offered again when its lease ends or its retry falls due. Only
// its attempt history before the restart is lost (its dead letter lists
// the later ones).

// orderKey is the sharding key an orderly view orders m by ("" = none).
func orderKey(v View, m *message.Message) string {
	if !v.Orderly {
		return ""
	}
	return m.Property(message.PropertyShardingKey)
}

// The cursors' busy keys and deferred offsets, and their release, are
// package lease's (PopState.Apply holds a key; Cursor.KeyBusy, Defer, TakeDeferred;
// PopState.Release, WakeChan).

// failInPlace decides a failed delivery of an ordered lease l, on off:
// it waits for its delay level or delay (neither: the group's retry
// policy, by failures so far; package retry) and keeps its key — the
// waiting item returned, under a new epoch, so the failed delivery's
// receipt is stale, with one failure more — or, level -1 or
// retryMaxTimes used up, it is dead (the caller sends it to the DLQ).
// history is its attempt history with a.
func (s *Service) failInPlace(l *lease.Lease, off int64, v View, level int, delay time.Duration, now time.Time, a retry.Attempt) (it lease.Item, history []retry.Attempt, dead bool) {
	history = append(historyOf(l), a)
	if level < 0 || int(l.Failures()) >= v.MaxRetry {
		return lease.Item{}, history, true
	}
	level, delay = s.cfg.RetryWait(v.Policy, l.Failures(), level, delay)
	wait := delay
	if level > 0 {
		wait = s.cfg.DelayLevels[level-1]
	} else {
		history[len(history)-1].DelayMs = delay.Milliseconds()
	}
	return lease.WaitingItem(off, s.cfg.Epoch.Add(1), now.Add(wait), l.Failures()+1), history, false
}

// deadInPlace is the send-back of ordered lease l on off of c, which used
// up its retries (failInPlace: dead, with history): l keeps the history
// and is marked as being sent back, its key is released, and its history
// and failure count travel with it to the DLQ. The caller holds ps's
// lock.
func deadInPlace(ps *lease.PopState, c *lease.Cursor, v View, off int64, l *lease.Lease, history []retry.Attempt, reason, outcome, client string) sendBack {
	l.KeepHistory(history)
	l.SendBack()
	ps.Release(c, l.Key(), off)
	return sendBack{view: v, offset: off, level: -1, reason: reason, outcome: outcome, client: client,
		history: history, failures: l.Failures(), lease: l}
}

// historyOf is l's in-place attempt history (package lease holds it
// opaque: Lease.History; only this package sets it, always to a
// []retry.Attempt).
func historyOf(l *lease.Lease) []retry.Attempt {
	h, _ := l.History().([]retry.Attempt)
	return h
}

// offerOrdered re-offers waiting in-place retries that are due and the
// first deferred message of every free key; the caller holds ps's lock.
func (s *Service) offerOrdered(ps *lease.PopState, g *changes, c *lease.Cursor, v View, max int, now time.Time, invisible time.Duration, client string) ([]Message, time.Time, error) {
	var out []Message
	var next time.Time
	for off, l := range c.Leases() {
		if !l.Waiting() {
			continue
		}
		if now.Before(l.RetryAt()) {
			if next.IsZero() || l.RetryAt().Before(next) {
				next = l.RetryAt()
			}
			continue
		}
		if len(out) == max {
			break
		}
		res, err := s.cfg.Store.ReadQueue(v.StoreTopic, v.StoreQueue, off, 1, nil)
		if err != nil || len(res.Messages) == 0 {
			c.Remove(off) // gone with retention
			ps.Release(c, l.Key(), off)
			continue
		}
		out = append(out, s.grant(ps, g, c, v.Key, l, "", res.Messages[0], now, invisible, client))
	}
	for key, offs := range c.Deferred() {
		if len(out) == max {
			break
		}
		if c.KeyBusy(key) || g.holds(c, key) || len(offs) == 0 {
			continue
		}
		off := c.TakeDeferred(key, offs)
		if s.progress().IsAcked(v.Key, off) {
			continue
		}
		res, err := s.cfg.Store.ReadQueue(v.StoreTopic, v.StoreQueue, off, 1, nil)
		if err != nil || len(res.Messages) == 0 {
			continue
		}
		out = append(out, s.grant(ps, g, c, v.Key, nil, key, res.Messages[0], now, invisible, client))
	}
	return out, next, nil
}
