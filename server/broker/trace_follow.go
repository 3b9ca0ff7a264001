package broker

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/trace"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// The trace follower (trace.go): one goroutine reads the lease records
// (rmq_sys_LEASE) and the progress records (rmq_sys_OFFSET) after the
// dispatcher has made them visible, turns each lease granted, released or
// failed in place and each ack into an event about the message copy it
// names (the copy's CommitLog offset, looked up in its ConsumeQueue), and
// appends them, with the push outcomes noted meanwhile, to rmq_sys_TRACE in
// batches: at most one pass per traceFollowInterval unless a trace query
// asks for one. Each record lists the copies it is about in KEYS, which
// the store indexes, and says up to which offsets of the two queues it
// covers; at open the follower resumes from the last record's offsets, so
// what was durable before a crash is traced after it (the events of a
// record written twice are deduplicated by the query). Tracing turned on
// for the first time starts at the queues' ends (openTrace). The send,
// pull and ack paths do nothing for it.
//
// Trace records are appended as ClassSend: above the send ceiling the
// follower waits (with backoff) rather than take the system headroom.
// Push outcomes wait in a bounded buffer (traceMaxPending); when it is
// full they are dropped and counted (TraceStats.Dropped).

// traceTopic carries trace records (package trace), RocketMQ's
// RMQ_SYS_TRACE_TOPIC.
const traceTopic = systemPrefix + "TRACE"

const (
	// traceFollowInterval is the least time between two passes that new
	// records start (a trace query starts one at once).
	traceFollowInterval = 100 * time.Millisecond
	// traceFollowBatch is how many records of each queue one pass reads.
	traceFollowBatch = 256
	// traceRecordItems, traceRecordKeys and traceRecordBytes (its
	// strings, about) bound one trace record.
	traceRecordItems = 2048
	traceRecordKeys  = 512
	traceRecordBytes = 32 << 10
	// traceMaxPending bounds the push outcomes waiting for a pass.
	traceMaxPending = 1 << 16
	// traceResumeScan is how many trace records open looks back for the
	// follower's position.
	traceResumeScan = 64
)

// traceState is the follower's state.
type traceState struct {
	off  bool
	kick chan struct{} // a trace query wants a pass now
	note chan struct{} // a push outcome was noted

	// next: the queue offsets the follower reads from (its goroutine only,
	// and open).
	leaseNext, offsetNext int64

	mu sync.Mutex
	// done: the events of the records below these offsets are in trace
	// records that are visible to lookups (-1 before the first pass).
	leaseDone, offsetDone int64
	changed               chan struct{} // closed when done moves
	pending               []pushNote
	carried               []string // lives whose copies retention carries (carryTraces)
	surviving             []string // lives whose carried events retention deletes (noteLivesBelow)

	dropped, events, records atomic.Uint64
	logged                   time.Time
}

// pushNote is a push outcome waiting for the follower.
type pushNote struct {
	group, receipt, result string
	status                 int
	at                     int64
}

// TraceStats describes message tracing.
type TraceStats struct {
	// Enabled is false with --message-trace=false.
	Enabled bool
	// Events and Records count what the follower appended since start.
	Events, Records uint64
	// Dropped counts push outcomes dropped because the buffer was full.
	Dropped uint64
	// Lag counts the lease and progress records not yet followed.
	Lag int64
}

// TraceStats reports the follower's counters.
func (b *Broker) TraceStats() TraceStats {
	t := &b.trace
	st := TraceStats{Enabled: !t.off, Events: t.events.Load(), Records: t.records.Load(), Dropped: t.dropped.Load()}
	if !t.off {
		t.mu.Lock()
		ld, od := t.leaseDone, t.offsetDone
		t.mu.Unlock()
		st.Lag = max(0, b.store.MaxOffset(leaseTopic, 0)-max(ld, 0)) + max(0, b.store.MaxOffset(offsetTopic, 0)-max(od, 0))
	}
	return st
}

