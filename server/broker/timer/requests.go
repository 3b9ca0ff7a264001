package timer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// View is one pending timer as the requests answer it (server/broker's
// Timer).
type View struct {
	ID          string
	Topic       string
	QueueID     int32
	DeliverAt   time.Time
	Tag         string
	Keys        []string
	Properties  map[string]string
	Body        []byte // only from Get
	ScheduledAt time.Time
}

// SendDue is the due time of a send's delayMs or deliverAt (one of them
// at most, and neither with a delayLevel); zero means no timer (deliver
// now).
func (s *Service) SendDue(delayMs int64, deliverAt time.Time, delayLevel int, now time.Time) (time.Time, error) {
	if delayMs != 0 && !deliverAt.IsZero() {
		return time.Time{}, fmt.Errorf("%w: give delayMs or deliverAt, not both", s.cfg.InvalidArgument)
	}
	if delayLevel != 0 && (delayMs != 0 || !deliverAt.IsZero()) {
		return time.Time{}, fmt.Errorf("%w: give delayLevel or a timer (delayMs, deliverAt), not both", s.cfg.InvalidArgument)
	}
	due := deliverAt
	maxDelay := s.cfg.MaxDelay
	if delayMs < 0 || delayMs > maxDelay.Milliseconds() {
		return time.Time{}, fmt.Errorf("%w: delayMs %d must be between 0 and %d (%v)", s.cfg.InvalidArgument, delayMs, maxDelay.Milliseconds(), maxDelay)
	}
	if delayMs > 0 {
		due = now.Add(time.Duration(delayMs) * time.Millisecond)
	}
	if due.IsZero() || !due.After(now) {
		return time.Time{}, nil // due already: an ordinary send
	}
	if due.After(now.Add(maxDelay)) {
		return time.Time{}, fmt.Errorf("%w: a timer may be at most %v ahead", s.cfg.InvalidArgument, maxDelay)
	}
	return due, nil
}

// Sent is called for a stored timer record (the first record of a
// timer, Wrap); it returns the timer's destination queue. The index
// learns of the record from its queue.
func (s *Service) Sent(m *message.Message) int32 {
	s.Nudge()
	qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
	return int32(qid)
}

// latestRecord finds the newest record of timer id (pending or not): its
// newest copy by UNIQ_KEY, else the first record, which the id names.
func (s *Service) latestRecord(id message.ID) (*message.Message, error) {
	m, err := s.cfg.Store.FindByUniqKey(Topic, Key(id.String()))
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, storage.ErrNotFound) {
		return nil, s.cfg.StoreError(err)
	}
	m, err = s.cfg.Store.LookupID(id)
	if storage.IsGone(err) || err == nil && (m.Topic != Topic || ID(m) != id.String()) {
		return nil, storage.ErrNotFound
	}
	if err != nil {
		return nil, s.cfg.StoreError(err)
	}
	return m, nil
}

// pending returns the latest record of a pending timer that is not being
// delivered; the caller holds the timer lock.
func (s *Service) pending(id string) (*message.Message, error) {
	mid, err := message.ParseID(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", s.cfg.InvalidArgument, err)
	}
	m, err := s.latestRecord(mid)
	if err == nil && (!s.index.Live(m.QueueOffset) || s.state.Busy(m.QueueOffset)) {
		err = storage.ErrNotFound
	}
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: no pending timer %s (delivered, cancelled or unknown)", s.cfg.NotFound, id)
	}
	return m, err
}

// view describes the timer whose latest record is m.
func (s *Service) view(m *message.Message, withBody bool) View {
	v := View{ID: ID(m), Topic: m.Property(message.PropertyRealTopic), DeliverAt: Due(m).UTC(),
		Tag: m.Tag(), Keys: m.Keys(), ScheduledAt: time.UnixMilli(m.StoreTimestamp).UTC()}
	for k, val := range m.Properties {
		if s.cfg.SystemProperty(k) {
			continue
		}
		if v.Properties == nil {
			v.Properties = make(map[string]string)
		}
		v.Properties[k] = val
	}
	if qid, err := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32); err == nil {
		v.QueueID = int32(qid)
	}
	if withBody {
		v.Body = m.Body
	}
	return v
}

