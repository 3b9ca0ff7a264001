package storage

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/message"
)

var readBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Lookup returns the message stored at a CommitLog offset taken from a
// ConsumeQueue or index entry (trusted input). Every frame is verified
// (size, magic, stored offset, CRC-32C) before it is decoded, so damaged
// bytes are never returned: a record that cannot be served gives an error
// wrapping ErrNotFound and ErrCorrupt (callers that pass over missing
// messages pass over it too), and one whose checksum fails is quarantined
// (stage "read").
func (s *Store) Lookup(offset int64) (*message.Message, error) {
	m, size, err := s.lookup(offset)
	if errors.Is(err, commitlog.ErrChecksum) {
		s.quarantine(offset, size, "read", err)
	}
	return m, err
}

// LookupID returns the message a message id names. The id comes from a
// client, so its offset may be anything: a frame that fails validation is
// ErrNotFound (and ErrCorrupt), and is not quarantined — a client must not
// be able to fill the quarantine list by guessing offsets (the scrubber
// and the queue readers report real damage). A message below its queue's
// minimum offset (purged) is ErrNotFound.
func (s *Store) LookupID(id message.ID) (*message.Message, error) {
	m, _, err := s.lookup(id.Offset())
	if err == nil && s.purged(m) {
		return nil, fmt.Errorf("%w: message %s was deleted with its topic or by retention", ErrNotFound, id)
	}
	return m, err
}

// lookup reads and decodes the record at offset; size is the frame's size
// when known (also for a record that fails its checksum).
func (s *Store) lookup(offset int64) (*message.Message, int32, error) {
	if s.closed.Load() {
		return nil, 0, ErrClosed
	}
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	rec, err := s.commitLog.Read(offset, *bp)
	if err != nil {
		return nil, rec.Size, s.mapReadErr(offset, err)
	}
	if cap(rec.Payload) > cap(*bp) {
		*bp = rec.Payload[:0]
	}
	m := new(message.Message)
	if err := message.DecodePayload(rec.Payload, m); err != nil {
		return nil, rec.Size, unreadable(offset, err)
	}
	m.PhysicalOffset = offset
	return m, rec.Size, nil
}

// errUnreadable is a record that cannot be served: its frame fails
// validation or its payload does not decode. errors.Is matches ErrNotFound,
// ErrCorrupt and the cause (commitlog.ErrChecksum for damaged bytes).
type errUnreadable struct {
	offset int64
	cause  error
}

func (e *errUnreadable) Error() string {
	return fmt.Sprintf("storage: unreadable record at commitlog offset %d: %v", e.offset, e.cause)
}

func (e *errUnreadable) Unwrap() []error { return []error{ErrNotFound, ErrCorrupt, e.cause} }

func unreadable(offset int64, cause error) error { return &errUnreadable{offset: offset, cause: cause} }

func (s *Store) mapReadErr(offset int64, err error) error {
	switch {
	case errors.Is(err, commitlog.ErrOffsetTooSmall):
		return fmt.Errorf("%w: commitlog offset %d < %d", ErrOffsetTooSmall, offset, s.commitLog.MinOffset())
	case errors.Is(err, commitlog.ErrCorrupt):
		return unreadable(offset, err)
	case errors.Is(err, commitlog.ErrNoData), errors.Is(err, commitlog.ErrEndOfSegment):
		return fmt.Errorf("%w: no message at commitlog offset %d", ErrNotFound, offset)
	case errors.Is(err, commitlog.ErrClosed):
		return ErrClosed
	}
	return err
}

// MinOffset is the lowest readable queue offset of (topic, queueID).
func (s *Store) MinOffset(topic string, queueID int32) int64 {
	q, _ := s.queue(topic, queueID, false)
	if q == nil {
		return 0
	}
	return q.MinOffset()
}

// MaxOffset is the next queue offset to be dispatched for (topic, queueID):
// every offset below it is readable (or below MinOffset).
func (s *Store) MaxOffset(topic string, queueID int32) int64 {
	q, _ := s.queue(topic, queueID, false)
	if q == nil {
		return 0
	}
	return q.MaxOffset()
}

// QueueIDs lists the queues of a topic that hold or held messages.
func (s *Store) QueueIDs(topic string) []int32 {
	s.queuesMu.RLock()
	defer s.queuesMu.RUnlock()
	return append([]int32(nil), s.topics[topic]...)
}

