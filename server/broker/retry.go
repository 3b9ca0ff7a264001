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
// filled in from the broker, and the property names the broker owns. The
// send-back, which hands the failed deliveries collected under the pop
// states' locks to the write and then settles their leases, and the lease
// reaper are package consume's (server/broker/consume/doc.go).

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

// dueMs formats a due time in unix milliseconds, rounded up so that a
// message is never delivered before its delay has fully passed (the
// timers' rule: timer.FormatDue).
func dueMs(t time.Time) string { return timer.FormatDue(t) }

// propOrderSeq records a dead-lettered ordered message's queue offset.
const propOrderSeq = "ORDER_SEQ"
