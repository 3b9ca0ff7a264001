package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
	"github.com/mqgate/mqgate/server/servertest"
)

// postJSON posts body as JSON to path and decodes the answer into out
// (may be nil); it returns the status.
func postJSON(t *testing.T, b *servertest.Server, path string, body any, out any) int {
	t.Helper()
	r := b.JSON(t, http.MethodPost, path, body)
	if out != nil {
		require.NoError(t, json.Unmarshal(r.Body, out), "%s", r)
	}
	return r.Status
}

// get performs a GET of path and returns status, content type and body.
func get(t *testing.T, b *servertest.Server, path string) (int, string, string) {
	t.Helper()
	r := b.Get(t, path)
	return r.Status, r.Header.Get("Content-Type"), string(r.Body)
}

// mirrorStats reads the mirror's state from GET /v1/stats.
func mirrorStats(t *testing.T, b *servertest.Server) api.MirrorStat {
	t.Helper()
	var st api.Stats
	servertest.Decode(t, b.Get(t, "/v1/stats"), http.StatusOK, &st)
	return st.Mirror
}

// mirrorConfig is the server configuration of these tests (small
// segments and messages) with the mirror on url.
func mirrorConfig(url string) func(*server.Config) {
	return func(c *server.Config) {
		c.SegmentSize = 8 << 20
		c.MaxMessageSize = 64 << 10
		c.MaxRequestSize = 128 << 10
		c.DatabaseURL = url
	}
}

// With --database-url the server mirrors into PostgreSQL: the DLQ listing
// is answered from SQL, /readyz and /metrics report the mirror, and the
// migrations ran at start.
func TestServerWithPostgresMirror(t *testing.T) {
	b := servertest.Start(t, mirrorConfig(pgtest.URL(t)))
	require.True(t, server.HasMirror(b.Srv))

	require.Equal(t, http.StatusOK, postJSON(t, b, "/v1/topics/pg/messages", map[string]any{"body": "poison"}, nil))
	var pulled struct {
		Messages []struct {
			Receipt string `json:"receipt"`
		} `json:"messages"`
	}
	require.Equal(t, http.StatusOK, postJSON(t, b, "/v1/groups/g/topics/pg/pull", map[string]any{"waitMs": 2000}, &pulled))
	require.Len(t, pulled.Messages, 1)
	require.Equal(t, http.StatusOK, postJSON(t, b, "/v1/groups/g/nack",
		map[string]any{"items": []map[string]any{{"receipt": pulled.Messages[0].Receipt, "delayLevel": -1, "reason": "bad input"}}}, nil))

	// The mirrored listing converges (the mirror follows the log asynchronously).
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		var list struct {
			Items []struct {
				Reason string `json:"reason"`
			} `json:"items"`
		}
		status, _, body := get(t, b, "/v1/groups/g/dlq?reasonContains=BAD")
		require.Equal(t, http.StatusOK, status, body)
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		if len(list.Items) == 1 {
			require.Equal(t, "bad input", list.Items[0].Reason)
			return true, ""
		}
		return false, "dead letter never mirrored: " + body
	})
	// Progress shows the mirrored offset next to the live one.
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		var prog struct {
			Queues []struct {
				ConsumerOffset int64  `json:"consumerOffset"`
				MirroredOffset *int64 `json:"mirroredOffset"`
			} `json:"queues"`
		}
		status, _, body := get(t, b, "/v1/groups/g/progress")
		require.Equal(t, http.StatusOK, status, body)
		require.NoError(t, json.Unmarshal([]byte(body), &prog))
		// Queues nobody consumed from have no mirrored row yet.
		synced := false
		for _, q := range prog.Queues {
			if q.ConsumerOffset > 0 {
				synced = q.MirroredOffset != nil && *q.MirroredOffset == q.ConsumerOffset
			}
		}
		return synced, "mirrored offsets never matched: " + body
	})
	status, _, body := get(t, b, "/readyz")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ok\n", body, "a healthy mirror adds nothing")
	_, _, metrics := get(t, b, "/metrics")
	require.True(t, strings.Contains(metrics, "mqgate_mirror_healthy 1"), "mirror metrics exported")
	require.True(t, strings.Contains(metrics, "mqgate_messages_dlq_total{group=\"g\"} 1"))
	// GET /v1/stats: enabled, healthy, passes counted, nothing behind.
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		m := mirrorStats(t, b)
		return m.Enabled && m.Healthy && m.PassesTotal > 0 && m.BehindRecords == 0 && m.LastError == "", fmt.Sprintf("mirror stats %+v", m)
	})
}

