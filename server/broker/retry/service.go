package retry

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
	"github.com/mqgate/mqgate/storage/schedule"
)

// Store is what the family reads of the broker's store (*storage.Store
// has it): a failed message's record, the schedule queues the ladder
// counts.
type Store interface {
	ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (storage.ReadResult, error)
	MinOffset(topic string, queueID int32) int64
}

// Names are the broker's names a copy holds beside the family's own: the
// retry topics' prefix, the dead-letter topics', the timer topic (a
// retry on a timer is a record there), and the properties a copy drops
// or sets that other families own (a dead letter's reason, a committed
// transaction's id, a dead-lettered ordered message's sequence, the
// consumer instance a broadcasting group's dead letter failed with).
type Names struct {
	RetryPrefix string
	DLQPrefix   string
	TimerTopic  string
	DLQReason   string
	TxnID       string
	OrderSeq    string
	Instance    string
}

// Failure is one failed delivery to send back: the progress key it
// failed under (a broadcasting group's instance's "<group>@<client>"),
// where its record is in the store (the retry view reads %RETRY%<group>),
// and how it failed.
type Failure struct {
	Key        offset.Key
	StoreTopic string
	StoreQueue int32
	Offset     int64         // queue offset in StoreTopic/StoreQueue
	Level      int           // -1 DLQ, 0 the group's policy, > 0 that level
	Delay      time.Duration // > 0: retry on a timer after this long (a nack's delayMs)
	Reason     string
	Outcome    string // OutcomeNack or OutcomeExpired
	Client     string // who failed it
	// History and Failures are an ordered message's, dead after retries
	// in place: its attempts and their count.
	History  []Attempt
	Failures int32
}

// Config is what the family gets from the broker: its store, clock and
// log, the delay levels, the broker's names and bounds, and, as funcs,
// what it asks of the broker and of the other families — the topic gate,
// the registry's word on a group and on a deleted topic's schedule
// entries, the wait a policy draws (with the broker's jitter), the
// consumer instances, the progress record, the timer record, the
// counters. server/broker fills it in (retry.go there).
type Config struct {
	Store Store
	// Clock is the broker's clock: an attempt's time, a copy's due time.
	Clock clockwork.Clock
	Log   zerolog.Logger
	// DelayLevels are the delay levels' durations (level 1 first).
	DelayLevels []time.Duration
	Names       Names
	// MaxReasonBytes bounds a dead letter's reason; MaxClientBytes an
	// attempt's client.
	MaxReasonBytes int
	MaxClientBytes int
	// StoreError turns an error of the store into the broker's sentinel.
	StoreError func(error) error
	// Gate is the read side of the broker's topic gate: a send-back writes
	// its copies under it, and so does the scheduler's delivery (Sink).
	Gate sync.Locker
	// Group is the registry's word on a group: its name ("" when it does
	// not exist: the copies then go to the bare prefixes' topics, as they
	// did before the family moved), its retryMaxTimes (0: the default, 16)
	// and its policy (nil: the ladder).
	Group func(name string) (cfgName string, maxTimes int, policy *Policy)
	// ScheduleFloor is the registry's word on a deleted topic: per level,
	// the schedule queue offset below which entries were scheduled for it
	// before its deletion (ok false: not deleted).
	ScheduleFloor func(topic string) (floor []int64, ok bool)
	// Wait is Wait over the broker's delay levels, with its jitter.
	Wait func(p *Policy, reconsume int32, level int, delay time.Duration) (int, time.Duration)
	// Known reports whether a progress group is still known (a forgotten
	// broadcasting instance's failures are dropped); Instance is the
	// client id of a broadcasting group's instance's progress group ("":
	// a group's own).
	Known    func(progressGroup string) bool
	Instance func(progressGroup string) string
	// AckEntry is the progress entry that ends a delivery; Persist
	// appends a progress record with messages, in one batch.
	AckEntry func(key offset.Key, off int64) offset.Entry
	Persist  func(rec offset.Record, msgs []*message.Message) error
	// Deleted reports whether m was stored before its topic was deleted.
	Deleted func(m *message.Message) bool
	// MessageID is the id a stored message is known by.
	MessageID func(m *message.Message) string
	// Timer makes a copy a timer record due at due (the timer family's
	// Wrap, after dropping what a timer delivery left on it); FormatDue
	// is a due time as a schedule entry holds it (rounded up).
	Timer     func(m *message.Message, due time.Time)
	FormatDue func(due time.Time) string
	// Retried and DeadLettered count copies, by group and level (0: on a
	// timer); Nudge wakes the timer delivery for a new retry timer.
	Retried      func(group string, level int)
	DeadLettered func(group string)
	Nudge        func()
}

