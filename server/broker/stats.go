package broker

import (
	"sort"
	"sync"
	"time"
)

// The broker counts what it does; the server exposes the counts as
// Prometheus metrics (a collector that calls Broker.Stats), so this package
// stays free of the metrics library.
//
// Label sets stay bounded: at most Options.MetricsMaxLabelValues topics,
// and as many groups, have counts of their own; the counts of any further
// one go to OtherLabel. Deleting a topic or group moves its counts to
// OtherLabel too, so that every sum over the label stays monotonic.

// OtherLabel is the topic or group under which Stats reports the counts of
// names beyond the label limit and of deleted ones.
const OtherLabel = "_other"

type counters struct {
	mu sync.Mutex
	// maxLabels is the most topics, and the most groups, counted under
	// their own name.
	maxLabels int
	// topics and groups are the names counted under their own name.
	topics, groups map[string]struct{}
	retries        map[retryKey]uint64 // sent back to %RETRY% per (group, level)
	dead           map[string]uint64   // sent to %DLQ% per group
	sent           map[string]uint64   // messages stored per topic
	sentBytes      map[string]uint64   // body bytes stored per topic
	delivered      map[string]uint64   // leases granted per group
	outBytes       map[string]uint64   // body bytes delivered per group
	acked          map[string]uint64   // acks per group
	// retentionDropped counts unconsumed messages retention removed, per group.
	retentionDropped map[string]uint64
	lateness         []time.Duration // recent scheduler lateness samples (ring), for the status's percentiles
	latenessPos      int
	// latenessCounts counts every scheduler delivery by lateness
	// (LatenessBuckets, the last one the later ones); latenessSum is their
	// total: the Prometheus histogram.
	latenessCounts [len(LatenessBuckets) + 1]uint64
	latenessSum    time.Duration
	scheduled      uint64 // messages the scheduler delivered
	clamped        uint64 // consumer offsets lowered to their queue's maximum
}

type retryKey struct {
	group string
	level int
}

const latenessSamples = 4096

// LatenessBuckets are the upper bounds of Stats.LatenessCounts: a due
// message is delivered within milliseconds; seconds mean a backlog.
var LatenessBuckets = [...]time.Duration{
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 5 * time.Minute,
}

// latenessBucket is the index in LatenessCounts of a delivery d late.
func latenessBucket(d time.Duration) int {
	for i, b := range LatenessBuckets {
		if d <= b {
			return i
		}
	}
	return len(LatenessBuckets)
}

func (c *counters) init(maxLabels int) {
	c.maxLabels = maxLabels
	c.topics = map[string]struct{}{}
	c.groups = map[string]struct{}{}
	c.retries = map[retryKey]uint64{}
	c.dead = map[string]uint64{}
	c.sent = map[string]uint64{}
	c.sentBytes = map[string]uint64{}
	c.delivered = map[string]uint64{}
	c.outBytes = map[string]uint64{}
	c.acked = map[string]uint64{}
	c.retentionDropped = map[string]uint64{}
}

// label returns the name counts of name go under: name itself when it
// has, or gets, one of the maxLabels places of set, else OtherLabel.
// Callers hold c.mu.
func (c *counters) label(set map[string]struct{}, name string) string {
	if _, ok := set[name]; ok || name == OtherLabel {
		return name
	}
	if len(set) < c.maxLabels {
		set[name] = struct{}{}
		return name
	}
	return OtherLabel
}

func (c *counters) retry(group string, level int) {
	c.mu.Lock()
	c.retries[retryKey{c.label(c.groups, group), level}]++
	c.mu.Unlock()
}

func (c *counters) dlq(group string) {
	c.mu.Lock()
	c.dead[c.label(c.groups, group)]++
	c.mu.Unlock()
}

// addTopic adds n to topic's count in m (sent or sentBytes).
func (c *counters) addTopic(m map[string]uint64, topic string, n int) {
	c.mu.Lock()
	m[c.label(c.topics, topic)] += uint64(n)
	c.mu.Unlock()
}

// addGroup adds n to group's count in m (delivered, outBytes or acked).
func (c *counters) addGroup(m map[string]uint64, group string, n int) {
	c.mu.Lock()
	m[c.label(c.groups, group)] += uint64(n)
	c.mu.Unlock()
}

// fold moves the count of name in m to OtherLabel.
func fold(m map[string]uint64, name string) {
	if v, ok := m[name]; ok {
		m[OtherLabel] += v
		delete(m, name)
	}
}