// Topics lists every topic with at least one ConsumeQueue, sorted.
func (s *Store) Topics() []string {
	s.queuesMu.RLock()
	out := make([]string, 0, len(s.topics))
	for t := range s.topics {
		out = append(out, t)
	}
	s.queuesMu.RUnlock()
	sort.Strings(out)
	return out
}

// ReadResult is one batch read from a queue.
type ReadResult struct {
	Messages []*message.Message
	// Next is the queue offset after the last entry examined: pass it to
	// the next call. Entries that did not match the filter are skipped.
	Next int64
	// Skipped counts entries whose CommitLog record was already deleted by
	// retention, or given up by a repair (their queue offsets are passed
	// over).
	Skipped int
	// Quarantined counts entries whose record could not be read; they are
	// passed over too and listed by Quarantined.
	Quarantined int
	// Bad counts entries refused because their record is not the queue's
	// message at that offset (see doc.go, "Derived state"); the read stops
	// before such an entry until its queue is rebuilt.
	Bad int
}

// maxScan bounds how many ConsumeQueue entries one read examines, so a
// selective tag filter cannot turn one pull into a full scan.
const maxScan = 1024

// ReadQueue reads up to max messages of (topic, queueID) from offset,
// keeping those whose tagsCode match accepts (nil accepts all).
// An offset below MinOffset gives ErrOffsetTooSmall; above MaxOffset,
// ErrOffsetOutOfRange; at MaxOffset, an empty result. An entry that does
// not lead to its own message (see doc.go, "Derived state") is never
// served: the read stops before it and the queue is rebuilt.
func (s *Store) ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (ReadResult, error) {
	for attempt := 0; ; attempt++ {
		res, err := s.readQueue(topic, queueID, offset, max, match)
		// A rebuild swapped the queue while we read it: read the new one.
		if errors.Is(err, consumequeue.ErrClosed) && !s.closed.Load() && attempt < 3 {
			continue
		}
		if errors.Is(err, consumequeue.ErrClosed) {
			return res, ErrClosed
		}
		return res, err
	}
}

func (s *Store) readQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (ReadResult, error) {
	if s.closed.Load() {
		return ReadResult{}, ErrClosed
	}
	res := ReadResult{Next: offset}
	q, _ := s.queue(topic, queueID, false)
	if q == nil {
		if offset != 0 {
			return res, fmt.Errorf("%w: %s/%d has no messages", ErrOffsetOutOfRange, topic, queueID)
		}
		return res, nil
	}
	if min := q.MinOffset(); offset < min {
		return res, fmt.Errorf("%w: %s/%d offset %d < %d", ErrOffsetTooSmall, topic, queueID, offset, min)
	}
	if top := q.MaxOffset(); offset > top {
		return res, fmt.Errorf("%w: %s/%d offset %d > %d", ErrOffsetOutOfRange, topic, queueID, offset, top)
	}
	key := queueKey{topic, queueID}
	var entries [32]consumequeue.Entry
	for scanned := 0; len(res.Messages) < max && scanned < maxScan; {
		n, err := q.Read(res.Next, entries[:])
		if errors.Is(err, consumequeue.ErrCorrupt) && n == 0 {
			// An empty or invalid entry below the maximum: the files were
			// damaged. Serve what came before it and rebuild the queue.
			s.badQueueEntry(key, res.Next, consumequeue.Entry{CommitLogOffset: -1}, err)
			return res, nil
		}
		if err != nil && !errors.Is(err, consumequeue.ErrOffsetOutOfRange) && !errors.Is(err, consumequeue.ErrCorrupt) {
			if errors.Is(err, consumequeue.ErrOffsetTooSmall) {
				return res, fmt.Errorf("%w: %w", ErrOffsetTooSmall, err)
			}
			return res, err
		}
		if n == 0 {
			break
		}
		for _, e := range entries[:n] {
			if len(res.Messages) == max {
				break
			}
			if match != nil && !match(e.TagsCode) {
				res.Next++
				scanned++
				continue
			}
			if s.inLost(e.CommitLogOffset) {
				// Its record was given up by a repair (lost.go).
				res.Next++
				scanned++
				res.Skipped++
				continue
			}
			m, _, err := s.lookup(e.CommitLogOffset)
			if err == nil {
				err = checkMessage(key, res.Next, m)
				if err != nil && !s.badQueueEntry(key, res.Next, e, err) {
					res.Bad++
					return res, nil // stop before it; the rebuild mends it
				}
				if err != nil {
					res.Bad++
					res.Next++
					scanned++
					continue
				}
			}
			res.Next++
			scanned++
			if errors.Is(err, ErrOffsetTooSmall) {
				res.Skipped++
				continue
			}
			if errors.Is(err, ErrNotFound) {
				// Unreadable although dispatched (damaged bytes fail the
				// frame's CRC): set it aside and move on, so one bad
				// record is never served and cannot wedge its queue.
				s.quarantine(e.CommitLogOffset, e.Size, "read", fmt.Errorf("%s/%d offset %d: %w", topic, queueID, res.Next-1, err))
				res.Quarantined++
				continue
			}
			if err != nil {
				return res, err
			}
			res.Messages = append(res.Messages, m)
		}
	}
	return res, nil
}

