package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The timer index follows two queues (see timer.go and package
// timerindex): every record of rmq_sys_TIMER/0 is a birth (its seq, due
// time and destination), and a record that supersedes another
// (TIMER_PREV) also kills that one; every entry of a rmq_sys_TIMER_STATUS
// record kills the record it settles. Records written before the index
// existed name timers by id only (a copy with TIMER_ID but no TIMER_PREV,
// a status without seq): they kill every earlier record of the timer,
// found by its newest copy, its first record and the legacy records the
// timer.State remembers. The State turns each record into births and
// kills (ApplyTimer, ApplyStatuses); followTimers reads the queues and
// applies the result to the index.

// timerIndexDir is the index's directory under the data dir.
const timerIndexDir = "timers"

// followBatch is how many queue records one step of followTimers reads.
const followBatch = 256

// timerRecovery describes how the timer index was opened.
type timerRecovery struct {
	Rebuilt  bool          // the index was built from the queues
	Reason   string        // why (empty when it opened)
	Births   int64         // timer records read from the timer queue
	Statuses int64         // status records read
	Took     time.Duration // opening and catching up
}

// followTimers applies the timer and status records dispatched since the
// index's position; the caller holds the timer lock.
func (b *Broker) followTimers() error {
	return b.followTimersThen(nil)
}

// followTimersThen is followTimers calling step after every applied
// batch (a rebuild checkpoints there when the buffer is full).
func (b *Broker) followTimersThen(step func() error) error {
	t := &b.timers
	x := t.index
	// Read the status queue's end first: every record a status before it
	// settles is then below the timer queue's end, and born before it is
	// killed.
	statusEnd := b.store.MaxOffset(timerStatusTopic, 0)
	timerEnd := b.store.MaxOffset(timerTopic, 0)
	floor := b.store.MinOffset(timerTopic, 0)
	pos := x.Position()
	n, err := b.followQueue(timerTopic, &pos.Timers, &pos.TimerMark, timerEnd, func(u *timerindex.Update, m *message.Message) {
		b.timerBirth(u, m)
	}, func(u timerindex.Update) error {
		u.Pos, u.Floor = pos, floor
		b.applyTimers(u)
		return runStep(step)
	})
	t.followed.births += n
	if err != nil {
		return err
	}
	n, err = b.followQueue(timerStatusTopic, &pos.Statuses, &pos.StatusMark, statusEnd, func(u *timerindex.Update, m *message.Message) {
		b.timerKills(u, m)
	}, func(u timerindex.Update) error {
		u.Pos, u.Floor = pos, floor
		b.applyTimers(u)
		return runStep(step)
	})
	t.followed.statuses += n
	if err != nil {
		return err
	}
	if pos != x.Position() || floor > t.floor {
		b.applyTimers(timerindex.Update{Pos: pos, Floor: floor})
	}
	t.floor = max(t.floor, floor)
	t.state.Landed(x.Live) // their statuses are in the index
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
func (b *Broker) followQueue(topic string, next *int64, mark *timerindex.Mark, end int64,
	read func(*timerindex.Update, *message.Message), apply func(timerindex.Update) error) (int64, error) {
	var n int64
	for *next < end {
		res, err := b.store.ReadQueue(topic, 0, *next, followBatch, nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			*next = b.store.MinOffset(topic, 0) // deleted by retention meanwhile
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

func (b *Broker) applyTimers(u timerindex.Update) {
	if lost := b.timers.index.Apply(u); lost > 0 {
		b.log.Error().Int64("timers", lost).Int64("below", u.Floor).
			Msg("pending timer records deleted by retention; they cannot be delivered")
	}
}

// timerBirth adds timer record m to u (timer.State.ApplyTimer).
func (b *Broker) timerBirth(u *timerindex.Update, m *message.Message) {
	b.timers.state.ApplyTimer(u, m, b.olderTimerRecords)
}

// timerKills adds the kills of status record m to u
// (timer.State.ApplyStatuses); an undecodable record is skipped.
func (b *Broker) timerKills(u *timerindex.Update, m *message.Message) {
	recs, err := timer.DecodeStatuses(m.Body)
	if err != nil {
		b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping undecodable timer status record")
		return
	}
	b.timers.state.ApplyStatuses(u, recs, b.olderTimerRecords)
}

// olderTimerRecords finds the records of timer id in the store (a
// timer.Older): its newest copy by UNIQ_KEY and its first record.
func (b *Broker) olderTimerRecords(id string) []timerindex.Kill {
	mid, err := message.ParseID(id)
	if err != nil {
		return nil
	}
	var kills []timerindex.Kill
	if c, err := b.store.FindByUniqKey(timerTopic, timer.Key(id)); err == nil {
		kills = append(kills, timerindex.Kill{Seq: c.QueueOffset, Topic: c.Property(message.PropertyRealTopic)})
	}
	if first, err := b.store.LookupID(mid); err == nil && first.Topic == timerTopic && timer.ID(first) == id {
		kills = append(kills, timerindex.Kill{Seq: first.QueueOffset, Topic: first.Property(message.PropertyRealTopic)})
	}
	return kills
}

func (b *Broker) timerIndexOptions() timerindex.Options {
	return timerindex.Options{Dir: filepath.Join(b.opts.DataDir, timerIndexDir), BufferEntries: b.opts.TimerIndexBuffer, Logger: b.opts.Logger}
}

// openTimers opens the timer index and catches it up with its queues, or
// rebuilds it from them when it is missing, damaged or does not match
// them.
func (b *Broker) openTimers(ctx context.Context) error {
	start := b.clock.Now()
	t := &b.timers
	t.startOffset = b.store.WriteOffset()
	opts := b.timerIndexOptions()
	x, err := timerindex.Open(opts)
	if err == nil {
		if err = b.timerIndexMatches(x.Position()); err != nil {
			_ = x.Close()
		}
	}
	t.recovered = timerRecovery{}
	if err != nil {
		t.recovered.Rebuilt, t.recovered.Reason = true, err.Error()
		if errors.Is(err, timerindex.ErrNotFound) {
			b.log.Info().Msg("building the timer index from the timer queues")
		} else {
			b.log.Warn().Err(err).Msg("timer index unusable; rebuilding it from the timer queues")
		}
		x, err = timerindex.Create(opts, timerindex.Position{
			Timers: b.store.MinOffset(timerTopic, 0), Statuses: b.store.MinOffset(timerStatusTopic, 0),
			TimerMark: timerindex.NoMark, StatusMark: timerindex.NoMark})
		if err != nil {
			return fmt.Errorf("create the timer index: %w", err)
		}
	}
	t.index = x
	t.mu.Lock()
	before := t.followed
	err = b.followTimersThen(func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-x.Full(): // a long catch-up: write the buffer out as it fills
			return b.maintainTimerIndex()
		default:
			return nil
		}
	})
	t.recovered.Births, t.recovered.Statuses = t.followed.births-before.births, t.followed.statuses-before.statuses
	if err == nil {
		err = b.migrateLegacyTimers()
	}
	t.mu.Unlock()
	if err == nil && t.recovered.Rebuilt {
		err = b.maintainTimerIndex()
	}
	if err != nil {
		_ = x.Close()
		return fmt.Errorf("recover timers: %w", err)
	}
	t.recovered.Took = b.clock.Since(start)
	st := x.Stats()
	b.log.Info().Bool("rebuilt", t.recovered.Rebuilt).Int64("pending", st.Pending).Int("runs", st.Runs).
		Int64("timerRecords", t.recovered.Births).Int64("statusRecords", t.recovered.Statuses).
		Dur("took", t.recovered.Took).Msg("timers recovered")
	return nil
}

// migrateLegacyTimers supersedes every pending copy written before the
// index existed (found only through the records timer.State remembers,
// Legacy) by a copy of today's form, which its id finds (UNIQ_KEY), then
// forgets them. The caller holds the timer lock.
func (b *Broker) migrateLegacyTimers() error {
	t := &b.timers
	var copies []*message.Message
	for _, seq := range t.state.Legacy() {
		if !t.index.Live(seq) {
			continue
		}
		m, err := b.queueRecord(timerTopic, seq)
		if err != nil {
			return fmt.Errorf("migrate timer record %d: %w", seq, err)
		}
		copies = append(copies, timerCopy(m, timer.Due(m)))
	}
	for len(copies) > 0 {
		n := min(len(copies), timerBatch)
		if err := b.store.PutClass(storage.ClassSystem, copies[:n], make([]storage.PutResult, n)); err != nil {
			return fmt.Errorf("migrate timer records: %w", err)
		}
		copies = copies[n:]
		if err := b.settleOwnWrite(); err != nil {
			return err
		}
	}
	t.state.ForgetLegacy()
	return nil
}

// timerIndexMatches checks a checkpointed position against the queues:
// it may not lie beyond their ends, and its marks must name the records
// there (an async-mode power loss can take back records the index saw).
func (b *Broker) timerIndexMatches(pos timerindex.Position) error {
	for _, q := range []struct {
		topic string
		next  int64
		mark  timerindex.Mark
	}{{timerTopic, pos.Timers, pos.TimerMark}, {timerStatusTopic, pos.Statuses, pos.StatusMark}} {
		if end := b.store.MaxOffset(q.topic, 0); q.next > end {
			return fmt.Errorf("the timer index has applied %s up to %d, beyond its end %d", q.topic, q.next, end)
		}
		if q.mark.Seq < 0 || q.mark.Seq < b.store.MinOffset(q.topic, 0) {
			continue
		}
		if q.mark.Seq >= q.next {
			return fmt.Errorf("the timer index's mark %d of %s is not below its position %d", q.mark.Seq, q.topic, q.next)
		}
		m, err := b.queueRecord(q.topic, q.mark.Seq)
		if isGone(err) {
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

// maintainTimerIndex checkpoints the index and merges its runs.
func (b *Broker) maintainTimerIndex() error {
	x := b.timers.index
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

// timerIndexLoop checkpoints the index every SnapshotInterval and when
// its buffer fills, until ctx (the broker's closing) ends. It runs on an
// internal/worker.Service; maintainTimerIndex is its pass.
func (b *Broker) timerIndexLoop(ctx context.Context) {
	tick := b.clock.NewTicker(b.opts.SnapshotInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		case <-b.timers.index.Full():
		}
		if err := b.maintainTimerIndex(); err != nil {
			b.log.Error().Err(err).Msg("timer index checkpoint failed")
		}
	}
}

// closeTimers catches the index up, checkpoints it and closes it (the
// workers have stopped).
func (b *Broker) closeTimers() error {
	x := b.timers.index
	if x == nil {
		return nil
	}
	err := b.lockTimers(context.Background()) // the store is still open: what was sent is dispatched
	if err == nil {
		b.timers.mu.Unlock()
	}
	return errors.Join(err, x.Checkpoint(), x.Close())
}