// TracePushed notes the outcome of one webhook delivery (package
// server/push): the lease of receipt, the endpoint's HTTP status (0
// without an answer) and the result. It never blocks; when the buffer is
// full the outcome is dropped and counted.
func (b *Broker) TracePushed(group, receipt string, status int, result string) {
	t := &b.trace
	if t.off {
		return
	}
	t.mu.Lock()
	if len(t.pending) >= traceMaxPending {
		t.mu.Unlock()
		t.dropped.Add(1)
		return
	}
	t.pending = append(t.pending, pushNote{group: group, receipt: receipt, result: result, status: status, at: b.clock.Now().UnixMilli()})
	t.mu.Unlock()
	select {
	case t.note <- struct{}{}:
	default:
	}
}

// openTrace readies the trace follower's state at open; resumeTrace, when
// the broker takes over, finds where the follower resumes: the offsets the
// newest trace record that names them covers; without one (a new store,
// or one of a version before the trace), the ends of both queues — what
// was consumed before is not traced.
func (b *Broker) openTrace() {
	t := &b.trace
	t.off = b.opts.NoMessageTrace
	t.kick, t.note = make(chan struct{}, 1), make(chan struct{}, 1)
	t.changed = make(chan struct{})
	t.leaseDone, t.offsetDone = -1, -1
}

// resumeTrace finds, when the broker takes over (follow.go), where the
// follower resumes: after the newest trace record's positions, or at the
// queues' ends with a record that says so.
func (b *Broker) resumeTrace() error {
	t := &b.trace
	t.leaseNext, t.offsetNext = b.store.MaxOffset(leaseTopic, 0), b.store.MaxOffset(offsetTopic, 0)
	min, top := b.store.MinOffset(traceTopic, 0), b.store.MaxOffset(traceTopic, 0)
	for off := top - 1; off >= min && off >= top-traceResumeScan; off-- {
		res, err := b.store.ReadQueue(traceTopic, 0, off, 1, nil)
		if err != nil {
			return mapStoreErr(err)
		}
		if len(res.Messages) == 0 || res.Messages[0].QueueOffset != off {
			continue
		}
		rec, err := trace.Decode(res.Messages[0].Body)
		if err != nil || rec.LeaseNext < 0 || rec.OffsetNext < 0 {
			continue
		}
		t.leaseNext, t.offsetNext = rec.LeaseNext, rec.OffsetNext
		return nil
	}
	if t.off {
		return nil
	}
	// Mark where tracing starts, so that a crash before the first events
	// are written does not move the start past them.
	mark := traceMessage(trace.Record{LeaseNext: t.leaseNext, OffsetNext: t.offsetNext}, nil, b.clock.Now().UnixMilli())
	if err := b.store.PutClass(storage.ClassSend, []*message.Message{mark}, make([]storage.PutResult, 1)); err != nil {
		b.log.Warn().Err(err).Msg("message trace: could not mark where tracing starts; it starts at the next record")
	}
	return nil
}

// traceLoop runs follower passes until ctx ends.
func (b *Broker) traceLoop(ctx context.Context) {
	t := &b.trace
	backoff := worker.NewBackoff(100*time.Millisecond, 5*time.Second)
	for {
		leaseSig, offsetSig := b.store.NewDataSignal(leaseTopic), b.store.NewDataSignal(offsetTopic)
		more, err := b.followTrace()
		if err != nil {
			if now := b.clock.Now(); now.Sub(t.logged) >= time.Minute {
				t.logged = now
				b.log.Warn().Err(err).Msg("message trace: appending trace records failed; retrying")
			}
			if !worker.Sleep(ctx, backoff.Next()) {
				return
			}
			continue
		}
		backoff.Reset()
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.kick:
			continue
		case <-leaseSig:
		case <-offsetSig:
		case <-t.note:
		}
		// Batch what comes in the next moment into the same pass.
		wait := b.clock.NewTimer(traceFollowInterval)
		select {
		case <-ctx.Done():
			wait.Stop()
			return
		case <-t.kick:
		case <-wait.Chan():
		}
		wait.Stop()
	}
}

