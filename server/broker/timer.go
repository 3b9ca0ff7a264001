package broker

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Timers: delayed delivery at an arbitrary time (delayMs / deliverAt),
// beyond RocketMQ 4's fixed levels (DESIGN §4). A timer is a record in the
// system topic rmq_sys_TIMER carrying its destination (REAL_TOPIC /
// REAL_QID) and due time (TIMER_DELIVER_MS). Pending timers are held in a
// min-heap by due time, rebuilt at start-up from the timer records minus
// those a status record (rmq_sys_TIMER_STATUS) settled. One goroutine
// sleeps until the head is due and delivers: the real messages and the
// "delivered" status go in one batch, so a restart neither loses nor
// repeats a delivery. Timers can be listed, cancelled and rescheduled
// while pending (a reschedule appends a new record with the same
// TIMER_ID); before retention deletes a segment, pending timers in it are
// re-appended, so a timer outlives the retention window.

const (
	timerTopic       = systemPrefix + "TIMER"
	timerStatusTopic = systemPrefix + "TIMER_STATUS"
	propTimerID      = "TIMER_ID"

	timerDelivered = "delivered"
	timerCancelled = "cancelled"
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

type timerEntry struct {
	id       string
	due      time.Time
	phys     int64 // CommitLog offset of the timer's latest record
	topic    string
	index    int // in the heap; -1 when out of it
	inFlight bool
}

type timerHeap []*timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].phys < h[j].phys
	}
	return h[i].due.Before(h[j].due)
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *timerHeap) Push(x any)   { e := x.(*timerEntry); e.index = len(*h); *h = append(*h, e) }
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
func (h timerHeap) peek() *timerEntry { return h[0] }

type timerSet struct {
	mu      sync.Mutex
	byID    map[string]*timerEntry
	byTopic map[string]int // pending timers per destination topic
	heap    timerHeap
	wake    chan struct{} // buffered(1): a new head
}

func (t *timerSet) init() {
	t.byID = make(map[string]*timerEntry)
	t.byTopic = make(map[string]int)
	t.wake = make(chan struct{}, 1)
}

func (t *timerSet) nudge() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// put adds or moves a timer; the caller holds t.mu.
func (t *timerSet) put(id, topic string, due time.Time, phys int64) {
	if e, ok := t.byID[id]; ok {
		e.due, e.phys = due, phys
		if e.index >= 0 {
			heap.Fix(&t.heap, e.index)
		}
		return
	}
	e := &timerEntry{id: id, topic: topic, due: due, phys: phys, index: -1}
	t.byID[id] = e
	t.byTopic[topic]++
	heap.Push(&t.heap, e)
}

// remove drops a timer; the caller holds t.mu.
func (t *timerSet) remove(e *timerEntry) {
	if e.index >= 0 {
		heap.Remove(&t.heap, e.index)
	}
	t.forget(e)
}

// forget drops a timer that is out of the heap; the caller holds t.mu.
func (t *timerSet) forget(e *timerEntry) {
	if _, ok := t.byID[e.id]; !ok {
		return
	}
	delete(t.byID, e.id)
	if t.byTopic[e.topic]--; t.byTopic[e.topic] <= 0 {
		delete(t.byTopic, e.topic)
	}
}

// pendingFor counts the pending timers destined to topic.
func (t *timerSet) pendingFor(topic string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byTopic[topic]
}

