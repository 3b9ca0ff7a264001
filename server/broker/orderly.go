package broker

import (
	"time"

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
// failure count) are recorded like every lease (lease_log.go), so a
// restart keeps the order: a leased or waiting message still holds its key
// and is offered again when its lease ends or its retry falls due. Only
// its attempt history before the restart is lost (its dead letter lists
// the later ones).

// propOrderSeq records a dead-lettered ordered message's queue offset.
const propOrderSeq = "ORDER_SEQ"

// orderKey is the sharding key an orderly view orders m by ("" = none).
func orderKey(v queueView, m *message.Message) string {
	if !v.orderly {
		return ""
	}
	return m.Property(message.PropertyShardingKey)
}

func (c *cursor) keyBusy(key string) bool {
	_, ok := c.busy[key]
	return ok
}

func (c *cursor) hold(key string, off int64) {
	if c.busy == nil {
		c.busy = make(map[string]int64)
	}
	c.busy[key] = off
}

func (c *cursor) defer_(key string, off int64) {
	if c.deferred == nil {
		c.deferred = make(map[string][]int64)
	}
	for _, o := range c.deferred[key] {
		if o == off {
			return
		}
	}
	c.deferred[key] = append(c.deferred[key], off)
}

// release frees key after its message at off is done (acked or dead).
func (ps *popState) release(c *cursor, key string, off int64) {
	if key == "" || c.busy[key] != off {
		return
	}
	delete(c.busy, key)
	if len(c.deferred[key]) > 0 {
		ps.notify()
	}
}

// notify wakes long polls of this popState (a deferred message became
// available); the caller holds ps.mu.
func (ps *popState) notify() {
	if ps.wake != nil {
		close(ps.wake)
		ps.wake = nil
	}
}

// wakeChan returns the channel notify closes; the caller holds ps.mu.
func (ps *popState) wakeChan() <-chan struct{} {
	if ps.wake == nil {
		ps.wake = make(chan struct{})
	}
	return ps.wake
}

// failInPlace records a failed delivery of an ordered lease: it waits for
// its delay level or delay (neither: the group's retry policy, by
// failures so far; package retry) and keeps its key, or — level -1, or
// retryMaxTimes used up — it is dead (the caller sends it to the DLQ).
// The epoch changes, so the failed delivery's receipt is stale.
func (b *Broker) failInPlace(l *lease, v queueView, level int, delay time.Duration, now time.Time, a Attempt) (dead bool) {
	if level < 0 || int(l.failures) >= v.maxRetry {
		l.history = append(l.history, a)
		return true
	}
	level, delay = b.retryWait(v.policy, l.failures, level, delay)
	wait := delay
	if level > 0 {
		wait = b.opts.DelayLevels[level-1]
	} else {
		a.DelayMs = delay.Milliseconds()
	}
	l.history = append(l.history, a)
	l.failures++
	l.waiting = true
	l.retryAt = now.Add(wait)
	l.epoch = b.epoch.Add(1)
	return false
}

// deadInPlace is the send-back of an ordered message that used up its
// retries: its history and failure count travel with it to the DLQ.
func deadInPlace(v queueView, off int64, l *lease, reason, outcome, client string) sendBack {
	return sendBack{view: v, offset: off, level: -1, reason: reason, outcome: outcome, client: client,
		history: l.history, failures: l.failures, lease: l}
}

// offerOrdered re-offers waiting in-place retries that are due and the
// first deferred message of every free key; the caller holds ps.mu.
func (b *Broker) offerOrdered(ps *popState, c *cursor, v queueView, max int, now time.Time, invisible time.Duration, client string) ([]ReceivedMessage, time.Time, error) {
	var out []ReceivedMessage
	var next time.Time
	for off, l := range c.inflight {
		if !l.waiting {
			continue
		}
		if now.Before(l.retryAt) {
			if next.IsZero() || l.retryAt.Before(next) {
				next = l.retryAt
			}
			continue
		}
		if len(out) == max {
			break
		}
		res, err := b.store.ReadQueue(v.storeTopic, v.storeQueue, off, 1, nil)
		if err != nil || len(res.Messages) == 0 {
			delete(c.inflight, off) // gone with retention
			ps.release(c, l.key, off)
			continue
		}
		l.waiting, l.client = false, client
		out = append(out, b.grant(v.key, l, res.Messages[0], now, invisible))
	}
	for key, offs := range c.deferred {
		if len(out) == max {
			break
		}
		if c.keyBusy(key) || len(offs) == 0 {
			continue
		}
		off := offs[0]
		if len(offs) == 1 {
			delete(c.deferred, key)
		} else {
			c.deferred[key] = offs[1:]
		}
		if b.progress.IsAcked(v.key, off) {
			continue
		}
		res, err := b.store.ReadQueue(v.storeTopic, v.storeQueue, off, 1, nil)
		if err != nil || len(res.Messages) == 0 {
			continue
		}
		l := &lease{client: client, key: key}
		c.inflight[off] = l
		c.hold(key, off)
		out = append(out, b.grant(v.key, l, res.Messages[0], now, invisible))
	}
	return out, next, nil
}
