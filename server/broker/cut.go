package broker

import (
	"context"
	"encoding/json"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Retention is decided by the leader and applied by every replica: before
// the leader's store deletes the segments below a cut (after the carries of
// what must outlive them), the broker appends a cut record, and every
// follower deletes the same segments when it applies that record
// (Store.ApplyRetentionCut). A follower's store runs no retention of its
// own (its policy is set when it takes over), so its segments are the
// leader's.

// cutTopic carries retention cuts.
const cutTopic = systemPrefix + "CUT"

// cutRecord is the body of a cut record (JSON): the CommitLog offset below
// which segments were deleted, why, and when (unix ms).
type cutRecord struct {
	Cut    int64  `json:"cut"`
	Reason string `json:"reason"`
	At     int64  `json:"at"`
}

// recordCut appends the cut record, through the flush, before the
// leader's store deletes below cut.
func (b *Broker) recordCut(cut int64, reason storage.DeleteReason) error {
	body, err := json.Marshal(cutRecord{Cut: cut, Reason: string(reason), At: b.clock.Now().UnixMilli()})
	if err != nil {
		return err
	}
	m := &message.Message{Topic: cutTopic, Body: body, BornTimestamp: b.clock.Now().UnixMilli()}
	if err := b.store.PutClass(storage.ClassSystem, []*message.Message{m}, make([]storage.PutResult, 1)); err != nil {
		return mapStoreErr(err)
	}
	return nil
}

// applyCuts applies the cut records from the queue offset next on (at
// open and while following) and returns the next one to apply.
func (b *Broker) applyCuts(ctx context.Context, next int64) (int64, error) {
	var firstErr error
	next, err := b.replayQueue(ctx, cutTopic, next, func(m *message.Message) {
		var rec cutRecord
		if err := json.Unmarshal(m.Body, &rec); err != nil {
			b.log.Error().Err(err).Int64("queueOffset", m.QueueOffset).Msg("skipping an undecodable retention cut")
			return
		}
		if _, err := b.store.ApplyRetentionCut(rec.Cut); err != nil && firstErr == nil {
			firstErr = err
		}
	})
	if err == nil {
		err = firstErr
	}
	return next, mapStoreErr(err)
}
