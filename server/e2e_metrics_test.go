package server_test

// End-to-end tests of the metrics operators alert on: the exposition
// passes `promtool check metrics` (the Prometheus linter), the consumer
// lag and oldest-unconsumed-age gauges follow sends and acks under the
// label limit, the scheduler's lateness and the records per flush are
// histograms, and the example alert rules in deploy/prometheus pass
// `promtool check rules`.

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// promtool returns the path of promtool (Debian package prometheus). In
// CI (CI set, e.g. CI=true; .ci/run installs it) a missing promtool fails
// the test; elsewhere it skips it, saying so.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("promtool not found (apt-get install prometheus): %v", err)
	}
	t.Skipf("SKIPPED: promtool not found (apt-get install prometheus); with CI set this is a failure")
	return ""
}

// runPromtool runs promtool with args and stdin, failing with its output.
func runPromtool(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

func TestE2EMetricsPassPromtoolCheck(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "orders"}}}), http.StatusCreated, nil)
	// Traffic that makes every family show: sends, a delayed one (the
	// scheduler), pulls, an ack, a nack to the ladder and one to the DLQ.
	for i := range 4 {
		e.Send(t, "orders", api.SendMessage{Body: fmt.Sprintf("m%d", i)})
	}
	e.Send(t, "orders", api.SendMessage{Body: "later", DelayLevel: 1})
	got := e.PullN(t, "billing", "orders", 5, 30_000, 10*time.Second)
	e.Ack(t, "billing", got[0].Receipt)
	e.Nack(t, "billing", got[1].Receipt, 1, "again")
	e.Nack(t, "billing", got[2].Receipt, -1, "poison")
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		v, _ := e.MetricValue(t, "mqgate_scheduler_lateness_seconds_count")
		return v >= 2, fmt.Sprintf("%v scheduler deliveries", v)
	})

	body := e.Get(t, "/metrics").Body
	for _, family := range []string{
		"mqgate_scheduler_lateness_seconds_bucket{le=",
		"mqgate_commitlog_flush_records_bucket{le=",
		`mqgate_consumer_lag_messages{group="billing",topic="orders"}`,
		`mqgate_consumer_oldest_unacked_age_seconds{group="billing",topic="orders"}`,
	} {
		require.True(t, strings.Contains(string(body), family), "/metrics has no %s", family)
	}
	require.False(t, regexp.MustCompile(`(?m)^mqgate_[a-z_]+\{[^}]*quantile=`).Match(body), "no mqgate series has a quantile label")
	// Every appended record is counted in the flush that covered it.
	appends, _ := e.MetricValue(t, "mqgate_commitlog_appends_total")
	flushed, _ := e.MetricValue(t, "mqgate_commitlog_flush_records_sum")
	require.Positive(t, flushed)
	require.LessOrEqual(t, flushed, appends)

	out := runPromtool(t, body, "check", "metrics")
	require.Empty(t, strings.TrimSpace(out), "promtool check metrics: %s", out)
}

func TestE2EMetricsConsumerLagAndOldestUnacked(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/jobs", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/workers", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "jobs"}}}), http.StatusCreated, nil)
	lag := `mqgate_consumer_lag_messages{group="workers",topic="jobs"}`
	age := `mqgate_consumer_oldest_unacked_age_seconds{group="workers",topic="jobs"}`

	v, ok := e.MetricValue(t, lag)
	require.True(t, ok, "a subscribed group has a lag series from the start")
	require.Zero(t, v)

	for i := range 3 {
		e.Send(t, "jobs", api.SendMessage{Body: fmt.Sprint(i)})
	}
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		v, _ := e.MetricValue(t, lag)
		return v == 3, fmt.Sprintf("lag %v, want 3", v)
	})
	time.Sleep(300 * time.Millisecond)
	a, _ := e.MetricValue(t, age)
	require.GreaterOrEqual(t, a, 0.3, "the oldest unconsumed message is at least as old as the wait")
	require.Less(t, a, 30.0)

	// A lease is not consumption: the lag stays until the ack.
	got := e.PullN(t, "workers", "jobs", 3, 30_000, 10*time.Second)
	v, _ = e.MetricValue(t, lag)
	require.EqualValues(t, 3, v, "leased but unacknowledged messages still lag")
	for _, m := range got {
		e.Ack(t, "workers", m.Receipt)
	}
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		v, _ := e.MetricValue(t, lag)
		a, _ := e.MetricValue(t, age)
		return v == 0 && a == 0, fmt.Sprintf("lag %v, age %v after the acks, want 0 and 0", v, a)
	})
}

