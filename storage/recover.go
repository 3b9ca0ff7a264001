package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/index"
)

// open is the store's recovery: what Open does before the store serves
// anything — the checkpoint, the CommitLog's recovery, the ConsumeQueues
// and the index brought in line with it (rebuilt where missing or
// damaged), the queue table. The package documentation ("Recovery: what
// each start verifies") says what each path checks.
func (s *Store) open() error {
	dir := s.opts.Dir
	fs := s.opts.FS
	ckpt, ckErr := readCheckpoint(fs, dir)
	s.recovery.CheckpointValid = ckErr == nil
	if ckErr != nil && !errors.Is(ckErr, os.ErrNotExist) {
		s.log.Warn().Err(ckErr).Msg("checkpoint unreadable; recovering from a full scan")
	}
	_, abortErr := fs.Stat(filepath.Join(dir, abortFile))
	s.recovery.Abnormal = abortErr == nil
	f, err := fs.Create(filepath.Join(dir, abortFile))
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.SyncDir(dir); err != nil {
		return err
	}

	if err := s.loadLost(); err != nil {
		return err
	}
	clOpts := commitlog.Options{
		Dir:           filepath.Join(dir, "commitlog"),
		SegmentSize:   s.opts.SegmentSize,
		StartOffset:   s.opts.StartOffset,
		Reserve:       s.opts.DiskSystemReserve,
		FlushMode:     s.opts.FlushMode,
		FlushInterval: s.opts.FlushInterval,
		AllowCorrupt:  s.opts.AllowCorrupt,
		Lost:          s.lost.inPlace(),
		Logger:        s.opts.Logger,
		FS:            s.opts.FS,
	}
	if s.recovery.CheckpointValid {
		// See "Recovery" in the package documentation for what each case
		// verifies.
		clOpts.HighWater = ckpt.Flushed
		clOpts.RecoverFrom = ckpt.Flushed
		if s.recovery.Abnormal || !ckpt.Clean {
			// Verify every frame that re-dispatch will read and the whole
			// segment the last durable byte lives in.
			clOpts.RecoverFrom = min(ckpt.Dispatched, ckpt.Flushed-ckpt.Flushed%s.opts.SegmentSize)
		}
	}
	cl, err := commitlog.Open(clOpts)
	if err != nil {
		if errors.Is(err, commitlog.ErrCorrupt) {
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return fmt.Errorf("open commitlog: %w", err)
	}
	s.commitLog = cl
	s.recovery.CommitLog = cl.Recovery()

	idx, err := index.Open(index.Options{
		Dir:        filepath.Join(dir, "index"),
		SlotCount:  s.opts.IndexSlots,
		EntryCount: s.opts.IndexEntries,
		Logger:     s.opts.Logger,
		FS:         s.opts.FS,
	})
	if err != nil {
		return fmt.Errorf("open index: %w", err)
	}
	s.index = idx
	s.loadQuarantine()
	s.initScrub()
	table, tableErr := readQueueTable(fs, dir)
	tableOK := tableErr == nil
	if tableErr != nil && !errors.Is(tableErr, os.ErrNotExist) {
		s.log.Warn().Err(tableErr).Msg("queue table unreadable; re-dispatching the whole CommitLog")
	}
	if !tableOK {
		table = queueTable{indexedPhy: -1, queues: map[queueKey]queueBounds{}}
	}
	broken, err := s.loadQueues()
	if err != nil {
		return err
	}

	from := cl.MinOffset()
	full := !s.recovery.CheckpointValid || (!tableOK && cl.Written() > cl.MinOffset())
	if !full && ckpt.Dispatched > from {
		from = ckpt.Dispatched
	}
	if end := cl.Written(); from > end {
		from = end
	}
	if full {
		// Without a checkpoint or a queue table nothing tells a lost queue
		// from one that never was: re-dispatch everything (queues whose
		// directory failed to open were set aside and start afresh).
		s.recovery.FullRedispatch = true
	} else if err := s.repairQueues(table, broken, from); err != nil {
		return fmt.Errorf("repair consume queues: %w", err)
	}
	// The index may know less than the checkpoint says (its flush never
	// claims the last message it was given): re-dispatch from the record
	// after the last one it guarantees, so every key is indexed again.
	if next, ok := s.indexResume(); ok && next < from {
		from = next
	} else if !ok && table.indexedPhy >= cl.MinOffset() && s.index.MaxPhysicalOffset() < table.indexedPhy {
		s.log.Warn().Int64("indexed", s.index.MaxPhysicalOffset()).Int64("checkpointed", table.indexedPhy).
			Msg("the index lost its files; re-indexing the whole CommitLog")
		from = cl.MinOffset()
	}
	n, err := s.redispatch(from)
	if err != nil {
		if errors.Is(err, commitlog.ErrCorrupt) { // a damaged frame header
			return fmt.Errorf("%w: re-dispatch from %d: %w", ErrCorrupt, from, err)
		}
		return fmt.Errorf("re-dispatch from %d: %w", from, err)
	}
	s.recovery.Redispatched = n
	end := cl.Written()
	for key, q := range s.queues {
		max, err := q.TruncateByPhysical(end)
		if err != nil {
			return fmt.Errorf("truncate consume queue %s/%d: %w", key.topic, key.id, err)
		}
		floor := table.queues[key].max
		if f := s.lost.floors[key]; f > floor {
			floor = f
		}
		if floor > max && s.fillLost(q, floor, end) {
			// Records a repair gave up: their offsets stay taken.
			max = q.MaxOffset()
		}
		if tb, ok := table.queues[key]; ok && tb.max > max {
			if max > q.MinOffset() || tb.lastPhy >= cl.MinOffset() {
				s.log.Error().Str("topic", key.topic).Int32("queue", key.id).Int64("maxOffset", max).Int64("checkpointed", tb.max).
					Msg("the CommitLog lost records of this queue; their offsets will be given out again")
				s.repairs.lost.Add(tb.max - max)
			} else {
				// Retention took every record of the queue: restart it
				// where it was, never at a used offset.
				if err := q.Reset(tb.max); err != nil {
					return fmt.Errorf("restart consume queue %s/%d at %d: %w", key.topic, key.id, tb.max, err)
				}
				s.repairs.restarted.Add(1)
				s.log.Warn().Str("topic", key.topic).Int32("queue", key.id).Int64("offset", tb.max).
					Msg("empty consume queue restarted at its checkpointed max offset")
				max = tb.max
			}
		}
		s.queueOffsets[key] = max
	}
	for key, floor := range s.lost.floors {
		if _, ok := s.queues[key]; !ok && floor > 0 && table.queues[key].max < floor {
			// Every record of the queue was given up by a repair and its
			// files are gone: its offsets continue above the floor.
			q, err := s.queue(key.topic, key.id, true)
			if err != nil {
				return err
			}
			if err := q.Reset(floor); err != nil {
				return err
			}
			s.queueOffsets[key] = floor
		}
	}
	for key, tb := range table.queues {
		if _, ok := s.queues[key]; !ok && tb.max > 0 && tb.lastPhy < cl.MinOffset() {
			// A queue of the table whose records are all gone and that
			// could not be rebuilt: keep its offsets moving on.
			q, err := s.queue(key.topic, key.id, true)
			if err != nil {
				return err
			}
			if err := q.Reset(tb.max); err != nil {
				return err
			}
			s.repairs.restarted.Add(1)
			s.queueOffsets[key] = tb.max
		}
	}
	// Records a held dispatcher has not reached yet (HoldDispatch) took
	// their queue offsets too (truncate.go).
	return s.countUndispatched()
}

// loadQueues opens every ConsumeQueue directory found on disk. A queue
// whose files cannot be opened (ErrCorrupt) is set aside as
// <queueId>.broken and returned, to be rebuilt.
func (s *Store) loadQueues() (map[queueKey]bool, error) {
	broken := make(map[queueKey]bool)
	root := filepath.Join(s.opts.Dir, "consumequeue")
	topics, err := s.opts.FS.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return broken, nil
	}
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		ids, err := s.opts.FS.ReadDir(filepath.Join(root, t.Name()))
		if err != nil {
			return nil, err
		}
		for _, d := range ids {
			id, err := strconv.ParseInt(d.Name(), 10, 32)
			if err != nil || !d.IsDir() {
				continue
			}
			_, err = s.queue(t.Name(), int32(id), true)
			if errors.Is(err, consumequeue.ErrCorrupt) {
				key := queueKey{t.Name(), int32(id)}
				s.log.Warn().Err(err).Str("topic", key.topic).Int32("queue", key.id).Msg("consume queue unreadable; setting it aside to rebuild it")
				if err := s.setAside(s.queueDir(key)); err != nil {
					return nil, err
				}
				broken[key] = true
				continue
			}
			if err != nil {
				return nil, err
			}
		}
	}
	return broken, nil
}
