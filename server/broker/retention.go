package broker

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Retention, from the broker's side (the store's rules are in storage's
// doc.go, "Retention and disk pressure"). The store deletes whole
// CommitLog segments; the broker is its RetentionPolicy and tells it,
// before every pass:
//
//   - Keep: the lowest CommitLog offset of what must never be deleted and
//     cannot be carried forward — the undelivered entries of every delay
//     level (from the scheduler's position on), the progress and lease
//     records no offsets or leases snapshot covers yet and the transaction
//     records the transaction snapshot does not cover;
//   - Unconsumed: the lowest CommitLog offset some group still needs — per
//     queue of every topic, the message at the lowest committed offset of
//     the groups consuming it (all of a topic no group consumes yet: a
//     group created later reads it from the start), and per group's retry
//     topic, the lowest committed offset of its retry views. Disk pressure
//     deletes below it only with --disk-pressure-delete;
//   - Retained: for topics whose retentionHours is longer than the store's
//     retention, the first message still within it; age-based deletion
//     keeps the segments from there on.
//
// A topic whose retentionHours is shorter than the store's retention
// shares segments with other topics, so its messages are expired logically:
// every pass raises its queues' minimum past the messages older than its
// retention (storage TrimQueue; readers then skip them as after retention).
// Retries and dead letters of its messages live by the store's retention.
//
// Before a deletion the broker carries dead letters, pending timers and
// unresolved transactions forward (ClassReclaim appends, dlq.go, timer.go
// and txnstate.go) and counts, per
// group, the unconsumed messages it takes away (expired by time, by a
// topic's shorter retention, or dropped under --disk-pressure-delete):
// metric mqgate_retention_dropped_unconsumed_total{group}, the progress
// field droppedUnconsumed, and a warning in the log.

// retentionPolicy is the broker's storage.RetentionPolicy.
type retentionPolicy struct{ b *Broker }

// Floors implements storage.RetentionPolicy.
func (p retentionPolicy) Floors(now time.Time) (storage.RetentionFloors, error) {
	b := p.b
	f := storage.RetentionFloors{Keep: storage.NoFloor, Unconsumed: storage.NoFloor, Retained: storage.NoFloor}
	low := func(floor *int64, topic string, queue int32, off int64) error {
		phys, err := b.store.PhysicalOffset(topic, queue, off)
		if err != nil {
			return err
		}
		*floor = min(*floor, phys)
		return nil
	}
	for i, st := range b.scheduler.Status() {
		if err := low(&f.Keep, message.ScheduleTopic, int32(i), st.Offset); err != nil {
			return f, err
		}
	}
	if err := low(&f.Keep, offsetTopic, 0, b.ledger.SnapshotAt()); err != nil {
		return f, err
	}
	// The transaction records the transaction snapshot does not cover.
	if err := low(&f.Keep, txnHalfTopic, 0, b.txns.KeepFrom(txn.HalfQueue)); err != nil {
		return f, err
	}
	if err := low(&f.Keep, txnOpTopic, 0, b.txns.KeepFrom(txn.OpQueue)); err != nil {
		return f, err
	}
	if err := low(&f.Keep, leaseTopic, 0, b.leases.KeepFrom()); err != nil {
		return f, err
	}
	if err := b.expireShortTopics(now); err != nil {
		return f, err
	}
	reserved := b.store.FileReservedTime()
	for _, t := range b.registry.ListTopics() {
		keep := time.Duration(t.RetentionHours) * time.Hour
		if keep <= reserved {
			continue
		}
		for _, q := range b.storedQueues(t) {
			off, err := b.store.SearchOffsetByTime(t.Name, q, now.Add(-keep).UnixMilli())
			if err != nil {
				return f, err
			}
			if err := low(&f.Retained, t.Name, q, off); err != nil {
				return f, err
			}
		}
	}
	for sq, positions := range b.consumerPositions() {
		need := b.store.MinOffset(sq.topic, sq.queue) // a topic nobody consumes yet: all of it
		if len(positions) > 0 {
			need = positions[0].committed
			for _, pos := range positions[1:] {
				need = min(need, pos.committed)
			}
		}
		if err := low(&f.Unconsumed, sq.topic, sq.queue, need); err != nil {
			return f, err
		}
	}
	return f, nil
}

