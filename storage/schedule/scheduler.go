package schedule

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/storage/internal/vfs"
	"github.com/mqgate/mqgate/storage/message"
)

// Source reads the schedule topic. The store implements it through an
// adapter; the scheduler never sees the store itself.
type Source interface {
	// ReadLevel reads up to max messages of the level's queue (queue
	// level-1) from offset and returns the offset after the last entry
	// examined (entries lost to retention are passed over).
	ReadLevel(level int, offset int64, max int) (msgs []*message.Message, next int64, err error)
	// LevelRange returns the min and max offsets of the level's queue.
	LevelRange(level int) (min, max int64)
	// Signal returns a channel that is closed when new schedule entries land.
	Signal() <-chan struct{}
	// Delivered reports whether a message carrying uniqKey (UNIQ_KEY) is
	// already stored in topic. The scheduler asks only after a restart, for
	// the entries its saved progress did not cover.
	Delivered(topic, uniqKey string) (bool, error)
}

// Sink stores due messages at their real destination.
type Sink interface {
	Deliver(msgs []*message.Message) error
}

// Config configures a Scheduler.
type Config struct {
	// Levels is the delay of each level, level 1 first. Required.
	Levels []time.Duration
	// ProgressPath is the file holding per-level offsets. Required.
	ProgressPath string
	// FS is the file system of ProgressPath (default the operating
	// system's; the broker passes the store's).
	FS vfs.FS
	// SaveInterval is how often changed progress is saved (default 1 s;
	// RocketMQ saves every 15 s — more often only narrows what a crash
	// re-delivers).
	SaveInterval time.Duration
	// BatchSize is how many messages one read/deliver step handles (default 256).
	BatchSize int
	// OnDeliver, if set, is called for every delivered message with its
	// level and how late it was (metrics).
	OnDeliver func(level int, late time.Duration)
	// Logger receives logs (default zerolog.Nop()).
	Logger zerolog.Logger
	// Clock decides what is due (default the wall clock).
	Clock clockwork.Clock
}

// LevelStatus is one level's position (mqadmin brokerStatus's
// scheduleMessageOffset).
type LevelStatus struct {
	Level     int
	Delay     time.Duration
	Offset    int64     // next entry to deliver
	MaxOffset int64     // entries written to the level's queue
	Backlog   int64     // MaxOffset - Offset
	NextDue   time.Time // due time of the head entry (zero when idle)
}

// RunResult is what one runOnce pass did.
type RunResult struct {
	Delivered int
	NextDue   time.Time // zero: the level's queue is drained
}

// Scheduler runs one worker per delay level.
type Scheduler struct {
	cfg  Config
	src  Source
	sink Sink
	log  zerolog.Logger

	mu      sync.Mutex
	offsets []int64
	nextDue []time.Time
	// verifyBelow[level-1]: entries below this offset may have been
	// delivered before a crash (the saved progress lags); each is checked
	// by its UNIQ_KEY before it is delivered again.
	verifyBelow []int64
	dirty       bool
	saveMu      sync.Mutex

	// The level workers and the progress saver run on internal/worker;
	// stopWorkers tells them all at once, then Stop waits for each.
	workers     []*worker.Service
	stopWorkers context.CancelFunc
	started     bool
}

// New loads saved progress and returns a scheduler that is not yet running.
func New(cfg Config, src Source, sink Sink) (*Scheduler, error) {
	if len(cfg.Levels) == 0 || len(cfg.Levels) > MaxLevels {
		return nil, fmt.Errorf("%w: %d levels", ErrBadLevels, len(cfg.Levels))
	}
	if cfg.FS == nil {
		cfg.FS = vfs.OS()
	}
	if cfg.ProgressPath == "" {
		return nil, errors.New("schedule: ProgressPath is required")
	}
	if cfg.SaveInterval == 0 {
		cfg.SaveInterval = time.Second
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 256
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	offsets, err := loadProgress(cfg.FS, cfg.ProgressPath, len(cfg.Levels))
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", cfg.ProgressPath, err)
	}
	verify := make([]int64, len(cfg.Levels))
	for i := range verify {
		_, verify[i] = src.LevelRange(i + 1)
	}
	return &Scheduler{
		cfg:         cfg,
		src:         src,
		sink:        sink,
		log:         cfg.Logger.With().Str("component", "schedule").Logger(),
		offsets:     offsets,
		nextDue:     make([]time.Time, len(cfg.Levels)),
		verifyBelow: verify,
	}, nil
}