// Over HTTP: PostgreSQL stops (-m immediate) under a load of sends and
// acks; nothing fails, /livez and /readyz stay 200 (readyz says the mirror
// is degraded), and after PostgreSQL returns the mirror catches up.
func TestServerSurvivesPostgresOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	cluster := pgtest.NewCluster(t)
	b := servertest.Start(t, mirrorConfig(cluster.URL()))

	var pulled struct {
		Messages []struct {
			Receipt string `json:"receipt"`
		} `json:"messages"`
	}
	load := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			require.Equal(t, http.StatusOK, postJSON(t, b, "/v1/topics/out/messages", map[string]any{"body": "m"}, nil))
			require.Equal(t, http.StatusOK, postJSON(t, b, "/v1/groups/g/topics/out/pull", map[string]any{"waitMs": 1000, "maxMessages": 1}, &pulled))
			require.Len(t, pulled.Messages, 1)
			require.Equal(t, http.StatusOK, postJSON(t, b, "/v1/groups/g/ack", map[string]any{"receipts": []string{pulled.Messages[0].Receipt}}, nil))
		}
	}
	load(20)
	cluster.Stop("immediate")
	outage := time.Now().Add(3 * time.Second)
	if os.Getenv("LONG") != "" {
		outage = time.Now().Add(30 * time.Second)
	}
	sawDegraded, sawNote := false, false
	for time.Now().Before(outage) {
		load(10)
		status, _, _ := get(t, b, "/livez")
		require.Equal(t, http.StatusOK, status)
		status, _, body := get(t, b, "/readyz")
		require.Equal(t, http.StatusOK, status, "the mirror never makes mqgate unready")
		sawDegraded = sawDegraded || strings.Contains(body, "degraded")
		// Progress leaves the mirrored offsets out, with a note, rather
		// than showing what it cannot know.
		var prog struct {
			Queues []struct {
				MirroredOffset *int64 `json:"mirroredOffset"`
			} `json:"queues"`
			Notes []string `json:"notes"`
		}
		_, _, pb := get(t, b, "/v1/groups/g/progress")
		require.NoError(t, json.Unmarshal([]byte(pb), &prog))
		noted := strings.Contains(strings.Join(prog.Notes, " "), "mirror is degraded")
		if noted && sawNote { // degraded for a while: not the moment it went down
			for _, q := range prog.Queues {
				require.Nil(t, q.MirroredOffset, "%s", pb)
			}
		}
		sawNote = sawNote || noted
	}
	require.True(t, sawDegraded, "/readyz reports the degraded mirror")
	require.True(t, sawNote, "progress notes the degraded mirror")
	// GET /v1/stats says why and how far behind.
	down := mirrorStats(t, b)
	require.True(t, down.Enabled)
	require.False(t, down.Healthy, "%+v", down)
	require.Contains(t, down.LastError, "degraded since")
	require.Positive(t, down.FailuresTotal)
	require.Positive(t, down.BehindRecords, "acks went on while PostgreSQL was down")
	require.Positive(t, down.BehindMs)
	cluster.Start()
	servertest.Eventually(t, 30*time.Second, func() (bool, string) {
		status, _, body := get(t, b, "/readyz")
		require.Equal(t, http.StatusOK, status)
		var prog struct {
			Queues []struct {
				ConsumerOffset int64  `json:"consumerOffset"`
				MirroredOffset *int64 `json:"mirroredOffset"`
			} `json:"queues"`
		}
		_, _, pb := get(t, b, "/v1/groups/g/progress")
		require.NoError(t, json.Unmarshal([]byte(pb), &prog))
		caughtUp := body == "ok\n"
		for _, q := range prog.Queues {
			if q.ConsumerOffset > 0 && (q.MirroredOffset == nil || *q.MirroredOffset != q.ConsumerOffset) {
				caughtUp = false
			}
		}
		m := mirrorStats(t, b)
		caughtUp = caughtUp && m.Healthy && m.LastError == "" && m.BehindRecords == 0
		return caughtUp, fmt.Sprintf("mirror never caught up: %s %s %+v", body, pb, m)
	})
}
