package storage

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage/consumequeue"
)

// Retention (see doc.go, "Retention and disk pressure"). The store deletes
// whole CommitLog segments, oldest first; what consumers still need is
// known only to the store's owner, which says so through a
// RetentionPolicy: before each pass it reports floors — CommitLog offsets
// below which the pass may not delete for a given reason — and before each
// deletion it is told the cut, so it can carry records forward and count
// what consumers lose.

// NoFloor is a floor that holds nothing back.
const NoFloor int64 = math.MaxInt64

// RetentionFloors are the limits a RetentionPolicy puts on one pass, as
// CommitLog offsets: a segment may go for a reason only when its end is at
// or below the floor that reason respects. NoFloor holds nothing.
type RetentionFloors struct {
	// Keep holds back every deletion, whatever the reason: records that
	// must not be lost and cannot be carried forward (undelivered
	// delay-level schedule entries, progress records no snapshot covers).
	Keep int64
	// Unconsumed is the lowest CommitLog offset of a message some
	// consumer has not consumed yet. Disk pressure deletes below it only
	// with Options.DiskPressureDelete.
	Unconsumed int64
	// Retained is the lowest CommitLog offset of a message whose topic
	// keeps its messages longer than FileReservedTime and whose time has
	// not passed: age-based deletion stays below it.
	Retained int64
}

// DeleteReason is why a retention pass deletes the CommitLog below a cut.
type DeleteReason string

// Deletion reasons, in the order a pass considers them for a segment.
const (
	// DeleteExpired: the segment was last written more than
	// FileReservedTime ago (and holds no message a longer topic retention
	// keeps).
	DeleteExpired DeleteReason = "expired"
	// DeleteConsumed: the disk is above DiskMaxUsedRatio and every
	// consumer has consumed the segment.
	DeleteConsumed DeleteReason = "consumed"
	// DeletePressure: the disk is above DiskMaxUsedRatio, a consumer has
	// not consumed the segment, and DiskPressureDelete is on.
	DeletePressure DeleteReason = "disk-pressure"
)

// RetentionPolicy is how the store's owner takes part in retention. The
// store calls it from its retention goroutine, one pass at a time.
type RetentionPolicy interface {
	// Floors runs at the start of every pass. It may also expire messages
	// logically (TrimQueue), for topics that keep them shorter than the
	// store does. An error skips the pass.
	Floors(now time.Time) (RetentionFloors, error)
	// BeforeDelete runs before the pass deletes the CommitLog below cut;
	// reason is why the highest deleted segment goes. The owner re-appends
	// the records that must outlive the deletion (ClassReclaim) and counts
	// the unconsumed messages consumers lose. An error skips the deletion.
	BeforeDelete(cut int64, reason DeleteReason) error
}

// SetRetentionPolicy installs p for the passes that follow (and lets them
// run again after PauseRetention). Without one a pass knows no consumer
// (so disk pressure deletes nothing early unless DiskPressureDelete) and
// carries nothing forward; with Options.AwaitRetentionPolicy no pass runs
// until it is called.
func (s *Store) SetRetentionPolicy(p RetentionPolicy) {
	s.retentionMu.Lock()
	s.retentionPolicy.Store(&p)
	s.retentionPaused = false
	s.retentionMu.Unlock()
}

// PauseRetention waits for a retention pass under way and runs no other
// until SetRetentionPolicy is called again. An owner closing calls it
// before it closes what its policy's BeforeDelete writes to, so that no
// pass deletes records it can no longer carry.
func (s *Store) PauseRetention() {
	s.retentionMu.Lock()
	s.retentionPaused = true
	s.retentionMu.Unlock()
}