// SearchOffsetByTime returns the first queue offset of (topic, queueID)
// whose store time is >= ts (unix ms), or MaxOffset when none is
// (RocketMQ's getOffsetInQueueByTime, used by reset-offset-by-time). An
// entry whose record cannot be read (quarantined, as ReadQueue does)
// takes the store time of the next readable entry, at most maxScan
// entries on, which keeps the search monotonic; with none, it counts as
// newer than ts.
func (s *Store) SearchOffsetByTime(topic string, queueID int32, ts int64) (int64, error) {
	q, _ := s.queue(topic, queueID, false)
	if q == nil {
		return 0, nil
	}
	lo, hi := q.MinOffset(), q.MaxOffset()
	var searchErr error
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	// storedAt is the store time of the entry at off: found false when
	// off is past the queue's end, older when retention deleted its record.
	storedAt := func(off int64) (at int64, found, older bool, err error) {
		for end := min(off+maxScan, hi); off < end; off++ {
			e, err := q.Get(off)
			if err != nil {
				if errors.Is(err, consumequeue.ErrOffsetTooSmall) {
					return 0, true, true, nil
				}
				if errors.Is(err, consumequeue.ErrOffsetOutOfRange) {
					return 0, false, false, nil
				}
				return 0, false, false, err
			}
			if s.inLost(e.CommitLogOffset) {
				continue // given up by a repair: take the next entry's time
			}
			rec, err := s.commitLog.Read(e.CommitLogOffset, *bp)
			switch {
			case errors.Is(err, commitlog.ErrOffsetTooSmall):
				return 0, true, true, nil // deleted by retention: older than anything left
			case err == nil:
				if cap(rec.Payload) > cap(*bp) {
					*bp = rec.Payload[:0]
				}
				var d message.DispatchInfo
				if err = message.DecodeDispatch(rec.Payload, &d); err == nil {
					return d.StoreTimestamp, true, false, nil
				}
			case !errors.Is(err, commitlog.ErrCorrupt):
				return 0, false, false, s.mapReadErr(e.CommitLogOffset, err)
			}
			// Unreadable although dispatched: set it aside, try the next.
			s.quarantine(e.CommitLogOffset, e.Size, "read",
				fmt.Errorf("%s/%d offset %d: %w", topic, queueID, off, unreadable(e.CommitLogOffset, err)))
		}
		return 0, false, false, nil
	}
	n := sort.Search(int(hi-lo), func(i int) bool {
		if searchErr != nil {
			return true
		}
		at, found, older, err := storedAt(lo + int64(i))
		switch {
		case err != nil:
			searchErr = err
			return true
		case older:
			return false
		case !found:
			return true
		}
		return at >= ts
	})
	if searchErr != nil {
		return 0, searchErr
	}
	return lo + int64(n), nil
}