// BeforeDelete implements storage.RetentionPolicy: it carries dead letters
// and pending timers past cut and counts what the groups lose.
func (p retentionPolicy) BeforeDelete(cut int64, reason storage.DeleteReason) error {
	b := p.b
	if err := errors.Join(b.carryDeadLetters(cut), b.carryTimers(cut), b.carryTxns(cut), b.carryMeta(cut), b.noteLivesBelow(cut)); err != nil {
		return err
	}
	if err := b.carryTraces(cut); err != nil { // after the copies they follow
		return err
	}
	if err := b.recordCut(cut, reason); err != nil { // every replica deletes the same (cut.go)
		return err
	}
	for sq, positions := range b.consumerPositions() {
		if len(positions) == 0 {
			continue
		}
		upTo, err := b.store.QueueOffsetAt(sq.topic, sq.queue, cut)
		if err != nil {
			return err
		}
		b.countDropped(positions, upTo, string(reason))
	}
	return nil
}

// storedQueue names one ConsumeQueue of the store.
type storedQueue struct {
	topic string
	queue int32
}

// consumerPosition is one group's position in one stored queue.
type consumerPosition struct {
	view      queueView
	committed int64 // the group's committed offset, at least the queue's minimum
}

// consumerPositions lists the queues whose messages groups consume — every
// queue of every topic (with no position when no group consumes it) and
// the retry topic of every group with its retry views — with the groups'
// positions in them, lowest committed offset first.
func (b *Broker) consumerPositions() map[storedQueue][]consumerPosition {
	out := map[storedQueue][]consumerPosition{}
	topics := map[string]TopicConfig{}
	for _, t := range b.registry.ListTopics() {
		topics[t.Name] = t
		for _, q := range b.storedQueues(t) {
			out[storedQueue{t.Name, q}] = nil
		}
	}
	add := func(v queueView) {
		sq := storedQueue{v.storeTopic, v.storeQueue}
		committed, _, _ := b.progress.Get(v.key)
		committed = max(committed, b.store.MinOffset(sq.topic, sq.queue))
		out[sq] = append(out[sq], consumerPosition{view: v, committed: committed})
	}
	groups := b.registry.ListGroups()
	consumed := b.topicsByGroup(groups)
	own := map[string]bool{} // groups with progress of their own (not only their instances')
	for _, k := range b.progress.Keys() {
		own[k.Group] = true
	}
	for _, g := range groups {
		hasRetries := b.store.MaxOffset(RetryTopic(g.Name), 0) > 0
		// A broadcasting group's consumer instances each have a position
		// (broadcast.go); the group's own counts when it has offsets of
		// its own or no instances.
		clients := []string{""}
		if g.ConsumeMode == ConsumeBroadcasting {
			if cs := b.instanceClients(g.Name); len(cs) > 0 {
				clients = cs
				if own[g.Name] {
					clients = append(clients, "")
				}
			}
		}
		for topic := range consumed[g.Name] {
			t, ok := topics[topic]
			if !ok {
				continue
			}
			for _, c := range clients {
				for _, q := range b.storedQueues(t) {
					add(viewOf(g, topic, q, nil, 0).forInstance(c))
				}
				if hasRetries {
					add(viewOf(g, topic, retryQueueID, nil, b.retryFloor(topic)).forInstance(c))
				}
			}
		}
	}
	for _, positions := range out {
		sort.Slice(positions, func(i, j int) bool { return positions[i].committed < positions[j].committed })
	}
	return out
}

// topicsByGroup is groupTopics for every group at once (one pass over the
// progress keys and the pop states, not one per group).
func (b *Broker) topicsByGroup(groups []GroupConfig) map[string]map[string]struct{} {
	out := make(map[string]map[string]struct{}, len(groups))
	for _, g := range groups {
		out[g.Name] = map[string]struct{}{}
		for _, s := range g.Subscriptions {
			out[g.Name][s.Topic] = struct{}{}
		}
	}
	add := func(group, topic string) {
		if set, ok := out[group]; ok {
			set[topic] = struct{}{}
		}
	}
	for _, k := range b.progress.Keys() {
		add(baseGroup(k.Group), k.Topic) // an instance's topics are its group's
	}
	b.popsMu.Lock()
	for k := range b.pops {
		add(baseGroup(k.group), k.topic)
	}
	b.popsMu.Unlock()
	return out
}