// awaitTrace asks the follower for a pass and waits (up to traceAwait)
// until it has traced every lease and progress record visible now. It
// reports whether it did (false with tracing off).
func (b *Broker) awaitTrace(ctx context.Context) bool {
	t := &b.trace
	if t.off {
		return false
	}
	wantLease, wantOffset := b.store.MaxOffset(leaseTopic, 0), b.store.MaxOffset(offsetTopic, 0)
	select {
	case t.kick <- struct{}{}:
	default:
	}
	timer := b.clock.NewTimer(traceAwait)
	defer timer.Stop()
	for {
		t.mu.Lock()
		done := t.leaseDone >= wantLease && t.offsetDone >= wantOffset
		ch := t.changed
		t.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-ch:
		case <-timer.Chan():
			return false
		case <-ctx.Done():
			return false
		case <-b.closing:
			return false
		}
	}
}

// followTrace runs one pass: it reads up to traceFollowBatch records of
// each queue, appends their events and the noted push outcomes, and
// publishes how far it got. more reports a backlog.
func (b *Broker) followTrace() (more bool, err error) {
	t := &b.trace
	var items []trace.Item
	leaseFrom, offsetFrom := t.leaseNext, t.offsetNext
	leaseNext, lmore, err := b.traceQueue(leaseTopic, leaseFrom, func(m *message.Message) {
		rec, derr := leaselog.DecodeRecord(m.Body)
		if derr != nil {
			return // logged by the lease replay at the next open
		}
		for _, e := range rec.Entries {
			for _, li := range e.Items {
				phys, ok := b.traceCopy(offset.Key(e.Key), li.Offset)
				if !ok {
					continue
				}
				it := trace.Item{Kind: trace.Delivered, At: e.At, Copy: phys, Group: e.Key.Group, Client: e.Client, Epoch: li.Epoch, Until: li.Deadline, Pos: m.PhysicalOffset}
				switch {
				case li.State == leaselog.Released || li.State == leaselog.Waiting && li.Failures == 0:
					it = trace.Item{Kind: trace.Released, At: e.At, Copy: phys, Group: e.Key.Group, Client: e.Client, Epoch: li.Epoch, Pos: m.PhysicalOffset}
				case li.State == leaselog.Waiting:
					it.Kind, it.InPlace, it.Count = trace.Retried, true, int64(li.Failures)
				}
				items = append(items, it)
			}
		}
	})
	if err != nil {
		return false, err
	}
	offsetNext, omore, err := b.traceQueue(offsetTopic, offsetFrom, func(m *message.Message) {
		rec, derr := offset.DecodeRecord(m.Body)
		if derr != nil {
			return
		}
		for _, e := range rec.Entries {
			if e.Kind != offset.KindAck {
				continue
			}
			for _, off := range e.Offsets {
				if phys, ok := b.traceCopy(e.Key, off); ok {
					items = append(items, trace.Item{Kind: trace.Acked, At: m.StoreTimestamp, Copy: phys, Group: e.Key.Group, Pos: m.PhysicalOffset})
				}
			}
		}
	})
	if err != nil {
		return false, err
	}
	t.mu.Lock()
	pushes := t.pending
	t.pending = nil
	t.mu.Unlock()
	for _, p := range pushes {
		r, derr := b.receipts().Decode(p.receipt)
		if derr != nil {
			continue
		}
		key := offset.Key{Group: r.Group, Topic: r.Topic, QueueID: r.QueueID}
		if phys, ok := b.traceCopy(key, r.Offset); ok {
			items = append(items, trace.Item{Kind: trace.Pushed, At: p.at, Copy: phys, Group: p.group, Epoch: r.Epoch, Status: p.status, Text: p.result})
		}
	}
	if len(items) > 0 {
		err := b.appendTrace(items, leaseFrom, offsetFrom, leaseNext, offsetNext, storage.ClassSend)
		if errors.Is(err, storage.ErrMessageTooLarge) || errors.Is(err, storage.ErrInvalidMessage) {
			// Never written, whatever the retries: pass over the batch.
			b.log.Error().Err(err).Int("events", len(items)).Msg("message trace: a batch of events cannot be stored; passed over")
			err = nil
		}
		if err != nil {
			t.mu.Lock()
			t.pending = append(pushes, t.pending...) // tried again with the next pass
			if over := len(t.pending) - traceMaxPending; over > 0 {
				t.pending = t.pending[over:]
				t.dropped.Add(uint64(over))
			}
			t.mu.Unlock()
			return false, err
		}
		_ = b.awaitDispatch(b.closingCtx)
	}
	t.leaseNext, t.offsetNext = leaseNext, offsetNext
	t.mu.Lock()
	if leaseNext != t.leaseDone || offsetNext != t.offsetDone {
		t.leaseDone, t.offsetDone = leaseNext, offsetNext
		close(t.changed)
		t.changed = make(chan struct{})
	}
	t.mu.Unlock()
	return lmore || omore, nil
}

