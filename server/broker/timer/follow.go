package timer

import (
	"context"
	"errors"
	"fmt"

	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The timer index follows two queues (package timerindex): every record
// of rmq_sys_TIMER/0 is a birth (its seq, due time and destination), and
// a record that supersedes another (TIMER_PREV) also kills that one;
// every entry of a rmq_sys_TIMER_STATUS record kills the record it
// settles. Records written before the index existed name timers by id
// only (a copy with TIMER_ID but no TIMER_PREV, a status without seq):
// they kill every earlier record of the timer, found by its newest copy,
// its first record and the legacy records the State remembers. The State
// turns each record into births and kills (ApplyTimer, ApplyStatuses);
// follow reads the queues and applies the result to the index.

// Follow applies the timer and status records dispatched since the
// index's position, under the timer lock (a follower's catch-up).
func (s *Service) Follow() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.follow()
}

// follow applies the timer and status records dispatched since the
// index's position; the caller holds the timer lock.
func (s *Service) follow() error {
	return s.followThen(nil)
}

// followThen is follow calling step after every applied batch (a rebuild
// checkpoints there when the buffer is full).
func (s *Service) followThen(step func() error) error {
	x := s.index
	st := s.cfg.Store
	// Read the status queue's end first: every record a status before it
	// settles is then below the timer queue's end, and born before it is
	// killed.
	statusEnd := st.MaxOffset(StatusTopic, 0)
	timerEnd := st.MaxOffset(Topic, 0)
	floor := st.MinOffset(Topic, 0)
	pos := x.Position()
	n, err := s.followQueue(Topic, &pos.Timers, &pos.TimerMark, timerEnd, func(u *timerindex.Update, m *message.Message) {
		s.birth(u, m)
	}, func(u timerindex.Update) error {
		u.Pos, u.Floor = pos, floor
		s.apply(u)
		return runStep(step)
	})
	s.followed.births += n
	if err != nil {
		return err
	}
	n, err = s.followQueue(StatusTopic, &pos.Statuses, &pos.StatusMark, statusEnd, func(u *timerindex.Update, m *message.Message) {
		s.kills(u, m)
	}, func(u timerindex.Update) error {
		u.Pos, u.Floor = pos, floor
		s.apply(u)
		return runStep(step)
	})
	s.followed.statuses += n
	if err != nil {
		return err
	}
	if pos != x.Position() || floor > s.floor {
		s.apply(timerindex.Update{Pos: pos, Floor: floor})
	}
	s.floor = max(s.floor, floor)
	s.state.Landed(x.Live) // their statuses are in the index
	return nil
}

func runStep(step func() error) error {
	if step == nil {
		return nil
	}
	return step()
}

// followQueue reads queue 0 of topic from *next to end, calling read for
// each record and apply after each batch with the update read so far;
// *next and *mark advance as it goes. It returns how many records it read.
func (s *Service) followQueue(topic string, next *int64, mark *timerindex.Mark, end int64,
	read func(*timerindex.Update, *message.Message), apply func(timerindex.Update) error) (int64, error) {
	var n int64
	for *next < end {
		res, err := s.cfg.Store.ReadQueue(topic, 0, *next, followBatch, nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			*next = s.cfg.Store.MinOffset(topic, 0) // deleted by retention meanwhile
			continue
		}
		if err != nil {
			return n, fmt.Errorf("follow %s at %d: %w", topic, *next, err)
		}
		if res.Next == *next {
			break
		}
		var u timerindex.Update
		for _, m := range res.Messages {
			read(&u, m)
			*mark = timerindex.Mark{Seq: m.QueueOffset, Phys: m.PhysicalOffset}
		}
		n += int64(len(res.Messages))
		*next = res.Next
		if err := apply(u); err != nil {
			return n, err
		}
	}
	return n, nil
}

func (s *Service) apply(u timerindex.Update) {
	if lost := s.index.Apply(u); lost > 0 {
		s.cfg.Log.Error().Int64("timers", lost).Int64("below", u.Floor).
			Msg("pending timer records deleted by retention; they cannot be delivered")
	}
}

