package trace

import (
	"errors"
	"strings"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Retention's carry of traces: a dead letter or a retry on a timer that
// retention carries forward outlives its segment, and so does its life's
// trace (query.go).

// NoteCarried is told of a copy retention is about to carry forward (a
// dead letter, a retry waiting on a timer): its life's events are carried
// with it (Carry).
func (t *Tracer) NoteCarried(m *message.Message) {
	origin := m.Property(message.PropertyOriginMessageID)
	if origin == "" {
		return // a delayed send not yet delivered: its copy holds its whole trace
	}
	t.mu.Lock()
	t.carried = append(t.carried, origin)
	t.mu.Unlock()
}

// NoteLivesBelow notes the lives whose carried events (records on
// LifeQueue) lie below cut, the records retention is about to
// delete: a life that still has a copy at or past cut — a dead letter
// resent after its carry, a retry whose timer fired after its carry —
// has its events carried once more (Carry), so its trace outlives
// the records it was carried in, as long as any copy of it lives.
func (t *Tracer) NoteLivesBelow(cut int64) error {
	if t.off {
		return nil
	}
	var lives []string
	for from, top := t.store.MinOffset(Topic, LifeQueue), t.store.MaxOffset(Topic, LifeQueue); from < top; {
		res, err := t.store.ReadQueue(Topic, LifeQueue, from, 256, nil)
		if err != nil {
			return t.broker.StoreErr(err)
		}
		done := res.Next == from
		for _, m := range res.Messages {
			if m.PhysicalOffset >= cut {
				done = true
				break
			}
			for _, k := range m.Keys() {
				if origin, ok := strings.CutPrefix(k, LifePrefix); ok {
					lives = append(lives, origin)
				}
			}
		}
		if done {
			break
		}
		from = res.Next
	}
	t.mu.Lock()
	t.surviving = append(t.surviving, lives...)
	t.mu.Unlock()
	return nil
}

// Carry runs before retention deletes the CommitLog below cut,
// after the copies were carried: it appends one record holding all of a
// life's events under the life's key, on LifeQueue, for every life
// noted by NoteCarried, and for every life noted by NoteLivesBelow that
// has a copy at or past cut — so the trace of a message that outlives its
// segment outlives it too.
func (t *Tracer) Carry(cut int64) error {
	t.mu.Lock()
	lives, surviving := t.carried, t.surviving
	t.carried, t.surviving = nil, nil
	t.mu.Unlock()
	carried := len(lives)
	lives = append(lives, surviving...)
	done := map[string]bool{}
	var msgs []*message.Message
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		err := t.store.PutClass(storage.ClassReclaim, msgs, make([]storage.PutResult, len(msgs)))
		msgs = msgs[:0]
		return t.broker.StoreErr(err)
	}
	now := t.clock.Now().UnixMilli()
	for i, origin := range lives {
		if done[origin] {
			continue
		}
		done[origin] = true
		oid, err := message.ParseID(origin)
		if err != nil {
			continue
		}
		m, err := t.target(oid)
		// No message, or the store's not-found as the broker reports it
		// (the broker's ErrMessageNotFound, as before the move).
		if errors.Is(err, ErrNoMessage) || errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		life, err := t.life(m)
		if err != nil {
			return err
		}
		if i >= carried && !life.outlives(cut) {
			continue // nothing of it is left past cut: its trace ends with it
		}
		items, _, err := t.lifeItems(life)
		if err != nil {
			return err
		}
		if len(items) > 2*MaxEvents {
			items = append(items[:MaxEvents], items[len(items)-MaxEvents:]...)
		}
		for i := range items {
			items[i].Copy = -1 // the copies they name may be gone; their ids stay
			items[i].Text = traceText(items[i].Text)
		}
		msgs = append(msgs, traceMessages(items, -1, -1, -1, -1, LifeKey(life.origin), now)...)
		if len(msgs) >= 64 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if len(done) > 0 {
		t.log.Info().Int("lives", len(done)).Msg("message traces carried past retention")
	}
	return nil
}
