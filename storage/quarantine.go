package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Quarantine: a record the store cannot use. Either its frame is intact
// (valid size, magic and CRC) but its payload does not decode, names a
// topic that cannot be a ConsumeQueue directory, or conflicts with its
// queue's entries — a bug, since Put refuses everything the readers would
// refuse — or its bytes were damaged after they were written and fail the
// frame's CRC (see "Damaged records" in doc.go). Either way it must never
// stop the store: the dispatcher, the readers and the scrubber set it
// aside, count it, log it with its offset and move on. Readiness reports
// the store degraded while any record is quarantined.
//
// The list survives restarts in <dir>/config/quarantine.json (the count and
// the newest maxQuarantineListed records), rewritten atomically on each
// addition. A record seen again (re-dispatch after a crash, another
// reader, the next scrub pass) is not counted twice while it is listed.

// quarantineFile is the metadata file listing quarantined records.
const quarantineFile = "quarantine.json"

// maxQuarantineListed bounds the records the list keeps.
const maxQuarantineListed = 100

// QuarantinedRecord is one record set aside.
type QuarantinedRecord struct {
	// Offset is the record's CommitLog offset.
	Offset int64 `json:"offset"`
	// Size is the record's frame size in bytes (0 when unknown).
	Size int32 `json:"size"`
	// Stage is who found it: "dispatch" (not made visible in a
	// ConsumeQueue), "read" (a reader could not use it) or "scrub" (the
	// scrubber found its frame damaged).
	Stage string `json:"stage"`
	// Reason says why.
	Reason string `json:"reason"`
	// At is when it was first quarantined.
	At time.Time `json:"at"`
}

// QuarantineReport is the store's quarantine list.
type QuarantineReport struct {
	// Count is how many distinct records were ever quarantined.
	Count int64 `json:"count"`
	// Recent holds the newest of them, oldest first.
	Recent []QuarantinedRecord `json:"recent"`
}

// quarantine is the list, shared by the dispatcher and the readers.
type quarantine struct {
	mu     sync.Mutex
	report QuarantineReport
	seen   map[int64]struct{} // offsets of the listed records
	save   func([]byte) error
}

// errUndispatchable marks a record-level failure of the dispatcher: trying
// again can never succeed, so the record is quarantined instead.
type errUndispatchable struct{ err error }

func (e errUndispatchable) Error() string { return e.err.Error() }
func (e errUndispatchable) Unwrap() error { return e.err }

// undispatchable wraps err as a record-level dispatch failure.
func undispatchable(format string, args ...any) error {
	return errUndispatchable{fmt.Errorf(format, args...)}
}

func isUndispatchable(err error) bool {
	var u errUndispatchable
	return errors.As(err, &u)
}

// loadQuarantine reads the persisted list (a missing or unreadable file
// starts an empty one).
func (s *Store) loadQuarantine() {
	q := &s.quarantined
	q.seen = make(map[int64]struct{})
	q.save = func(b []byte) error { return s.WriteMeta(quarantineFile, b) }
	b, err := s.ReadMeta(quarantineFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		err = json.Unmarshal(b, &q.report)
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("quarantine list unreadable; starting a new one")
		q.report = QuarantineReport{}
		return
	}
	for _, r := range q.report.Recent {
		q.seen[r.Offset] = struct{}{}
	}
}