// storedQueues lists the queue ids of topic t: its configured queues and
// any others the store holds (a topic whose queue count was lowered).
func (b *Broker) storedQueues(t TopicConfig) []int32 {
	ids := make([]int32, 0, t.Queues)
	for q := 0; q < t.Queues; q++ {
		ids = append(ids, int32(q))
	}
	for _, q := range b.store.QueueIDs(t.Name) {
		if int(q) >= t.Queues {
			ids = append(ids, q)
		}
	}
	return ids
}

// expireShortTopics raises the minimum of every queue of a topic whose
// retention is shorter than the store's past its messages older than it,
// counting what the groups lose.
func (b *Broker) expireShortTopics(now time.Time) error {
	reserved := b.store.FileReservedTime()
	var positions map[storedQueue][]consumerPosition
	for _, t := range b.registry.ListTopics() {
		keep := time.Duration(t.RetentionHours) * time.Hour
		if keep <= 0 || keep >= reserved {
			continue
		}
		for _, q := range b.storedQueues(t) {
			upTo, err := b.store.SearchOffsetByTime(t.Name, q, now.Add(-keep).UnixMilli())
			if err != nil {
				return err
			}
			if upTo <= b.store.MinOffset(t.Name, q) {
				continue
			}
			if positions == nil {
				positions = b.consumerPositions()
			}
			b.countDropped(positions[storedQueue{t.Name, q}], upTo, "topic-retention")
			if _, err := b.store.TrimQueue(t.Name, q, upTo); err != nil {
				return fmt.Errorf("expire %s/%d below %d (retentionHours %d): %w", t.Name, q, upTo, t.RetentionHours, err)
			}
		}
	}
	return nil
}

// countDropped counts, for each group position, the messages below queue
// offset upTo that the group has not consumed and is about to lose.
func (b *Broker) countDropped(positions []consumerPosition, upTo int64, reason string) {
	for _, pos := range positions {
		if pos.committed >= upTo {
			continue
		}
		n := upTo - pos.committed
		if pos.view.storeQueue != pos.view.key.QueueID || pos.view.storeTopic != pos.view.key.Topic {
			// A retry view counts its own topic's retries only.
			matching, _, err := b.store.CountQueue(pos.view.storeTopic, pos.view.storeQueue, pos.committed, upTo, pos.view.match, maxLagScan)
			if err != nil {
				b.log.Error().Err(err).Str("group", pos.view.key.Group).Msg("counting retries lost to retention failed")
				continue
			}
			n = matching
		}
		for _, off := range b.progress.AckedAbove(pos.view.key) {
			if off >= pos.committed && off < upTo {
				n--
			}
		}
		if n <= 0 {
			continue
		}
		b.dropped.add(pos.view.key, n)
		b.metrics.addGroup(b.metrics.retentionDropped, baseGroup(pos.view.key.Group), int(n))
		b.log.Warn().Str("group", pos.view.key.Group).Str("topic", pos.view.key.Topic).Int32("queue", pos.view.key.QueueID).
			Int64("messages", n).Int64("from", pos.committed).Int64("to", upTo).Str("reason", reason).
			Msg("retention removes messages the group has not consumed")
	}
}

// droppedCounts are the unconsumed messages retention took from each
// progress key since the broker started (the progress field).
type droppedCounts struct {
	mu sync.Mutex
	n  map[offset.Key]int64
}

func (d *droppedCounts) add(k offset.Key, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[offset.Key]int64{}
	}
	d.n[k] += n
}

func (d *droppedCounts) get(k offset.Key) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[k]
}

// forget drops a deleted group's counts (with its instances'), or a
// forgotten instance's.
func (d *droppedCounts) forget(group string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range d.n {
		if offset.Forgets(group, k.Group) {
			delete(d.n, k)
		}
	}
}