// List lists pending timers (of topic, or all when ""), soonest first, up
// to limit (1..500, else 100), after the cursor (a timer id from the last
// page); next is the cursor of the page after, "" when none.
func (s *Service) List(ctx context.Context, topic string, cursor string, limit int) (timers []View, next string, err error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	after := timerindex.MinKey
	if cursor != "" {
		id, err := message.ParseID(cursor)
		if err != nil {
			return nil, "", fmt.Errorf("%w: cursor is not a timer id: %w", s.cfg.InvalidArgument, err)
		}
		m, err := s.latestRecord(id)
		if errors.Is(err, storage.ErrNotFound) {
			return nil, "", nil // a timer long gone: nothing after it is known
		}
		if err != nil {
			return nil, "", err
		}
		// After every record of the cursor's timer (a carry may have
		// copied it since, under a new seq).
		after = timerindex.Key{Due: DueMs(m), ID: IDOffset(m), Seq: math.MaxInt64}
	}
	if err := s.lock(ctx); err != nil {
		return nil, "", err
	}
	var found []timerindex.Entry
	for {
		last, done, err := s.index.Scan(after, topic, listStep, func(e timerindex.Entry) bool {
			if !s.state.Busy(e.Seq) {
				found = append(found, e)
			}
			return len(found) <= limit
		})
		if err != nil {
			s.mu.Unlock()
			return nil, "", err
		}
		if done || len(found) > limit {
			break
		}
		after = last
		s.mu.Unlock() // let deliveries and sends through between steps
		s.mu.Lock()
	}
	// The records are read under the lock: a carry (which holds it) cannot
	// replace one between the scan and the read, which would leave a
	// short page with a cursor past the copy.
	var out []View
	for _, e := range found[:min(len(found), limit)] {
		m, err := storage.RecordAt(s.cfg.Store, Topic, e.Seq)
		if err != nil {
			continue // deleted by retention uncarried (counted as lost)
		}
		out = append(out, s.view(m, false))
	}
	s.mu.Unlock()
	if len(found) > limit && len(out) > 0 {
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// Get returns one pending timer with its body.
func (s *Service) Get(ctx context.Context, id string) (View, error) {
	if err := s.lock(ctx); err != nil {
		return View{}, err
	}
	m, err := s.pending(id)
	s.mu.Unlock()
	if err != nil {
		return View{}, err
	}
	return s.view(m, true), nil
}

// Cancel cancels a pending timer: it is never delivered. A retry waiting
// on a timer is refused (cancelling would drop the message for its
// group without a dead letter).
func (s *Service) Cancel(ctx context.Context, id string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	m, err := s.pending(id)
	if err != nil {
		return err
	}
	if dest := m.Property(message.PropertyRealTopic); s.cfg.IsRetry(dest) {
		// Cancelling would drop the message for the group without a
		// dead letter (package retry).
		return fmt.Errorf("%w: timer %s is a retry waiting for %s: reschedule it, or nack its redelivery with delayLevel -1",
			s.cfg.InvalidArgument, id, dest)
	}
	if err := s.appendStatus([]StatusRecord{Settle(m, Cancelled, s.cfg.Clock.Now())}); err != nil {
		return err
	}
	return s.settleOwnWrite()
}

// appendStatus makes timer status changes durable.
func (s *Service) appendStatus(recs []StatusRecord) error {
	m, err := StatusMessage(recs, s.cfg.Clock.Now())
	if err != nil {
		return err
	}
	if err := s.cfg.Store.PutClass(storage.ClassSystem, []*message.Message{m}, make([]storage.PutResult, 1)); err != nil {
		return s.cfg.StoreError(err)
	}
	return nil
}

// Reschedule moves a pending timer to a new due time (a copy of its
// record due then supersedes it); a time in the past is now.
func (s *Service) Reschedule(ctx context.Context, id string, at time.Time) (View, error) {
	now := s.cfg.Clock.Now()
	if !at.After(now) {
		at = now
	}
	if at.After(now.Add(s.cfg.MaxDelay)) {
		return View{}, fmt.Errorf("%w: a timer may be at most %v ahead", s.cfg.InvalidArgument, s.cfg.MaxDelay)
	}
	if err := s.lock(ctx); err != nil {
		return View{}, err
	}
	defer s.mu.Unlock()
	m, err := s.pending(id)
	if err != nil {
		return View{}, err
	}
	c := timerCopy(m, at)
	if err := s.cfg.Store.PutClass(storage.ClassSystem, []*message.Message{c}, make([]storage.PutResult, 1)); err != nil {
		return View{}, s.cfg.StoreError(err)
	}
	s.Nudge()
	if err := s.settleOwnWrite(); err != nil {
		return View{}, err
	}
	return s.view(c, false), nil
}

// Count is how many timers are pending, and the next due time of those
// not being delivered (zero when none).
func (s *Service) Count() (int, time.Time) {
	if err := s.lock(s.cfg.Background); err != nil {
		s.cfg.Log.Error().Err(err).Msg("timer index not up to date")
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	next, _ := s.nextLocked()
	return int(s.index.Count()), next
}

// nextLocked is the due time of the soonest pending timer not being
// delivered (zero when none); the caller holds the timer lock.
func (s *Service) nextLocked() (time.Time, error) {
	var next time.Time
	_, _, err := s.index.Scan(timerindex.MinKey, "", 0, func(e timerindex.Entry) bool {
		if s.state.Busy(e.Seq) {
			return true
		}
		next = time.UnixMilli(e.Due)
		return false
	})
	return next, err
}

// PendingFor counts the pending timers destined to topic (the caller has
// awaited the dispatch of what was stored before).
func (s *Service) PendingFor(topic string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.follow(); err != nil {
		s.cfg.Log.Error().Err(err).Msg("timer index not up to date")
	}
	return int(s.index.CountTopic(topic))
}

// Pending counts the pending timers as the index has them, without
// catching it up (the quota's count); ok is false before Open.
func (s *Service) Pending() (n int, ok bool) {
	if s.index == nil {
		return 0, false
	}
	return int(s.index.Count()), true
}

// CancelTopic cancels the pending timers destined to a topic being
// deleted (one being delivered right now is cancelled by the delivery,
// Config.Deleted), a status record per batch of them. The caller holds
// the topic gate's write side.
func (s *Service) CancelTopic(name string) error {
	if err := s.lock(s.cfg.Background); err != nil {
		return err
	}
	defer s.mu.Unlock()
	after := timerindex.MinKey
	for {
		var seqs []int64
		last, done, err := s.index.Scan(after, name, 0, func(e timerindex.Entry) bool {
			if !s.state.Busy(e.Seq) {
				seqs = append(seqs, e.Seq)
			}
			return len(seqs) < batch
		})
		if err != nil {
			return err
		}
		now := s.cfg.Clock.Now()
		recs := make([]StatusRecord, 0, len(seqs))
		for _, seq := range seqs {
			m, err := storage.RecordAt(s.cfg.Store, Topic, seq)
			if err != nil {
				return s.cfg.StoreError(err)
			}
			recs = append(recs, Settle(m, Cancelled, now))
		}
		if len(recs) > 0 {
			if err := s.appendStatus(recs); err != nil {
				return err
			}
			if err := s.settleOwnWrite(); err != nil {
				return err
			}
		}
		if done || len(seqs) < batch {
			return nil
		}
		after = last
	}
}
