package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqgate/mqgate/server/broker"
)

// traceSource is what the trace collector reads; *broker.Broker has it.
type traceSource interface {
	TraceStats() broker.TraceStats
}

// traceCollector exposes the message trace's follower (server/broker/trace,
// follow.go) at scrape time.
type traceCollector struct {
	src                           traceSource
	events, records, dropped, lag *prometheus.Desc
}

func newTraceCollector(src traceSource) *traceCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc("mqgate_"+name, help, nil, nil) }
	return &traceCollector{
		src:     src,
		events:  d("trace_events_total", "Message trace events the trace follower appended to rmq_sys_TRACE since start."),
		records: d("trace_records_total", "Trace records the trace follower appended since start."),
		dropped: d("trace_events_dropped_total", "Push outcomes dropped from the message trace because its buffer was full, since start."),
		lag:     d("trace_lag_records", "Lease and progress records the trace follower has not traced yet."),
	}
}

// Describe implements prometheus.Collector.
func (c *traceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.events, c.records, c.dropped, c.lag} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Nothing is reported with
// tracing off.
func (c *traceCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.TraceStats()
	if !st.Enabled {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.events, prometheus.CounterValue, float64(st.Events))
	ch <- prometheus.MustNewConstMetric(c.records, prometheus.CounterValue, float64(st.Records))
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(st.Lag))
}
