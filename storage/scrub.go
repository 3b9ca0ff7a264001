package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
)

// The scrubber re-reads the durable CommitLog in the background
// and checks every frame's CRC, so damage in data nobody reads (old
// messages a consumer may still rewind to, dead letters) is found and
// reported while it is one bad record, not when it is needed. See
// "Damaged records" in the package documentation.

// Scrubber defaults.
const (
	// DefaultScrubRate is Options.ScrubRate's default: 16 MiB/s.
	DefaultScrubRate int64 = 16 << 20
	// DefaultScrubInterval is Options.ScrubInterval's default: 24 h.
	DefaultScrubInterval = 24 * time.Hour
	// scrubTick is the scrubber's step period; each step verifies
	// ScrubRate*scrubTick bytes.
	scrubTick = 100 * time.Millisecond
	// scrubSaveEvery is how often the scrubber's progress is saved during
	// a pass (and at every pass end and Close).
	scrubSaveEvery = time.Minute
	// scrubFile is the metadata file that keeps the scrubber's progress
	// across restarts.
	scrubFile = "scrub.json"
)

// ScrubStatus is the scrubber's progress.
type ScrubStatus struct {
	// Enabled is false when Options.ScrubRate is negative.
	Enabled bool `json:"-"`
	// Rate is the verification rate in bytes per second.
	Rate int64 `json:"-"`
	// Position is the CommitLog offset the current pass has verified up
	// to (where the next pass starts, between passes).
	Position int64 `json:"position"`
	// PassStartedAt is when the current pass started; zero between passes.
	PassStartedAt time.Time `json:"passStartedAt"`
	// Passes counts the full passes completed (kept across restarts).
	Passes int64 `json:"passes"`
	// LastPassAt is when the last full pass ended; zero before the first.
	LastPassAt time.Time `json:"lastPassAt"`
	// LastPassDuration is how long the last full pass took.
	LastPassDuration time.Duration `json:"lastPassDuration"`
	// NextPassAt is when the next pass starts; zero during a pass.
	NextPassAt time.Time `json:"nextPassAt"`
	// BytesVerified and RecordsVerified count what was checked since the
	// store opened.
	BytesVerified   int64 `json:"-"`
	RecordsVerified int64 `json:"-"`
	// BadFrames counts the invalid frames found since the store opened;
	// each is quarantined (stage "scrub").
	BadFrames int64 `json:"-"`
	// Busy is the time spent verifying since the store opened (wall time
	// of the scrub steps: about the CPU time when the data is cached).
	Busy time.Duration `json:"-"`
}

// scrubber is the scrubber's state. The worker goroutine (or Close, after
// it stopped, or a test calling runScrub) owns it; mu guards status for
// readers.
type scrubber struct {
	budget   int64 // bytes per step
	interval time.Duration
	savedAt  time.Time

	mu     sync.Mutex
	status ScrubStatus
}

// initScrub sets the scrubber up and resumes the progress saved by the
// previous run, at the start of the segment it was in (a segment base is
// always a frame boundary, whatever recovery did to the log since).
func (s *Store) initScrub() {
	sc := &s.scrub
	rate := s.opts.ScrubRate
	sc.interval = s.opts.ScrubInterval
	sc.budget = max(rate*int64(scrubTick)/int64(time.Second), 1)
	sc.status = ScrubStatus{Enabled: rate > 0, Rate: max(rate, 0)}
	b, err := s.ReadMeta(scrubFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var saved ScrubStatus
	if err == nil {
		err = json.Unmarshal(b, &saved)
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("scrub progress unreadable; the next pass starts from the oldest segment")
		return
	}
	st := &sc.status
	st.Passes, st.LastPassAt, st.LastPassDuration = saved.Passes, saved.LastPassAt, saved.LastPassDuration
	st.PassStartedAt, st.NextPassAt = saved.PassStartedAt, saved.NextPassAt
	if !saved.PassStartedAt.IsZero() {
		st.Position = s.commitLog.MinOffset()
		for _, seg := range s.commitLog.Segments() {
			if seg.Base <= saved.Position {
				st.Position = seg.Base
			}
		}
	}
}

// ScrubStatus reports the scrubber's progress.
func (s *Store) ScrubStatus() ScrubStatus {
	sc := &s.scrub
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.status
}

// runScrub is one scrubber step at time now: it starts a pass when one is
// due, verifies the next budget bytes of sealed segments (0: the
// configured ScrubRate's share of a step), quarantines what is bad (stage
// "scrub") and ends the pass when it reaches the active segment.
func (s *Store) runScrub(now time.Time, budget int64) (commitlog.ScrubResult, error) {
	s.truncMu.Lock() // a cut moves the position back (truncate.go)
	defer s.truncMu.Unlock()
	sc := &s.scrub
	if budget <= 0 {
		budget = sc.budget
	}
	sc.mu.Lock()
	st := sc.status
	sc.mu.Unlock()
	if st.PassStartedAt.IsZero() {
		if now.Before(st.NextPassAt) {
			return commitlog.ScrubResult{}, nil
		}
		st.PassStartedAt, st.NextPassAt, st.Position = now, time.Time{}, s.commitLog.MinOffset()
	}
	began := time.Now()
	res, err := s.commitLog.Scrub(st.Position, budget)
	st.Busy += time.Since(began)
	if err != nil {
		return res, err
	}
	bad := 0
	for _, b := range res.Bad {
		if s.inLost(b.Offset) {
			continue // given up by a repair, which reported it
		}
		bad++
		cause := b.Err
		if b.Unverified > 0 {
			cause = fmt.Errorf("%w (%d bytes to the end of its segment unchecked)", cause, b.Unverified)
		}
		s.quarantine(b.Offset, b.Size, "scrub", cause)
	}
	st.Position = res.Next
	st.BytesVerified += res.Bytes
	st.RecordsVerified += res.Records
	st.BadFrames += int64(bad)
	if res.Done {
		st.Passes++
		st.LastPassAt, st.LastPassDuration = now, now.Sub(st.PassStartedAt)
		st.NextPassAt = st.PassStartedAt.Add(sc.interval)
		st.PassStartedAt = time.Time{}
		s.log.Info().Int64("passes", st.Passes).Dur("took", st.LastPassDuration).Int64("verifiedBytes", st.BytesVerified).
			Int64("badFrames", st.BadFrames).Time("next", st.NextPassAt).Msg("scrub pass done")
	}
	sc.mu.Lock()
	sc.status = st
	sc.mu.Unlock()
	if res.Done || now.Sub(sc.savedAt) >= scrubSaveEvery {
		s.saveScrub(now)
	}
	return res, nil
}

// saveScrub persists the scrubber's progress.
func (s *Store) saveScrub(now time.Time) {
	sc := &s.scrub
	b, err := json.Marshal(s.ScrubStatus())
	if err == nil {
		err = s.WriteMeta(scrubFile, b)
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("saving scrub progress failed")
		return
	}
	sc.savedAt = now
}
