package timer

import (
	"math"

	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage/message"
)

// State is what the Service keeps of the timers beside the index (which
// holds the pending records): the records written before the index
// existed, by timer id; the earliest due time born since the delivery
// loop last looked; and the records being delivered. It has no lock: the
// Service's timer lock guards it with the index.
type State struct {
	// legacy maps a timer id to its latest record among those written
	// before the index existed (no PropPrev): only such records add to
	// it.
	legacy map[string]legacyRecord
	// bornDue is the earliest due time (unix ms) of the records born
	// since TakeBornDue (math.MaxInt64: none).
	bornDue int64
	// inFlight holds the seqs of the records being delivered: false while
	// the batch is written, true once it is stored and until the index
	// has seen its status.
	inFlight map[int64]bool
	// unsure holds the seqs whose delivery failed with an unknown outcome.
	unsure map[int64]struct{}
}

type legacyRecord struct {
	seq   int64
	topic string
}

// NewState is the State of a broker that has read no record.
func NewState() *State {
	return &State{legacy: make(map[string]legacyRecord), bornDue: math.MaxInt64,
		inFlight: make(map[int64]bool), unsure: make(map[int64]struct{})}
}

// Older finds the records of timer id in the store beyond the State: its
// newest copy (by Key) and its first record (which the id names), each
// as the Kill that ends it; none when id is not a message id. Applying a
// record written before the index calls it.
type Older func(id string) []timerindex.Kill

// ApplyTimer adds timer record m, read from Topic at m.QueueOffset, to u:
// its birth, and the kill of the record it supersedes (PropPrev). A copy
// written before the index existed (PropID without PropPrev) kills every
// earlier record of its timer instead — the one the State remembers and
// those older finds — and is remembered in their place.
func (s *State) ApplyTimer(u *timerindex.Update, m *message.Message, older Older) {
	topic := m.Property(message.PropertyRealTopic)
	due := DueMs(m)
	u.Births = append(u.Births, timerindex.Entry{Due: due, ID: IDOffset(m), Seq: m.QueueOffset, Topic: topic})
	s.bornDue = min(s.bornDue, due)
	if prev, ok := Prev(m); ok {
		u.Kills = append(u.Kills, timerindex.Kill{Seq: prev, Topic: topic})
		return
	}
	if id := m.Property(PropID); id != "" {
		s.killLegacy(u, id, m.QueueOffset, older)
		s.legacy[id] = legacyRecord{seq: m.QueueOffset, topic: topic}
	}
}

// ApplyStatuses adds the kills of a status record's entries to u: the
// record each names (Seq), or, for an entry written before the index
// (no Seq), every record of its timer.
func (s *State) ApplyStatuses(u *timerindex.Update, recs []StatusRecord, older Older) {
	for _, r := range recs {
		if r.Seq != nil {
			u.Kills = append(u.Kills, timerindex.Kill{Seq: *r.Seq, Topic: r.Topic})
			continue
		}
		s.killLegacy(u, r.ID, -1, older)
	}
}

// killLegacy kills the records of timer id below seq before (-1: all).
func (s *State) killLegacy(u *timerindex.Update, id string, before int64, older Older) {
	below := func(seq int64) bool { return before < 0 || seq < before }
	if l, ok := s.legacy[id]; ok && below(l.seq) {
		u.Kills = append(u.Kills, timerindex.Kill{Seq: l.seq, Topic: l.topic})
	}
	for _, k := range older(id) {
		if below(k.Seq) {
			u.Kills = append(u.Kills, k)
		}
	}
}

// Legacy lists the records remembered by ApplyTimer (written before the
// index existed), one per timer.
func (s *State) Legacy() []int64 {
	seqs := make([]int64, 0, len(s.legacy))
	for _, l := range s.legacy {
		seqs = append(seqs, l.seq)
	}
	return seqs
}

// ForgetLegacy forgets them (once each is superseded by a copy of
// today's form).
func (s *State) ForgetLegacy() { clear(s.legacy) }

// TakeBornDue returns the earliest due time (unix ms) of the records
// applied since it was last called (ok false: none) and starts over.
func (s *State) TakeBornDue() (due int64, ok bool) {
	due, s.bornDue = s.bornDue, math.MaxInt64
	return due, due != math.MaxInt64
}

// Busy reports whether record seq is being delivered.
func (s *State) Busy(seq int64) bool {
	_, ok := s.inFlight[seq]
	return ok
}

// Unsure reports whether an earlier delivery of record seq failed with an
// unknown outcome (its destination is searched before it is delivered
// again).
func (s *State) Unsure(seq int64) bool {
	_, ok := s.unsure[seq]
	return ok
}

// Deliver puts record seq in flight: its delivery is being written.
func (s *State) Deliver(seq int64) { s.inFlight[seq] = false }

// Delivered ends the write of record seq's delivery: a record no longer
// live (its status applied) leaves the flight; one whose batch was stored
// stays in flight until the index sees its status; one whose write
// failed leaves it, unsure.
func (s *State) Delivered(seq int64, live, stored bool) {
	switch {
	case !live:
		delete(s.inFlight, seq)
		delete(s.unsure, seq)
	case stored:
		s.inFlight[seq] = true
	default:
		delete(s.inFlight, seq)
		s.unsure[seq] = struct{}{}
	}
}

// Landed ends the flight of every stored delivery whose record is no
// longer live (the index has seen its status).
func (s *State) Landed(live func(seq int64) bool) {
	for seq, stored := range s.inFlight {
		if stored && !live(seq) {
			delete(s.inFlight, seq)
		}
	}
}
