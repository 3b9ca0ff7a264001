package trace

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// The trace follower (query.go): one goroutine reads the lease records
// (rmq_sys_LEASE) and the progress records (rmq_sys_OFFSET) after the
// dispatcher has made them visible, turns each lease granted, released or
// failed in place and each ack into an event about the message copy it
// names (the copy's CommitLog offset, looked up in its ConsumeQueue), and
// appends them, with the push outcomes noted meanwhile, to rmq_sys_TRACE in
// batches: at most one pass per followInterval unless a trace query
// asks for one. Each record lists the copies it is about in KEYS, which
// the store indexes, and says up to which offsets of the two queues it
// covers; when the broker takes over, the follower resumes from the last
// record's offsets (Resume), so what was durable before a crash is traced
// after it (the events of a record written twice are deduplicated by the
// query). Tracing turned on for the first time starts at the queues'
// ends. The send, pull and ack paths do nothing for it.
//
// Trace records are appended as ClassSend: above the send ceiling the
// follower waits (with backoff) rather than take the system headroom.
// Push outcomes wait in a bounded buffer (maxPending); when it is
// full they are dropped and counted (Stats.Dropped).

// Resume finds, when the broker takes over (server/broker's follow.go),
// where the follower resumes: the offsets the newest trace record that
// names them covers; without one (a new store, or one of a version before
// the trace), the ends of both queues — what was consumed before is not
// traced — with a record that says so.
func (t *Tracer) Resume() error {
	t.leaseNext, t.offsetNext = t.store.MaxOffset(lease.Topic, 0), t.store.MaxOffset(t.names.OffsetTopic, 0)
	min, top := t.store.MinOffset(Topic, 0), t.store.MaxOffset(Topic, 0)
	for off := top - 1; off >= min && off >= top-resumeScan; off-- {
		res, err := t.store.ReadQueue(Topic, 0, off, 1, nil)
		if err != nil {
			return t.broker.StoreErr(err)
		}
		if len(res.Messages) == 0 || res.Messages[0].QueueOffset != off {
			continue
		}
		rec, err := Decode(res.Messages[0].Body)
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
	mark := traceMessage(Record{LeaseNext: t.leaseNext, OffsetNext: t.offsetNext}, nil, t.clock.Now().UnixMilli())
	if err := t.store.PutClass(storage.ClassSend, []*message.Message{mark}, make([]storage.PutResult, 1)); err != nil {
		t.log.Warn().Err(err).Msg("message trace: could not mark where tracing starts; it starts at the next record")
	}
	return nil
}

// Run runs follower passes until ctx ends: the leader-only service the
// broker starts at Promote and stops at Demote (unless Off).
func (t *Tracer) Run(ctx context.Context) {
	backoff := worker.NewBackoff(100*time.Millisecond, 5*time.Second)
	for {
		leaseSig, offsetSig := t.store.NewDataSignal(lease.Topic), t.store.NewDataSignal(t.names.OffsetTopic)
		more, err := t.RunOnce()
		if err != nil {
			if now := t.clock.Now(); now.Sub(t.logged) >= time.Minute {
				t.logged = now
				t.log.Warn().Err(err).Msg("message trace: appending trace records failed; retrying")
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
		wait := t.clock.NewTimer(followInterval)
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

// await asks the follower for a pass and waits (up to traceAwait)
// until it has traced every lease and progress record visible now. It
// reports whether it did (false with tracing off).
func (t *Tracer) await(ctx context.Context) bool {
	if t.off {
		return false
	}
	wantLease, wantOffset := t.store.MaxOffset(lease.Topic, 0), t.store.MaxOffset(t.names.OffsetTopic, 0)
	select {
	case t.kick <- struct{}{}:
	default:
	}
	timer := t.clock.NewTimer(traceAwait)
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
		case <-t.closing:
			return false
		}
	}
}

// RunOnce runs one pass of the follower: it reads up to followBatch
// records of each queue, appends their events and the noted push
// outcomes, and publishes how far it got. more reports a backlog. Run
// calls it; so do tests.
func (t *Tracer) RunOnce() (more bool, err error) {
	var items []Item
	leaseFrom, offsetFrom := t.leaseNext, t.offsetNext
	leaseNext, lmore, err := t.queue(lease.Topic, leaseFrom, func(m *message.Message) {
		rec, derr := lease.DecodeRecord(m.Body)
		if derr != nil {
			return // logged by the lease replay at the next open
		}
		for _, e := range rec.Entries {
			for _, li := range e.Items {
				phys, ok := t.copyOf(offset.Key(e.Key), li.Offset)
				if !ok {
					continue
				}
				it := Item{Kind: Delivered, At: e.At, Copy: phys, Group: e.Key.Group, Client: e.Client, Epoch: li.Epoch, Until: li.Deadline, Pos: m.PhysicalOffset}
				switch {
				case li.State == lease.Released || li.State == lease.Waiting && li.Failures == 0:
					it = Item{Kind: Released, At: e.At, Copy: phys, Group: e.Key.Group, Client: e.Client, Epoch: li.Epoch, Pos: m.PhysicalOffset}
				case li.State == lease.Waiting:
					it.Kind, it.InPlace, it.Count = Retried, true, int64(li.Failures)
				}
				items = append(items, it)
			}
		}
	})
	if err != nil {
		return false, err
	}
	offsetNext, omore, err := t.queue(t.names.OffsetTopic, offsetFrom, func(m *message.Message) {
		rec, derr := offset.DecodeRecord(m.Body)
		if derr != nil {
			return
		}
		for _, e := range rec.Entries {
			if e.Kind != offset.KindAck {
				continue
			}
			for _, off := range e.Offsets {
				if phys, ok := t.copyOf(e.Key, off); ok {
					items = append(items, Item{Kind: Acked, At: m.StoreTimestamp, Copy: phys, Group: e.Key.Group, Pos: m.PhysicalOffset})
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
		r, derr := t.broker.Receipt(p.receipt)
		if derr != nil {
			continue
		}
		key := offset.Key{Group: r.Group, Topic: r.Topic, QueueID: r.QueueID}
		if phys, ok := t.copyOf(key, r.Offset); ok {
			items = append(items, Item{Kind: Pushed, At: p.at, Copy: phys, Group: p.group, Epoch: r.Epoch, Status: p.status, Text: p.result})
		}
	}
	if len(items) > 0 {
		err := t.append(items, leaseFrom, offsetFrom, leaseNext, offsetNext, storage.ClassSend)
		if errors.Is(err, storage.ErrMessageTooLarge) || errors.Is(err, storage.ErrInvalidMessage) {
			// Never written, whatever the retries: pass over the batch.
			t.log.Error().Err(err).Int("events", len(items)).Msg("message trace: a batch of events cannot be stored; passed over")
			err = nil
		}
		if err != nil {
			t.mu.Lock()
			t.pending = append(pushes, t.pending...) // tried again with the next pass
			if over := len(t.pending) - maxPending; over > 0 {
				t.pending = t.pending[over:]
				t.dropped.Add(uint64(over))
			}
			t.mu.Unlock()
			return false, err
		}
		_ = t.broker.AwaitDispatch(t.closingCtx)
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

// queue calls fn for the records of queue 0 of topic from offset
// from (or its retained minimum) on, at most followBatch of them, and
// returns the offset to read next and whether more wait.
func (t *Tracer) queue(topic string, from int64, fn func(*message.Message)) (int64, bool, error) {
	from = max(from, t.store.MinOffset(topic, 0))
	top := t.store.MaxOffset(topic, 0)
	if from > top {
		from = top // the log lost its tail (async mode): follow what is there
	}
	read := 0
	for from < top && read < followBatch {
		res, err := t.store.ReadQueue(topic, 0, from, min(followBatch-read, 64), nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			from = t.store.MinOffset(topic, 0)
			continue
		}
		if err != nil {
			return from, false, t.broker.StoreErr(err)
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

// copyOf is the CommitLog offset of the message at queue offset off of
// key's view (the retry view: the group's retry topic), if it is there.
func (t *Tracer) copyOf(key offset.Key, off int64) (int64, bool) {
	topic, queue := key.Topic, key.QueueID
	if queue == lease.RetryQueueID {
		topic, queue = t.names.RetryPrefix+key.Group, 0
	}
	if off < t.store.MinOffset(topic, queue) || off >= t.store.MaxOffset(topic, queue) {
		return 0, false
	}
	phys, err := t.store.PhysicalOffset(topic, queue, off)
	if err != nil || phys == storage.NoFloor {
		return 0, false
	}
	return phys, true
}

// append appends items as trace records (traceMessages).
func (t *Tracer) append(items []Item, leaseFrom, offsetFrom, leaseTo, offsetTo int64, class storage.Class) error {
	msgs := traceMessages(items, leaseFrom, offsetFrom, leaseTo, offsetTo, "", t.clock.Now().UnixMilli())
	if err := t.store.PutClass(class, msgs, make([]storage.PutResult, len(msgs))); err != nil {
		return t.broker.StoreErr(err)
	}
	t.records.Add(uint64(len(msgs)))
	t.events.Add(uint64(len(items)))
	return nil
}

// traceMessages splits items into trace records of at most
// recordItems items, recordBytes of strings and recordKeys
// copies, keyed by their copies, or all by life when it is set. Every
// record but the last says the offsets the pass started from; the last,
// the offsets it reached (a crash that keeps only some of a batch makes
// the next open trace the whole pass again).
func traceMessages(items []Item, leaseFrom, offsetFrom, leaseTo, offsetTo int64, life string, now int64) []*message.Message {
	var msgs []*message.Message
	for len(items) > 0 {
		keys := map[string]bool{}
		if life != "" {
			keys[life] = true
		}
		n, size := 0, 0
		for n < len(items) && n < recordItems {
			it := &items[n]
			size += 32 + len(it.Group) + len(it.Client) + len(it.Text) + len(it.Topic) + len(it.MessageID) + len(it.RelatedID)
			if n > 0 && size > recordBytes {
				break
			}
			if it.Copy >= 0 && life == "" {
				k := CopyKey(it.Copy)
				if !keys[k] && len(keys) == recordKeys {
					break
				}
				keys[k] = true
			}
			n++
		}
		rec := Record{LeaseNext: leaseFrom, OffsetNext: offsetFrom, Items: items[:n]}
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
func traceMessage(rec Record, keys []string, now int64) *message.Message {
	m := &message.Message{Topic: Topic, Body: Encode(rec), BornTimestamp: now}
	if len(keys) == 1 && strings.HasPrefix(keys[0], LifePrefix) {
		m.QueueID = LifeQueue // a carried life: retention finds it there (NoteLivesBelow)
	}
	if len(keys) > 0 {
		m.SetKeys(keys)
	}
	return m
}
