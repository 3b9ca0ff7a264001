package storage

import (
	"errors"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
)

// start launches the background workers; Close stops and waits for them.
func (s *Store) start() {
	s.workers.Add(4)
	go s.dispatchLoop()
	go s.every(s.opts.DiskCheckInterval, func() {
		if _, err := s.sampleDisk(); err != nil {
			s.log.Error().Err(err).Msg("disk usage sample failed")
		}
	})
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
		s.logRetention(res)
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
	table := s.snapshotQueues() // after dispatched: covers every record below it
	if err := s.flushDerived(); err != nil {
		return err
	}
	if err := s.writeQueueTable(table); err != nil {
		return err
	}
	return writeCheckpoint(s.opts.FS, s.opts.Dir, checkpoint{Flushed: flushed, Dispatched: dispatched, WrittenAt: time.Now().UnixMilli()})
}
