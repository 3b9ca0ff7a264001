package txn

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Following the two queues into the State: Follow applies what the store
// dispatched since the State's position, so every writer stores its
// records first and then follows (settle); nothing is changed in memory
// that is not in the log. Open starts from the snapshot file, or from the
// queues' beginning when it is missing or does not match them.

// Follow applies the half and op records dispatched since the position;
// the caller holds the state's lock.
func (s *Service) Follow() error {
	// The op queue's end first: every half record an op before it names
	// is then below the half queue's end.
	opEnd := s.cfg.Store.MaxOffset(OpTopic, 0)
	halfEnd := s.cfg.Store.MaxOffset(HalfTopic, 0)
	n, err := s.followQueue(HalfQueue, halfEnd, s.applyHalf)
	s.followed.half += n
	if err != nil {
		return err
	}
	n, err = s.followQueue(OpQueue, opEnd, s.applyOp)
	s.followed.op += n
	return err
}

// followQueue reads queue 0 of q's topic from the state's position to
// end, applying each record; it returns how many it read.
func (s *Service) followQueue(q Queue, end int64, apply func(*message.Message)) (int64, error) {
	store := s.cfg.Store
	topic, next, mark := HalfTopic, s.Position().Half, s.Position().HalfMark
	if q == OpQueue {
		topic, next, mark = OpTopic, s.Position().Op, s.Position().OpMark
	}
	var n int64
	for next < end {
		res, err := store.ReadQueue(topic, 0, next, followBatch, nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			if low := store.MinOffset(topic, 0); low > next {
				next = low // deleted by retention meanwhile (kept from the snapshot's position on)
				s.Followed(q, next, mark)
				continue
			}
		}
		if err != nil {
			return n, fmt.Errorf("follow %s at %d: %w", topic, next, err)
		}
		if res.Next == next {
			break
		}
		for _, m := range res.Messages {
			apply(m)
			mark = Mark{Seq: m.QueueOffset, Phys: m.PhysicalOffset}
		}
		n += int64(len(res.Messages))
		next = res.Next
		s.Followed(q, next, mark)
	}
	return n, nil
}

// applyHalf applies a half record: a new transaction, or a copy of a
// pending one (carried past retention).
func (s *Service) applyHalf(m *message.Message) {
	if err := s.ApplyHalf(ReadHalf(m)); err != nil {
		s.cfg.Log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping a half message with a bad transaction id")
	}
}

// applyOp applies an op record to its transaction (when pending).
func (s *Service) applyOp(m *message.Message) {
	rec, err := DecodeOp(m.Body)
	if err != nil {
		s.cfg.Log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping an undecodable transaction op record")
		return
	}
	s.ApplyOp(rec)
}

// snapshotMatches checks a snapshot's position against the queues: not
// beyond their ends, and its marks naming the records there (an
// async-mode power loss can take back records the snapshot saw).
func (s *Service) snapshotMatches(p Position) error {
	store := s.cfg.Store
	for _, q := range []struct {
		topic string
		next  int64
		mark  Mark
	}{{HalfTopic, p.Half, p.HalfMark}, {OpTopic, p.Op, p.OpMark}} {
		if end := store.MaxOffset(q.topic, 0); q.next > end {
			return fmt.Errorf("the transaction snapshot covers %s up to %d, beyond its end %d", q.topic, q.next, end)
		}
		if q.mark.Seq < 0 || q.mark.Seq < store.MinOffset(q.topic, 0) {
			continue
		}
		m, err := storage.RecordAt(store, q.topic, q.mark.Seq)
		if storage.IsGone(err) {
			continue
		}
		if err != nil {
			return err
		}
		if m.PhysicalOffset != q.mark.Phys {
			return fmt.Errorf("the transaction snapshot saw %s offset %d at CommitLog offset %d, the queue holds %d", q.topic, q.mark.Seq, q.mark.Phys, m.PhysicalOffset)
		}
	}
	return nil
}

// Open loads the snapshot (or starts from the queues' beginning) and
// catches the state up with the queues.
func (s *Service) Open(ctx context.Context) error {
	store := s.cfg.Store
	start := s.cfg.Clock.Now()
	s.startOffset = store.WriteOffset()
	rec := Recovery{}
	var snap Snapshot
	data, err := store.ReadMeta(SnapshotFile)
	if err == nil {
		if snap, err = DecodeSnapshot(data, s.cfg.Names); err == nil {
			err = s.snapshotMatches(snap.Pos)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", SnapshotFile, err)
	}
	s.Lock()
	defer s.Unlock()
	if err != nil {
		rec.Rebuilt, rec.Reason = true, err.Error()
		if !errors.Is(err, os.ErrNotExist) {
			s.cfg.Log.Warn().Err(err).Msg("transaction snapshot unusable; rebuilding the unresolved transactions from their queues")
		}
		s.SetPosition(Position{Half: store.MinOffset(HalfTopic, 0), HalfMark: NoMark, Op: store.MinOffset(OpTopic, 0), OpMark: NoMark})
	} else {
		s.Install(snap)
	}
	pos := s.Position()
	s.snapshotted = pos
	s.snapHalf.Store(pos.Half)
	s.snapOp.Store(pos.Op)
	before := s.followed
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.Follow(); err != nil {
		return fmt.Errorf("recover transactions: %w", err)
	}
	rec.HalfRecords, rec.OpRecords = s.followed.half-before.half, s.followed.op-before.op
	rec.Pending, rec.Took = s.Len(), s.cfg.Clock.Since(start)
	s.recovered = rec
	s.cfg.Log.Info().Bool("rebuilt", rec.Rebuilt).Int("pending", rec.Pending).Int64("halfRecords", rec.HalfRecords).
		Int64("opRecords", rec.OpRecords).Dur("took", rec.Took).Msg("transactions recovered")
	return nil
}

// WriteSnapshot writes the snapshot when the position moved since the
// last.
func (s *Service) WriteSnapshot() error {
	s.Lock()
	if err := s.Follow(); err != nil {
		s.Unlock()
		return err
	}
	if s.Position() == s.snapshotted {
		s.Unlock()
		return nil
	}
	pos, data := s.Position(), s.EncodeSnapshot()
	s.Unlock()
	if err := s.cfg.Store.WriteMeta(SnapshotFile, data); err != nil {
		return err
	}
	s.Lock()
	s.snapshotted = pos
	s.Unlock()
	s.snapHalf.Store(pos.Half)
	s.snapOp.Store(pos.Op)
	return nil
}
