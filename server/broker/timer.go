package broker

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage/message"
)

// Timers: delayed delivery at an arbitrary time (delayMs / deliverAt),
// beyond RocketMQ 4's fixed levels: the facade of the timer family,
// server/broker/timer, which holds the records' codecs, the state beside
// the timer index and its apply, following the two queues into the index
// (opening, checkpointing and rebuilding it), the requests (a timer's
// send, listing, getting, cancelling and rescheduling timers, a topic's
// deletion cancelling its timers), the leader's delivery loop and
// retention's carry of pending timers (server/broker/timer/doc.go). What
// stays here: the exported requests, which delegate; the family's
// Config, filled in from the broker (its store, clock, log and options,
// the index's directory, the topic gate, the registry's word on a deleted
// topic, the broker's property names, counters and trace); the quota on
// pending timers (quota.go); and the entry points the broker's other
// files call.
//
// A timer is a record in the system topic rmq_sys_TIMER carrying its
// destination (REAL_TOPIC / REAL_QID) and due time (TIMER_DELIVER_MS);
// its id is the message id of its first record. The pending timers are
// not held in memory: the timer index (package timerindex, files in
// <data>/timers) orders them by due time on disk.

const (
	timerTopic       = timer.Topic
	timerStatusTopic = timer.StatusTopic
)

// timerIndexDir is the timer index's directory under the data dir.
const timerIndexDir = "timers"

// Timer is one pending delayed message (package timer's View).
type Timer = timer.View

// newTimers is the timer family over b's store (Open makes it before the
// recovery, which opens it).
func (b *Broker) newTimers() *timer.Service {
	return timer.New(timer.Config{
		Store: b.store,
		Clock: b.clock,
		Log:   b.log,
		Index: timerindex.Options{Dir: filepath.Join(b.opts.DataDir, timerIndexDir), BufferEntries: b.opts.TimerIndexBuffer,
			Logger: b.opts.Logger},
		MaxDelay:        b.opts.MaxTimerDelay,
		CheckpointEvery: b.opts.SnapshotInterval,
		InvalidArgument: ErrInvalidArgument,
		NotFound:        ErrMessageNotFound,
		StoreError:      mapStoreErr,
		AwaitDispatch:   b.awaitDispatch,
		Gate:            b.topicGate.RLocker(), // see topicdelete.go
		Deleted:         func(m *message.Message, since int64) bool { return since < b.retryFloor(originTopic(m)) },
		IsRetry:         func(topic string) bool { return strings.HasPrefix(topic, retryPrefix) },
		SystemProperty:  isSystemProperty,
		Late:            b.metrics.late,
		Carried:         b.noteCarried,
		Background:      b.closingCtx,
	})
}

// ListTimers lists pending timers (of topic, or all when ""), soonest
// first, up to limit, after the cursor (a timer id from the last page).
func (b *Broker) ListTimers(ctx context.Context, topic string, cursor string, limit int) ([]Timer, string, error) {
	return b.timers.List(ctx, topic, cursor, limit)
}

// GetTimer returns one pending timer with its body.
func (b *Broker) GetTimer(ctx context.Context, id string) (Timer, error) {
	return b.timers.Get(ctx, id)
}

// CancelTimer cancels a pending timer: it is never delivered.
func (b *Broker) CancelTimer(ctx context.Context, id string) error {
	return b.timers.Cancel(ctx, id)
}

// RescheduleTimer moves a pending timer to a new due time (a copy of its
// record due then supersedes it).
func (b *Broker) RescheduleTimer(ctx context.Context, id string, at time.Time) (Timer, error) {
	return b.timers.Reschedule(ctx, id, at)
}

// TimerCount is how many timers are pending, and the next due time of
// those not being delivered.
func (b *Broker) TimerCount() (int, time.Time) { return b.timers.Count() }

// pendingFor counts the pending timers destined to topic (the caller has
// awaited the dispatch of what was stored before).
func (b *Broker) pendingFor(topic string) int { return b.timers.PendingFor(topic) }

// carryTimers carries the pending timers recorded below cut before
// retention deletes the CommitLog there (package timer: Service.Carry).
func (b *Broker) carryTimers(cut int64) error { return b.timers.Carry(cut) }
