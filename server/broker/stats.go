package broker

import (
	"sort"
	"sync"
	"time"
)

// The broker counts what it does; the server exposes the counts as
// Prometheus metrics (a collector that calls Broker.Stats), so this package
// stays free of the metrics library.

type counters struct {
	mu          sync.Mutex
	retries     map[retryKey]uint64 // sent back to %RETRY% per (group, level)
	dead        map[string]uint64   // sent to %DLQ% per group
	sent        map[string]uint64   // messages stored per topic
	sentBytes   map[string]uint64   // body bytes stored per topic
	delivered   map[string]uint64   // leases granted per group
	outBytes    map[string]uint64   // body bytes delivered per group
	acked       map[string]uint64   // acks per group
	lateness    []time.Duration     // recent scheduler lateness samples (ring)
	latenessPos int
	scheduled   uint64 // messages the scheduler delivered
}

type retryKey struct {
	group string
	level int
}

const latenessSamples = 4096

func (c *counters) init() {
	c.retries = map[retryKey]uint64{}
	c.dead = map[string]uint64{}
	c.sent = map[string]uint64{}
	c.sentBytes = map[string]uint64{}
	c.delivered = map[string]uint64{}
	c.outBytes = map[string]uint64{}
	c.acked = map[string]uint64{}
}

func (c *counters) retry(group string, level int) {
	c.mu.Lock()
	c.retries[retryKey{group, level}]++
	c.mu.Unlock()
}

func (c *counters) dlq(group string) {
	c.mu.Lock()
	c.dead[group]++
	c.mu.Unlock()
}

func (c *counters) add(m map[string]uint64, key string, n int) {
	c.mu.Lock()
	m[key] += uint64(n)
	c.mu.Unlock()
}

func (c *counters) late(d time.Duration) {
	c.mu.Lock()
	c.scheduled++
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
	// Scheduled counts messages the delay scheduler delivered.
	Scheduled uint64
	// LatenessP50, LatenessP99 and LatenessMax summarise how late the
	// scheduler delivered its most recent messages.
	LatenessP50, LatenessP99, LatenessMax time.Duration
	// InFlight counts leases held, by group.
	InFlight map[string]int
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
		DeadLetters:    copyCounts(c.dead),
		Sent:           copyCounts(c.sent),
		SentBytes:      copyCounts(c.sentBytes),
		DeliveredBytes: copyCounts(c.outBytes),
		Delivered:      copyCounts(c.delivered),
		Acked:          copyCounts(c.acked),
		Scheduled:      c.scheduled,
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
	b.popsMu.Lock()
	states := make(map[popKey]*popState, len(b.pops))
	for k, ps := range b.pops {
		states[k] = ps
	}
	b.popsMu.Unlock()
	for k, ps := range states {
		ps.mu.Lock()
		for _, cur := range ps.queues {
			st.InFlight[k.group] += len(cur.inflight)
		}
		ps.mu.Unlock()
	}
	return st
}
