package storage

import (
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/internal/fileutil"
)

// start launches the background workers; Close stops and waits for them.
func (s *Store) start() {
	s.workers.Add(3)
	go s.dispatchLoop()
	go s.every(s.opts.CheckpointInterval, func() {
		s.sampleDispatchLimit(time.Now())
		if err := s.runCheckpoint(); err != nil {
			s.log.Error().Err(err).Msg("checkpoint failed")
		}
	})
	go s.every(s.opts.RetentionInterval, func() {
		res, err := s.runRetention(time.Now())
		if err != nil {
			s.log.Error().Err(err).Msg("retention failed")
			return
		}
		if res.DeletedSegments > 0 {
			s.log.Info().Int("segments", res.DeletedSegments).Int64("minOffset", res.MinOffset).
				Float64("diskUsage", res.DiskUsage).Msg("retention deleted segments")
		}
	})
	if s.opts.ScrubRate > 0 {
		s.workers.Add(1)
		go s.every(scrubTick, func() {
			if _, err := s.runScrub(time.Now(), 0); err != nil && !errors.Is(err, commitlog.ErrClosed) {
				s.log.Error().Err(err).Msg("scrub step failed")
			}
		})
	}
}

func (s *Store) every(d time.Duration, fn func()) {
	defer s.workers.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.closing:
			return
		case <-t.C:
			fn()
		}
	}
}

// runCheckpoint flushes the CommitLog, then the derived files, and records
// how far each is durable. The dispatched offset is read first and the
// CommitLog flushed before the derived files, so neither the checkpoint nor
// the index ever claims CommitLog bytes that a crash could still lose
// (which matters in async flush mode).
func (s *Store) runCheckpoint() error {
	dispatched := s.dispatched.Load()
	if err := s.commitLog.Flush(); err != nil {
		return err
	}
	flushed := s.commitLog.Flushed()
	if err := s.flushDerived(); err != nil {
		return err
	}
	return writeCheckpoint(s.opts.Dir, checkpoint{Flushed: flushed, Dispatched: dispatched, WrittenAt: time.Now().UnixMilli()})
}

// OnRetention registers fn to run before each retention pass deletes the
// CommitLog below cut. The owner of records that must outlive retention
// (dead letters) re-appends them there; an error skips the deletion.
func (s *Store) OnRetention(fn func(cut int64) error) { s.retentionHook.Store(&fn) }

// RetentionResult is what one retention pass did.
type RetentionResult struct {
	DeletedSegments int
	MinOffset       int64   // CommitLog minimum after the pass
	DiskUsage       float64 // fraction of the filesystem in use before the pass
}

// runRetention deletes the oldest CommitLog segments that are older than
// FileReservedTime, or — while disk usage is above DiskMaxUsedRatio — the
// oldest ones regardless of age (never the active segment), then drops
// ConsumeQueue and index files wholly below the new minimum. It also sets
// the disk-full flag that makes Put refuse writes.
func (s *Store) runRetention(now time.Time) (RetentionResult, error) {
	var res RetentionResult
	usage, err := fileutil.DiskUsage(s.opts.Dir)
	if err != nil {
		return res, err
	}
	res.DiskUsage = usage
	hard := s.opts.DiskMaxUsedRatio + 0.10
	if hard > 0.95 {
		hard = 0.95
	}
	segs := s.commitLog.Segments()
	cut := int64(-1)
	pressure := usage > s.opts.DiskMaxUsedRatio
	dispatched := s.dispatched.Load()
	for i, seg := range segs {
		if i == len(segs)-1 {
			break // the active segment stays
		}
		if seg.Base+seg.Size > dispatched {
			break // not yet in the ConsumeQueues and the index: keep it
		}
		expired := now.Sub(seg.ModTime) > s.opts.FileReservedTime
		if !expired && !pressure {
			break
		}
		cut = seg.Base + seg.Size
		if pressure && !expired {
			// Under pressure delete one old segment per pass; the next pass
			// re-measures (RocketMQ deletes a bounded batch per round too).
			break
		}
	}
	if cut > 0 {
		if hook := s.retentionHook.Load(); hook != nil {
			if err := (*hook)(cut); err != nil {
				return res, fmt.Errorf("retention hook below %d: %w", cut, err)
			}
		}
		n, err := s.commitLog.DeleteSegmentsBelow(cut)
		res.DeletedSegments = n
		if err != nil {
			return res, err
		}
	}
	res.MinOffset = s.commitLog.MinOffset()
	if res.DeletedSegments > 0 {
		s.queuesMu.RLock()
		for _, q := range s.queues {
			if _, err := q.DeleteBelowPhysical(res.MinOffset); err != nil {
				s.queuesMu.RUnlock()
				return res, err
			}
		}
		s.queuesMu.RUnlock()
		if _, err := s.index.DeleteBelow(res.MinOffset); err != nil {
			return res, err
		}
	}
	s.diskFull.Store(usage > hard)
	return res, nil
}
