package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Timers: delayed delivery at an arbitrary time (delayMs / deliverAt),
// beyond RocketMQ 4's fixed levels. A timer is a record in the system
// topic rmq_sys_TIMER carrying its destination (REAL_TOPIC / REAL_QID)
// and due time (TIMER_DELIVER_MS); its id is the message id of its first
// record. A reschedule, and the carry of a pending timer past retention,
// append a copy with a new due time that names the timer (TIMER_ID, and
// UNIQ_KEY "timer:<id>", so the newest copy is found by id through the
// store's key index) and the record it supersedes (TIMER_PREV, its offset
// in the timer queue). A delivery or a cancellation appends a status
// record (rmq_sys_TIMER_STATUS) naming the records it settles. The
// records' codecs and what applying them makes are package timer's
// (server/broker/timer/doc.go); what needs the store, the requests and the
// delivery loop are here.
//
// The pending timers are not held in memory: the timer index (package
// timerindex, files in <data>/timers) orders them by due time on disk and
// keeps the pending set and the counts per topic in a few bytes per
// timer. It is derived from the two queues: followTimers applies what was
// dispatched since its checkpointed position (a birth per timer record, a
// kill per superseded or settled record), so a start-up reads only the
// records since the last checkpoint, and a lost or damaged index is
// rebuilt from the queues (timerfollow.go). Every operation first brings
// the index up to date with what was stored before it (lockTimers).
//
// One goroutine delivers due timers (timerdeliver.go): the real messages
// and the "delivered" status go in one batch; the records of a batch are
// in flight (invisible to list, cancel and reschedule) until the index has
// seen the status. A timer is never delivered early. A timer created
// before the last start (a batch a crash tore may have stored its
// delivery but not its status) or whose delivery failed is first looked
// up in its topic by its UNIQ_KEY, so it is not delivered twice. Before
// retention deletes a segment, pending timers recorded there are carried
// (re-appended), so a timer outlives the retention window.

const (
	timerTopic       = timer.Topic
	timerStatusTopic = timer.StatusTopic
)

// Timer is one pending delayed message.
type Timer struct {
	ID          string
	Topic       string
	QueueID     int32
	DeliverAt   time.Time
	Tag         string
	Keys        []string
	Properties  map[string]string
	Body        []byte // only from GetTimer
	ScheduledAt time.Time
}

// timerSet is the broker's timer state: the index, and the State
// (package timer) beside it.
type timerSet struct {
	// deliverMu is held by a delivery pass; a retention carry takes it
	// for its last pass, when no delivery reads a record it carries.
	deliverMu sync.Mutex

	mu    sync.Mutex // guards what follows and orders timer operations
	index *timerindex.Index
	// state holds the records written before the index (by id), the
	// earliest due time born since the timer loop last looked, and the
	// records being delivered.
	state *timer.State
	// floor is the timer queue's minimum the index was last given.
	floor int64
	// startOffset is the CommitLog's end when the broker opened: a timer
	// whose id lies below it may have been delivered before a crash.
	startOffset int64
	// recovered describes the last start-up (tests, logs).
	recovered timerRecovery
	// followed counts the records followTimers has read.
	followed struct{ births, statuses int64 }

	wake chan struct{} // buffered(1): something to deliver may have changed
}

func (t *timerSet) init() {
	t.state = timer.NewState()
	t.wake = make(chan struct{}, 1)
}

func (t *timerSet) nudge() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// timerDue parses a send's delayMs / deliverAt into a due time; zero
// means no timer (deliver now).
func (b *Broker) timerDue(in *SendMessage, now time.Time) (time.Time, error) {
	if in.DelayMs != 0 && !in.DeliverAt.IsZero() {
		return time.Time{}, fmt.Errorf("%w: give delayMs or deliverAt, not both", ErrInvalidArgument)
	}
	if in.DelayLevel != 0 && (in.DelayMs != 0 || !in.DeliverAt.IsZero()) {
		return time.Time{}, fmt.Errorf("%w: give delayLevel or a timer (delayMs, deliverAt), not both", ErrInvalidArgument)
	}
	due := in.DeliverAt
	if in.DelayMs < 0 || in.DelayMs > b.opts.MaxTimerDelay.Milliseconds() {
		return time.Time{}, fmt.Errorf("%w: delayMs %d must be between 0 and %d (%v)", ErrInvalidArgument, in.DelayMs, b.opts.MaxTimerDelay.Milliseconds(), b.opts.MaxTimerDelay)
	}
	if in.DelayMs > 0 {
		due = now.Add(time.Duration(in.DelayMs) * time.Millisecond)
	}
	if due.IsZero() || !due.After(now) {
		return time.Time{}, nil // due already: an ordinary send
	}
	if due.After(now.Add(b.opts.MaxTimerDelay)) {
		return time.Time{}, fmt.Errorf("%w: a timer may be at most %v ahead", ErrInvalidArgument, b.opts.MaxTimerDelay)
	}
	return due, nil
}