// Birth adds what applying timer record m makes to u, as following does
// (State.ApplyTimer), under the timer lock; it does not apply u.
func (s *Service) Birth(u *timerindex.Update, m *message.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.birth(u, m)
}

// Kills adds what applying status record m makes to u, as following does
// (State.ApplyStatuses), under the timer lock; it does not apply u.
func (s *Service) Kills(u *timerindex.Update, m *message.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kills(u, m)
}

// birth adds timer record m to u (State.ApplyTimer).
func (s *Service) birth(u *timerindex.Update, m *message.Message) {
	s.state.ApplyTimer(u, m, s.olderRecords)
}

// kills adds the kills of status record m to u (State.ApplyStatuses); an
// undecodable record is skipped.
func (s *Service) kills(u *timerindex.Update, m *message.Message) {
	recs, err := DecodeStatuses(m.Body)
	if err != nil {
		s.cfg.Log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping undecodable timer status record")
		return
	}
	s.state.ApplyStatuses(u, recs, s.olderRecords)
}

// olderRecords finds the records of timer id in the store (an Older):
// its newest copy by UNIQ_KEY and its first record.
func (s *Service) olderRecords(id string) []timerindex.Kill {
	mid, err := message.ParseID(id)
	if err != nil {
		return nil
	}
	var kills []timerindex.Kill
	if c, err := s.cfg.Store.FindByUniqKey(Topic, Key(id)); err == nil {
		kills = append(kills, timerindex.Kill{Seq: c.QueueOffset, Topic: c.Property(message.PropertyRealTopic)})
	}
	if first, err := s.cfg.Store.LookupID(mid); err == nil && first.Topic == Topic && ID(first) == id {
		kills = append(kills, timerindex.Kill{Seq: first.QueueOffset, Topic: first.Property(message.PropertyRealTopic)})
	}
	return kills
}

// Open opens the timer index and catches it up with its queues, or
// rebuilds it from them when it is missing, damaged or does not match
// them.
func (s *Service) Open(ctx context.Context) error {
	start := s.cfg.Clock.Now()
	st := s.cfg.Store
	s.startOffset = st.WriteOffset()
	opts := s.cfg.Index
	x, err := timerindex.Open(opts)
	if err == nil {
		if err = s.indexMatches(x.Position()); err != nil {
			_ = x.Close()
		}
	}
	s.recovered = Recovery{}
	if err != nil {
		s.recovered.Rebuilt, s.recovered.Reason = true, err.Error()
		if errors.Is(err, timerindex.ErrNotFound) {
			s.cfg.Log.Info().Msg("building the timer index from the timer queues")
		} else {
			s.cfg.Log.Warn().Err(err).Msg("timer index unusable; rebuilding it from the timer queues")
		}
		x, err = timerindex.Create(opts, timerindex.Position{
			Timers: st.MinOffset(Topic, 0), Statuses: st.MinOffset(StatusTopic, 0),
			TimerMark: timerindex.NoMark, StatusMark: timerindex.NoMark})
		if err != nil {
			return fmt.Errorf("create the timer index: %w", err)
		}
	}
	s.index = x
	s.mu.Lock()
	before := s.followed
	err = s.followThen(func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-x.Full(): // a long catch-up: write the buffer out as it fills
			return s.maintain()
		default:
			return nil
		}
	})
	s.recovered.Births, s.recovered.Statuses = s.followed.births-before.births, s.followed.statuses-before.statuses
	if err == nil {
		err = s.migrateLegacy()
	}
	s.mu.Unlock()
	if err == nil && s.recovered.Rebuilt {
		err = s.maintain()
	}
	if err != nil {
		_ = x.Close()
		return fmt.Errorf("recover timers: %w", err)
	}
	s.recovered.Took = s.cfg.Clock.Since(start)
	stats := x.Stats()
	s.cfg.Log.Info().Bool("rebuilt", s.recovered.Rebuilt).Int64("pending", stats.Pending).Int("runs", stats.Runs).
		Int64("timerRecords", s.recovered.Births).Int64("statusRecords", s.recovered.Statuses).
		Dur("took", s.recovered.Took).Msg("timers recovered")
	return nil
}

