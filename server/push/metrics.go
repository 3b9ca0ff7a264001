package push

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the push dispatcher's Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	deliveries *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	inFlight   *prometheus.GaugeVec
}

// NewMetrics creates the push metrics and registers them with reg:
// mqgate_push_deliveries_total{group,result},
// mqgate_push_request_duration_seconds{group} and
// mqgate_push_requests_in_flight{group}.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mqgate_push_deliveries_total",
			Help: "Push deliveries by group and result: ok (2xx, acked), 3xx, 4xx, 5xx, gone (410, endpoint disabled), timeout, network, forbidden (SSRF guard), released (endpoint disabled before sending), abandoned (shutdown).",
		}, []string{"group", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mqgate_push_request_duration_seconds",
			Help:    "Push request latency, until the endpoint's answer (or the failure), by group.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15, 30, 60},
		}, []string{"group"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mqgate_push_requests_in_flight",
			Help: "Push deliveries in progress, by group.",
		}, []string{"group"}),
	}
	reg.MustRegister(m.deliveries, m.duration, m.inFlight)
	return m
}

func (m *Metrics) begin(group string) {
	if m != nil {
		m.inFlight.WithLabelValues(group).Inc()
	}
}

func (m *Metrics) end(group, result string, took time.Duration, requested bool) {
	if m == nil {
		return
	}
	m.inFlight.WithLabelValues(group).Dec()
	m.deliveries.WithLabelValues(group, result).Inc()
	if requested {
		m.duration.WithLabelValues(group).Observe(took.Seconds())
	}
}
