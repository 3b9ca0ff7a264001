package retention

import (
	"context"
	"encoding/json"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Topic carries retention cuts (rmq_sys_CUT), queue 0.
const Topic = "rmq_sys_CUT"

// Record is the body of a cut record (JSON): the CommitLog offset below
// which segments were deleted, why (storage's DeleteReason), and when
// (unix ms).
type Record struct {
	Cut    int64  `json:"cut"`
	Reason string `json:"reason"`
	At     int64  `json:"at"`
}

// Decode reads a cut record's body.
func Decode(body []byte) (Record, error) {
	var rec Record
	err := json.Unmarshal(body, &rec)
	return rec, err
}

// recordCut appends the cut record, through the flush, before the
// leader's store deletes below cut.
func (s *Service) recordCut(cut int64, reason storage.DeleteReason) error {
	body, err := json.Marshal(Record{Cut: cut, Reason: string(reason), At: s.cfg.Now().UnixMilli()})
	if err != nil {
		return err
	}
	m := &message.Message{Topic: Topic, Body: body, BornTimestamp: s.cfg.Now().UnixMilli()}
	if err := s.cfg.Store.PutClass(storage.ClassSystem, []*message.Message{m}, make([]storage.PutResult, 1)); err != nil {
		return s.cfg.StoreError(err)
	}
	return nil
}

// Apply applies the cut records from queue offset next on (at open and
// while following): the store deletes the segments below each cut. A
// record that does not decode is logged and skipped. It returns the next
// queue offset to apply.
func (s *Service) Apply(ctx context.Context, next int64) (int64, error) {
	var firstErr error
	next, err := storage.Replay(ctx, s.cfg.Store, Topic, next, func(m *message.Message) {
		rec, err := Decode(m.Body)
		if err != nil {
			s.cfg.Log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping an undecodable retention cut")
			return
		}
		if _, err := s.cfg.Store.ApplyRetentionCut(rec.Cut); err != nil && firstErr == nil {
			firstErr = err
		}
	})
	if err == nil {
		err = firstErr
	}
	return next, s.cfg.StoreError(err)
}