// TestE2EMetricsConsumerLagLabelLimit: groups and topics beyond
// --metrics-max-label-values are summed under "_other", so the lag series
// stay bounded.
func TestE2EMetricsConsumerLagLabelLimit(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) { c.MetricsMaxLabelValues = 2 })
	for i := range 4 {
		topic := fmt.Sprintf("t%d", i)
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/"+topic, api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
		servertest.Decode(t, e.JSON(t, http.MethodPut, fmt.Sprintf("/v1/groups/g%d", i), api.GroupRequest{Subscriptions: []api.Subscription{{Topic: topic}}}), http.StatusCreated, nil)
		e.Send(t, topic, api.SendMessage{Body: "x"})
	}
	series := regexp.MustCompile(`(?m)^mqgate_consumer_lag_messages\{([^}]*)\} (\S+)$`)
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		rows := series.FindAllStringSubmatch(string(e.Get(t, "/metrics").Body), -1)
		total, groups := 0.0, map[string]bool{}
		for _, r := range rows {
			var v float64
			fmt.Sscan(r[2], &v)
			total += v
			groups[strings.Split(r[1], ",")[0]] = true
		}
		return total == 4 && len(groups) <= 3, fmt.Sprintf("%d series over %d group labels summing to %v, want a sum of 4 over at most 2 groups + _other: %q", len(rows), len(groups), total, rows)
	})
}

// TestAlertRulesPassPromtool: the example alert rules are valid, and name
// only metrics the server exposes.
func TestAlertRulesPassPromtool(t *testing.T) {
	t.Parallel()
	rules := filepath.Join("..", "deploy", "prometheus", "alerts.yml")
	runPromtool(t, nil, "check", "rules", rules)

	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/a", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/g", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "a"}}}), http.StatusCreated, nil)
	exposed := string(e.Get(t, "/metrics").Body)
	src, err := os.ReadFile(rules)
	require.NoError(t, err)
	for _, name := range regexp.MustCompile(`mqgate_[a-z_]+`).FindAllString(string(src), -1) {
		if strings.HasPrefix(name, "mqgate_mirror_") || strings.HasPrefix(name, "mqgate_pg") {
			continue // only exposed with --pg-url
		}
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
		require.True(t, strings.Contains(exposed, "\n"+base), "an alert rule names %s, which the server does not expose", name)
	}
}

// TestE2EMetricsScrapeDuringTraffic: scrapes of /metrics and /v1/stats
// while messages are sent, pulled, acked and nacked (run it with -race:
// the lag gauges read offsets, leases and queues the traffic changes).
func TestE2EMetricsScrapeDuringTraffic(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/busy", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/busy-g", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "busy"}}}), http.StatusCreated, nil)
	done := make(chan struct{})
	scraped := make(chan int)
	go func() {
		n := 0
		defer func() { scraped <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			for _, path := range []string{"/metrics", "/v1/stats"} {
				resp, err := http.Get(e.Base + path)
				if err != nil {
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return
				}
			}
			n++
		}
	}()
	for i := range 40 {
		e.Send(t, "busy", api.SendMessage{Body: fmt.Sprint(i)})
		if i%4 == 3 {
			for j, m := range e.PullN(t, "busy-g", "busy", 4, 30_000, 10*time.Second) {
				if j == 0 {
					e.Nack(t, "busy-g", m.Receipt, 1, "later")
				} else {
					e.Ack(t, "busy-g", m.Receipt)
				}
			}
		}
	}
	close(done)
	require.Positive(t, <-scraped, "scrapes succeeded during the traffic")
}