// QueryByKey returns up to max messages of topic carrying key in their KEYS
// property, stored within [begin, end] (unix ms; end 0 = no bound), newest
// first. Hash collisions are resolved against the messages themselves;
// purged messages are left out.
func (s *Store) QueryByKey(topic, key string, begin, end int64, max int) ([]*message.Message, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	cands, err := s.index.Lookup(indexKey(nil, topic, indexKindKey, []byte(key)), begin, end, max*4+16)
	if err != nil {
		return nil, err
	}
	var out []*message.Message
	for _, off := range cands {
		if len(out) == max {
			break
		}
		m, err := s.Lookup(off)
		if errors.Is(err, ErrOffsetTooSmall) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return out, err
		}
		if m.Topic != topic || !hasKey(m.Property(message.PropertyKeys), key) || s.purged(m) {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

func hasKey(keys, key string) bool {
	for _, k := range strings.Fields(keys) {
		if k == key {
			return true
		}
	}
	return false
}

// Index key kinds: the byte between topic and key in an index key.
const (
	indexKindKey  = 0 // a business key from KEYS
	indexKindUniq = 1 // UNIQ_KEY
	indexKindDup  = 2 // DEDUP_ID
	// indexKindOrigin: ORIGIN_MESSAGE_ID, under the empty topic (the
	// copies of one message live in many topics: the schedule and timer
	// topics, retry and dead-letter topics).
	indexKindOrigin = 3
)

// indexKey composes "<topic>\x00<kind><key>" into dst.
func indexKey(dst []byte, topic string, kind byte, key []byte) []byte {
	dst = append(dst[:0], topic...)
	dst = append(dst, 0, kind)
	return append(dst, key...)
}

// FindByDedupID returns the newest message of topic whose DEDUP_ID property
// is id and that was stored at or after since (unix ms), or ErrNotFound.
func (s *Store) FindByDedupID(topic, id string, since int64) (*message.Message, error) {
	return s.findByIndexedKey(topic, indexKindDup, message.PropertyDedupID, id, since)
}

// FindByOrigin returns up to max messages, of any topic, whose
// ORIGIN_MESSAGE_ID property is id (the copies the broker made of the
// message id names: retries, dead letters, resends), in CommitLog order.
// more reports that the index held more candidates than were looked at
// (the oldest are left out). Purged messages are left out.
func (s *Store) FindByOrigin(id string, max int) (msgs []*message.Message, more bool, err error) {
	if s.closed.Load() {
		return nil, false, ErrClosed
	}
	limit := max*2 + 16
	cands, err := s.index.Lookup(indexKey(nil, "", indexKindOrigin, []byte(id)), 0, 0, limit)
	if err != nil {
		return nil, false, err
	}
	more = len(cands) == limit
	seen := make(map[int64]bool, len(cands))
	for _, off := range cands {
		if len(msgs) == max {
			more = true
			break
		}
		if seen[off] {
			continue
		}
		seen[off] = true
		m, err := s.Lookup(off)
		if errors.Is(err, ErrOffsetTooSmall) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if m.Property(message.PropertyOriginMessageID) != id || s.purged(m) {
			continue
		}
		msgs = append(msgs, m)
	}
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].PhysicalOffset < msgs[j].PhysicalOffset })
	return msgs, more, nil
}

// FindByUniqKey returns the newest message of topic whose UNIQ_KEY
// property is key, or ErrNotFound (also when it is purged).
func (s *Store) FindByUniqKey(topic, key string) (*message.Message, error) {
	return s.findByIndexedKey(topic, indexKindUniq, message.PropertyUniqKey, key, 0)
}

// findByIndexedKey looks up the newest message of topic whose property
// prop equals value, through the index entries of kind.
func (s *Store) findByIndexedKey(topic string, kind byte, prop, value string, since int64) (*message.Message, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	cands, err := s.index.Lookup(indexKey(nil, topic, kind, []byte(value)), since, 0, 16)
	if err != nil {
		return nil, err
	}
	for _, off := range cands {
		m, err := s.Lookup(off)
		if errors.Is(err, ErrOffsetTooSmall) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.Topic == topic && m.Property(prop) == value && !s.purged(m) {
			return m, nil
		}
	}
	return nil, ErrNotFound
}

// Stats is a snapshot of the store's extent.
type Stats struct {
	CommitLogMin int64 // lowest retained CommitLog offset
	CommitLogMax int64 // CommitLog write offset
	Flushed      int64 // CommitLog durable offset
	Dispatched   int64 // CommitLog offset visible through ConsumeQueues
	Segments     int   // CommitLog segment files
	DiskBytes    int64 // disk space allocated by CommitLog segments (as du counts it)
	// The CommitLog's group commit since open: records appended, flushes
	// (one fdatasync batch each, shared by every append it covers), the time
	// they took in all and the longest.
	Appends, Flushes    int64
	FlushTime, MaxFlush time.Duration
	// FlushCounts is the flushes by duration (commitlog.FlushBuckets).
	FlushCounts [len(commitlog.FlushBuckets) + 1]int64
	// FlushRecordCounts is the flushes by the records each covered
	// (commitlog.FlushRecordBuckets); FlushRecords their sum.
	FlushRecordCounts [len(commitlog.FlushRecordBuckets) + 1]int64
	FlushRecords      int64
}