// Levels returns the configured delays, level 1 first.
func (s *Scheduler) Levels() []time.Duration { return s.cfg.Levels }

// Start launches the level workers and the progress saver. It does
// nothing while they run; after Stop it launches them again (a broker
// that leads again).
func (s *Scheduler) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return
	}
	s.started, s.workers = true, nil
	// What is stored now may have been delivered by another broker whose
	// log this one followed (a leader before a failover), whatever the
	// progress file here says: verify it, as after a crash.
	for i := range s.verifyBelow {
		_, top := s.src.LevelRange(i + 1)
		s.verifyBelow[i] = max(s.verifyBelow[i], top)
	}
	ctx, s.stopWorkers = context.WithCancel(ctx)
	for level := 1; level <= len(s.cfg.Levels); level++ {
		s.workers = append(s.workers, worker.New(func(ctx context.Context) { s.work(ctx, level) }))
	}
	saver := worker.Every(s.cfg.SaveInterval, func(context.Context, time.Time) {
		if err := s.save(); err != nil {
			s.log.Error().Err(err).Msg("saving schedule progress failed")
		}
	})
	s.workers = append(s.workers, saver.Service)
	for _, w := range s.workers {
		w.Start(ctx)
	}
}

// Stop stops the workers, waits for them and saves progress (also when
// they are not running). Idempotent.
func (s *Scheduler) Stop() error {
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return s.save()
	}
	s.started = false
	workers, stop := s.workers, s.stopWorkers
	s.workers, s.stopWorkers = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	for _, w := range workers {
		w.Stop()
	}
	return s.save()
}

// work is one level's loop: a pass (runOnce) whenever the level's source
// signals new entries, at the head's due time, and with backoff after a
// failed pass.
func (s *Scheduler) work(ctx context.Context, level int) {
	retry := worker.NewBackoff(100*time.Millisecond, 5*time.Second)
	for {
		signal := s.src.Signal()
		res, err := s.runOnce(level, s.cfg.Clock.Now())
		var wait <-chan time.Time
		var due <-chan struct{}
		cancel := func() {}
		switch {
		case err != nil:
			d := retry.Next()
			s.log.Error().Err(err).Int("level", level).Dur("retryIn", d).Msg("delivering due messages failed; will retry")
			wait = s.cfg.Clock.After(d)
			signal = nil
		case !res.NextDue.IsZero():
			// The head is not due yet. Later entries of this level are due
			// later still, so new data cannot change when to wake. The wake-up
			// is set at the due time itself (not now + the wait, two readings
			// of the clock), so that a clock that moves in between — a test's
			// virtual one — cannot push it later.
			retry.Reset()
			var dueCtx context.Context
			dueCtx, cancel = clockwork.WithDeadline(ctx, s.cfg.Clock, res.NextDue)
			due = dueCtx.Done()
			signal = nil
		default:
			retry.Reset()
		}
		select {
		case <-ctx.Done():
			cancel()
			return
		case <-signal:
		case <-wait:
		case <-due:
		}
		cancel()
	}
}