// migrateLegacy supersedes every pending copy written before the index
// existed (found only through the records the State remembers, Legacy)
// by a copy of today's form, which its id finds (UNIQ_KEY), then forgets
// them. The caller holds the timer lock.
func (s *Service) migrateLegacy() error {
	var copies []*message.Message
	for _, seq := range s.state.Legacy() {
		if !s.index.Live(seq) {
			continue
		}
		m, err := storage.RecordAt(s.cfg.Store, Topic, seq)
		if err != nil {
			return fmt.Errorf("migrate timer record %d: %w", seq, err)
		}
		copies = append(copies, timerCopy(m, Due(m)))
	}
	for len(copies) > 0 {
		n := min(len(copies), batch)
		if err := s.cfg.Store.PutClass(storage.ClassSystem, copies[:n], make([]storage.PutResult, n)); err != nil {
			return fmt.Errorf("migrate timer records: %w", err)
		}
		copies = copies[n:]
		if err := s.settleOwnWrite(); err != nil {
			return err
		}
	}
	s.state.ForgetLegacy()
	return nil
}

// indexMatches checks a checkpointed position against the queues: it may
// not lie beyond their ends, and its marks must name the records there
// (an async-mode power loss can take back records the index saw).
func (s *Service) indexMatches(pos timerindex.Position) error {
	for _, q := range []struct {
		topic string
		next  int64
		mark  timerindex.Mark
	}{{Topic, pos.Timers, pos.TimerMark}, {StatusTopic, pos.Statuses, pos.StatusMark}} {
		if end := s.cfg.Store.MaxOffset(q.topic, 0); q.next > end {
			return fmt.Errorf("the timer index has applied %s up to %d, beyond its end %d", q.topic, q.next, end)
		}
		if q.mark.Seq < 0 || q.mark.Seq < s.cfg.Store.MinOffset(q.topic, 0) {
			continue
		}
		if q.mark.Seq >= q.next {
			return fmt.Errorf("the timer index's mark %d of %s is not below its position %d", q.mark.Seq, q.topic, q.next)
		}
		m, err := storage.RecordAt(s.cfg.Store, q.topic, q.mark.Seq)
		if storage.IsGone(err) {
			continue // retention took it
		}
		if err != nil {
			return err
		}
		if m.PhysicalOffset != q.mark.Phys {
			return fmt.Errorf("the timer index saw %s offset %d at CommitLog offset %d, the queue holds %d", q.topic, q.mark.Seq, q.mark.Phys, m.PhysicalOffset)
		}
	}
	return nil
}

// maintain checkpoints the index and merges its runs.
func (s *Service) maintain() error {
	x := s.index
	if err := x.Checkpoint(); err != nil {
		return err
	}
	for {
		merged, err := x.Compact()
		if err != nil || !merged {
			return err
		}
	}
}

// IndexLoop checkpoints the index every Config.CheckpointEvery and when
// its buffer fills, until ctx (the broker's closing) ends. It runs on an
// internal/worker.Service on every replica; maintain is its pass.
func (s *Service) IndexLoop(ctx context.Context) {
	tick := s.cfg.Clock.NewTicker(s.cfg.CheckpointEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		case <-s.index.Full():
		}
		if err := s.maintain(); err != nil {
			s.cfg.Log.Error().Err(err).Msg("timer index checkpoint failed")
		}
	}
}

// Close catches the index up, checkpoints it and closes it (the loops
// have stopped; the store is still open).
func (s *Service) Close() error {
	x := s.index
	if x == nil {
		return nil
	}
	err := s.lock(context.Background()) // the store is still open: what was sent is dispatched
	if err == nil {
		s.mu.Unlock()
	}
	return errors.Join(err, x.Checkpoint(), x.Close())
}

// Abandon closes the index as it is, without catching it up or
// checkpointing it (an open of the broker that fails after Open).
func (s *Service) Abandon() {
	if s.index != nil {
		_ = s.index.Close()
	}
}