// FlushBuckets are the upper bounds of Stats.FlushCounts (the CommitLog's).
var FlushBuckets = commitlog.FlushBuckets

// FlushRecordBuckets are the upper bounds of Stats.FlushRecordCounts.
var FlushRecordBuckets = commitlog.FlushRecordBuckets

// MinPhysicalOffset is the CommitLog offset of the oldest byte it holds
// (what retention left).
func (s *Store) MinPhysicalOffset() int64 { return s.commitLog.MinOffset() }

// SegmentSize is the size of the CommitLog segments the store creates.
func (s *Store) SegmentSize() int64 { return s.commitLog.SegmentSize() }

// Stats reports the store's extent.
func (s *Store) Stats() Stats {
	segs := s.commitLog.Segments()
	st := Stats{
		CommitLogMin: s.commitLog.MinOffset(),
		CommitLogMax: s.commitLog.Written(),
		Flushed:      s.commitLog.Flushed(),
		Dispatched:   s.dispatched.Load(),
		Segments:     len(segs),
	}
	cl := s.commitLog.Stats()
	st.Appends, st.Flushes, st.FlushTime, st.MaxFlush = cl.Appends, cl.Flushes, cl.FlushTime, cl.MaxFlush
	st.FlushCounts = cl.FlushCounts
	st.FlushRecordCounts, st.FlushRecords = cl.FlushRecordCounts, cl.FlushRecords
	for _, seg := range segs {
		st.DiskBytes += seg.Allocated
	}
	return st
}

// QueueReader is what RecordAt reads through: a Store, or a family's
// narrower view of one.
type QueueReader interface {
	ReadQueue(topic string, queueID int32, offset int64, max int, match func(tagsCode int64) bool) (ReadResult, error)
}

// RecordAt reads the record at queue offset seq of queue 0 of a system
// topic (whose records are read back by their position); a record no
// longer there is ErrNotFound.
func RecordAt(r QueueReader, topic string, seq int64) (*message.Message, error) {
	res, err := r.ReadQueue(topic, 0, seq, 1, nil)
	if err != nil {
		return nil, err
	}
	if len(res.Messages) == 0 || res.Messages[0].QueueOffset != seq {
		return nil, fmt.Errorf("%w: %s/0 offset %d is gone", ErrNotFound, topic, seq)
	}
	return res.Messages[0], nil
}

// IsGone reports whether err says a record is not in its queue any more:
// ErrNotFound, ErrOffsetTooSmall (retention deleted it) or
// ErrOffsetOutOfRange.
func IsGone(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrOffsetTooSmall) || errors.Is(err, ErrOffsetOutOfRange)
}

// QueueBounds is what Replay reads through: a QueueReader that knows a
// queue's first kept and next offset (a Store, or a family's view of one).
type QueueBounds interface {
	QueueReader
	MinOffset(topic string, queueID int32) int64
	MaxOffset(topic string, queueID int32) int64
}

// Replay calls fn, in order, for every record of queue 0 of topic (a
// system topic) from queue offset from, or the queue's retained minimum
// if later, to the queue's end as it was read, and returns the offset it
// stopped at: the next record to apply. It stops early when ctx ends.
func Replay(ctx context.Context, r QueueBounds, topic string, from int64, fn func(*message.Message)) (int64, error) {
	from = max(from, r.MinOffset(topic, 0))
	for from < r.MaxOffset(topic, 0) {
		if err := ctx.Err(); err != nil {
			return from, err
		}
		res, err := r.ReadQueue(topic, 0, from, 256, nil)
		if err != nil {
			return from, fmt.Errorf("replay %s at %d: %w", topic, from, err)
		}
		for _, m := range res.Messages {
			fn(m)
		}
		if res.Next == from {
			break
		}
		from = res.Next
	}
	return from, nil
}
