package push

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
)

// deliveries sums the delivery counts of each group label.
func deliveries(m *Metrics) map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]uint64{}
	for name, g := range m.groups {
		for _, n := range g.results {
			out[name] += n
		}
	}
	return out
}

// TestMetricsGroupLabelsStayBounded: beyond maxGroups, deliveries count
// under "_other"; a group that no longer exists moves there once its
// deliveries in flight have ended; the exposition follows.
func TestMetricsGroupLabelsStayBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, 2)
	deliver := func(group string) {
		m.end(m.begin(group), ResultOK, 20*time.Millisecond, true)
	}
	for i := range 5 {
		deliver(fmt.Sprintf("g%d", i))
	}
	require.Equal(t, map[string]uint64{"g0": 1, "g1": 1, broker.OtherLabel: 3}, deliveries(m))

	label := m.begin("g0") // in flight while g0 is deleted
	m.retain(map[string]bool{"g1": true})
	require.Contains(t, deliveries(m), "g0", "kept while a delivery is in flight")
	m.end(label, ResultOK, time.Millisecond, true)
	m.retain(map[string]bool{"g1": true})
	require.Equal(t, map[string]uint64{"g1": 1, broker.OtherLabel: 5}, deliveries(m))
	deliver("g5")
	require.Equal(t, uint64(1), deliveries(m)["g5"], "the freed place goes to the next group")

	families, err := reg.Gather()
	require.NoError(t, err)
	series := map[string]int{}
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
		if f.GetName() == "mqgate_push_request_duration_seconds" {
			var count uint64
			for _, metric := range f.GetMetric() {
				count += metric.GetHistogram().GetSampleCount()
			}
			require.Equal(t, uint64(7), count, "every latency is kept, moved or not")
		}
	}
	require.Equal(t, map[string]int{"mqgate_push_deliveries_total": 3, "mqgate_push_request_duration_seconds": 3, "mqgate_push_requests_in_flight": 3}, series)
}