// Service is the retry family at work: the send-back of failed
// deliveries (Write), the ladder's counts (Counts, Reset), the schedule's
// deliveries for deleted topics dropped (Sink, ScheduledForDeleted).
// Safe for concurrent use.
type Service struct {
	cfg    Config
	ladder Ladder
}

// New is the family over cfg.
func New(cfg Config) *Service {
	s := &Service{cfg: cfg}
	s.ladder.Init(len(cfg.DelayLevels))
	return s
}

// RetryTopic is group's retry topic.
func (s *Service) RetryTopic(group string) string { return s.cfg.Names.RetryPrefix + group }

// DLQTopic is group's dead-letter topic.
func (s *Service) DLQTopic(group string) string { return s.cfg.Names.DLQPrefix + group }

// Write writes the copies of group's failed deliveries (of the group's
// own queues or of its instances') — a retry copy on the ladder or on a
// timer, or a dead letter — plus one progress record ending the failed
// deliveries, in one batch, under the topic gate. A forgotten instance's
// failures are dropped (its progress ended with its forget record), and
// so are messages retention or a topic's deletion removed meanwhile, and
// the whole of a group deleted meanwhile.
func (s *Service) Write(group string, items []Failure) error {
	s.cfg.Gate.Lock()
	defer s.cfg.Gate.Unlock()
	name, maxTimes, policy := s.cfg.Group(group)
	if name == "" {
		// The group was deleted since the deliveries: its progress and
		// its retry and dead-letter topics went with it, so nothing is
		// retried or written (a copy would land in a topic named by the
		// bare prefix).
		return nil
	}
	if maxTimes == 0 {
		maxTimes = 16
	}
	now := s.cfg.Clock.Now()
	msgs := make([]*message.Message, 0, len(items)+1)
	var rec offset.Record
	for _, it := range items {
		if !s.cfg.Known(it.Key.Group) {
			continue
		}
		e := s.cfg.AckEntry(it.Key, it.Offset)
		e.Kind = offset.KindFailed // done for the group; a late ack of its receipt is refused
		rec.Entries = append(rec.Entries, e)
		res, err := s.cfg.Store.ReadQueue(it.StoreTopic, it.StoreQueue, it.Offset, 1, nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) || (err == nil && len(res.Messages) == 0) {
			continue // deleted by retention meanwhile: nothing to retry
		}
		if err != nil {
			return s.cfg.StoreError(err)
		}
		if s.cfg.Deleted(res.Messages[0]) {
			continue // its topic was deleted meanwhile
		}
		msgs = append(msgs, s.copy(name, maxTimes, policy, res.Messages[0], it, now))
	}
	if err := s.cfg.Persist(rec, msgs); err != nil {
		return err
	}
	for _, m := range msgs {
		switch m.Topic {
		case s.DLQTopic(group):
			s.cfg.DeadLettered(group)
		case s.cfg.Names.TimerTopic:
			s.cfg.Nudge()
			s.cfg.Retried(group, 0) // level 0: on a timer
		default:
			lvl, _ := strconv.Atoi(m.Property(message.PropertyDelayLevel))
			s.cfg.Retried(group, lvl)
		}
	}
	return nil
}