// HoldRetention keeps every CommitLog segment until release is called: no
// retention pass runs meanwhile, and a cut applied (ApplyRetentionCut)
// waits and is applied by the last release. A copy of the store for
// another replica (package shard) holds it, so that the segments it has
// yet to read are not deleted under it. Holds nest; release is
// idempotent.
func (s *Store) HoldRetention() (release func()) {
	s.retentionMu.Lock()
	s.retentionHolds++
	s.retentionMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.retentionMu.Lock()
			defer s.retentionMu.Unlock()
			if s.retentionHolds--; s.retentionHolds > 0 || s.heldCut == 0 {
				return
			}
			cut := s.heldCut
			s.heldCut = 0
			if s.closed.Load() {
				return
			}
			if _, err := s.applyCutLocked(cut); err != nil {
				s.log.Error().Err(err).Int64("below", cut).Msg("a retention cut held by a copy failed when applied")
			}
		})
	}
}

// retentionPass runs one scheduled pass unless retention is paused or
// still awaits its policy; ran is false when it did not run.
func (s *Store) retentionPass(now time.Time) (res RetentionResult, ran bool, err error) {
	s.retentionMu.Lock()
	defer s.retentionMu.Unlock()
	if s.retentionPaused || s.retentionHolds > 0 || (s.opts.AwaitRetentionPolicy && s.retentionPolicy.Load() == nil) {
		return res, false, nil
	}
	res, err = s.runRetention(now)
	return res, true, err
}

// FileReservedTime is the store's retention window (Options).
func (s *Store) FileReservedTime() time.Duration { return s.opts.FileReservedTime }

// noPolicy is the policy of a store nobody told about its consumers.
type noPolicy struct{}

func (noPolicy) Floors(time.Time) (RetentionFloors, error) {
	return RetentionFloors{Keep: NoFloor, Unconsumed: 0, Retained: NoFloor}, nil
}

func (noPolicy) BeforeDelete(int64, DeleteReason) error { return nil }

func (s *Store) policy() RetentionPolicy {
	if p := s.retentionPolicy.Load(); p != nil {
		return *p
	}
	return noPolicy{}
}

// RetentionResult is what one retention pass did.
type RetentionResult struct {
	DeletedSegments int
	// Reason is why the highest deleted segment went ("" when none did).
	Reason    DeleteReason
	MinOffset int64   // CommitLog minimum after the pass
	DiskUsage float64 // used fraction of the file system before the pass
	// Pressure: DiskUsage was above DiskMaxUsedRatio.
	Pressure bool
	// HeldBy says, under pressure, what kept the next segment from being
	// deleted early ("" when nothing did).
	HeldBy string
	// Floors are the policy's floors for the pass.
	Floors RetentionFloors
}

// runRetention samples the disk, asks the policy for its floors, and
// deletes the oldest segments that may go: those older than
// FileReservedTime (below the Keep and Retained floors), and — while disk
// usage is above DiskMaxUsedRatio — one more per pass before its time,
// when every consumer has consumed it (below the Unconsumed floor) or
// DiskPressureDelete says to delete it anyway. The active segment and
// anything not yet dispatched always stay. ConsumeQueue and index files
// wholly below the new minimum go with them, and the disk is sampled
// again so that sends resume as soon as the space is free.
func (s *Store) runRetention(now time.Time) (RetentionResult, error) {
	var res RetentionResult
	usage, err := s.sampleDisk()
	if err != nil {
		return res, err
	}
	res.DiskUsage = usage
	res.Pressure = usage > s.opts.DiskMaxUsedRatio
	policy := s.policy()
	floors, err := policy.Floors(now)
	if err != nil {
		return res, fmt.Errorf("retention floors: %w", err)
	}
	res.Floors = floors
	cut, reason, held := s.retentionCut(now, res.Pressure, floors)
	res.HeldBy = held
	if cut > 0 {
		if err := policy.BeforeDelete(cut, reason); err != nil {
			return res, fmt.Errorf("retention below %d (%s): %w", cut, reason, err)
		}
		n, err := s.deleteBelow(cut)
		res.DeletedSegments = n
		if n > 0 {
			res.Reason = reason
		}
		if err != nil {
			return res, err
		}
	}
	res.MinOffset = s.commitLog.MinOffset()
	return res, nil
}

