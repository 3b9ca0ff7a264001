package server

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mqgate/mqgate/server/broker"
)

// statsSource is what the broker collector reads; *broker.Broker has it.
type statsSource interface {
	Stats() broker.Stats
	ConsumerLags() []broker.ConsumerLag
	Status(ctx context.Context) (broker.BrokerStatus, error)
}

// brokerCollector exposes the broker's counters at scrape time, so the
// broker itself stays free of the metrics library. The broker bounds their
// topic and group labels (--metrics-max-label-values; the rest and deleted
// ones under "_other", see broker.OtherLabel).
type brokerCollector struct {
	src statsSource

	sent, delivered, acked, retries, dead, inflight *prometheus.Desc
	retentionDropped                                *prometheus.Desc
	sentBytes, deliveredBytes                       *prometheus.Desc
	scheduled, lateness, backlog, storeBytes        *prometheus.Desc
	timersPending                                   *prometheus.Desc
	commitLogMin, commitLogMax                      *prometheus.Desc
	appends, flushes, flushTime, maxFlush           *prometheus.Desc
	flushDuration, flushRecords                     *prometheus.Desc
	consumerLag, oldestUnacked                      *prometheus.Desc
	offsetsClamped                                  *prometheus.Desc
	txnPending, txnCommitted, txnRolledBack         *prometheus.Desc
	txnMaxChecks, txnChecks                         *prometheus.Desc
}

func newBrokerCollector(src statsSource) *brokerCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("mqgate_"+name, help, labels, nil)
	}
	return &brokerCollector{
		src:            src,
		sent:           d("messages_sent_total", "Messages stored by sends, per topic.", "topic"),
		delivered:      d("messages_delivered_total", "Leases granted to pulls, per group.", "group"),
		sentBytes:      d("message_bytes_sent_total", "Body bytes stored by sends, per topic.", "topic"),
		deliveredBytes: d("message_bytes_delivered_total", "Body bytes delivered to pulls, per group.", "group"),
		acked:          d("messages_acked_total", "Acknowledged deliveries, per group.", "group"),
		retries:        d("messages_retried_total", "Failed deliveries sent to the retry topic, per group and delay level (0: on a timer, a nack's delayMs or an exponential or fixed retry policy).", "group", "level"),
		dead:           d("messages_dlq_total", "Messages moved to the dead-letter queue, per group.", "group"),
		inflight:       d("inflight_leases", "Leased messages not yet acknowledged, per group.", "group"),
		retentionDropped: d("retention_dropped_unconsumed_total",
			"Messages retention removed before the group consumed them (expired, a topic's shorter retentionHours, or --disk-pressure-delete), per group.", "group"),
		scheduled:     d("scheduler_delivered_total", "Messages the delay scheduler delivered."),
		lateness:      d("scheduler_lateness_seconds", "How late the delay scheduler delivered its messages, since start."),
		backlog:       d("scheduler_backlog_messages", "Schedule entries not yet delivered, per delay level.", "level"),
		storeBytes:    d("store_bytes", "Disk space of CommitLog segments."),
		timersPending: d("timers_pending", "delayMs/deliverAt timers not yet due."),
		commitLogMin:  d("commitlog_min_offset_bytes", "Lowest CommitLog offset still kept."),
		commitLogMax:  d("commitlog_max_offset_bytes", "CommitLog write offset."),
		appends:       d("commitlog_appends_total", "Records appended to the CommitLog since start."),
		flushes:       d("commitlog_flushes_total", "CommitLog flushes (fdatasync batches, each shared by the appends it covers: group commit) since start."),
		flushTime:     d("commitlog_flush_seconds_total", "Time spent in CommitLog flushes since start (divide by mqgate_commitlog_flushes_total for the mean)."),
		maxFlush:      d("commitlog_flush_max_seconds", "The longest CommitLog flush since start."),
		flushDuration: d("commitlog_flush_duration_seconds", "CommitLog flushes (one fdatasync batch each) by duration since start: a durable send waits for one, so their tail is the send's."),
		flushRecords:  d("commitlog_flush_records", "CommitLog flushes by the records each covered (appended since the flush before) since start: how much group commit shares one fdatasync."),
		consumerLag: d("consumer_lag_messages",
			"Messages of the topic the group has not consumed yet: in its queues, and due retries and resent dead letters in the group's %RETRY% topic (a broadcasting group: its slowest instance), per group and topic.", "group", "topic"),
		oldestUnacked: d("consumer_oldest_unacked_age_seconds",
			"How long ago the oldest message of the topic's queues the group has not consumed yet was stored (0 when none), per group and topic.", "group", "topic"),
		offsetsClamped: d("consumer_offsets_clamped_total", "Consumer offsets found above their queue's maximum (the store lost messages) and lowered to it."),
		txnPending:     d("transactions_pending", "Unresolved transactions (half messages neither committed nor rolled back)."),
		txnCommitted:   d("transactions_committed_total", "Transactions committed since start."),
		txnRolledBack:  d("transactions_rolled_back_total", "Transactions rolled back since start (by the producer, after unanswered checks, or for a deleted topic)."),
		txnMaxChecks:   d("transactions_max_checks_rolled_back_total", "Transactions rolled back since start because none of their --transaction-max-checks checks was answered."),
		txnChecks:      d("transaction_checks_total", "Checks of unresolved transactions handed out to producer groups since start."),
	}
}

