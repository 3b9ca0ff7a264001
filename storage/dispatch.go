package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/index"
	"github.com/mqgate/mqgate/storage/message"
)

// dispatcher is the state owned by the goroutine that follows the
// CommitLog (RocketMQ's ReputMessageService). Only dispatchAvailable uses
// it, and it is only ever called by one goroutine at a time: Open (before
// the workers start), the dispatch loop, and Close (after they stopped).
type dispatcher struct {
	buf        []byte
	keyBuf     []byte
	names      map[string]string  // interned topic names
	touched    []string           // topics that got entries in this pass
	indexFloor int64              // the index already holds every offset <= this
	skipped    []commitlog.Record // records passed over for a CRC mismatch (no payload), oldest first
	logged     string             // the last failure logged by dispatchLoop
	loggedAt   time.Time
}

// maxSkipped bounds the records the dispatcher remembers having passed
// over (see fillSkipped).
const maxSkipped = 1024

// dispatchLimit is how far consumers may see: the flushed offset in sync
// mode (a consumer never sees a message a crash could take back), the
// written offset in async mode.
func (s *Store) dispatchLimit() int64 {
	limit := s.commitLog.Written()
	if s.commitLog.FlushMode() == commitlog.FlushSync {
		limit = s.commitLog.Flushed()
	}
	return min(limit, s.dispatchCap.Load())
}

// redispatch rebuilds derived entries from CommitLog offset from to the end.
func (s *Store) redispatch(from int64) (int64, error) {
	// The index may claim more than the recovered log holds (an async-mode
	// crash loses unflushed log bytes): never skip indexing past the end.
	floor := min(s.index.MaxPhysicalOffset(), s.commitLog.Written()-1)
	s.disp = dispatcher{names: make(map[string]string), indexFloor: floor}
	s.dispatched.Store(from)
	return s.dispatchAvailable(min(s.commitLog.Written(), s.dispatchCap.Load()))
}

// dispatchAvailable dispatches every record below limit, then wakes the
// long-polling readers of the topics it touched. A record it can never
// dispatch (errUndispatchable) is quarantined and passed over, and so is a
// record whose frame fails its CRC while its header is intact (its length
// is known; see "Damaged records" in the package documentation). Any other
// failure stops the pass at that record, to be retried: an I/O error, or a
// frame whose header is damaged — past it the next frame's position is
// unknown, so the dispatcher stops there and DispatchStatus reports it.
func (s *Store) dispatchAvailable(limit int64) (int64, error) {
	d := &s.disp
	var n int64
	defer s.notifyTouched()
	for off := s.dispatched.Load(); off < limit; {
		rec, next, err := s.commitLog.Next(off, d.buf)
		if errors.Is(err, commitlog.ErrNoData) {
			// Past a Blank frame that ends the data (after a crash took
			// the record that followed it): nothing is left to dispatch
			// there, and readers waiting for the dispatcher to reach the
			// end must not wait for the next append.
			if next > off {
				s.dispatched.Store(next)
			}
			break
		}
		if errors.Is(err, commitlog.ErrChecksum) {
			s.quarantine(rec.Offset, rec.Size, "dispatch", err)
			if len(d.skipped) == maxSkipped {
				d.skipped = append(d.skipped[:0], d.skipped[1:]...)
			}
			d.skipped = append(d.skipped, rec)
			n++
			off = next
			s.dispatched.Store(off)
			continue
		}
		if err != nil {
			return n, fmt.Errorf("dispatch at %d: %w", off, err)
		}
		if cap(rec.Payload) > cap(d.buf) {
			d.buf = rec.Payload[:0]
		}
		if err := s.dispatchRecord(rec); err != nil {
			if !isUndispatchable(err) {
				return n, err
			}
			s.quarantine(rec.Offset, rec.Size, "dispatch", err)
		}
		n++
		off = next
		s.dispatched.Store(off)
	}
	return n, nil
}