// runOnce delivers every due message of one level and reports the head's
// due time when it stops at one that is not due.
func (s *Scheduler) runOnce(level int, now time.Time) (RunResult, error) {
	var res RunResult
	s.mu.Lock()
	off := s.offsets[level-1]
	s.mu.Unlock()
	low, top := s.src.LevelRange(level)
	if off < low {
		s.log.Warn().Int("level", level).Int64("from", off).Int64("to", low).Msg("schedule progress below the retained minimum")
		off = low
		s.advance(level, off, time.Time{})
	}
	for off < top {
		msgs, next, err := s.src.ReadLevel(level, off, s.cfg.BatchSize)
		if err != nil {
			return res, err
		}
		due := len(msgs)
		for i, m := range msgs {
			if at := DueTime(m); at.After(now) {
				due, res.NextDue = i, at
				break
			}
		}
		if due > 0 {
			out := make([]*message.Message, 0, due)
			for _, m := range msgs[:due] {
				r := Restore(m)
				if m.QueueOffset < s.verifyBelow[level-1] {
					done, err := s.src.Delivered(r.Topic, r.Property(message.PropertyUniqKey))
					if err != nil {
						return res, err
					}
					if done {
						continue // delivered before the restart
					}
				}
				out = append(out, r)
			}
			if len(out) > 0 {
				if err := s.sink.Deliver(out); err != nil {
					return res, fmt.Errorf("deliver %d messages of level %d: %w", len(out), level, err)
				}
			}
			if s.cfg.OnDeliver != nil {
				delivered := s.cfg.Clock.Now()
				for _, m := range msgs[:due] {
					s.cfg.OnDeliver(level, delivered.Sub(DueTime(m)))
				}
			}
			res.Delivered += due
		}
		if due < len(msgs) {
			off = msgs[due].QueueOffset
			s.advance(level, off, res.NextDue)
			return res, nil
		}
		if next <= off {
			break
		}
		off = next
		s.advance(level, off, time.Time{})
		_, top = s.src.LevelRange(level)
	}
	return res, nil
}

func (s *Scheduler) advance(level int, off int64, nextDue time.Time) {
	s.mu.Lock()
	if s.offsets[level-1] != off {
		s.offsets[level-1] = off
		s.dirty = true
	}
	s.nextDue[level-1] = nextDue
	s.mu.Unlock()
}

func (s *Scheduler) save() error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	offsets := append([]int64(nil), s.offsets...)
	s.dirty = false
	s.mu.Unlock()
	if err := saveProgress(s.cfg.FS, s.cfg.ProgressPath, offsets); err != nil {
		s.mu.Lock()
		s.dirty = true
		s.mu.Unlock()
		return err
	}
	return nil
}

// Status reports every level's position.
func (s *Scheduler) Status() []LevelStatus {
	out := make([]LevelStatus, len(s.cfg.Levels))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range s.cfg.Levels {
		_, top := s.src.LevelRange(i + 1)
		out[i] = LevelStatus{Level: i + 1, Delay: d, Offset: s.offsets[i], MaxOffset: top, Backlog: max(0, top-s.offsets[i]), NextDue: s.nextDue[i]}
	}
	return out
}

// DueTime is when a schedule message is due (zero if it carries no time:
// deliver at once).
func DueTime(m *message.Message) time.Time {
	ms, err := strconv.ParseInt(m.Property(message.PropertyDeliverTimeMs), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// UniqKey identifies the delivery of one schedule entry: "sched:<queue>:<offset>"
// of the entry in SCHEDULE_TOPIC_XXXX. The delivered message carries it as
// UNIQ_KEY, which the store indexes, so a delivery repeated after a crash
// can be recognised.
func UniqKey(scheduled *message.Message) string {
	return "sched:" + strconv.Itoa(int(scheduled.QueueID)) + ":" + strconv.FormatInt(scheduled.QueueOffset, 10)
}

// Restore turns a schedule message back into its real message: topic and
// queue from REAL_TOPIC / REAL_QID, the delay properties cleared, and
// UNIQ_KEY set to the entry's identity (UniqKey).
func Restore(m *message.Message) *message.Message {
	out := &message.Message{
		Topic:          m.Property(message.PropertyRealTopic),
		Flag:           m.Flag,
		SysFlag:        m.SysFlag,
		BornTimestamp:  m.BornTimestamp,
		BornHost:       m.BornHost,
		ReconsumeTimes: m.ReconsumeTimes,
		Body:           m.Body,
	}
	if qid, err := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32); err == nil {
		out.QueueID = int32(qid)
	}
	for k, v := range m.Properties {
		switch k {
		case message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyDelayLevel, message.PropertyDeliverTimeMs:
			continue
		}
		out.SetProperty(k, v)
	}
	out.SetProperty(message.PropertyUniqKey, UniqKey(m))
	return out
}
