package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestMetricsLintClean: /metrics passes promlint (promtool check metrics'
// rules: names, units, _total on counters, help), and mqgate_build_info
// carries the version and the commit as prometheus/common's build_info
// does (version, revision, goversion).
func TestMetricsLintClean(t *testing.T) {
	t.Parallel()
	b := servertest.Start(t, func(c *server.Config) { c.Version, c.Commit = "1.2.3", "0123abcd" })
	resp, err := http.Get(b.Base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	problems, err := promlint.New(resp.Body).Lint()
	require.NoError(t, err)
	// Known, and left for a change of their own (renaming breaks dashboards).
	known := map[string]string{
		// gauges of p50, p99 and max with a "quantile" label: promlint
		// reserves it for summaries, which need a count and a sum
		"mqgate_scheduler_lateness_seconds": `non-summary metrics should not have "quantile" label`,
	}
	for _, p := range problems {
		require.Equal(t, known[p.Metric], p.Text, "promlint: %s: %s", p.Metric, p.Text)
	}

	_, _, body := get(t, b, "/metrics")
	var info string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "mqgate_build_info{") {
			info = line
		}
	}
	require.Contains(t, info, `revision="0123abcd"`)
	require.Contains(t, info, `version="1.2.3"`)
	require.Contains(t, info, `goversion="go`)
	require.True(t, strings.HasSuffix(info, "} 1"), info)
}
