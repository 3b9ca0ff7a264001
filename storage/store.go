package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/index"
	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/message"
)

// queueKey names one ConsumeQueue.
type queueKey struct {
	topic string
	id    int32
}

// PutResult is where a message landed.
type PutResult struct {
	ID             message.ID
	PhysicalOffset int64
	Size           int32
	QueueID        int32
	QueueOffset    int64
	StoreTimestamp int64
}

// RecoveryInfo describes what Open had to do.
type RecoveryInfo struct {
	Abnormal        bool // the abort marker survived: the last run did not close cleanly
	CheckpointValid bool
	CommitLog       commitlog.RecoveryReport
	Redispatched    int64 // records re-dispatched into ConsumeQueues/index
	FullRedispatch  bool  // no checkpoint or queue table: every record was re-dispatched
	Duration        time.Duration
}

// Store is the message store facade. All methods are safe for concurrent use.
type Store struct {
	opts      Options
	log       zerolog.Logger
	lock      *fileutil.DirLock
	commitLog *commitlog.Log
	index     *index.Index
	storeHost message.Host
	recovery  RecoveryInfo

	// queueOffsets is the next queue offset per queue. Only the commitlog
	// encoder touches it, under the commitlog's append lock.
	queueOffsets map[queueKey]int64

	queuesMu sync.RWMutex
	queues   map[queueKey]*consumequeue.Queue
	topics   map[string][]int32 // queue ids per topic, sorted

	signalsMu      sync.Mutex
	signals        map[string]chan struct{} // per topic: closed when entries land
	dispatchSignal chan struct{}            // closed after every dispatch pass that added entries

	disp        dispatcher   // owned by whoever dispatches (see dispatcher)
	dispatched  atomic.Int64 // CommitLog offset the dispatcher has processed up to
	quarantined quarantine   // records set aside (quarantine.go)
	repairs     repairs      // rebuilds of derived files (rebuild.go)
	tableMu     sync.Mutex   // guards lastTable
	lastTable   []byte       // the queue table last written
	health      dispatchHealth
	disk        diskMonitor // last sample of the file system's used fraction (disk.go)
	scrub       scrubber    // scrub.go

	retentionPolicy atomic.Pointer[RetentionPolicy]
	heldLogged      atomic.Int64 // unix ns of the last "pressure, nothing deletable" warning
	encoders        sync.Pool

	closing      chan struct{}      // stops the dispatcher
	workers      sync.WaitGroup     // the dispatcher
	periodic     []*worker.Periodic // disk sampler, checkpointer, retention, scrubber
	checkpointer *worker.Periodic   // also in periodic
	stopPeriodic context.CancelFunc
	closed       atomic.Bool
	closeMu      sync.Mutex
	closeErr     error
}

