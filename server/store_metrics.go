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

// dispatchCollector exposes the health of the store's dispatcher, its
// quarantine, its disk and its scrubber at scrape time.
type dispatchCollector struct {
	src                              dispatchSource
	quarantined, lag, delay, failing *prometheus.Desc
	diskUsed, sendsRefused           *prometheus.Desc
	systemRefused, noSpace           *prometheus.Desc
	systemRoom                       *prometheus.Desc
	scrub                            scrubDescs
}

// scrubDescs are the scrubber's series.
type scrubDescs struct {
	bytes, records, badFrames, busy, passes, lastPass, position *prometheus.Desc
}

func newDispatchCollector(src dispatchSource) *dispatchCollector {
	return &dispatchCollector{
		src:         src,
		quarantined: prometheus.NewDesc("mqgate_store_quarantined_records", "Records the store set aside because they could not be dispatched or read (see GET /v1/broker/status).", nil, nil),
		lag:         prometheus.NewDesc("mqgate_dispatch_lag_bytes", "Stored CommitLog bytes not yet visible to consumers.", nil, nil),
		delay:       prometheus.NewDesc("mqgate_dispatch_delay_seconds", "How long the dispatcher has been behind the CommitLog (0 when caught up).", nil, nil),
		failing:     prometheus.NewDesc("mqgate_dispatch_failing", "1 while the dispatcher's passes fail (an I/O error or a damaged frame header; retried), else 0.", nil, nil),
		diskUsed:    prometheus.NewDesc("mqgate_disk_used_ratio", "Used fraction of the data dir's file system (as df), sampled every --disk-check-interval.", nil, nil),
		sendsRefused: prometheus.NewDesc("mqgate_disk_sends_refused",
			"1 while sends get 507 disk-full (the disk is above --disk-send-ceiling, or the file system has no room left for messages), else 0.", nil, nil),
		systemRefused: prometheus.NewDesc("mqgate_disk_system_refused",
			"1 while acks, nacks and commits get 507 too (the disk is above --disk-system-ceiling, or the room kept for them is gone), else 0.", nil, nil),
		noSpace: prometheus.NewDesc("mqgate_commitlog_no_space_total",
			"Writes refused because the file system had no room for them in the CommitLog.", nil, nil),
		systemRoom: prometheus.NewDesc("mqgate_commitlog_system_room_bytes",
			"CommitLog room allocated ahead of the writes that acks, nacks, retries and commits may still use (sends leave the reserve in it alone).", nil, nil),
		scrub: scrubDescs{
			bytes:     prometheus.NewDesc("mqgate_store_scrub_verified_bytes_total", "CommitLog bytes the background scrubber verified (CRC of every durable frame) since start.", nil, nil),
			records:   prometheus.NewDesc("mqgate_store_scrub_verified_records_total", "Records the background scrubber verified since start.", nil, nil),
			badFrames: prometheus.NewDesc("mqgate_store_scrub_bad_frames_total", "Damaged frames the scrubber found since start (each is quarantined).", nil, nil),
			busy:      prometheus.NewDesc("mqgate_store_scrub_busy_seconds_total", "Time the scrubber spent verifying since start.", nil, nil),
			passes:    prometheus.NewDesc("mqgate_store_scrub_passes_total", "Full scrub passes over the durable CommitLog (kept across restarts).", nil, nil),
			lastPass:  prometheus.NewDesc("mqgate_store_scrub_last_pass_timestamp_seconds", "When the last full scrub pass ended (unix seconds; 0 before the first).", nil, nil),
			position:  prometheus.NewDesc("mqgate_store_scrub_position_bytes", "CommitLog offset the current scrub pass has verified up to.", nil, nil),
		},
	}
}

// Describe implements prometheus.Collector.
func (c *dispatchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.quarantined
	ch <- c.lag
	ch <- c.delay
	ch <- c.failing
	ch <- c.diskUsed
	ch <- c.sendsRefused
	ch <- c.systemRefused
	ch <- c.noSpace
	ch <- c.systemRoom
	for _, d := range c.scrub.all() {
		ch <- d
	}
}

func (d scrubDescs) all() []*prometheus.Desc {
	return []*prometheus.Desc{d.bytes, d.records, d.badFrames, d.busy, d.passes, d.lastPass, d.position}
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
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	ch <- prometheus.MustNewConstMetric(c.diskUsed, prometheus.GaugeValue, st.Disk.Usage)
	ch <- prometheus.MustNewConstMetric(c.sendsRefused, prometheus.GaugeValue, flag(st.Disk.SendsRefused))
	ch <- prometheus.MustNewConstMetric(c.systemRefused, prometheus.GaugeValue, flag(st.Disk.SystemRefused))
	ch <- prometheus.MustNewConstMetric(c.noSpace, prometheus.CounterValue, float64(st.Disk.NoSpace))
	ch <- prometheus.MustNewConstMetric(c.systemRoom, prometheus.GaugeValue, float64(st.Disk.SystemRoom))
	sc, d := st.Scrub, c.scrub
	lastPass := 0.0
	if !sc.LastPassAt.IsZero() {
		lastPass = float64(sc.LastPassAt.UnixMilli()) / 1000
	}
	ch <- prometheus.MustNewConstMetric(d.bytes, prometheus.CounterValue, float64(sc.BytesVerified))
	ch <- prometheus.MustNewConstMetric(d.records, prometheus.CounterValue, float64(sc.RecordsVerified))
	ch <- prometheus.MustNewConstMetric(d.badFrames, prometheus.CounterValue, float64(sc.BadFrames))
	ch <- prometheus.MustNewConstMetric(d.busy, prometheus.CounterValue, sc.Busy.Seconds())
	ch <- prometheus.MustNewConstMetric(d.passes, prometheus.CounterValue, float64(sc.Passes))
	ch <- prometheus.MustNewConstMetric(d.lastPass, prometheus.GaugeValue, lastPass)
	ch <- prometheus.MustNewConstMetric(d.position, prometheus.GaugeValue, float64(sc.Position))
}