// traceQueue calls fn for the records of queue 0 of topic from offset
// from (or its retained minimum) on, at most traceFollowBatch of them, and
// returns the offset to read next and whether more wait.
func (b *Broker) traceQueue(topic string, from int64, fn func(*message.Message)) (int64, bool, error) {
	from = max(from, b.store.MinOffset(topic, 0))
	top := b.store.MaxOffset(topic, 0)
	if from > top {
		from = top // the log lost its tail (async mode): follow what is there
	}
	read := 0
	for from < top && read < traceFollowBatch {
		res, err := b.store.ReadQueue(topic, 0, from, min(traceFollowBatch-read, 64), nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			from = b.store.MinOffset(topic, 0)
			continue
		}
		if err != nil {
			return from, false, mapStoreErr(err)
		}
		if res.Next == from {
			break
		}
		for _, m := range res.Messages {
			fn(m)
		}
		read += int(res.Next - from)
		from = res.Next
	}
	return from, from < top, nil
}

// traceCopy is the CommitLog offset of the message at queue offset off of
// key's view (the retry view: the group's retry topic), if it is there.
func (b *Broker) traceCopy(key offset.Key, off int64) (int64, bool) {
	topic, queue := key.Topic, key.QueueID
	if queue == retryQueueID {
		topic, queue = RetryTopic(key.Group), 0
	}
	if off < b.store.MinOffset(topic, queue) || off >= b.store.MaxOffset(topic, queue) {
		return 0, false
	}
	phys, err := b.store.PhysicalOffset(topic, queue, off)
	if err != nil || phys == storage.NoFloor {
		return 0, false
	}
	return phys, true
}

// appendTrace appends items as trace records (traceMessages).
func (b *Broker) appendTrace(items []trace.Item, leaseFrom, offsetFrom, leaseTo, offsetTo int64, class storage.Class) error {
	msgs := traceMessages(items, leaseFrom, offsetFrom, leaseTo, offsetTo, "", b.clock.Now().UnixMilli())
	if err := b.store.PutClass(class, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return mapStoreErr(err)
	}
	b.trace.records.Add(uint64(len(msgs)))
	b.trace.events.Add(uint64(len(items)))
	return nil
}

