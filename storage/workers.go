package storage

import (
	"context"
	"errors"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/storage/commitlog"
)

// start launches the background workers; Close stops and waits for them.
// The dispatcher is an event-driven Service (woken by appends, repairs
// and its retry timer); the periodic passes are worker.Every, each an
// ordinary method tests call directly.
func (s *Store) start() {
	s.dispatcher = worker.New(s.dispatchLoop)
	s.dispatcher.Start(context.Background())
	s.checkpointer = worker.Every(s.opts.CheckpointInterval, func(_ context.Context, now time.Time) {
		s.sampleDispatchLimit(now)
		if err := s.runCheckpoint(); err != nil {
			s.log.Error().Err(err).Msg("checkpoint failed")
		}
	})
	s.periodic = append(s.periodic,
		worker.Every(s.opts.DiskCheckInterval, func(context.Context, time.Time) {
			if _, err := s.sampleDisk(); err != nil {
				s.log.Error().Err(err).Msg("disk usage sample failed")
			}
		}),
		s.checkpointer,
		worker.Every(s.opts.RetentionInterval, func(_ context.Context, now time.Time) {
			res, ran, err := s.retentionPass(now)
			if !ran {
				return
			}
			if err != nil {
				s.log.Error().Err(err).Msg("retention failed")
				return
			}
			s.logRetention(res)
		}),
	)
	if s.opts.ScrubRate > 0 {
		s.periodic = append(s.periodic, worker.Every(scrubTick, func(_ context.Context, now time.Time) {
			if _, err := s.runScrub(now, 0); err != nil && !errors.Is(err, commitlog.ErrClosed) {
				s.log.Error().Err(err).Msg("scrub step failed")
			}
		}))
	}
	var ctx context.Context
	ctx, s.stopPeriodic = context.WithCancel(context.Background())
	for _, p := range s.periodic {
		p.Start(ctx)
	}
}

// stopWorkers stops every background worker and waits for them: all are
// told at once, then each is waited for.
func (s *Store) stopWorkers() {
	close(s.closing)
	if s.stopPeriodic != nil {
		s.stopPeriodic()
	}
	for _, p := range s.periodic {
		p.Stop()
	}
	s.dispatcher.Stop()
}

// runCheckpoint flushes the CommitLog, then the derived files, and records
// how far each is durable. The dispatched offset is read first and the
// CommitLog flushed before the derived files, so neither the checkpoint nor
// the index ever claims CommitLog bytes that a crash could still lose
// (which matters in async flush mode).
func (s *Store) runCheckpoint() error {
	s.truncMu.Lock()
	defer s.truncMu.Unlock()
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
