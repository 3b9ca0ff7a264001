package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/message"
)

// Rebuilding derived state from the CommitLog (see doc.go, "Derived state
// is rebuilt from the CommitLog").

const (
	brokenSuffix  = ".broken"
	rebuildSuffix = ".rebuild"
)

// RepairStats counts what the store found wrong in its derived files and
// rebuilt from the CommitLog since Open (Open's own repairs included).
type RepairStats struct {
	// QueuesRebuilt counts ConsumeQueue rebuilds.
	QueuesRebuilt int64
	// BadEntries counts queue entries a reader refused: their record did
	// not carry the entry's topic, queue id and queue offset, or the entry
	// was empty below the queue's maximum.
	BadEntries int64
	// QueuesRestarted counts empty queues restarted at the queue table's
	// maximum so that their offsets are not reused.
	QueuesRestarted int64
	// LostRecords counts queue offsets the queue table knew of whose
	// records the CommitLog no longer holds (a cut made by AllowCorrupt);
	// their offsets are given out again.
	LostRecords int64
}

// repairs is the store's rebuild bookkeeping.
type repairs struct {
	rebuilt, badEntries, restarted, lost atomic.Int64

	mu      sync.Mutex
	pending map[queueKey]string // queue -> why, waiting for the dispatcher
	done    map[queueKey]int64  // rebuilds completed per queue
	bad     map[queueKey]badEntry
	wake    chan struct{} // buffered 1: the dispatcher has rebuilds to do
}

// badEntry is the last entry of a queue a reader refused.
type badEntry struct {
	offset int64
	after  int64 // rebuilds of the queue completed when it was refused
}

// RepairStats reports the repairs made since Open.
func (s *Store) RepairStats() RepairStats {
	r := &s.repairs
	return RepairStats{QueuesRebuilt: r.rebuilt.Load(), BadEntries: r.badEntries.Load(),
		QueuesRestarted: r.restarted.Load(), LostRecords: r.lost.Load()}
}

func (s *Store) queueDir(key queueKey) string {
	return filepath.Join(s.opts.Dir, "consumequeue", key.topic, strconv.Itoa(int(key.id)))
}

// badQueueEntry handles a queue entry a reader must not serve: it is
// counted and the queue's rebuild requested. It reports whether the reader
// should pass over the entry instead of stopping before it: only when a
// rebuild completed since the same entry was refused (the CommitLog itself
// does not hold the message any more), so a queue can never wedge.
func (s *Store) badQueueEntry(key queueKey, offset int64, e consumequeue.Entry, cause error) (skip bool) {
	r := &s.repairs
	r.badEntries.Add(1)
	r.mu.Lock()
	done := r.done[key]
	prev, seen := r.bad[key]
	skip = seen && prev.offset == offset && prev.after < done
	if !skip {
		r.bad[key] = badEntry{offset: offset, after: done}
	}
	r.mu.Unlock()
	if skip {
		s.quarantine(e.CommitLogOffset, e.Size, "read", fmt.Errorf("%s/%d offset %d still bad after a rebuild: %w", key.topic, key.id, offset, cause))
		return true
	}
	s.log.Error().Err(cause).Str("topic", key.topic).Int32("queue", key.id).Int64("queueOffset", offset).
		Msg("consume queue entry refused; rebuilding the queue from the CommitLog")
	s.requestRebuild(key, cause.Error())
	return false
}