// dispatchRecord makes one record visible: its ConsumeQueue entry, then
// its index keys. Failures that retrying cannot mend are errUndispatchable.
func (s *Store) dispatchRecord(rec commitlog.Record) error {
	d := &s.disp
	var info message.DispatchInfo
	if err := message.DecodeDispatch(rec.Payload, &info); err != nil {
		return undispatchable("%w: record at %d: %w", ErrCorrupt, rec.Offset, err)
	}
	topic, ok := d.names[string(info.Topic)]
	if !ok {
		topic = string(info.Topic)
		if err := checkTopic(topic); err != nil {
			return undispatchable("record at %d: %w", rec.Offset, err)
		}
		d.names[topic] = topic
	}
	if info.QueueID < 0 || info.QueueID > MaxQueueID {
		return undispatchable("%w: record at %d: queue id %d outside 0..%d", ErrInvalidMessage, rec.Offset, info.QueueID, MaxQueueID)
	}
	q, err := s.queue(topic, info.QueueID, true)
	if err != nil {
		return err
	}
	entry := consumequeue.Entry{CommitLogOffset: rec.Offset, Size: rec.Size, TagsCode: info.TagsCode}
	err = s.putQueueEntry(q, info.QueueOffset, entry)
	if errors.Is(err, consumequeue.ErrGap) {
		// The queue lost an end its records still have (files lost while
		// the table did not know them yet): rebuild it from the CommitLog
		// up to this record, then put the record.
		key := queueKey{topic, info.QueueID}
		s.log.Warn().Err(err).Str("topic", topic).Int32("queue", info.QueueID).Int64("queueOffset", info.QueueOffset).
			Msg("consume queue has a gap below a record; rebuilding it from the CommitLog")
		if err := s.rebuildQueues(map[queueKey]int64{key: q.MinOffset()}, rec.Offset); err != nil {
			return err
		}
		if q, err = s.queue(topic, info.QueueID, true); err != nil {
			return err
		}
		err = s.putQueueEntry(q, info.QueueOffset, entry)
		if errors.Is(err, consumequeue.ErrGap) && s.fillLost(q, info.QueueOffset, rec.Offset) {
			// The rebuild read the whole log: the missing offsets were
			// records a repair gave up (lost.go).
			err = q.Put(info.QueueOffset, entry)
		}
	}
	if err != nil {
		err = fmt.Errorf("consume queue %s/%d offset %d: %w", topic, info.QueueID, info.QueueOffset, err)
		if errors.Is(err, consumequeue.ErrGap) || errors.Is(err, consumequeue.ErrInvalidEntry) {
			return errUndispatchable{err}
		}
		return err
	}
	if len(d.touched) == 0 || d.touched[len(d.touched)-1] != topic {
		d.touched = append(d.touched, topic)
	}
	if rec.Offset > d.indexFloor {
		if err := s.indexRecord(topic, rec.Offset, &info); err != nil {
			if !errors.Is(err, index.ErrKeyTooLong) && !errors.Is(err, index.ErrInvalidArgument) {
				return err
			}
			// Consumers see the message; only its key lookups are lost.
			s.index.Complete(rec.Offset)
			return errUndispatchable{fmt.Errorf("keys not indexed: %w", err)}
		}
		s.index.Complete(rec.Offset)
	}
	return nil
}

// putQueueEntry writes entry at queue offset off. A gap before off that
// records the dispatcher passed over explain is closed with placeholders
// (fillSkipped); a queue that is otherwise empty below off (its files were
// lost, or retention moved past its start) is restarted at off; an entry
// below a minimum that retention already recorded is skipped (re-dispatch
// after a crash).
func (s *Store) putQueueEntry(q *consumequeue.Queue, off int64, e consumequeue.Entry) error {
	err := q.Put(off, e)
	if errors.Is(err, consumequeue.ErrOffsetTooSmall) {
		return nil
	}
	if errors.Is(err, consumequeue.ErrGap) && s.fillSkipped(q, off, e.CommitLogOffset) {
		return q.Put(off, e)
	}
	if errors.Is(err, consumequeue.ErrGap) && q.MaxOffset() == q.MinOffset() {
		if err := q.Reset(off); err != nil {
			return err
		}
		return q.Put(off, e)
	}
	return err
}

// fillSkipped closes the gap [MaxOffset, off) of q before the record at
// recOffset when at least as many records the dispatcher passed over (CRC
// mismatch) lie between q's last entry and that record: the missing queue
// offsets were theirs, since a queue's records are in the log in
// queue-offset order. Each hole gets a placeholder entry pointing at one
// of those damaged frames (which one does not matter: none can be read),
// so the queue stays dense and a reader that reaches a placeholder finds
// a frame that fails its CRC and passes over it. It reports whether the
// gap was closed; any other gap is left to errUndispatchable.
func (s *Store) fillSkipped(q *consumequeue.Queue, off, recOffset int64) bool {
	d := &s.disp
	top := q.MaxOffset()
	holes := off - top
	after := int64(-1)
	if last, ok := q.LastEntry(); ok {
		after = last.CommitLogOffset
	}
	var fill []commitlog.Record
	for _, r := range d.skipped {
		if r.Offset > after && r.Offset < recOffset {
			fill = append(fill, r)
		}
	}
	if holes <= 0 || int64(len(fill)) < holes {
		return false
	}
	for i, r := range fill[:holes] {
		if err := q.Put(top+int64(i), consumequeue.Entry{CommitLogOffset: r.Offset, Size: r.Size}); err != nil {
			s.log.Warn().Err(err).Int64("queueOffset", top+int64(i)).Msg("placeholder for a damaged record not written")
			return false
		}
	}
	s.log.Warn().Int64("from", top).Int64("to", off).Int64("damagedAt", fill[0].Offset).
		Msg("queue offsets of damaged records kept as placeholders; readers pass over them")
	return true
}