type timerStatusRecord struct {
	ID     string    `json:"id"`
	Status string    `json:"status"`
	At     time.Time `json:"at"`
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

// asTimer wraps a message for the timer topic.
func asTimer(m *message.Message, due time.Time) {
	m.SetProperty(message.PropertyRealTopic, m.Topic)
	m.SetProperty(message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.SetProperty(message.PropertyDeliverTimeMs, dueMs(due))
	m.Topic, m.QueueID = timerTopic, 0
}

func timerID(m *message.Message) string {
	if id := m.Property(propTimerID); id != "" {
		return id
	}
	return message.NewID(m.StoreHost, m.PhysicalOffset).String()
}

func dueOf(m *message.Message) time.Time {
	ms, _ := strconv.ParseInt(m.Property(message.PropertyDeliverTimeMs), 10, 64)
	return time.UnixMilli(ms)
}

// recoverTimers rebuilds the pending set from the timer records and
// their statuses.
func (b *Broker) recoverTimers(ctx context.Context) error {
	settled := map[string]bool{}
	err := b.scanSystemQueue(ctx, timerStatusTopic, 0, func(m *message.Message) {
		var recs []timerStatusRecord
		if json.Unmarshal(m.Body, &recs) == nil {
			for _, r := range recs {
				settled[r.ID] = true
			}
		}
	})
	if err != nil {
		return err
	}
	t := &b.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	return b.scanSystemQueue(ctx, timerTopic, 0, func(m *message.Message) {
		if id := timerID(m); !settled[id] {
			t.put(id, m.Property(message.PropertyRealTopic), dueOf(m), m.PhysicalOffset) // the latest record wins
		}
	})
}

// timerLoop delivers due timers until the broker closes.
func (b *Broker) timerLoop() {
	defer b.workers.Done()
	backoff := 100 * time.Millisecond
	for {
		t := &b.timers
		t.mu.Lock()
		var wait <-chan time.Time
		if len(t.heap) > 0 {
			if d := time.Until(t.heap.peek().due); d > 0 {
				wait = time.After(d)
			} else {
				wait = time.After(0)
			}
		}
		t.mu.Unlock()
		select {
		case <-b.closing:
			return
		case <-t.wake:
			continue
		case <-wait:
		}
		if err := b.deliverDueTimers(time.Now()); err != nil {
			b.log.Error().Err(err).Dur("retryIn", backoff).Msg("delivering timers failed; will retry")
			select {
			case <-b.closing:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// deliverDueTimers delivers every timer due at now, in batches.
func (b *Broker) deliverDueTimers(now time.Time) error {
	t := &b.timers
	for {
		t.mu.Lock()
		var batch []*timerEntry
		for len(t.heap) > 0 && !t.heap.peek().due.After(now) && len(batch) < 256 {
			e := heap.Pop(&t.heap).(*timerEntry)
			e.inFlight = true
			batch = append(batch, e)
		}
		t.mu.Unlock()
		if len(batch) == 0 {
			return nil
		}
		err := b.deliverTimers(batch, now)
		t.mu.Lock()
		for _, e := range batch {
			e.inFlight = false
			if err != nil {
				heap.Push(&t.heap, e) // retried
			} else {
				t.forget(e)
			}
		}
		t.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (b *Broker) deliverTimers(batch []*timerEntry, now time.Time) error {
	b.topicGate.RLock() // see topicdelete.go
	defer b.topicGate.RUnlock()
	msgs := make([]*message.Message, 0, len(batch)+1)
	recs := make([]timerStatusRecord, 0, len(batch))
	for _, e := range batch {
		if id, err := message.ParseID(e.id); err == nil && id.Offset() < b.retryFloor(e.topic) {
			// Its topic was deleted after it was scheduled.
			recs = append(recs, timerStatusRecord{ID: e.id, Status: timerCancelled, At: now.UTC()})
			continue
		}
		recs = append(recs, timerStatusRecord{ID: e.id, Status: timerDelivered, At: now.UTC()})
		m, err := b.store.Lookup(e.phys)
		if errors.Is(err, storage.ErrOffsetTooSmall) || errors.Is(err, storage.ErrNotFound) {
			b.log.Error().Str("timer", e.id).Msg("timer record lost; it cannot be delivered")
			continue
		}
		if err != nil {
			return mapStoreErr(err)
		}
		out := copyOf(m, m.Property(message.PropertyRealTopic),
			message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyDeliverTimeMs, propTimerID)
		if qid, err := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32); err == nil {
			out.QueueID = int32(qid)
		}
		msgs = append(msgs, out)
		b.metrics.late(now.Sub(e.due))
	}
	body, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	msgs = append(msgs, &message.Message{Topic: timerStatusTopic, Body: body, BornTimestamp: now.UnixMilli()})
	if err := b.store.PutClass(storage.ClassSystem, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return mapStoreErr(err)
	}
	return nil
}

// pendingTimer finds a pending timer that is not being delivered.
func (b *Broker) pendingTimer(id string) (*timerEntry, error) {
	mid, err := message.ParseID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	e, ok := b.timers.byID[mid.String()]
	if !ok || e.inFlight {
		return nil, fmt.Errorf("%w: no pending timer %s (delivered, cancelled or unknown)", ErrMessageNotFound, id)
	}
	return e, nil
}

func (b *Broker) timerView(e *timerEntry, withBody bool) (Timer, error) {
	m, err := b.store.Lookup(e.phys)
	if err != nil {
		return Timer{}, mapStoreErr(err)
	}
	rm := toReceived(m)
	t := Timer{ID: e.id, Topic: e.topic, DeliverAt: e.due.UTC(), Tag: rm.Tag, Keys: rm.Keys, Properties: rm.Properties,
		ScheduledAt: time.UnixMilli(m.StoreTimestamp).UTC()}
	if qid, err := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32); err == nil {
		t.QueueID = int32(qid)
	}
	if withBody {
		t.Body = m.Body
	}
	return t, nil
}

// ListTimers lists pending timers (of topic, or all when ""), soonest
// first, up to limit, after the cursor (a timer id from the last page).
func (b *Broker) ListTimers(ctx context.Context, topic string, cursor string, limit int) ([]Timer, string, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	b.timers.mu.Lock()
	entries := make([]*timerEntry, 0, len(b.timers.byID))
	for _, e := range b.timers.byID {
		if (topic == "" || e.topic == topic) && !e.inFlight {
			snapshot := *e // the entry changes under the lock (retention, reschedule)
			entries = append(entries, &snapshot)
		}
	}
	b.timers.mu.Unlock()
	sort.Slice(entries, func(i, j int) bool { return timerHeap(entries).Less(i, j) })
	start := 0
	if cursor != "" {
		start = len(entries)
		for i, e := range entries {
			if e.id == cursor {
				start = i + 1
				break
			}
		}
	}
	var out []Timer
	next := ""
	for _, e := range entries[start:] {
		if len(out) == limit {
			next = out[len(out)-1].ID
			break
		}
		t, err := b.timerView(e, false)
		if err != nil {
			continue // delivered or carried meanwhile
		}
		out = append(out, t)
	}
	return out, next, nil
}

// GetTimer returns one pending timer with its body.
func (b *Broker) GetTimer(ctx context.Context, id string) (Timer, error) {
	b.timers.mu.Lock()
	e, err := b.pendingTimer(id)
	var snapshot timerEntry
	if err == nil {
		snapshot = *e
	}
	b.timers.mu.Unlock()
	if err != nil {
		return Timer{}, err
	}
	return b.timerView(&snapshot, true)
}

// CancelTimer cancels a pending timer: it is never delivered.
func (b *Broker) CancelTimer(ctx context.Context, id string) error {
	t := &b.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	e, err := b.pendingTimer(id)
	if err != nil {
		return err
	}
	if err := b.appendTimerStatus([]timerStatusRecord{{ID: e.id, Status: timerCancelled, At: time.Now().UTC()}}); err != nil {
		return err
	}
	t.remove(e)
	return nil
}

// appendTimerStatus makes timer status changes durable.
func (b *Broker) appendTimerStatus(recs []timerStatusRecord) error {
	body, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	msgs := []*message.Message{{Topic: timerStatusTopic, Body: body, BornTimestamp: time.Now().UnixMilli()}}
	if err := b.store.PutClass(storage.ClassSystem, msgs, make([]storage.PutResult, 1)); err != nil {
		return mapStoreErr(err)
	}
	return nil
}

// RescheduleTimer moves a pending timer to a new due time (a record with
// the same TIMER_ID is appended; the latest record wins).
func (b *Broker) RescheduleTimer(ctx context.Context, id string, at time.Time) (Timer, error) {
	now := time.Now()
	if !at.After(now) {
		at = now
	}
	if at.After(now.Add(b.opts.MaxTimerDelay)) {
		return Timer{}, fmt.Errorf("%w: a timer may be at most %v ahead", ErrInvalidArgument, b.opts.MaxTimerDelay)
	}
	t := &b.timers
	t.mu.Lock()
	e, err := b.pendingTimer(id)
	var phys int64
	if err == nil {
		phys, err = b.copyTimer(e, at, storage.ClassSystem)
	}
	var snapshot timerEntry
	if err == nil {
		t.put(e.id, e.topic, at, phys)
		t.nudge()
		snapshot = *e
	}
	t.mu.Unlock()
	if err != nil {
		return Timer{}, err
	}
	return b.timerView(&snapshot, false)
}

// copyTimer appends a new record of timer e due at at (in class); the
// caller holds the timer lock.
func (b *Broker) copyTimer(e *timerEntry, at time.Time, class storage.Class) (int64, error) {
	m, err := b.store.Lookup(e.phys)
	if err != nil {
		return 0, mapStoreErr(err)
	}
	c := copyOf(m, timerTopic)
	c.SetProperty(propTimerID, e.id)
	c.SetProperty(message.PropertyDeliverTimeMs, dueMs(at))
	r := make([]storage.PutResult, 1)
	if err := b.store.PutClass(class, []*message.Message{c}, r); err != nil {
		return 0, mapStoreErr(err)
	}
	return r[0].PhysicalOffset, nil
}

// carryTimers runs before retention deletes the CommitLog below cut:
// pending timers recorded there are re-appended (same id and due time). A
// timer being delivered right now is not copied (its delivered status
// could precede the copy): the deletion waits for the next pass instead.
func (b *Broker) carryTimers(cut int64) error {
	t := &b.timers
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.byID {
		if e.phys < cut && e.inFlight {
			return fmt.Errorf("timer %s below CommitLog offset %d is being delivered; retention waits for the next pass", e.id, cut)
		}
	}
	carried := 0
	for _, e := range t.byID {
		if e.phys >= cut {
			continue
		}
		phys, err := b.copyTimer(e, e.due, storage.ClassReclaim)
		if err != nil {
			return err
		}
		e.phys = phys
		carried++
	}
	if carried > 0 {
		b.log.Info().Int("timers", carried).Int64("below", cut).Msg("pending timers carried past retention")
	}
	return nil
}

// TimerCount is how many timers are pending, and the next due time.
func (b *Broker) TimerCount() (int, time.Time) {
	b.timers.mu.Lock()
	defer b.timers.mu.Unlock()
	if len(b.timers.heap) == 0 {
		return len(b.timers.byID), time.Time{}
	}
	return len(b.timers.byID), b.timers.heap.peek().due
}

// registerTimer adds a stored timer record to the pending set and returns
// its destination queue (the queue offset is not known before delivery: -1).
func (b *Broker) registerTimer(m *message.Message, r storage.PutResult) (int32, int64) {
	t := &b.timers
	t.mu.Lock()
	t.put(r.ID.String(), m.Property(message.PropertyRealTopic), dueOf(m), r.PhysicalOffset)
	t.mu.Unlock()
	t.nudge()
	qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
	return int32(qid), -1
}
