package broker

import (
	"errors"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// The consume-failure path (ARCHITECTURE.md, the life of a message; RocketMQ's sendMessageBack and
// asyncConsumerSendMsgBack). A failed delivery — a nack, or a lease that
// expired — becomes a new message: to %RETRY%<group> through the delay
// scheduler or a timer (package retry) with reconsumeTimes+1, or to
// %DLQ%<group> once the message has used up the group's retryMaxTimes (or
// the nack said -1). The copy and the ack of the failed delivery are
// appended in one batch (one flush).

// Broker-owned properties carried by retries and dead letters.
const (
	propAttempts  = "ATTEMPTS"     // JSON attempt history
	propDLQReason = dlq.PropReason // last failure reason of a dead letter
)

// Attempt is one failed delivery in a message's attempt history (package
// retry).
type Attempt = retry.Attempt

func parseAttempts(s string) []Attempt { return retry.ParseAttempts(s) }

// sendBack writes the retry (or dead-letter) copy of every failed delivery
// plus one progress record acknowledging the originals, in one batch, and
// then marks the originals done and takes their leases (marked
// sendingBack by the caller) out of flight.
func (b *Broker) sendBack(group string, items []sendBack) error {
	if len(items) == 0 {
		return nil
	}
	err := b.writeSendBack(baseGroup(group), items)
	b.sentBack(items)
	if err != nil {
		b.offerAgain(items)
	}
	return err
}

// writeSendBack writes the copies of group's failed deliveries (of the
// group's own queues or of its instances'; broadcast.go). A forgotten
// instance's are dropped: its progress ended with its forget record.
func (b *Broker) writeSendBack(group string, items []sendBack) error {
	b.topicGate.RLock() // see topicdelete.go
	defer b.topicGate.RUnlock()
	cfg, _ := b.registry.group(group)
	if cfg.RetryMaxTimes == 0 {
		cfg.RetryMaxTimes = 16
	}
	now := b.clock.Now()
	msgs := make([]*message.Message, 0, len(items)+1)
	var rec offset.Record
	for _, it := range items {
		if !b.instanceKnown(it.view.key.Group) {
			continue
		}
		e := b.ackEntry(it.view.key, it.offset)
		e.Kind = offset.KindFailed // done for the group; a late ack of its receipt is refused
		rec.Entries = append(rec.Entries, e)
		res, err := b.store.ReadQueue(it.view.storeTopic, it.view.storeQueue, it.offset, 1, nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) || (err == nil && len(res.Messages) == 0) {
			continue // deleted by retention meanwhile: nothing to retry
		}
		if err != nil {
			return mapStoreErr(err)
		}
		if b.deletedMessage(res.Messages[0]) {
			continue // its topic was deleted meanwhile
		}
		msgs = append(msgs, b.retryCopy(cfg, res.Messages[0], it, now))
	}
	if err := b.persist(rec, msgs); err != nil {
		return err
	}
	for _, m := range msgs {
		switch m.Topic {
		case DLQTopic(group):
			b.metrics.dlq(group)
		case timerTopic:
			b.timers.Nudge()
			b.metrics.retry(group, 0) // level 0: on a timer
		default:
			lvl, _ := strconv.Atoi(m.Property(message.PropertyDelayLevel))
			b.metrics.retry(group, lvl)
		}
	}
	return nil
}

// offerAgain makes failed deliveries whose send-back could not be written
// (a full disk refuses it; the write is retryable) visible to the group
// again, as a lease shortened to 0 would: they are neither in flight nor
// done, so without it they would wait for a restart. Ordered messages
// that failed in place keep their state (orderly.go).
func (b *Broker) offerAgain(items []sendBack) {
	for _, it := range items {
		if len(it.history) > 0 {
			continue
		}
		ps := b.existingPopState(it.view.key.Group, it.view.key.Topic)
		if ps == nil {
			continue
		}
		ps.mu.Lock()
		if c := ps.queues[it.view.key.QueueID]; c != nil && it.offset < c.next {
			c.next = it.offset
		}
		ps.mu.Unlock()
	}
}

// retryCopy builds the next incarnation of a failed message.
func (b *Broker) retryCopy(cfg GroupConfig, m *message.Message, it sendBack, now time.Time) *message.Message {
	reconsume := m.ReconsumeTimes + it.failures
	origin := m.Property(message.PropertyOriginMessageID)
	if origin == "" {
		origin = messageID(m)
	}
	originalTopic := m.Property(message.PropertyRetryTopic)
	if originalTopic == "" {
		originalTopic = m.Topic
	}
	dead := it.level < 0 || int(reconsume) >= cfg.RetryMaxTimes
	var level int
	var delay time.Duration
	if !dead {
		level, delay = b.retryWait(cfg.RetryPolicy, reconsume, it.level, it.delay)
	}
	attempts := parseAttempts(m.Property(propAttempts))
	if len(it.history) > 0 {
		attempts = append(attempts, it.history...) // an ordered message's in-place attempts
	} else {
		a := newAttempt(now, it.outcome, it.client, it.reason, it.level)
		a.DelayMs = delay.Milliseconds()
		attempts = append(attempts, a)
	}
	history := boundAttempts(attempts)

	out := copyOf(m, "", message.PropertyDedupID, message.PropertyRealTopic, message.PropertyRealQueueID,
		message.PropertyDelayLevel, message.PropertyDeliverTimeMs, propDLQReason, propTxnID)
	out.ReconsumeTimes = reconsume + 1
	out.SetProperty(message.PropertyRetryTopic, originalTopic)
	out.SetProperty(message.PropertyOriginMessageID, origin)
	out.SetProperty(message.PropertyMaxReconsumeTimes, strconv.Itoa(cfg.RetryMaxTimes))
	out.SetProperty(propAttempts, history)
	if dead {
		out.Topic = DLQTopic(cfg.Name)
		out.SetProperty(propDLQReason, truncateText(it.reason, maxDLQReasonBytes))
		orderSeq(out, m)
		if _, client := splitInstance(it.view.key.Group); client != "" {
			out.SetProperty(propInstance, client) // a resend goes to that instance (broadcast.go)
		}
		return out
	}
	if delay > 0 {
		// On a timer (package retry): a new timer, so none of the
		// properties a timer delivery left on m (UNIQ_KEY "timer:<id>").
		out.DeleteProperty(message.PropertyUniqKey)
		out.DeleteProperty(timer.PropID)
		out.DeleteProperty(timer.PropPrev)
		out.Topic = RetryTopic(cfg.Name)
		out.QueueID = 0
		timer.Wrap(out, now.Add(delay))
		return out
	}
	out.Topic = message.ScheduleTopic
	out.QueueID = int32(level - 1)
	out.SetProperty(message.PropertyRealTopic, RetryTopic(cfg.Name))
	out.SetProperty(message.PropertyRealQueueID, "0")
	out.SetProperty(message.PropertyDelayLevel, strconv.Itoa(level))
	out.SetProperty(message.PropertyDeliverTimeMs, dueMs(now.Add(b.opts.DelayLevels[level-1])))
	return out
}

// dueMs formats a due time in unix milliseconds, rounded up so that a
// message is never delivered before its delay has fully passed (the
// timers' rule: timer.FormatDue).
func dueMs(t time.Time) string { return timer.FormatDue(t) }

// reapExpired sends back every lease that expired, in every pop state, so
// a consume timeout starts its retry delay without waiting for a pull.
func (b *Broker) reapExpired() {
	b.popsMu.Lock()
	states := make(map[popKey]*popState, len(b.pops))
	for k, ps := range b.pops {
		states[k] = ps
	}
	b.popsMu.Unlock()
	now := b.clock.Now()
	for k, ps := range states {
		var failed []sendBack
		ps.mu.Lock()
		for qid, c := range ps.queues {
			if len(c.inflight) == 0 {
				continue
			}
			expired, _ := b.takeExpired(ps, c, b.view(k.group, k.topic, qid, nil), now)
			failed = append(failed, expired...)
		}
		var staged leaseStages
		staged.stage(b, ps.takeNotes())
		ps.mu.Unlock()
		if err := staged.wait(); err != nil {
			b.log.Error().Err(err).Str("group", k.group).Msg("recording ordered retries failed")
		}
		if err := b.sendBack(k.group, failed); err != nil {
			b.log.Error().Err(err).Str("group", k.group).Msg("sending back expired leases failed")
		}
	}
}