// copy builds the next incarnation of a failed message of group (the
// group's configured name).
func (s *Service) copy(group string, maxTimes int, policy *Policy, m *message.Message, it Failure, now time.Time) *message.Message {
	names := &s.cfg.Names
	reconsume := m.ReconsumeTimes + it.Failures
	origin := m.Property(message.PropertyOriginMessageID)
	if origin == "" {
		origin = s.cfg.MessageID(m)
	}
	originalTopic := m.Property(message.PropertyRetryTopic)
	if originalTopic == "" {
		originalTopic = m.Topic
	}
	dead := it.Level < 0 || int(reconsume) >= maxTimes
	var level int
	var delay time.Duration
	if !dead {
		level, delay = s.cfg.Wait(policy, reconsume, it.Level, it.Delay)
	}
	attempts := ParseAttempts(m.Property(PropAttempts))
	if len(it.History) > 0 {
		attempts = append(attempts, it.History...) // an ordered message's in-place attempts
	} else {
		a := NewAttempt(now, it.Outcome, it.Client, it.Reason, it.Level, s.cfg.MaxClientBytes)
		a.DelayMs = delay.Milliseconds()
		attempts = append(attempts, a)
	}
	history := Bound(attempts)

	out := m.CopyTo("", message.PropertyDedupID, message.PropertyRealTopic, message.PropertyRealQueueID,
		message.PropertyDelayLevel, message.PropertyDeliverTimeMs, names.DLQReason, names.TxnID)
	out.ReconsumeTimes = reconsume + 1
	out.SetProperty(message.PropertyRetryTopic, originalTopic)
	out.SetProperty(message.PropertyOriginMessageID, origin)
	out.SetProperty(message.PropertyMaxReconsumeTimes, strconv.Itoa(maxTimes))
	out.SetProperty(PropAttempts, history)
	if dead {
		out.Topic = s.DLQTopic(group)
		out.SetProperty(names.DLQReason, TruncateText(it.Reason, s.cfg.MaxReasonBytes))
		if m.Property(message.PropertyShardingKey) != "" {
			// An ordered message: its queue offset.
			out.SetProperty(names.OrderSeq, strconv.FormatInt(m.QueueOffset, 10))
		}
		if client := s.cfg.Instance(it.Key.Group); client != "" {
			out.SetProperty(names.Instance, client) // a resend goes to that instance
		}
		return out
	}
	if delay > 0 {
		// On a timer: a new timer, so none of the properties a timer
		// delivery left on m (UNIQ_KEY "timer:<id>").
		out.DeleteProperty(message.PropertyUniqKey)
		out.Topic = s.RetryTopic(group)
		out.QueueID = 0
		s.cfg.Timer(out, now.Add(delay))
		return out
	}
	out.Topic = message.ScheduleTopic
	out.QueueID = int32(level - 1)
	out.SetProperty(message.PropertyRealTopic, s.RetryTopic(group))
	out.SetProperty(message.PropertyRealQueueID, "0")
	out.SetProperty(message.PropertyDelayLevel, strconv.Itoa(level))
	out.SetProperty(message.PropertyDeliverTimeMs, s.cfg.FormatDue(now.Add(s.cfg.DelayLevels[level-1])))
	return out
}

// Counts refreshes the ladder and returns, per level, the undelivered
// schedule entries whose destination want accepts (Ladder.Counts, over
// the scheduler's positions status reads).
func (s *Service) Counts(status func() []schedule.LevelStatus, want func(Dest) bool) []LevelCount {
	return s.ladder.Counts(LadderSource{Status: status, Store: s.cfg.Store, Log: s.cfg.Log,
		Dropped: s.ScheduledForDeleted, RetryPrefix: s.cfg.Names.RetryPrefix}, want)
}

// ResetLadder forgets the ladder's counts: the next count reads the
// undelivered entries again (a topic's deletion changed what will be
// delivered).
func (s *Service) ResetLadder() { s.ladder.Reset() }

// ScheduledForDeleted reports whether the schedule entry at offset of
// level, going to d, was scheduled for a topic deleted since.
func (s *Service) ScheduledForDeleted(d Dest, level int, offset int64) bool {
	topic := d.Topic
	if d.Origin != "" {
		topic = d.Origin
	}
	floor, ok := s.cfg.ScheduleFloor(topic)
	return ok && level >= 1 && level <= len(floor) && offset < floor[level-1]
}

// Sink is the scheduler's sink: under the topic gate it drops the due
// messages scheduled for a topic deleted since, and hands the others to
// next.
func (s *Service) Sink(next schedule.Sink) schedule.Sink { return sink{s: s, next: next} }

type sink struct {
	s    *Service
	next schedule.Sink
}

// Deliver implements schedule.Sink.
func (k sink) Deliver(msgs []*message.Message) error {
	s := k.s
	s.cfg.Gate.Lock()
	defer s.cfg.Gate.Unlock()
	kept := make([]*message.Message, 0, len(msgs))
	for _, m := range msgs {
		level, off, ok := ScheduleEntry(m.Property(message.PropertyUniqKey))
		if ok && s.ScheduledForDeleted(DestOf(m, m.Topic, s.cfg.Names.RetryPrefix), level, off) {
			continue
		}
		kept = append(kept, m)
	}
	if dropped := len(msgs) - len(kept); dropped > 0 {
		s.cfg.Log.Info().Int("messages", dropped).Msg("due messages of deleted topics dropped")
	}
	if len(kept) == 0 {
		return nil
	}
	return k.next.Deliver(kept)
}

// ScheduleEntry parses the level and offset out of a delivered schedule
// entry's UNIQ_KEY (schedule.UniqKey: "sched:<queue>:<offset>").
func ScheduleEntry(key string) (level int, off int64, ok bool) {
	rest, ok := strings.CutPrefix(key, "sched:")
	if !ok {
		return 0, 0, false
	}
	q, o, ok := strings.Cut(rest, ":")
	if !ok {
		return 0, 0, false
	}
	queue, err1 := strconv.Atoi(q)
	off, err2 := strconv.ParseInt(o, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return queue + 1, off, true
}
