package dlq

import (
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Dead letters outlive CommitLog retention: before retention deletes a
// segment, every dead letter still Dead in it is re-appended to its
// dead-letter topic (Carry). The copy keeps the letter's identity (PropID,
// and for lookups UNIQ_KEY Key) and its original death time (PropDeadAt),
// so a dead letter's id, listing and history do not change when it moves.

// Carry runs before retention deletes the CommitLog below cut: every dead
// letter still Dead there is re-appended to its topic, keeping its
// identity (DLQ_ID), death time and history (MarkCarried); from then on a
// listing and a lookup skip what lies below cut. Store errors of the
// reads are returned as they are, those of the writes as the broker's.
func (s *Service) Carry(cut int64) error {
	st := s.cfg.Store
	carried := 0
	for _, topic := range st.Topics() {
		group, ok := GroupOf(topic)
		if !ok {
			continue
		}
		var copies []*message.Message
		for from, top := st.MinOffset(topic, 0), st.MaxOffset(topic, 0); from < top; {
			res, err := st.ReadQueue(topic, 0, from, 256, nil)
			if err != nil {
				return err
			}
			done := res.Next == from
			for _, m := range res.Messages {
				if m.PhysicalOffset >= cut {
					done = true
					break
				}
				if s.table.Status(group, StableID(m)) != Dead {
					continue
				}
				c := s.cfg.Copy(m, topic)
				MarkCarried(c, m)
				copies = append(copies, c)
				s.cfg.NoteCarried(m)
			}
			if done {
				break
			}
			from = res.Next
		}
		for start := 0; start < len(copies); start += ResendChunk {
			chunk := copies[start:min(start+ResendChunk, len(copies))]
			if err := st.PutClass(storage.ClassReclaim, chunk, make([]storage.PutResult, len(chunk))); err != nil {
				return s.cfg.StoreError(err)
			}
		}
		carried += len(copies)
	}
	if old := s.carriedBelow.Load(); cut > old {
		s.carriedBelow.Store(cut)
	}
	if carried > 0 {
		s.cfg.Log.Info().Int("deadLetters", carried).Int64("below", cut).Msg("dead letters carried past retention")
	}
	return nil
}