// Open opens (creating if needed) the store in opts.Dir and recovers it.
func Open(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	start := time.Now()
	logger := opts.Logger.With().Str("component", "storage").Logger()
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := fileutil.LockDir(opts.Dir)
	if err != nil {
		if errors.Is(err, fileutil.ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, opts.Dir)
		}
		return nil, err
	}
	s := &Store{
		opts:         opts,
		log:          logger,
		lock:         lock,
		storeHost:    message.HostFrom(opts.StoreHost),
		queueOffsets: make(map[queueKey]int64),
		queues:       make(map[queueKey]*consumequeue.Queue),
		topics:       make(map[string][]int32),
		signals:      make(map[string]chan struct{}),
		closing:      make(chan struct{}),
	}
	s.encoders.New = func() any { return &putEncoder{store: s} }
	s.repairs.pending = make(map[queueKey]string)
	s.repairs.done = make(map[queueKey]int64)
	s.repairs.bad = make(map[queueKey]badEntry)
	s.repairs.wake = make(chan struct{}, 1)
	if err := s.open(); err != nil {
		s.closeEngines()
		lock.Unlock()
		return nil, err
	}
	if _, err := s.sampleDisk(); err != nil {
		logger.Error().Err(err).Msg("disk usage sample failed")
	}
	s.recovery.Duration = time.Since(start)
	ev := logger.Info()
	if s.recovery.Abnormal {
		ev = logger.Warn()
	}
	ev.Bool("abnormal", s.recovery.Abnormal).
		Bool("checkpointValid", s.recovery.CheckpointValid).
		Int64("end", s.commitLog.Written()).
		Int64("truncatedBytes", s.recovery.CommitLog.TruncatedBytes).
		Int64("redispatched", s.recovery.Redispatched).
		Dur("took", s.recovery.Duration).
		Msg("store opened")
	s.start()
	return s, nil
}

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

	clOpts := commitlog.Options{
		Dir:           filepath.Join(dir, "commitlog"),
		SegmentSize:   s.opts.SegmentSize,
		FlushMode:     s.opts.FlushMode,
		FlushInterval: s.opts.FlushInterval,
		AllowCorrupt:  s.opts.AllowCorrupt,
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
	return nil
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

// queue returns the ConsumeQueue for (topic, id), opening or creating it
// when create is set; nil without error when it does not exist.
func (s *Store) queue(topic string, id int32, create bool) (*consumequeue.Queue, error) {
	key := queueKey{topic, id}
	s.queuesMu.RLock()
	q := s.queues[key]
	s.queuesMu.RUnlock()
	if q != nil || !create {
		return q, nil
	}
	s.queuesMu.Lock()
	defer s.queuesMu.Unlock()
	if q = s.queues[key]; q != nil {
		return q, nil
	}
	if err := s.openQueueLocked(key); err != nil {
		return nil, err
	}
	return s.queues[key], nil
}

// openQueueLocked opens (creating) the queue's directory and registers
// it. The caller holds queuesMu for writing.
func (s *Store) openQueueLocked(key queueKey) error {
	q, err := consumequeue.Open(consumequeue.Options{
		Dir:            s.queueDir(key),
		EntriesPerFile: s.opts.QueueEntriesPerFile,
		Logger:         s.opts.Logger,
		FS:             s.opts.FS,
	})
	if err != nil {
		return fmt.Errorf("open consume queue %s/%d: %w", key.topic, key.id, err)
	}
	s.queues[key] = q
	ids := s.topics[key.topic]
	for _, id := range ids {
		if id == key.id {
			return nil
		}
	}
	ids = append(ids, key.id)
	for i := len(ids) - 1; i > 0 && ids[i] < ids[i-1]; i-- {
		ids[i], ids[i-1] = ids[i-1], ids[i]
	}
	s.topics[key.topic] = ids
	return nil
}

// Recovery reports what Open did.
func (s *Store) Recovery() RecoveryInfo { return s.recovery }

// FlushMode reports the flush policy in force.
func (s *Store) FlushMode() commitlog.FlushMode { return s.commitLog.FlushMode() }

// Err is non-nil once the write path has failed (the store is read-only).
func (s *Store) Err() error {
	if err := s.commitLog.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	return nil
}

// Close flushes everything, writes a clean checkpoint and releases the
// directory. It is idempotent.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return s.closeErr
	}
	s.stopWorkers()
	if s.opts.ScrubRate > 0 {
		s.saveScrub(time.Now())
	}
	var errs []error
	// Drain: dispatch whatever was appended, then flush and checkpoint.
	if err := s.commitLog.Flush(); err != nil {
		errs = append(errs, err)
	}
	if err := s.runPendingRebuilds(); err != nil {
		errs = append(errs, err)
	}
	if _, err := s.dispatchAvailable(s.commitLog.Written()); err != nil {
		errs = append(errs, err)
	}
	table := s.snapshotQueues()
	clean := len(errs) == 0 && s.commitLog.Err() == nil
	if err := s.flushDerived(); err != nil {
		errs = append(errs, err)
		clean = false
	}
	end := s.commitLog.Flushed()
	if clean {
		if err := s.writeQueueTable(table); err != nil {
			errs = append(errs, err)
			clean = false
		}
	}
	if clean {
		if err := writeCheckpoint(s.opts.FS, s.opts.Dir, checkpoint{Clean: true, Flushed: end, Dispatched: s.dispatched.Load(), WrittenAt: time.Now().UnixMilli()}); err != nil {
			errs = append(errs, err)
			clean = false
		}
	}
	errs = append(errs, s.closeEngines())
	if clean {
		if err := s.opts.FS.Remove(filepath.Join(s.opts.Dir, abortFile)); err != nil {
			errs = append(errs, err)
		} else if err := s.opts.FS.SyncDir(s.opts.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.lock.Unlock())
	s.closeErr = errors.Join(errs...)
	s.signalsMu.Lock()
	for topic, ch := range s.signals {
		close(ch)
		delete(s.signals, topic)
	}
	s.signalsMu.Unlock()
	return s.closeErr
}

func (s *Store) closeEngines() error {
	var errs []error
	s.queuesMu.Lock()
	for _, q := range s.queues {
		errs = append(errs, q.Close())
	}
	s.queuesMu.Unlock()
	if s.index != nil {
		errs = append(errs, s.index.Close())
	}
	if s.commitLog != nil {
		errs = append(errs, s.commitLog.Close())
	}
	return errors.Join(errs...)
}

// flushDerived msyncs every ConsumeQueue and the index.
func (s *Store) flushDerived() error {
	var errs []error
	s.queuesMu.RLock()
	for _, q := range s.queues {
		errs = append(errs, q.Flush())
	}
	s.queuesMu.RUnlock()
	errs = append(errs, s.index.Flush())
	return errors.Join(errs...)
}