// forgetTopic moves a deleted topic's counts to OtherLabel and frees its
// place.
func (c *counters) forgetTopic(topic string) {
	if topic == OtherLabel {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fold(c.sent, topic)
	fold(c.sentBytes, topic)
	delete(c.topics, topic)
}

// forgetGroup moves a deleted group's counts to OtherLabel and frees its
// place.
func (c *counters) forgetGroup(group string) {
	if group == OtherLabel {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range []map[string]uint64{c.dead, c.delivered, c.outBytes, c.acked, c.retentionDropped} {
		fold(m, group)
	}
	for k, v := range c.retries {
		if k.group == group {
			c.retries[retryKey{OtherLabel, k.level}] += v
			delete(c.retries, k)
		}
	}
	delete(c.groups, group)
}

func (c *counters) clampedOffset() {
	c.mu.Lock()
	c.clamped++
	c.mu.Unlock()
}

func (c *counters) late(d time.Duration) {
	c.mu.Lock()
	c.scheduled++
	c.latenessCounts[latenessBucket(d)]++
	c.latenessSum += max(d, 0)
	if len(c.lateness) < latenessSamples {
		c.lateness = append(c.lateness, d)
	} else {
		c.lateness[c.latenessPos] = d
		c.latenessPos = (c.latenessPos + 1) % latenessSamples
	}
	c.mu.Unlock()
}

// Stats is a snapshot of the broker's counters.
type Stats struct {
	// Retries counts messages sent back to a retry topic, by group and delay level.
	Retries []RetryCount
	// DeadLetters counts messages moved to a DLQ, by group.
	DeadLetters map[string]uint64
	// Sent counts stored messages by topic; SentBytes their body bytes.
	Sent, SentBytes map[string]uint64
	// DeliveredBytes counts body bytes of granted leases by group.
	DeliveredBytes map[string]uint64
	// Delivered counts leases granted by group.
	Delivered map[string]uint64
	// Acked counts acknowledgements by group.
	Acked map[string]uint64
	// RetentionDropped counts, by group, the messages retention removed
	// before the group consumed them.
	RetentionDropped map[string]uint64
	// Scheduled counts messages the delay scheduler delivered.
	Scheduled uint64
	// OffsetsClamped counts consumer offsets found above their queue's
	// maximum (the store lost messages the group had consumed) and lowered
	// to it, so the group receives what is stored from then on.
	OffsetsClamped uint64
	// LatenessP50, LatenessP99 and LatenessMax summarise how late the
	// scheduler delivered its most recent messages (the status report's).
	LatenessP50, LatenessP99, LatenessMax time.Duration
	// LatenessCounts counts every scheduler delivery since start by how
	// late it was: LatenessCounts[i] those at most LatenessBuckets[i] late
	// (and more than the bucket before), the last one the later ones.
	// LatenessSum is their total lateness. (The metrics' histogram.)
	LatenessCounts []uint64
	LatenessSum    time.Duration
	// InFlight counts leases held, by group.
	InFlight map[string]int
	// Every map above, and Retries, is keyed by topic or group name, at
	// most Options.MetricsMaxLabelValues of each plus OtherLabel.
}

// RetryCount is one (group, level) retry counter.
type RetryCount struct {
	Group string
	Level int
	Count uint64
}

func copyCounts(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Stats returns the broker's counters.
func (b *Broker) Stats() Stats {
	c := &b.metrics
	c.mu.Lock()
	st := Stats{
		DeadLetters:      copyCounts(c.dead),
		Sent:             copyCounts(c.sent),
		SentBytes:        copyCounts(c.sentBytes),
		DeliveredBytes:   copyCounts(c.outBytes),
		Delivered:        copyCounts(c.delivered),
		Acked:            copyCounts(c.acked),
		RetentionDropped: copyCounts(c.retentionDropped),
		Scheduled:        c.scheduled,
		OffsetsClamped:   c.clamped,
		LatenessCounts:   append([]uint64(nil), c.latenessCounts[:]...),
		LatenessSum:      c.latenessSum,
	}
	for k, v := range c.retries {
		st.Retries = append(st.Retries, RetryCount{Group: k.group, Level: k.level, Count: v})
	}
	late := append([]time.Duration(nil), c.lateness...)
	c.mu.Unlock()
	sort.Slice(st.Retries, func(i, j int) bool {
		if st.Retries[i].Group != st.Retries[j].Group {
			return st.Retries[i].Group < st.Retries[j].Group
		}
		return st.Retries[i].Level < st.Retries[j].Level
	})
	if len(late) > 0 {
		sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
		st.LatenessP50 = late[len(late)/2]
		st.LatenessP99 = late[len(late)*99/100]
		st.LatenessMax = late[len(late)-1]
	}
	st.InFlight = map[string]int{}
	states := b.consume.States()
	for k, ps := range states {
		ps.Lock()
		n := 0
		for _, cur := range ps.Cursors() {
			n += cur.InFlight()
		}
		ps.Unlock()
		c.mu.Lock()
		group := c.label(c.groups, k.Group)
		c.mu.Unlock()
		st.InFlight[group] += n
	}
	return st
}

// ConsumerLag is one (group, topic) row of ConsumerLags.
type ConsumerLag struct {
	// Group and Topic are the labels: names, or OtherLabel for those
	// beyond the label limit (their rows summed).
	Group, Topic string
	// Lag counts the messages of the topic that the group has not
	// consumed (acknowledged, skipped or sent back): those of its queues,
	// and its retries (and resent dead letters) that are due, in the
	// group's %RETRY% topic (counted up to 1 Mi entries, as Progress does);
	// retries still waiting for their delay level are the scheduler's
	// backlog. A broadcasting group's lag is its slowest instance's.
	Lag int64
	// OldestUnacked is how long ago the oldest unconsumed message of the
	// topic's own queues was stored (0 when none): what an alert on a
	// stuck consumer watches.
	OldestUnacked time.Duration
}

// ConsumerLags reports every group's lag and oldest unconsumed message
// per topic it reads, for the metrics, under the label limit of Stats.
// It reads offsets, one ConsumeQueue entry per queue that lags, and the
// unconsumed entries of the group's retry topic.
// It does not wait for the dispatcher, so messages stored an instant ago
// may not be counted yet.
func (b *Broker) ConsumerLags() []ConsumerLag {
	type key struct{ group, topic string }
	rows := map[key]*ConsumerLag{}
	now := b.clock.Now()
	for _, g := range b.registry.ListGroups() {
		// The progress groups: the group's own, and a broadcasting
		// group's instances (the slowest one counts).
		progress := []string{g.Name}
		if g.ConsumeMode == ConsumeBroadcasting {
			if clients := b.instanceClients(g.Name); len(clients) > 0 {
				if !b.hasOwnOffsets(g.Name) {
					progress = progress[:0]
				}
				for _, c := range clients {
					progress = append(progress, instanceKey(g.Name, c))
				}
			}
		}
		for _, topic := range b.groupTopics(g) {
			t, ok := b.registry.Topic(topic)
			if !ok {
				continue
			}
			var lag int64
			var oldest time.Duration
			for _, pg := range progress {
				var n int64
				for q := int32(retryQueueID); q < int32(t.Queues); q++ {
					v := b.consume.View(pg, topic, q, nil)
					committed, _, _ := b.progress.Get(v.Key)
					maxOff := b.store.MaxOffset(v.StoreTopic, v.StoreQueue)
					from := max(committed, b.store.MinOffset(v.StoreTopic, v.StoreQueue))
					if maxOff <= from {
						continue
					}
					if q == retryQueueID {
						// The group's retry topic, shared by its topics:
						// count this topic's due retries (as Progress does).
						var k int64
						var err error
						if v.InPlace {
							k, _, err = b.countInstanceRetries(v, from, maxOff)
						} else {
							k, _, err = b.store.CountQueue(v.StoreTopic, v.StoreQueue, from, maxOff, v.Match, maxLagScan)
						}
						if err == nil {
							n += k
						}
						continue
					}
					n += maxOff - from
					if res, err := b.store.ReadQueue(v.StoreTopic, v.StoreQueue, from, 1, nil); err == nil && len(res.Messages) == 1 {
						oldest = max(oldest, now.Sub(time.UnixMilli(res.Messages[0].StoreTimestamp)))
					}
				}
				lag = max(lag, n)
			}
			b.metrics.mu.Lock()
			k := key{b.metrics.label(b.metrics.groups, g.Name), b.metrics.label(b.metrics.topics, topic)}
			b.metrics.mu.Unlock()
			r := rows[k]
			if r == nil {
				r = &ConsumerLag{Group: k.group, Topic: k.topic}
				rows[k] = r
			}
			r.Lag += lag
			r.OldestUnacked = max(r.OldestUnacked, oldest)
		}
	}
	out := make([]ConsumerLag, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Group != out[j].Group {
			return out[i].Group < out[j].Group
		}
		return out[i].Topic < out[j].Topic
	})
	return out
}