// timerCopy is a new record of timer record m due at at, superseding m.
func timerCopy(m *message.Message, at time.Time) *message.Message {
	c := copyOf(m, timerTopic)
	timer.MarkCopy(c, m, at)
	return c
}

// registerTimer is called for a stored timer record; it returns the
// timer's destination queue (the queue offset is not known before
// delivery: -1). The index learns of the record from its queue.
func (b *Broker) registerTimer(m *message.Message, _ storage.PutResult) (int32, int64) {
	b.timers.nudge()
	qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
	return int32(qid), -1
}

// lockTimers takes the timer lock with the index up to date with every
// record stored before the call. On success the caller must unlock.
func (b *Broker) lockTimers(ctx context.Context) error {
	if err := b.awaitDispatch(ctx); err != nil {
		return err
	}
	b.timers.mu.Lock()
	if err := b.followTimers(); err != nil {
		b.timers.mu.Unlock()
		return err
	}
	return nil
}

// settleOwnWrite waits until what the caller stored is dispatched and
// applies it to the index; the caller holds the timer lock.
func (b *Broker) settleOwnWrite() error {
	// Not awaitDispatch, which gives up quietly after a second: a caller
	// that went on with its write unapplied would copy a timer twice.
	if err := b.store.AwaitDispatch(b.closingCtx); err != nil {
		return mapStoreErr(err)
	}
	return b.followTimers()
}

// queueRecord reads the record at seq of queue 0 of a system topic.
func (b *Broker) queueRecord(topic string, seq int64) (*message.Message, error) {
	res, err := b.store.ReadQueue(topic, 0, seq, 1, nil)
	if err != nil {
		return nil, err
	}
	if len(res.Messages) == 0 || res.Messages[0].QueueOffset != seq {
		return nil, fmt.Errorf("%w: %s/0 offset %d is gone", storage.ErrNotFound, topic, seq)
	}
	return res.Messages[0], nil
}

func isGone(err error) bool {
	return errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrOffsetTooSmall) || errors.Is(err, storage.ErrOffsetOutOfRange)
}

// latestTimerRecord finds the newest record of timer id (pending or not):
// its newest copy by UNIQ_KEY, else the first record, which the id names.
func (b *Broker) latestTimerRecord(id message.ID) (*message.Message, error) {
	m, err := b.store.FindByUniqKey(timerTopic, timer.Key(id.String()))
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, storage.ErrNotFound) {
		return nil, mapStoreErr(err)
	}
	m, err = b.store.LookupID(id)
	if isGone(err) || err == nil && (m.Topic != timerTopic || timer.ID(m) != id.String()) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, mapStoreErr(err)
	}
	return m, nil
}

// pendingTimer returns the latest record of a pending timer that is not
// being delivered; the caller holds the timer lock.
func (b *Broker) pendingTimer(id string) (*message.Message, error) {
	mid, err := message.ParseID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	m, err := b.latestTimerRecord(mid)
	if err == nil && (!b.timers.index.Live(m.QueueOffset) || b.timers.state.Busy(m.QueueOffset)) {
		err = storage.ErrNotFound
	}
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: no pending timer %s (delivered, cancelled or unknown)", ErrMessageNotFound, id)
	}
	return m, err
}

// timerView describes the timer whose latest record is m.
func timerView(m *message.Message, withBody bool) Timer {
	rm := toReceived(m)
	t := Timer{ID: timer.ID(m), Topic: m.Property(message.PropertyRealTopic), DeliverAt: timer.Due(m).UTC(),
		Tag: rm.Tag, Keys: rm.Keys, Properties: rm.Properties, ScheduledAt: time.UnixMilli(m.StoreTimestamp).UTC()}
	if qid, err := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32); err == nil {
		t.QueueID = int32(qid)
	}
	if withBody {
		t.Body = m.Body
	}
	return t
}

// listStep bounds the index entries one step of a listing examines under
// the timer lock.
const listStep = 1 << 16

