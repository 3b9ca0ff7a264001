package broker

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/storage/message"
)

// The consume-failure path (ARCHITECTURE.md, the life of a message; RocketMQ's sendMessageBack and
// asyncConsumerSendMsgBack). A failed delivery — a nack, or a lease that
// expired — becomes a new message: to %RETRY%<group> through the delay
// scheduler or a timer (package retry) with reconsumeTimes+1, or to
// %DLQ%<group> once the message has used up the group's retryMaxTimes (or
// the nack said -1). The copy and the ack of the failed delivery are
// appended in one batch (one flush).
//
// This file is the facade of the retry family, server/broker/retry, which
// holds the copies and their write (Service.Write), the ladder's counts
// and the schedule's deliveries for deleted topics dropped
// (server/broker/retry/doc.go). What stays here: the family's Config,
// filled in from the broker; sendBack, which hands the lease family's
// failed deliveries to the write and then settles their leases
// (sentBack, lease_log.go), offerAgain and the lease reaper (reapExpired:
// its walk over the pop states and the send-back; the scan of a cursor is
// package lease's PopState.Expire, through takeExpired, pop.go), which
// work on the pop states under their locks (the lease family's).

// newRetries is the retry family over b's store (Open makes it).
func (b *Broker) newRetries() *retry.Service {
	return retry.New(retry.Config{
		Store:       b.store,
		Clock:       b.clock,
		Log:         b.log,
		DelayLevels: b.opts.DelayLevels,
		Names: retry.Names{RetryPrefix: retryPrefix, DLQPrefix: dlqPrefix, TimerTopic: timerTopic,
			DLQReason: propDLQReason, TxnID: propTxnID, OrderSeq: propOrderSeq, Instance: propInstance},
		MaxReasonBytes: maxDLQReasonBytes,
		MaxClientBytes: MaxClientIDBytes,
		StoreError:     mapStoreErr,
		Gate:           b.topicGate.RLocker(), // see topicdelete.go
		Group: func(name string) (string, int, *RetryPolicy) {
			cfg, _ := b.registry.Group(name)
			return cfg.Name, cfg.RetryMaxTimes, cfg.RetryPolicy
		},
		ScheduleFloor: func(topic string) ([]int64, bool) {
			tomb, ok := b.registry.Tombstone(topic)
			return tomb.ScheduleOffsets, ok
		},
		Wait:  b.retryWait,
		Known: b.instanceKnown,
		Instance: func(group string) string {
			_, client := splitInstance(group)
			return client
		},
		AckEntry:  b.ackEntry,
		Persist:   b.persist,
		Deleted:   b.deletedMessage,
		MessageID: messageID,
		Timer: func(m *message.Message, due time.Time) {
			m.DeleteProperty(timer.PropID)
			m.DeleteProperty(timer.PropPrev)
			timer.Wrap(m, due)
		},
		FormatDue:    timer.FormatDue,
		Retried:      b.metrics.retry,
		DeadLettered: b.metrics.dlq,
		Nudge:        func() { b.timers.Nudge() },
	})
}

// Broker-owned properties carried by retries and dead letters.
const (
	propAttempts  = retry.PropAttempts // JSON attempt history
	propDLQReason = dlq.PropReason     // last failure reason of a dead letter
)

// Attempt is one failed delivery in a message's attempt history (package
// retry).
type Attempt = retry.Attempt

func parseAttempts(s string) []Attempt { return retry.ParseAttempts(s) }

// sendBack writes the retry (or dead-letter) copy of every failed delivery
// plus one progress record acknowledging the originals, in one batch
// (package retry's Service.Write), and then marks the originals done and
// takes their leases (marked sendingBack by the caller) out of flight.
func (b *Broker) sendBack(group string, items []sendBack) error {
	if len(items) == 0 {
		return nil
	}
	err := b.retries.Write(baseGroup(group), failures(items))
	b.sentBack(items)
	if err != nil {
		b.offerAgain(items)
	}
	return err
}

// failures are items as the retry family takes them.
func failures(items []sendBack) []retry.Failure {
	out := make([]retry.Failure, len(items))
	for i, it := range items {
		out[i] = retry.Failure{Key: it.view.key, StoreTopic: it.view.storeTopic, StoreQueue: it.view.storeQueue,
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
func (b *Broker) offerAgain(items []sendBack) {
	for _, it := range items {
		if len(it.history) > 0 {
			continue
		}
		ps := b.existingPopState(it.view.key.Group, it.view.key.Topic)
		if ps == nil {
			continue
		}
		ps.Lock()
		if c := ps.Cursor(it.view.key.QueueID); c != nil {
			c.Rewind(it.offset)
		}
		ps.Unlock()
	}
}

// dueMs formats a due time in unix milliseconds, rounded up so that a
// message is never delivered before its delay has fully passed (the
// timers' rule: timer.FormatDue).
func dueMs(t time.Time) string { return timer.FormatDue(t) }

// reapExpired sends back every lease that expired, in every pop state, so
// a consume timeout starts its retry delay without waiting for a pull.
func (b *Broker) reapExpired() {
	states := b.popStates()
	now := b.clock.Now()
	for k, ps := range states {
		var failed []sendBack
		ps.Lock()
		for qid, c := range ps.Cursors() {
			if c.InFlight() == 0 {
				continue
			}
			expired, _ := b.takeExpired(ps, c, b.view(k.group, k.topic, qid, nil), now)
			failed = append(failed, expired...)
		}
		var staged leaseStages
		staged.stage(b, ps.TakeNotes())
		ps.Unlock()
		if err := staged.wait(); err != nil {
			b.log.Error().Err(err).Str("group", k.group).Msg("recording ordered retries failed")
		}
		if err := b.sendBack(k.group, failed); err != nil {
			b.log.Error().Err(err).Str("group", k.group).Msg("sending back expired leases failed")
		}
	}
}
