package storage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
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
	storeID   atomic.Uint64 // names the store in message ids (storeid.go): the 8 bytes, big-endian
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
	damage      damageMark   // a replica's first damage (damage.go)
	lost        lostState    // ranges a repair gave up (lost.go); set at Open
	repairs     repairs      // rebuilds of derived files (rebuild.go)
	tableMu     sync.Mutex   // guards lastTable
	lastTable   []byte       // the queue table last written
	health      dispatchHealth
	disk        diskMonitor // last sample of the file system's used fraction (disk.go)
	scrub       scrubber    // scrub.go

	retentionPolicy atomic.Pointer[RetentionPolicy]
	retentionMu     sync.Mutex   // held by a scheduled retention pass
	retentionPaused bool         // PauseRetention; under retentionMu
	retentionHolds  int          // HoldRetention's holds; under retentionMu
	heldCut         int64        // the highest cut applied while held; under retentionMu
	heldLogged      atomic.Int64 // unix ns of the last "pressure, nothing deletable" warning
	encoders        sync.Pool

	// dispatchCap bounds the dispatcher (HoldDispatch; MaxInt64 without),
	// and truncMu serialises TruncateFrom with checkpoints (truncate.go).
	dispatchCap atomic.Int64
	truncMu     sync.Mutex
	// gate is a replicated store's commit point and fence (replicate.go).
	gate commitGate

	closing      chan struct{}      // stops the dispatcher
	dispatcher   *worker.Service    // dispatchLoop
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
	s.dispatchCap.Store(math.MaxInt64)
	s.damage.c = make(chan struct{})
	if opts.Replicated {
		opts.HoldDispatch = true
		s.opts.HoldDispatch = true
		s.gate.fenced = true // the commit point is raised by the owner's first SetDispatchLimit
	}
	if opts.HoldDispatch {
		s.dispatchCap.Store(max(opts.DispatchLimit, 0))
	}
	if opts.Replicated {
		err = s.checkDamageMark()
	}
	if err == nil {
		err = s.open()
	}
	if err == nil {
		err = s.loadStoreID()
	}
	if err != nil {
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
	id := s.StoreID()
	ev.Hex("storeId", id[:]).
		Bool("abnormal", s.recovery.Abnormal).
		Bool("checkpointValid", s.recovery.CheckpointValid).
		Int64("end", s.commitLog.Written()).
		Int64("truncatedBytes", s.recovery.CommitLog.TruncatedBytes).
		Int64("redispatched", s.recovery.Redispatched).
		Dur("took", s.recovery.Duration).
		Msg("store opened")
	s.start()
	return s, nil
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
	if _, err := s.dispatchAvailable(min(s.commitLog.Written(), s.dispatchCap.Load())); err != nil {
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