// deleteBelow deletes the CommitLog segments wholly below cut (never the
// active one), then the ConsumeQueue and index files wholly below the new
// minimum, and samples the disk again; the caller holds retentionMu.
func (s *Store) deleteBelow(cut int64) (int, error) {
	n, err := s.commitLog.DeleteSegmentsBelow(cut)
	if err != nil || n == 0 {
		return n, err
	}
	low := s.commitLog.MinOffset()
	s.queuesMu.RLock()
	for _, q := range s.queues {
		if _, err := q.DeleteBelowPhysical(low); err != nil {
			s.queuesMu.RUnlock()
			return n, err
		}
	}
	s.queuesMu.RUnlock()
	if _, err := s.index.DeleteBelow(low); err != nil {
		return n, err
	}
	_, err = s.sampleDisk()
	return n, err
}

// ApplyRetentionCut deletes what another store's retention deleted: the
// segments wholly below cut, as far as this store has dispatched (a
// follower applying its leader's cut record; the leader decided the cut,
// and carried forward what had to outlive it, before it deleted). A cut at
// or below the store's minimum deletes nothing. It returns the number of
// segments deleted.
func (s *Store) ApplyRetentionCut(cut int64) (int, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	s.retentionMu.Lock()
	defer s.retentionMu.Unlock()
	if s.retentionHolds > 0 {
		s.heldCut = max(s.heldCut, cut)
		return 0, nil
	}
	return s.applyCutLocked(cut)
}

// applyCutLocked is ApplyRetentionCut's deletion; the caller holds
// retentionMu.
func (s *Store) applyCutLocked(cut int64) (int, error) {
	cut = min(cut, s.dispatched.Load())
	if cut <= s.commitLog.MinOffset() {
		return 0, nil
	}
	n, err := s.deleteBelow(cut)
	if n > 0 {
		s.log.Info().Int("segments", n).Int64("below", cut).Msg("retention cut applied")
	}
	return n, err
}

// retentionCut is how far the pass may delete, why, and (under pressure)
// what held the next segment back.
func (s *Store) retentionCut(now time.Time, pressure bool, f RetentionFloors) (cut int64, reason DeleteReason, held string) {
	segs := s.commitLog.Segments()
	dispatched := s.dispatched.Load()
	cut = -1
	for i, seg := range segs {
		end := seg.Base + seg.Size
		hold := ""
		switch {
		case i == len(segs)-1:
			hold = "the active segment"
		case end > dispatched:
			hold = "records not yet dispatched"
		case end > f.Keep:
			hold = "undelivered delayed messages or progress records"
		}
		expired := !seg.ModTime.IsZero() && now.Sub(seg.ModTime) > s.opts.FileReservedTime
		if hold == "" && expired && end <= f.Retained {
			cut, reason = end, DeleteExpired
			continue
		}
		if !pressure {
			break
		}
		switch {
		case hold != "":
		case end <= f.Unconsumed:
			cut, reason = end, DeleteConsumed
		case s.opts.DiskPressureDelete:
			cut, reason = end, DeletePressure
		default:
			hold = "unconsumed messages"
		}
		held = hold
		break // under pressure, one segment before its time per pass
	}
	return cut, reason, held
}

// heldLogEvery spaces the warnings about disk pressure nothing relieves.
const heldLogEvery = time.Minute

// logRetention logs what a pass did; a pass under pressure that could not
// delete is a warning, at most once per heldLogEvery.
func (s *Store) logRetention(res RetentionResult) {
	switch {
	case res.DeletedSegments > 0:
		ev := s.log.Info()
		if res.Reason == DeletePressure {
			ev = s.log.Warn()
		}
		ev.Int("segments", res.DeletedSegments).Str("reason", string(res.Reason)).Int64("minOffset", res.MinOffset).
			Float64("diskUsage", res.DiskUsage).Msg("retention deleted segments")
	case res.Pressure && res.HeldBy != "":
		now := time.Now().UnixNano()
		last := s.heldLogged.Load()
		if now-last < int64(heldLogEvery) || !s.heldLogged.CompareAndSwap(last, now) {
			return
		}
		s.log.Warn().Float64("diskUsage", res.DiskUsage).Float64("diskMaxUsedRatio", s.opts.DiskMaxUsedRatio).
			Float64("sendCeiling", s.opts.DiskSendCeiling).Str("heldBy", res.HeldBy).
			Msg("disk above the clean ratio, but the oldest segment must stay (unconsumed messages are never deleted early unless disk-pressure deletion is on)")
	}
}