// Describe implements prometheus.Collector.
func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sent, c.sentBytes, c.deliveredBytes, c.delivered, c.acked, c.retries, c.dead, c.inflight, c.retentionDropped,
		c.scheduled, c.lateness, c.backlog, c.storeBytes, c.timersPending, c.commitLogMin, c.commitLogMax, c.offsetsClamped,
		c.appends, c.flushes, c.flushTime, c.maxFlush, c.flushDuration, c.flushRecords, c.consumerLag, c.oldestUnacked, c.txnPending, c.txnCommitted, c.txnRolledBack, c.txnMaxChecks, c.txnChecks} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	counter := func(d *prometheus.Desc, m map[string]uint64) {
		for k, v := range m {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), k)
		}
	}
	counter(c.sent, st.Sent)
	counter(c.sentBytes, st.SentBytes)
	counter(c.deliveredBytes, st.DeliveredBytes)
	counter(c.delivered, st.Delivered)
	counter(c.acked, st.Acked)
	counter(c.dead, st.DeadLetters)
	counter(c.retentionDropped, st.RetentionDropped)
	for _, r := range st.Retries {
		ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(r.Count), r.Group, strconv.Itoa(r.Level))
	}
	for g, n := range st.InFlight {
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(n), g)
	}
	ch <- prometheus.MustNewConstMetric(c.scheduled, prometheus.CounterValue, float64(st.Scheduled))
	ch <- prometheus.MustNewConstMetric(c.offsetsClamped, prometheus.CounterValue, float64(st.OffsetsClamped))
	if len(st.LatenessCounts) == len(broker.LatenessBuckets)+1 {
		buckets, n := make(map[float64]uint64, len(broker.LatenessBuckets)), uint64(0)
		for i, b := range broker.LatenessBuckets {
			n += st.LatenessCounts[i]
			buckets[b.Seconds()] = n // cumulative, as Prometheus counts buckets
		}
		n += st.LatenessCounts[len(broker.LatenessBuckets)]
		ch <- prometheus.MustNewConstHistogram(c.lateness, n, st.LatenessSum.Seconds(), buckets)
	}
	for _, l := range c.src.ConsumerLags() {
		ch <- prometheus.MustNewConstMetric(c.consumerLag, prometheus.GaugeValue, float64(l.Lag), l.Group, l.Topic)
		ch <- prometheus.MustNewConstMetric(c.oldestUnacked, prometheus.GaugeValue, l.OldestUnacked.Seconds(), l.Group, l.Topic)
	}
	status, err := c.src.Status(context.Background())
	if err != nil {
		return
	}
	for _, l := range status.Levels {
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(l.Backlog), strconv.Itoa(l.Level))
	}
	ch <- prometheus.MustNewConstMetric(c.storeBytes, prometheus.GaugeValue, float64(status.StoreBytes))
	ch <- prometheus.MustNewConstMetric(c.timersPending, prometheus.GaugeValue, float64(status.TimersPending))
	ch <- prometheus.MustNewConstMetric(c.commitLogMin, prometheus.GaugeValue, float64(status.CommitLogMin))
	ch <- prometheus.MustNewConstMetric(c.commitLogMax, prometheus.GaugeValue, float64(status.CommitLogMax))
	ch <- prometheus.MustNewConstMetric(c.appends, prometheus.CounterValue, float64(status.Appends))
	ch <- prometheus.MustNewConstMetric(c.flushes, prometheus.CounterValue, float64(status.Flushes))
	ch <- prometheus.MustNewConstMetric(c.flushTime, prometheus.CounterValue, status.FlushTime.Seconds())
	ch <- prometheus.MustNewConstMetric(c.maxFlush, prometheus.GaugeValue, status.MaxFlush.Seconds())
	if len(status.FlushCounts) == len(status.FlushBuckets)+1 {
		buckets, n := make(map[float64]uint64, len(status.FlushBuckets)), uint64(0)
		for i, b := range status.FlushBuckets {
			n += uint64(status.FlushCounts[i])
			buckets[b.Seconds()] = n // cumulative, as Prometheus counts buckets
		}
		n += uint64(status.FlushCounts[len(status.FlushBuckets)])
		ch <- prometheus.MustNewConstHistogram(c.flushDuration, n, status.FlushTime.Seconds(), buckets)
	}
	if len(status.FlushRecordCounts) == len(status.FlushRecordBuckets)+1 {
		buckets, n := make(map[float64]uint64, len(status.FlushRecordBuckets)), uint64(0)
		for i, b := range status.FlushRecordBuckets {
			n += uint64(status.FlushRecordCounts[i])
			buckets[float64(b)] = n
		}
		n += uint64(status.FlushRecordCounts[len(status.FlushRecordBuckets)])
		ch <- prometheus.MustNewConstHistogram(c.flushRecords, n, float64(status.FlushRecords), buckets)
	}
	tx := status.Transactions
	ch <- prometheus.MustNewConstMetric(c.txnPending, prometheus.GaugeValue, float64(tx.Pending))
	ch <- prometheus.MustNewConstMetric(c.txnCommitted, prometheus.CounterValue, float64(tx.Committed))
	ch <- prometheus.MustNewConstMetric(c.txnRolledBack, prometheus.CounterValue, float64(tx.RolledBack))
	ch <- prometheus.MustNewConstMetric(c.txnMaxChecks, prometheus.CounterValue, float64(tx.MaxChecksRolledBack))
	ch <- prometheus.MustNewConstMetric(c.txnChecks, prometheus.CounterValue, float64(tx.ChecksHandedOut))
}
