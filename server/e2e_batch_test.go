package server_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestE2EBinaryBatchRoundTrip sends binary batches over HTTP and pulls
// every message back, byte for byte, in order, with the header attributes.
func TestE2EBinaryBatchRoundTrip(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	require.Equal(t, http.StatusCreated, e.JSON(t, http.MethodPut, "/v1/topics/bin", api.TopicRequest{Queues: 1}).Status)

	var bodies [][]byte
	for i := 0; i < api.MaxBatchMessages; i++ {
		b := []byte(strings.Repeat(string(rune('a'+i%26)), 1+i*7))
		if i%5 == 0 {
			b = append(b, 0x00, 0xff, '\n', '"') // binary and JSON-hostile bytes
		}
		bodies = append(bodies, b)
	}
	header := http.Header{"X-Mqgate-Tag": {"bin"}, "X-Mqgate-Property-Origin": {"batch"}}
	for _, chunk := range [][][]byte{bodies[:1], bodies[1:100], bodies[100:]} {
		r := e.Do(t, http.MethodPost, "/v1/topics/bin/messages", api.ContentTypeBatch, api.AppendBatch(nil, chunk...), header)
		var resp api.SendResponse
		servertest.Decode(t, r, http.StatusOK, &resp)
		require.Len(t, resp.Results, len(chunk))
	}
	// A refused batch stores nothing.
	bad := append(api.AppendBatch(nil, []byte("x"), []byte("y")), 'z')
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/bin/messages", api.ContentTypeBatch, bad, nil), http.StatusBadRequest, "malformed-request")

	got := e.PullN(t, "g", "bin", len(bodies), 30_000, 20*time.Second)
	require.Len(t, got, len(bodies))
	for i, m := range got {
		require.EqualValues(t, i, m.QueueOffset)
		body := []byte(m.Body)
		if m.BodyEncoding == "base64" {
			var err error
			body, err = base64.StdEncoding.DecodeString(m.Body)
			require.NoError(t, err)
		}
		require.Equal(t, bodies[i], body, "message %d", i)
		require.Equal(t, "bin", m.Tag)
		require.Equal(t, "batch", m.Properties["origin"])
	}
}

// TestE2EGroupCommitMetrics: the CommitLog's appends and flushes are
// metrics, with the flushes by duration, and in sync mode every
// acknowledged send was covered by a flush.
func TestE2EGroupCommitMetrics(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	bodies := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/gc/messages", api.ContentTypeBatch, api.AppendBatch(nil, bodies...), nil), http.StatusOK, &api.SendResponse{})
	appends, ok := e.MetricValue(t, "mqgate_commitlog_appends_total")
	require.True(t, ok)
	require.GreaterOrEqual(t, appends, 3.0)
	flushes, ok := e.MetricValue(t, "mqgate_commitlog_flushes_total")
	require.True(t, ok)
	require.GreaterOrEqual(t, flushes, 1.0)
	took, ok := e.MetricValue(t, "mqgate_commitlog_flush_seconds_total")
	require.True(t, ok)
	require.Positive(t, took)
	longest, ok := e.MetricValue(t, "mqgate_commitlog_flush_max_seconds")
	require.True(t, ok)
	require.GreaterOrEqual(t, took, longest)
	// The flushes by duration: a histogram whose buckets are cumulative
	// and whose +Inf bucket is its count, with at least the send's flush.
	count, ok := e.MetricValue(t, "mqgate_commitlog_flush_duration_seconds_count")
	require.True(t, ok)
	require.GreaterOrEqual(t, count, 1.0)
	inf, ok := e.MetricValue(t, `mqgate_commitlog_flush_duration_seconds_bucket{le="+Inf"}`)
	require.True(t, ok)
	require.Equal(t, count, inf)
	fast, ok := e.MetricValue(t, `mqgate_commitlog_flush_duration_seconds_bucket{le="0.0001"}`)
	require.True(t, ok)
	second, ok := e.MetricValue(t, `mqgate_commitlog_flush_duration_seconds_bucket{le="1"}`)
	require.True(t, ok)
	require.LessOrEqual(t, fast, second)
	require.LessOrEqual(t, second, inf)
	sum, ok := e.MetricValue(t, "mqgate_commitlog_flush_duration_seconds_sum")
	require.True(t, ok)
	require.Positive(t, sum)
}