// ListTimers lists pending timers (of topic, or all when ""), soonest
// first, up to limit, after the cursor (a timer id from the last page).
func (b *Broker) ListTimers(ctx context.Context, topic string, cursor string, limit int) ([]Timer, string, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	after := timerindex.MinKey
	if cursor != "" {
		id, err := message.ParseID(cursor)
		if err != nil {
			return nil, "", fmt.Errorf("%w: cursor is not a timer id: %w", ErrInvalidArgument, err)
		}
		m, err := b.latestTimerRecord(id)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, "", nil // a timer long gone: nothing after it is known
		}
		if err != nil {
			return nil, "", err
		}
		// After every record of the cursor's timer (a carry may have
		// copied it since, under a new seq).
		after = timerindex.Key{Due: timer.DueMs(m), ID: timer.IDOffset(m), Seq: math.MaxInt64}
	}
	if err := b.lockTimers(ctx); err != nil {
		return nil, "", err
	}
	t := &b.timers
	var found []timerindex.Entry
	for {
		last, done, err := t.index.Scan(after, topic, listStep, func(e timerindex.Entry) bool {
			if !t.state.Busy(e.Seq) {
				found = append(found, e)
			}
			return len(found) <= limit
		})
		if err != nil {
			t.mu.Unlock()
			return nil, "", err
		}
		if done || len(found) > limit {
			break
		}
		after = last
		t.mu.Unlock() // let deliveries and sends through between steps
		t.mu.Lock()
	}
	// The records are read under the lock: a carry (which holds it) cannot
	// replace one between the scan and the read, which would leave a
	// short page with a cursor past the copy.
	var out []Timer
	for _, e := range found[:min(len(found), limit)] {
		m, err := b.queueRecord(timerTopic, e.Seq)
		if err != nil {
			continue // deleted by retention uncarried (counted as lost)
		}
		out = append(out, timerView(m, false))
	}
	t.mu.Unlock()
	next := ""
	if len(found) > limit && len(out) > 0 {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// GetTimer returns one pending timer with its body.
func (b *Broker) GetTimer(ctx context.Context, id string) (Timer, error) {
	if err := b.lockTimers(ctx); err != nil {
		return Timer{}, err
	}
	m, err := b.pendingTimer(id)
	b.timers.mu.Unlock()
	if err != nil {
		return Timer{}, err
	}
	return timerView(m, true), nil
}

// CancelTimer cancels a pending timer: it is never delivered.
func (b *Broker) CancelTimer(ctx context.Context, id string) error {
	if err := b.lockTimers(ctx); err != nil {
		return err
	}
	defer b.timers.mu.Unlock()
	m, err := b.pendingTimer(id)
	if err != nil {
		return err
	}
	if dest := m.Property(message.PropertyRealTopic); strings.HasPrefix(dest, retryPrefix) {
		// Cancelling would drop the message for the group without a
		// dead letter (package retry).
		return fmt.Errorf("%w: timer %s is a retry waiting for %s: reschedule it, or nack its redelivery with delayLevel -1",
			ErrInvalidArgument, id, dest)
	}
	if err := b.appendTimerStatus([]timer.StatusRecord{timer.Settle(m, timer.Cancelled, b.clock.Now())}); err != nil {
		return err
	}
	return b.settleOwnWrite()
}

// appendTimerStatus makes timer status changes durable.
func (b *Broker) appendTimerStatus(recs []timer.StatusRecord) error {
	m, err := timer.StatusMessage(recs, b.clock.Now())
	if err != nil {
		return err
	}
	if err := b.store.PutClass(storage.ClassSystem, []*message.Message{m}, make([]storage.PutResult, 1)); err != nil {
		return mapStoreErr(err)
	}
	return nil
}

// RescheduleTimer moves a pending timer to a new due time (a copy of its
// record due then supersedes it).
func (b *Broker) RescheduleTimer(ctx context.Context, id string, at time.Time) (Timer, error) {
	now := b.clock.Now()
	if !at.After(now) {
		at = now
	}
	if at.After(now.Add(b.opts.MaxTimerDelay)) {
		return Timer{}, fmt.Errorf("%w: a timer may be at most %v ahead", ErrInvalidArgument, b.opts.MaxTimerDelay)
	}
	if err := b.lockTimers(ctx); err != nil {
		return Timer{}, err
	}
	defer b.timers.mu.Unlock()
	m, err := b.pendingTimer(id)
	if err != nil {
		return Timer{}, err
	}
	c := timerCopy(m, at)
	if err := b.store.PutClass(storage.ClassSystem, []*message.Message{c}, make([]storage.PutResult, 1)); err != nil {
		return Timer{}, mapStoreErr(err)
	}
	b.timers.nudge()
	if err := b.settleOwnWrite(); err != nil {
		return Timer{}, err
	}
	return timerView(c, false), nil
}

// TimerCount is how many timers are pending, and the next due time of
// those not being delivered.
func (b *Broker) TimerCount() (int, time.Time) {
	if err := b.lockTimers(b.closingCtx); err != nil {
		b.log.Error().Err(err).Msg("timer index not up to date")
		b.timers.mu.Lock()
	}
	defer b.timers.mu.Unlock()
	next, _ := b.nextTimerLocked()
	return int(b.timers.index.Count()), next
}

// nextTimerLocked is the due time of the soonest pending timer not being
// delivered (zero when none); the caller holds the timer lock.
func (b *Broker) nextTimerLocked() (time.Time, error) {
	t := &b.timers
	var next time.Time
	_, _, err := t.index.Scan(timerindex.MinKey, "", 0, func(e timerindex.Entry) bool {
		if t.state.Busy(e.Seq) {
			return true
		}
		next = time.UnixMilli(e.Due)
		return false
	})
	return next, err
}

// pendingFor counts the pending timers destined to topic (the caller has
// awaited the dispatch of what was stored before).
func (b *Broker) pendingFor(topic string) int {
	t := &b.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := b.followTimers(); err != nil {
		b.log.Error().Err(err).Msg("timer index not up to date")
	}
	return int(t.index.CountTopic(topic))
}