// Queue positions for a RetentionPolicy.

// PhysicalOffset returns the CommitLog offset of the message at queue
// offset off of (topic, queueID) — of the oldest retained one when off is
// below the queue's minimum — or NoFloor when the queue holds nothing at
// or after off.
func (s *Store) PhysicalOffset(topic string, queueID int32, off int64) (int64, error) {
	q, _ := s.queue(topic, queueID, false)
	if q == nil {
		return NoFloor, nil
	}
	off = max(off, q.MinOffset())
	if off >= q.MaxOffset() {
		return NoFloor, nil
	}
	e, err := q.Get(off)
	switch {
	case errors.Is(err, consumequeue.ErrOffsetTooSmall):
		// Retention moved the minimum meanwhile: ask again from there.
		return s.PhysicalOffset(topic, queueID, q.MinOffset())
	case err != nil:
		return 0, fmt.Errorf("%s/%d offset %d: %w", topic, queueID, off, err)
	}
	return e.CommitLogOffset, nil
}

// QueueOffsetAt returns the first queue offset of (topic, queueID) whose
// message is stored at or after CommitLog offset phys (MaxOffset when
// none is): where the queue starts once the CommitLog below phys is gone.
func (s *Store) QueueOffsetAt(topic string, queueID int32, phys int64) (int64, error) {
	q, _ := s.queue(topic, queueID, false)
	if q == nil {
		return 0, nil
	}
	lo, hi := q.MinOffset(), q.MaxOffset()
	var searchErr error
	n := sort.Search(int(hi-lo), func(i int) bool {
		if searchErr != nil {
			return true
		}
		e, err := q.Get(lo + int64(i))
		if errors.Is(err, consumequeue.ErrOffsetTooSmall) {
			return false // already below the minimum
		}
		if err != nil {
			searchErr = err
			return true
		}
		return e.CommitLogOffset >= phys
	})
	if searchErr != nil {
		return 0, fmt.Errorf("%s/%d: search CommitLog offset %d: %w", topic, queueID, phys, searchErr)
	}
	return lo + int64(n), nil
}

// TrimQueue raises the minimum of (topic, queueID) to queue offset below
// (at most MaxOffset): the messages under it are gone for readers and for
// the lookups by id and key, exactly as after retention — persisted, so a
// re-dispatch never brings them back. The CommitLog keeps their bytes
// until retention deletes the segments. It never lowers the minimum and
// returns the new one. It is how a topic keeps its messages for less time
// than the store does.
func (s *Store) TrimQueue(topic string, queueID int32, below int64) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	q, _ := s.queue(topic, queueID, false)
	if q == nil {
		return 0, nil
	}
	below = min(below, q.MaxOffset())
	if below <= q.MinOffset() {
		return q.MinOffset(), nil
	}
	// Everything up to the entry before below goes: entries dispatched
	// meanwhile lie after it in the CommitLog.
	last, err := q.Get(below - 1)
	if err != nil {
		if errors.Is(err, consumequeue.ErrOffsetTooSmall) {
			return q.MinOffset(), nil // retention got there first
		}
		return q.MinOffset(), fmt.Errorf("trim %s/%d below %d: %w", topic, queueID, below, err)
	}
	newMin, err := q.DeleteBelowPhysical(last.CommitLogOffset + 1)
	if err != nil {
		return newMin, fmt.Errorf("trim %s/%d below %d: %w", topic, queueID, below, err)
	}
	return newMin, nil
}