// requestRebuild asks the dispatcher to rebuild a queue.
func (s *Store) requestRebuild(key queueKey, why string) {
	r := &s.repairs
	r.mu.Lock()
	if _, dup := r.pending[key]; !dup {
		r.pending[key] = why
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// runPendingRebuilds rebuilds the requested queues up to the dispatched
// offset. Only the dispatcher (or Open/Close) calls it.
func (s *Store) runPendingRebuilds() error {
	r := &s.repairs
	r.mu.Lock()
	pending := r.pending
	r.pending = make(map[queueKey]string)
	r.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	targets := make(map[queueKey]int64, len(pending))
	for key, why := range pending {
		floor := int64(0)
		if q, _ := s.queue(key.topic, key.id, false); q != nil {
			floor = q.MinOffset()
		}
		targets[key] = floor
		s.log.Warn().Str("topic", key.topic).Int32("queue", key.id).Str("reason", why).Msg("rebuilding consume queue")
	}
	err := s.rebuildQueues(targets, s.dispatched.Load())
	if err != nil {
		r.mu.Lock()
		for key, why := range pending { // try again on the next pass
			r.pending[key] = why
		}
		r.mu.Unlock()
	}
	return err
}

// rebuildQueues rebuilds each queue of targets (queue -> the minimum offset
// to keep) from the records of the CommitLog in [MinOffset, upTo), in one
// scan: the new files are written in <queueId>.rebuild, then swapped in
// under the queues lock; the old directory is kept as <queueId>.broken.
func (s *Store) rebuildQueues(targets map[queueKey]int64, upTo int64) error {
	start := time.Now()
	type target struct {
		key   queueKey
		floor int64
		q     *consumequeue.Queue
		n     int64
	}
	byTopic := make(map[string]map[int32]*target)
	var all []*target
	fail := func(err error) error {
		for _, t := range all {
			if t.q != nil {
				t.q.Close()
			}
		}
		return err
	}
	for key, floor := range targets {
		dir := s.queueDir(key) + rebuildSuffix
		if err := s.opts.FS.RemoveAll(dir); err != nil {
			return fail(err)
		}
		q, err := consumequeue.Open(consumequeue.Options{Dir: dir, EntriesPerFile: s.opts.QueueEntriesPerFile, Logger: s.opts.Logger, FS: s.opts.FS})
		if err != nil {
			return fail(fmt.Errorf("rebuild %s/%d: %w", key.topic, key.id, err))
		}
		t := &target{key: key, floor: floor, q: q}
		all = append(all, t)
		if byTopic[key.topic] == nil {
			byTopic[key.topic] = make(map[int32]*target)
		}
		byTopic[key.topic][key.id] = t
	}
	var buf []byte
	for off := s.commitLog.MinOffset(); off < upTo; {
		rec, next, err := s.commitLog.Next(off, buf)
		if errors.Is(err, commitlog.ErrNoData) {
			break
		}
		if errors.Is(err, commitlog.ErrChecksum) {
			// A damaged record (quarantined by the dispatcher): its queue
			// offset is kept as a placeholder when the gap shows
			// (putQueueEntry, fillSkipped).
			d := &s.disp
			if len(d.skipped) == maxSkipped {
				d.skipped = append(d.skipped[:0], d.skipped[1:]...)
			}
			d.skipped = append(d.skipped, rec)
			off = next
			continue
		}
		if errors.Is(err, commitlog.ErrCorrupt) {
			// A damaged frame header: nothing after it can be trusted to be
			// a frame (see Damaged records in doc.go).
			return fail(fmt.Errorf("%w: rebuild: read at %d: %w", ErrCorrupt, off, err))
		}
		if err != nil {
			return fail(fmt.Errorf("rebuild: read at %d: %w", off, err))
		}
		if cap(rec.Payload) > cap(buf) {
			buf = rec.Payload[:0]
		}
		off = next
		var info message.DispatchInfo
		if message.DecodeDispatch(rec.Payload, &info) != nil {
			continue // quarantined by the dispatcher; never had an entry
		}
		t := byTopic[string(info.Topic)][info.QueueID]
		if t == nil || info.QueueOffset < t.floor {
			continue
		}
		e := consumequeue.Entry{CommitLogOffset: rec.Offset, Size: rec.Size, TagsCode: info.TagsCode}
		err = s.putQueueEntry(t.q, info.QueueOffset, e)
		if errors.Is(err, consumequeue.ErrGap) && s.fillLost(t.q, info.QueueOffset, rec.Offset) {
			// Records a repair gave up (lost.go): the scan read every
			// record before this one, so the missing offsets were theirs.
			err = t.q.Put(info.QueueOffset, e)
		}
		if errors.Is(err, consumequeue.ErrGap) {
			// Records of the queue are missing from the CommitLog (a cut
			// made by AllowCorrupt): continue after the hole.
			s.log.Error().Str("topic", t.key.topic).Int32("queue", t.key.id).Int64("from", t.q.MaxOffset()).
				Int64("to", info.QueueOffset).Msg("the CommitLog lacks records of this queue; restarting it after the hole")
			s.repairs.lost.Add(info.QueueOffset - t.q.MaxOffset())
			if err = t.q.Reset(info.QueueOffset); err == nil {
				err = t.q.Put(info.QueueOffset, e)
			}
		}
		if err != nil {
			return fail(fmt.Errorf("rebuild %s/%d at queue offset %d: %w", t.key.topic, t.key.id, info.QueueOffset, err))
		}
		t.n++
	}
	for _, t := range all {
		if err := t.q.Close(); err != nil {
			return fail(err)
		}
		t.q = nil
	}
	for _, t := range all {
		if err := s.swapRebuilt(t.key); err != nil {
			return err
		}
		s.repairs.rebuilt.Add(1)
		s.repairs.mu.Lock()
		s.repairs.done[t.key]++
		s.repairs.mu.Unlock()
		q, _ := s.queue(t.key.topic, t.key.id, false)
		s.log.Warn().Str("topic", t.key.topic).Int32("queue", t.key.id).Int64("entries", t.n).
			Int64("minOffset", q.MinOffset()).Int64("maxOffset", q.MaxOffset()).
			Dur("took", time.Since(start)).Msg("consume queue rebuilt from the CommitLog")
		s.disp.touched = append(s.disp.touched, t.key.topic)
	}
	return nil
}

// swapRebuilt replaces the queue's directory with its rebuilt one and
// reopens it. Readers that hold the old queue see consumequeue.ErrClosed
// and look the queue up again, which waits for the swap.
func (s *Store) swapRebuilt(key queueKey) error {
	dir := s.queueDir(key)
	s.queuesMu.Lock()
	defer s.queuesMu.Unlock()
	if old := s.queues[key]; old != nil {
		if err := old.Close(); err != nil {
			s.log.Warn().Err(err).Str("dir", dir).Msg("closing the damaged consume queue failed")
		}
		delete(s.queues, key)
	}
	if err := s.setAside(dir); err != nil {
		return err
	}
	if err := s.opts.FS.Rename(dir+rebuildSuffix, dir); err != nil {
		return fmt.Errorf("rebuild %s/%d: %w", key.topic, key.id, err)
	}
	if err := s.opts.FS.SyncDir(filepath.Dir(dir)); err != nil {
		return err
	}
	return s.openQueueLocked(key)
}

// setAside renames a queue directory to <dir>.broken (replacing an older
// one); a missing directory is fine.
func (s *Store) setAside(dir string) error {
	if err := s.opts.FS.RemoveAll(dir + brokenSuffix); err != nil {
		return err
	}
	if err := s.opts.FS.Rename(dir, dir+brokenSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("set aside %s: %w", dir, err)
	}
	return nil
}

// verifyEntry reports why the record at e does not belong at queue offset
// off of key (nil when it does). It reads the record from the CommitLog.
func (s *Store) verifyEntry(key queueKey, off int64, e consumequeue.Entry, buf []byte) error {
	if s.inLost(e.CommitLogOffset) {
		return nil // a record a repair gave up (or its placeholder): readers pass over it
	}
	rec, err := s.commitLog.Read(e.CommitLogOffset, buf)
	if errors.Is(err, commitlog.ErrChecksum) && rec.Size == e.Size {
		// The entry points at an intact frame of its size whose bytes were
		// damaged: the record is bad, not the entry. Readers quarantine it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: entry %d points at CommitLog offset %d: %w", ErrCorrupt, off, e.CommitLogOffset, err)
	}
	var info message.DispatchInfo
	if err := message.DecodeDispatch(rec.Payload, &info); err != nil {
		return fmt.Errorf("%w: entry %d points at an undecodable record at %d: %w", ErrCorrupt, off, e.CommitLogOffset, err)
	}
	if rec.Size != e.Size || !bytes.Equal(info.Topic, []byte(key.topic)) || info.QueueID != key.id || info.QueueOffset != off {
		return fmt.Errorf("%w: entry %d of %s/%d points at the record of %s/%d offset %d (size %d, entry says %d)",
			ErrCorrupt, off, key.topic, key.id, info.Topic, info.QueueID, info.QueueOffset, rec.Size, e.Size)
	}
	return nil
}

// checkMessage reports why a message read through the entry at queue
// offset off of key does not belong there (nil when it does). ReadQueue
// calls it on every message it serves.
func checkMessage(key queueKey, off int64, m *message.Message) error {
	if m.Topic != key.topic || m.QueueID != key.id || m.QueueOffset != off {
		return fmt.Errorf("%w: entry %d of %s/%d points at the message of %s/%d offset %d (CommitLog offset %d)",
			ErrCorrupt, off, key.topic, key.id, m.Topic, m.QueueID, m.QueueOffset, m.PhysicalOffset)
	}
	return nil
}

// sampleQueue checks a few entries of q against the CommitLog (see
// doc.go): the minimum, each file boundary, tableMax-1 and the maximum-1,
// those pointing at retained records below dispatched. It returns the first
// problem found.
func (s *Store) sampleQueue(key queueKey, q *consumequeue.Queue, tableMax, dispatched int64) error {
	lo, hi := q.MinOffset(), q.MaxOffset()
	if lo >= hi {
		return nil
	}
	offs := []int64{lo, hi - 1}
	if tableMax > lo && tableMax <= hi {
		offs = append(offs, tableMax-1)
	}
	per := int64(s.opts.QueueEntriesPerFile)
	for b := (lo/per + 1) * per; b < hi; b += per {
		offs = append(offs, b-1, b)
	}
	var buf []byte
	for _, off := range offs {
		e, err := q.Get(off)
		if err != nil {
			return err
		}
		if e.CommitLogOffset >= dispatched || e.CommitLogOffset < s.commitLog.MinOffset() {
			continue // re-dispatched below, or deleted by retention
		}
		if err := s.verifyEntry(key, off, e, buf); err != nil {
			return err
		}
	}
	return nil
}

// repairQueues is Open's check of the ConsumeQueues against the queue
// table and the CommitLog, before the re-dispatch: broken holds the queues
// whose directory failed to open (already set aside). It rebuilds what
// is damaged.
func (s *Store) repairQueues(table queueTable, broken map[queueKey]bool, dispatched int64) error {
	targets := make(map[queueKey]int64)
	why := make(map[queueKey]string)
	for key := range broken {
		targets[key], why[key] = table.queues[key].min, "files unreadable"
	}
	for key, tb := range table.queues {
		if broken[key] {
			continue
		}
		q := s.queues[key]
		switch {
		case q == nil:
			targets[key], why[key] = tb.min, "directory missing"
		case q.MaxOffset() < tb.max:
			targets[key], why[key] = max(tb.min, q.MinOffset()), fmt.Sprintf("max offset %d below the checkpointed %d", q.MaxOffset(), tb.max)
		case q.MinOffset() > tb.min && !q.HasStoredMin():
			// Nothing recorded a raised minimum: its first files are lost.
			targets[key], why[key] = tb.min, fmt.Sprintf("min offset %d above the checkpointed %d", q.MinOffset(), tb.min)
		}
	}
	for key, q := range s.queues {
		if _, ok := targets[key]; ok {
			continue
		}
		tb, known := table.queues[key]
		if !known {
			tb.max = -1
		}
		if err := s.sampleQueue(key, q, tb.max, dispatched); err != nil {
			targets[key], why[key] = max(tb.min, q.MinOffset()), err.Error()
		}
	}
	if len(targets) == 0 {
		return nil
	}
	for key := range targets {
		s.log.Warn().Str("topic", key.topic).Int32("queue", key.id).Str("reason", why[key]).Msg("consume queue damaged; rebuilding it from the CommitLog")
	}
	return s.rebuildQueues(targets, min(s.commitLog.Written(), s.dispatchCap.Load()))
}
