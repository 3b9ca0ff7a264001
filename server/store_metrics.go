package server

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqgate/mqgate/server/broker"
)

// dispatchSource is what the dispatch collector reads; *broker.Broker has it.
type dispatchSource interface {
	Status(ctx context.Context) (broker.BrokerStatus, error)
}

// dispatchCollector exposes the health of the store's dispatcher and its
// quarantine at scrape time.
type dispatchCollector struct {
	src                              dispatchSource
	quarantined, lag, delay, failing *prometheus.Desc
}

func newDispatchCollector(src dispatchSource) *dispatchCollector {
	return &dispatchCollector{
		src:         src,
		quarantined: prometheus.NewDesc("mqgate_store_quarantined_records", "Records the store set aside because they could not be dispatched or read (see GET /v1/broker/status).", nil, nil),
		lag:         prometheus.NewDesc("mqgate_dispatch_lag_bytes", "Stored CommitLog bytes not yet visible to consumers.", nil, nil),
		delay:       prometheus.NewDesc("mqgate_dispatch_delay_seconds", "How long the dispatcher has been behind the CommitLog (0 when caught up).", nil, nil),
		failing:     prometheus.NewDesc("mqgate_dispatch_failing", "1 while the dispatcher's passes fail (an I/O error; retried), else 0.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *dispatchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.quarantined
	ch <- c.lag
	ch <- c.delay
	ch <- c.failing
}

// Collect implements prometheus.Collector.
func (c *dispatchCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.src.Status(context.Background())
	if err != nil {
		return
	}
	failing := 0.0
	if st.Dispatch.Error != "" {
		failing = 1
	}
	ch <- prometheus.MustNewConstMetric(c.quarantined, prometheus.GaugeValue, float64(st.Quarantined))
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(st.Dispatch.LagBytes))
	ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, st.Dispatch.Delay.Seconds())
	ch <- prometheus.MustNewConstMetric(c.failing, prometheus.GaugeValue, failing)
}