func (s *Store) indexRecord(topic string, offset int64, info *message.DispatchInfo) error {
	d := &s.disp
	keys := info.Keys
	for len(keys) > 0 {
		var k []byte
		if i := bytes.IndexByte(keys, ' '); i >= 0 {
			k, keys = keys[:i], keys[i+1:]
		} else {
			k, keys = keys, nil
		}
		if len(k) == 0 {
			continue
		}
		d.keyBuf = indexKey(d.keyBuf, topic, indexKindKey, k)
		if err := s.index.Add(d.keyBuf, offset, info.StoreTimestamp); err != nil {
			return fmt.Errorf("index key at %d: %w", offset, err)
		}
	}
	for _, kk := range [...]struct {
		topic string
		kind  byte
		v     []byte
	}{{topic, indexKindUniq, info.UniqKey}, {topic, indexKindDup, info.DedupID}, {"", indexKindOrigin, info.OriginID}} {
		if len(kk.v) == 0 {
			continue
		}
		d.keyBuf = indexKey(d.keyBuf, kk.topic, kk.kind, kk.v)
		if err := s.index.Add(d.keyBuf, offset, info.StoreTimestamp); err != nil {
			return fmt.Errorf("index key at %d: %w", offset, err)
		}
	}
	return nil
}

// NewDataSignal returns a channel that is closed the next time the
// dispatcher adds entries to any queue of topic (or the store closes).
// Long polls take the channel, re-check their queues, then wait on it.
func (s *Store) NewDataSignal(topic string) <-chan struct{} {
	s.signalsMu.Lock()
	defer s.signalsMu.Unlock()
	ch, ok := s.signals[topic]
	if !ok {
		ch = make(chan struct{})
		if s.closed.Load() {
			close(ch)
			return ch
		}
		s.signals[topic] = ch
	}
	return ch
}

func (s *Store) notifyTouched() {
	d := &s.disp
	if len(d.touched) == 0 {
		return
	}
	s.signalsMu.Lock()
	if s.dispatchSignal != nil {
		close(s.dispatchSignal)
		s.dispatchSignal = nil
	}
	for _, t := range d.touched {
		if ch, ok := s.signals[t]; ok {
			close(ch)
			delete(s.signals, t)
		}
	}
	s.signalsMu.Unlock()
	d.touched = d.touched[:0]
}

// AwaitDispatch waits until everything appended (and, in sync mode,
// flushed) before the call is visible in the ConsumeQueues, or ctx ends.
// A consumer that calls it before reading sees every message whose send
// had returned: read-your-writes across the asynchronous dispatcher.
func (s *Store) AwaitDispatch(ctx context.Context) error {
	target := s.dispatchLimit()
	for s.dispatched.Load() < target {
		s.signalsMu.Lock()
		if s.dispatchSignal == nil {
			s.dispatchSignal = make(chan struct{})
		}
		ch := s.dispatchSignal
		s.signalsMu.Unlock()
		if s.dispatched.Load() >= target {
			return nil
		}
		select {
		case <-ch:
		case <-s.closing:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// CaughtUp reports whether everything appended (flushed, in sync mode) is
// visible in the ConsumeQueues: AwaitDispatch would return at once.
func (s *Store) CaughtUp() bool { return s.dispatched.Load() >= s.dispatchLimit() }

// Dispatched is the CommitLog offset below which every record is visible
// in its ConsumeQueue.
func (s *Store) Dispatched() int64 { return s.dispatched.Load() }

// dispatchLoop follows the CommitLog until the store closes. A failed pass
// (an I/O error: a record-level failure is quarantined instead) is logged,
// reported by DispatchStatus and retried.
func (s *Store) dispatchLoop(ctx context.Context) {
	notify := s.commitLog.Notify()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-notify:
		case <-retry:
		case <-s.repairs.wake:
		}
		retry = nil
		err := s.runPendingRebuilds()
		if err == nil {
			_, err = s.dispatchAvailable(s.dispatchLimit())
		} else {
			s.notifyTouched()
		}
		s.recordDispatch(err)
		if err != nil {
			// A pass stuck at a damaged header fails the same way every
			// 100 ms: log it when it changes and once a minute.
			d := &s.disp
			if now := time.Now(); err.Error() != d.logged || now.Sub(d.loggedAt) >= time.Minute {
				s.log.Error().Err(err).Msg("dispatch failed; retrying every 100 ms")
				d.logged, d.loggedAt = err.Error(), now
			}
			retry = time.After(100 * time.Millisecond)
		} else {
			s.disp.logged = ""
		}
	}
}

// indexResume is the CommitLog offset just after the last record the
// index guarantees (ok false when that cannot be known: the index is
// empty or its record is gone, and the checkpoint decides).
func (s *Store) indexResume() (int64, bool) {
	last := s.index.MaxPhysicalOffset()
	if last < s.commitLog.MinOffset() {
		return 0, false
	}
	rec, err := s.commitLog.Read(last, nil)
	if err != nil {
		return 0, false
	}
	return last + int64(rec.Size), true
}
