package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Consumer progress (mqadmin consumerProgress): per queue what the group
// has not consumed yet (Progress), and what waits for it outside its
// queues — retries in the delay ladder and delayed messages of its topics
// (Backlog). Together they are the group's whole lag.

// maxLagScan bounds the ConsumeQueue entries one retry view's lag count
// examines (20 bytes each); beyond it the lag shown is a lower bound.
const maxLagScan = 1 << 20

// awaitDispatch waits (a second at most) until what was stored before the
// call is in the ConsumeQueues: progress is read-your-writes, as pulls are.
func (b *Broker) awaitDispatch(ctx context.Context) error {
	if b.store.CaughtUp() {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := b.store.AwaitDispatch(wait); err != nil && !errors.Is(err, wait.Err()) {
		return mapStoreErr(err)
	}
	return nil
}

// groupTopics lists the topics a group has progress in, subscribes to or
// pops from.
func (b *Broker) groupTopics(g GroupConfig) []string {
	set := map[string]struct{}{}
	for _, s := range g.Subscriptions {
		set[s.Topic] = struct{}{}
	}
	for _, k := range b.progress.Keys() {
		if k.Group == g.Name {
			set[k.Topic] = struct{}{}
		}
	}
	b.popsMu.Lock()
	for k := range b.pops {
		if k.group == g.Name {
			set[k.topic] = struct{}{}
		}
	}
	b.popsMu.Unlock()
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Progress reports, per queue, the broker's max offset, the group's
// committed offset, the lag and the leases in flight (mqadmin
// consumerProgress). Queue id -1 is the topic's view of the group's retry
// topic %RETRY%<group>; it is listed once retries exist. Its offsets are
// positions in %RETRY%<group>, which all topics of the group share, and its
// lag counts this topic's retries only. A broadcasting group's consumer
// instances have progress of their own (Instances); its own queues are
// listed when it has offsets of its own or no instances.
func (b *Broker) Progress(ctx context.Context, group string) ([]QueueProgress, error) {
	g, err := b.GetGroup(ctx, group)
	if err != nil {
		return nil, err
	}
	if err := b.awaitDispatch(ctx); err != nil {
		return nil, err
	}
	if client := clientOf(ctx); client != "" && g.ConsumeMode == ConsumeBroadcasting {
		return b.instanceOffsets(ctx, group, client)
	}
	var out []QueueProgress
	if g.ConsumeMode == ConsumeBroadcasting && len(b.instanceClients(group)) > 0 && !b.hasOwnOffsets(group) {
		return out, nil
	}
	for _, topic := range b.groupTopics(g) {
		t, ok := b.registry.topic(topic)
		if !ok {
			continue
		}
		rows, err := b.queueRows(group, t)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// queueRows is the progress of one topic's queues (and its retry view)
// under a progress group: a group's own, or an instance's.
func (b *Broker) queueRows(group string, t TopicConfig) ([]QueueProgress, error) {
	var out []QueueProgress
	topic := t.Name
	ps := b.existingPopState(group, topic)
	for q := int32(retryQueueID); q < int32(t.Queues); q++ {
		v := b.view(group, topic, q, nil)
		committed, _, _ := b.progress.Get(v.key)
		qp := QueueProgress{Topic: topic, QueueID: q, BrokerOffset: b.store.MaxOffset(v.storeTopic, v.storeQueue)}
		qp.ConsumerOffset = max(committed, b.store.MinOffset(v.storeTopic, v.storeQueue))
		qp.Lag = max(qp.BrokerOffset-qp.ConsumerOffset, 0)
		qp.DroppedUnconsumed = b.dropped.get(v.key)
		if ps != nil {
			ps.mu.Lock()
			if c := ps.queues[q]; c != nil {
				qp.InFlight = len(c.inflight)
			}
			ps.mu.Unlock()
		}
		if q == retryQueueID && qp.Lag > 0 && v.inPlace {
			// An instance's view takes only the resends naming it.
			n, complete, err := b.countInstanceRetries(v, qp.ConsumerOffset, qp.BrokerOffset)
			if err != nil {
				return nil, err
			}
			qp.Lag, qp.LagIsLowerBound = n, !complete
		}
		if q == retryQueueID && (qp.BrokerOffset == 0 || v.inPlace && qp.Lag == 0) && qp.InFlight == 0 {
			continue // no retries: keep the view out of the listing
		}
		if q == retryQueueID && qp.Lag > 0 && !v.inPlace {
			// The retry topic holds every topic's retries: count this one's.
			n, complete, err := b.store.CountQueue(v.storeTopic, v.storeQueue, qp.ConsumerOffset, qp.BrokerOffset, v.match, maxLagScan)
			if err != nil {
				return nil, mapStoreErr(err)
			}
			qp.Lag, qp.LagIsLowerBound = n, !complete
		}
		if qp.BrokerOffset > 0 {
			if res, err := b.store.ReadQueue(v.storeTopic, v.storeQueue, qp.BrokerOffset-1, 1, nil); err == nil && len(res.Messages) == 1 {
				qp.LastStoredAt = time.UnixMilli(res.Messages[0].StoreTimestamp).UTC()
			}
		}
		out = append(out, qp)
	}
	return out, nil
}

// GetOffsets reports the group's committed offsets (the progress view).
func (b *Broker) GetOffsets(ctx context.Context, group string) ([]QueueProgress, error) {
	return b.Progress(ctx, group)
}

// Backlog reports what waits for the group besides its queues' lag: its
// retries still in the delay ladder (entries of SCHEDULE_TOPIC_XXXX for
// %RETRY%<group> the scheduler has not delivered) or on a timer, and the delayed
// messages of the topics it consumes (delay levels and delayMs/deliverAt
// timers). A count that cannot be known is nil, with a note.
func (b *Broker) Backlog(ctx context.Context, group string) (GroupBacklog, error) {
	g, err := b.GetGroup(ctx, group)
	if err != nil {
		return GroupBacklog{}, err
	}
	if err := b.awaitDispatch(ctx); err != nil {
		return GroupBacklog{}, err
	}
	topics := map[string]bool{}
	for _, t := range b.groupTopics(g) {
		if _, ok := b.registry.topic(t); ok {
			topics[t] = true
		}
	}
	retry := RetryTopic(group)
	var out GroupBacklog
	for _, kind := range []struct {
		into *[]LevelBacklog
		want func(ladderDest) bool
		what string
	}{
		{&out.Retry, func(d ladderDest) bool { return d.topic == retry && topics[d.origin] }, "retries"},
		{&out.Delayed, func(d ladderDest) bool { return d.origin == "" && topics[d.topic] }, "delayed messages"},
	} {
		var unknown []string
		for _, c := range b.ladderCounts(kind.want) {
			lb := LevelBacklog{Level: c.level, Delay: b.opts.DelayLevels[c.level-1]}
			switch {
			case c.known && c.count == 0:
				continue
			case c.known:
				n := c.count
				lb.Count = &n
			default:
				unknown = append(unknown, fmt.Sprint(c.level))
				if c.count > 0 {
					n := c.count
					lb.AtLeast = &n
				}
			}
			*kind.into = append(*kind.into, lb)
		}
		if len(unknown) > 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("%s waiting at delay level %s: still being counted (a large backlog is read once after a start); ask again",
				kind.what, strings.Join(unknown, ", ")))
		}
	}
	for t := range topics {
		out.Timers += int64(b.pendingFor(t))
	}
	out.RetryTimers = int64(b.pendingFor(retry))
	return out, nil
}