// traceMessages splits items into trace records of at most
// traceRecordItems items, traceRecordBytes of strings and traceRecordKeys
// copies, keyed by their copies, or all by life when it is set. Every
// record but the last says the offsets the pass started from; the last,
// the offsets it reached (a crash that keeps only some of a batch makes
// the next open trace the whole pass again).
func traceMessages(items []trace.Item, leaseFrom, offsetFrom, leaseTo, offsetTo int64, life string, now int64) []*message.Message {
	var msgs []*message.Message
	for len(items) > 0 {
		keys := map[string]bool{}
		if life != "" {
			keys[life] = true
		}
		n, size := 0, 0
		for n < len(items) && n < traceRecordItems {
			it := &items[n]
			size += 32 + len(it.Group) + len(it.Client) + len(it.Text) + len(it.Topic) + len(it.MessageID) + len(it.RelatedID)
			if n > 0 && size > traceRecordBytes {
				break
			}
			if it.Copy >= 0 && life == "" {
				k := trace.CopyKey(it.Copy)
				if !keys[k] && len(keys) == traceRecordKeys {
					break
				}
				keys[k] = true
			}
			n++
		}
		rec := trace.Record{LeaseNext: leaseFrom, OffsetNext: offsetFrom, Items: items[:n]}
		items = items[n:]
		if len(items) == 0 {
			rec.LeaseNext, rec.OffsetNext = leaseTo, offsetTo
		}
		msgs = append(msgs, traceMessage(rec, sortedKeys(keys), now))
	}
	return msgs
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// traceMessage wraps a trace record, indexed by keys.
func traceMessage(rec trace.Record, keys []string, now int64) *message.Message {
	m := &message.Message{Topic: traceTopic, Body: trace.Encode(rec), BornTimestamp: now}
	if len(keys) == 1 && strings.HasPrefix(keys[0], trace.LifePrefix) {
		m.QueueID = trace.LifeQueue // a carried life: retention finds it there (noteLivesBelow)
	}
	if len(keys) > 0 {
		m.SetKeys(keys)
	}
	return m
}

// noteCarried is told of a copy retention is about to carry forward (a
// dead letter, a retry waiting on a timer): its life's events are carried
// with it (carryTraces).
func (b *Broker) noteCarried(m *message.Message) {
	origin := m.Property(message.PropertyOriginMessageID)
	if origin == "" {
		return // a delayed send not yet delivered: its copy holds its whole trace
	}
	t := &b.trace
	t.mu.Lock()
	t.carried = append(t.carried, origin)
	t.mu.Unlock()
}

// noteLivesBelow notes the lives whose carried events (records on
// trace.LifeQueue) lie below cut, the records retention is about to
// delete: a life that still has a copy at or past cut — a dead letter
// resent after its carry, a retry whose timer fired after its carry —
// has its events carried once more (carryTraces), so its trace outlives
// the records it was carried in, as long as any copy of it lives.
func (b *Broker) noteLivesBelow(cut int64) error {
	if b.trace.off {
		return nil
	}
	var lives []string
	for from, top := b.store.MinOffset(traceTopic, trace.LifeQueue), b.store.MaxOffset(traceTopic, trace.LifeQueue); from < top; {
		res, err := b.store.ReadQueue(traceTopic, trace.LifeQueue, from, 256, nil)
		if err != nil {
			return mapStoreErr(err)
		}
		done := res.Next == from
		for _, m := range res.Messages {
			if m.PhysicalOffset >= cut {
				done = true
				break
			}
			for _, k := range m.Keys() {
				if origin, ok := strings.CutPrefix(k, trace.LifePrefix); ok {
					lives = append(lives, origin)
				}
			}
		}
		if done {
			break
		}
		from = res.Next
	}
	t := &b.trace
	t.mu.Lock()
	t.surviving = append(t.surviving, lives...)
	t.mu.Unlock()
	return nil
}

// carryTraces runs before retention deletes the CommitLog below cut,
// after the copies were carried: it appends one record holding all of a
// life's events under the life's key, on trace.LifeQueue, for every life
// noted by noteCarried, and for every life noted by noteLivesBelow that
// has a copy at or past cut — so the trace of a message that outlives its
// segment outlives it too.
func (b *Broker) carryTraces(cut int64) error {
	t := &b.trace
	t.mu.Lock()
	lives, surviving := t.carried, t.surviving
	t.carried, t.surviving = nil, nil
	t.mu.Unlock()
	carried := len(lives)
	lives = append(lives, surviving...)
	done := map[string]bool{}
	var msgs []*message.Message
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		err := b.store.PutClass(storage.ClassReclaim, msgs, make([]storage.PutResult, len(msgs)))
		msgs = msgs[:0]
		return mapStoreErr(err)
	}
	now := b.clock.Now().UnixMilli()
	for i, origin := range lives {
		if done[origin] {
			continue
		}
		done[origin] = true
		oid, err := message.ParseID(origin)
		if err != nil {
			continue
		}
		m, err := b.traceTarget(oid)
		if errors.Is(err, ErrMessageNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		life, err := b.traceLife(m)
		if err != nil {
			return err
		}
		if i >= carried && !life.outlives(cut) {
			continue // nothing of it is left past cut: its trace ends with it
		}
		items, _, err := b.lifeItems(life)
		if err != nil {
			return err
		}
		if len(items) > 2*MaxTraceEvents {
			items = append(items[:MaxTraceEvents], items[len(items)-MaxTraceEvents:]...)
		}
		for i := range items {
			items[i].Copy = -1 // the copies they name may be gone; their ids stay
			items[i].Text = traceText(items[i].Text)
		}
		msgs = append(msgs, traceMessages(items, -1, -1, -1, -1, trace.LifeKey(life.origin), now)...)
		if len(msgs) >= 64 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if len(done) > 0 {
		b.log.Info().Int("lives", len(done)).Msg("message traces carried past retention")
	}
	return nil
}
