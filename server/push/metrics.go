package push

import (
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqgate/mqgate/server/broker"
)

// Metrics are the push dispatcher's Prometheus metrics. A nil *Metrics
// records nothing.
//
// The group label stays bounded: at most maxGroups groups have series of
// their own; deliveries of any further group are counted under
// broker.OtherLabel ("_other"). Once a group no longer exists (and has no
// delivery in flight), its counts and latencies move to "_other" too, so
// every sum over the label stays monotonic.
type Metrics struct {
	deliveries, duration, inFlight *prometheus.Desc

	mu        sync.Mutex
	maxGroups int
	groups    map[string]*groupMetrics // by label: group name or broker.OtherLabel
}

// groupMetrics are the counts of one group label.
type groupMetrics struct {
	results  map[string]uint64 // deliveries by result
	inFlight int
	// buckets[i] counts durations ≤ durationBuckets[i] (not cumulative).
	buckets []uint64
	count   uint64
	sum     float64
}

// durationBuckets are the upper bounds of the latency histogram (seconds).
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60}

// NewMetrics creates the push metrics and registers them with reg:
// mqgate_push_deliveries_total{group,result},
// mqgate_push_request_duration_seconds{group} and
// mqgate_push_requests_in_flight{group}, with at most maxGroups group
// label values besides "_other" (broker.DefaultMetricsMaxLabelValues when
// maxGroups ≤ 0).
func NewMetrics(reg prometheus.Registerer, maxGroups int) *Metrics {
	if maxGroups <= 0 {
		maxGroups = broker.DefaultMetricsMaxLabelValues
	}
	m := &Metrics{
		deliveries: prometheus.NewDesc("mqgate_push_deliveries_total",
			"Push deliveries by group and result: ok (2xx, acked), 3xx, 4xx, 5xx, gone (410, endpoint disabled), timeout, network, forbidden (SSRF guard), released (endpoint disabled before sending), abandoned (shutdown).",
			[]string{"group", "result"}, nil),
		duration: prometheus.NewDesc("mqgate_push_request_duration_seconds",
			"Push request latency, until the endpoint's answer (or the failure), by group.",
			[]string{"group"}, nil),
		inFlight: prometheus.NewDesc("mqgate_push_requests_in_flight",
			"Push deliveries in progress, by group.",
			[]string{"group"}, nil),
		maxGroups: maxGroups,
		groups:    make(map[string]*groupMetrics),
	}
	reg.MustRegister(m)
	return m
}

// begin counts a delivery of group as in flight and returns the label it
// is counted under, for end.
func (m *Metrics) begin(group string) string {
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	label, g := m.group(group)
	g.inFlight++
	return label
}

// end counts a finished delivery under the label begin returned.
func (m *Metrics) end(label, result string, took time.Duration, requested bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.groups[label] // present: retain keeps groups with deliveries in flight
	if g == nil {
		_, g = m.group(label)
	}
	g.inFlight--
	g.results[result]++
	if requested {
		s := took.Seconds()
		g.count++
		g.sum += s
		if i := sort.SearchFloat64s(durationBuckets, s); i < len(durationBuckets) {
			g.buckets[i]++
		}
	}
}

// group returns the label group's deliveries are counted under and its
// counts, creating them. Callers hold m.mu.
func (m *Metrics) group(name string) (string, *groupMetrics) {
	if g := m.groups[name]; g != nil {
		return name, g
	}
	own := len(m.groups)
	if _, ok := m.groups[broker.OtherLabel]; ok {
		own--
	}
	if own >= m.maxGroups {
		name = broker.OtherLabel
		if g := m.groups[name]; g != nil {
			return name, g
		}
	}
	g := &groupMetrics{results: make(map[string]uint64), buckets: make([]uint64, len(durationBuckets))}
	m.groups[name] = g
	return name, g
}

// retain moves the counts of groups that no longer exist (and have no
// delivery in flight) to "_other".
func (m *Metrics) retain(exists map[string]bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, g := range m.groups {
		if name == broker.OtherLabel || exists[name] || g.inFlight > 0 {
			continue
		}
		delete(m.groups, name)
		_, other := m.group(broker.OtherLabel)
		for r, n := range g.results {
			other.results[r] += n
		}
		for i, n := range g.buckets {
			other.buckets[i] += n
		}
		other.count += g.count
		other.sum += g.sum
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.deliveries
	ch <- m.duration
	ch <- m.inFlight
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	var out []prometheus.Metric
	m.mu.Lock()
	for name, g := range m.groups {
		for r, n := range g.results {
			out = append(out, prometheus.MustNewConstMetric(m.deliveries, prometheus.CounterValue, float64(n), name, r))
		}
		cumulative := make(map[float64]uint64, len(durationBuckets))
		var below uint64
		for i, upper := range durationBuckets {
			below += g.buckets[i]
			cumulative[upper] = below
		}
		out = append(out,
			prometheus.MustNewConstHistogram(m.duration, g.count, g.sum, cumulative, name),
			prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, float64(g.inFlight), name))
	}
	m.mu.Unlock()
	for _, metric := range out {
		ch <- metric
	}
}
