package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
)

// Lost ranges: what `mqgate repair` gave up (see doc.go, "Repair"). The
// repair blanks each damaged CommitLog range and records it, with the
// highest queue offset every damaged queue had given out, in
// config/repair.json. The store reads the file at Open and from then on:
//
//   - a ConsumeQueue entry pointing into a lost range is passed over by
//     readers like one whose record retention deleted (ReadResult.Skipped),
//     is never quarantined and never makes its queue look damaged;
//   - a queue offset gap in front of a record, when lost ranges lie between
//     the queue's last entry and the record, is closed with placeholder
//     entries pointing into those ranges — only where a scan of the whole
//     log showed the offsets are not there (a rebuild, or the dispatcher
//     after the rebuild a gap makes it run): a queue's records lie in the
//     log in queue-offset order, so the missing offsets were records there;
//   - a queue whose entries end below its recorded floor is filled with
//     placeholders up to it, so no queue offset is ever given out twice,
//     even when the queue's files are lost and rebuilt later.

// repairFile is the metadata file of the repairs made to the store.
const repairFile = "repair.json"

// LostRange is a CommitLog range a repair gave up.
type LostRange struct {
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Reason string `json:"reason"`
	// InPlace marks one damaged record frame left where it is (its header
	// is intact, the frame after it valid): recovery passes over it.
	InPlace bool `json:"inPlace,omitempty"`
}

// LostQueue is a run of queue offsets of one queue whose records a repair
// gave up: [From, To).
type LostQueue struct {
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	// Range is the index of the LostRange the records were in (in the
	// same repair).
	Range int `json:"range"`
}

// RepairRecord is one applied repair, as config/repair.json keeps it.
type RepairRecord struct {
	At     time.Time   `json:"at"`
	Ranges []LostRange `json:"ranges"`
	Queues []LostQueue `json:"queues"`
	// Floors is the highest queue offset (exclusive) each damaged queue
	// had given out: its offsets continue there at least.
	Floors []LostQueue `json:"floors"`
	// Broken names the .broken copies of the damaged bytes (in
	// <dir>/commitlog).
	Broken []string `json:"broken"`
}

// repairLog is the content of config/repair.json.
type repairLog struct {
	Repairs []RepairRecord `json:"repairs"`
}

// lostState is what the store knows of lost ranges; set at Open only.
type lostState struct {
	ranges []LostRange        // sorted, non-overlapping
	floors map[queueKey]int64 // the next queue offset is at least this
}

// loadLost reads config/repair.json (a missing file: nothing lost).
func (s *Store) loadLost() error {
	s.lost = lostState{floors: map[queueKey]int64{}}
	lg, err := s.readRepairLog()
	if err != nil {
		return err
	}
	for _, r := range lg.Repairs {
		s.lost.ranges = append(s.lost.ranges, r.Ranges...)
		for _, f := range r.Floors {
			key := queueKey{f.Topic, f.QueueID}
			s.lost.floors[key] = max(s.lost.floors[key], f.To)
		}
	}
	sort.Slice(s.lost.ranges, func(i, j int) bool { return s.lost.ranges[i].From < s.lost.ranges[j].From })
	return nil
}

func (s *Store) readRepairLog() (repairLog, error) {
	var lg repairLog
	b, err := s.ReadMeta(repairFile)
	if errors.Is(err, os.ErrNotExist) {
		return lg, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &lg)
	}
	if err != nil {
		// Without it, entries of lost records would look like damage and
		// their offsets could be given out again: refuse to guess.
		return lg, fmt.Errorf("%w: config/%s unreadable: %w", ErrCorrupt, repairFile, err)
	}
	return lg, nil
}

// inPlace lists the lost ranges that are damaged frames left in place,
// for the CommitLog's recovery to pass over.
func (l lostState) inPlace() []commitlog.Range {
	var out []commitlog.Range
	for _, r := range l.ranges {
		if r.InPlace {
			out = append(out, commitlog.Range{From: r.From, To: r.To})
		}
	}
	return out
}

// inLost reports whether CommitLog offset off lies in a lost range.
func (s *Store) inLost(off int64) bool {
	r := s.lost.ranges
	if len(r) == 0 {
		return false
	}
	i := sort.Search(len(r), func(i int) bool { return r[i].To > off })
	return i < len(r) && r[i].From <= off
}

// placeholders returns up to n CommitLog offsets for placeholder entries
// in the lost ranges within (after, before), ascending.
func (s *Store) placeholders(after, before, n int64) []int64 {
	var out []int64
	for _, r := range s.lost.ranges {
		from, to := max(r.From, after+1), min(r.To, before)
		for off := from; off < to && int64(len(out)) < n; off++ {
			out = append(out, off)
		}
		if int64(len(out)) == n {
			break
		}
	}
	return out
}

// fillLost closes the gap [MaxOffset, upTo) of q with placeholder entries
// in the lost ranges between q's last entry and CommitLog offset before.
// It reports whether the gap was closed. Callers make sure no record of
// the gap is in the log (they read it all): a gap a damaged ConsumeQueue
// left is rebuilt, never filled.
func (s *Store) fillLost(q *consumequeue.Queue, upTo, before int64) bool {
	top := q.MaxOffset()
	holes := upTo - top
	if holes <= 0 || len(s.lost.ranges) == 0 {
		return false
	}
	after := int64(-1)
	if last, ok := q.LastEntry(); ok {
		after = last.CommitLogOffset
	}
	offs := s.placeholders(after, before, holes)
	if int64(len(offs)) < holes {
		return false
	}
	for i, off := range offs {
		if err := q.Put(top+int64(i), consumequeue.Entry{CommitLogOffset: off, Size: 1}); err != nil {
			s.log.Warn().Err(err).Int64("queueOffset", top+int64(i)).Msg("placeholder for a lost record not written")
			return false
		}
	}
	return true
}