// quarantine sets the record at offset aside, once.
func (s *Store) quarantine(offset int64, size int32, stage string, cause error) {
	if s.inLost(offset) {
		return // given up by a repair, which reported it (lost.go)
	}
	q := &s.quarantined
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, dup := q.seen[offset]; dup {
		return
	}
	q.seen[offset] = struct{}{}
	q.report.Count++
	rec := QuarantinedRecord{
		Offset: offset, Size: size, Stage: stage, Reason: cause.Error(), At: time.Now().UTC().Truncate(time.Millisecond),
	}
	q.report.Recent = append(q.report.Recent, rec)
	if n := len(q.report.Recent); n > maxQuarantineListed {
		drop := q.report.Recent[:n-maxQuarantineListed]
		for _, r := range drop {
			delete(q.seen, r.Offset)
		}
		q.report.Recent = append([]QuarantinedRecord(nil), q.report.Recent[n-maxQuarantineListed:]...)
	}
	s.log.Error().Err(cause).Int64("offset", offset).Int32("size", size).Str("stage", stage).
		Int64("quarantined", q.report.Count).Msg("record quarantined: the store set it aside and moves on")
	if b, err := json.Marshal(q.report); err == nil {
		if err := q.save(b); err != nil {
			s.log.Warn().Err(err).Msg("saving the quarantine list failed")
		}
	}
	if s.opts.Replicated && isDamage(cause) {
		s.markDamaged(rec)
	}
}

// Quarantined reports the records set aside so far.
func (s *Store) Quarantined() QuarantineReport {
	q := &s.quarantined
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.report
	out.Recent = append([]QuarantinedRecord(nil), q.report.Recent...)
	return out
}

// lagSamples is how many (time, dispatch limit) samples readiness keeps:
// with the default 1 s CheckpointInterval, about two minutes.
const lagSamples = 128

// dispatchHealth is what readiness needs to know about the dispatcher.
type dispatchHealth struct {
	mu      sync.Mutex
	err     error     // the failure of the last pass; nil once a pass succeeds
	since   time.Time // when passes started failing
	samples [lagSamples]lagSample
	next    int
}

// lagSample is how far the dispatcher was allowed to go at a time.
type lagSample struct {
	at    time.Time
	limit int64
}

// DispatchStatus describes the dispatcher.
type DispatchStatus struct {
	// Dispatched is the CommitLog offset below which every record is
	// visible in its ConsumeQueue (or quarantined).
	Dispatched int64
	// Limit is how far the dispatcher may go: the flushed offset in sync
	// mode, the written offset in async mode.
	Limit int64
	// LagBytes is Limit - Dispatched.
	LagBytes int64
	// Delay is how long the log has held bytes the dispatcher has not
	// dispatched yet (0 when caught up; resolution CheckpointInterval).
	Delay time.Duration
	// Err is the failure of the dispatcher's last pass, nil when it
	// succeeded; failing passes are retried every 100 ms.
	Err error
	// FailingSince is when the passes started failing.
	FailingSince time.Time
}

// sampleDispatchLimit records how far the dispatcher may go now.
func (s *Store) sampleDispatchLimit(now time.Time) {
	h := &s.health
	h.mu.Lock()
	h.samples[h.next] = lagSample{at: now, limit: s.dispatchLimit()}
	h.next = (h.next + 1) % lagSamples
	h.mu.Unlock()
}

// recordDispatch notes the outcome of a dispatch pass.
func (s *Store) recordDispatch(err error) {
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.err = nil
	case h.err == nil:
		h.err, h.since = err, time.Now()
	default:
		h.err = err
	}
}

// DispatchStatus reports how far behind the log the dispatcher is and
// whether it is failing.
func (s *Store) DispatchStatus() DispatchStatus {
	now := time.Now()
	st := DispatchStatus{Dispatched: s.dispatched.Load(), Limit: s.dispatchLimit()}
	st.LagBytes = max(st.Limit-st.Dispatched, 0)
	h := &s.health
	h.mu.Lock()
	defer h.mu.Unlock()
	st.Err, st.FailingSince = h.err, h.since
	if st.LagBytes == 0 {
		return st
	}
	st.Delay = h.delay(st.Dispatched, now)
	return st
}

// delay is how long ago the oldest sample was taken whose limit is above
// dispatched: since then the log has held bytes the dispatcher has not
// dispatched. 0 when no sample is ahead.
func (h *dispatchHealth) delay(dispatched int64, now time.Time) time.Duration {
	for i := 0; i < lagSamples; i++ {
		sm := h.samples[(h.next+i)%lagSamples]
		if !sm.at.IsZero() && sm.limit > dispatched {
			return now.Sub(sm.at)
		}
	}
	return 0
}
