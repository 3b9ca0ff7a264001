package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
)

func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// With --database-url the server mirrors into PostgreSQL: the DLQ listing
// is answered from SQL, /readyz and /metrics report the mirror, and the
// migrations ran at start.
func TestServerWithPostgresMirror(t *testing.T) {
	cfg := testConfig(t)
	cfg.DatabaseURL = pgtest.URL(t)
	b := mustOpen(t, cfg)
	require.NotNil(t, b.server.mirror)

	require.Equal(t, http.StatusOK, postJSON(t, b.url+"/v1/topics/pg/messages", map[string]any{"body": "poison"}, nil))
	var pulled struct {
		Messages []struct {
			Receipt string `json:"receipt"`
		} `json:"messages"`
	}
	require.Equal(t, http.StatusOK, postJSON(t, b.url+"/v1/groups/g/topics/pg/pull", map[string]any{"waitMs": 2000}, &pulled))
	require.Len(t, pulled.Messages, 1)
	require.Equal(t, http.StatusOK, postJSON(t, b.url+"/v1/groups/g/nack",
		map[string]any{"items": []map[string]any{{"receipt": pulled.Messages[0].Receipt, "delayLevel": -1, "reason": "bad input"}}}, nil))

	// The mirrored listing converges (the mirror follows the log asynchronously).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var list struct {
			Items []struct {
				Reason string `json:"reason"`
			} `json:"items"`
		}
		status, _, body := get(t, b.url+"/v1/groups/g/dlq?reasonContains=BAD")
		require.Equal(t, http.StatusOK, status, body)
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		if len(list.Items) == 1 {
			require.Equal(t, "bad input", list.Items[0].Reason)
			break
		}
		require.True(t, time.Now().Before(deadline), "dead letter never mirrored: %s", body)
		time.Sleep(50 * time.Millisecond)
	}
	// Progress shows the mirrored offset next to the live one.
	deadline = time.Now().Add(10 * time.Second)
	for {
		var prog struct {
			Queues []struct {
				ConsumerOffset int64  `json:"consumerOffset"`
				MirroredOffset *int64 `json:"mirroredOffset"`
			} `json:"queues"`
		}
		status, _, body := get(t, b.url+"/v1/groups/g/progress")
		require.Equal(t, http.StatusOK, status, body)
		require.NoError(t, json.Unmarshal([]byte(body), &prog))
		// Queues nobody consumed from have no mirrored row yet.
		synced := false
		for _, q := range prog.Queues {
			if q.ConsumerOffset > 0 {
				synced = q.MirroredOffset != nil && *q.MirroredOffset == q.ConsumerOffset
			}
		}
		if synced {
			break
		}
		require.True(t, time.Now().Before(deadline), "mirrored offsets never matched: %s", body)
		time.Sleep(50 * time.Millisecond)
	}
	status, _, body := get(t, b.url+"/readyz")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ok\n", body, "a healthy mirror adds nothing")
	_, _, metrics := get(t, b.url+"/metrics")
	require.True(t, strings.Contains(metrics, "mqgate_mirror_healthy 1"), "mirror metrics exported")
	require.True(t, strings.Contains(metrics, "mqgate_messages_dlq_total{group=\"g\"} 1"))
}

// Over HTTP: PostgreSQL stops (-m immediate) under a load of sends and
// acks; nothing fails, /livez and /readyz stay 200 (readyz says the mirror
// is degraded), and after PostgreSQL returns the mirror catches up.
func TestServerSurvivesPostgresOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster")
	}
	cluster := pgtest.NewCluster(t)
	cfg := testConfig(t)
	cfg.DatabaseURL = cluster.URL()
	b := mustOpen(t, cfg)

	var pulled struct {
		Messages []struct {
			Receipt string `json:"receipt"`
		} `json:"messages"`
	}
	load := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			require.Equal(t, http.StatusOK, postJSON(t, b.url+"/v1/topics/out/messages", map[string]any{"body": "m"}, nil))
			require.Equal(t, http.StatusOK, postJSON(t, b.url+"/v1/groups/g/topics/out/pull", map[string]any{"waitMs": 1000, "maxMessages": 1}, &pulled))
			require.Len(t, pulled.Messages, 1)
			require.Equal(t, http.StatusOK, postJSON(t, b.url+"/v1/groups/g/ack", map[string]any{"receipts": []string{pulled.Messages[0].Receipt}}, nil))
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
		status, _, _ := get(t, b.url+"/livez")
		require.Equal(t, http.StatusOK, status)
		status, _, body := get(t, b.url+"/readyz")
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
		_, _, pb := get(t, b.url+"/v1/groups/g/progress")
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
	cluster.Start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _, body := get(t, b.url+"/readyz")
		require.Equal(t, http.StatusOK, status)
		var prog struct {
			Queues []struct {
				ConsumerOffset int64  `json:"consumerOffset"`
				MirroredOffset *int64 `json:"mirroredOffset"`
			} `json:"queues"`
		}
		_, _, pb := get(t, b.url+"/v1/groups/g/progress")
		require.NoError(t, json.Unmarshal([]byte(pb), &prog))
		caughtUp := body == "ok\n"
		for _, q := range prog.Queues {
			if q.ConsumerOffset > 0 && (q.MirroredOffset == nil || *q.MirroredOffset != q.ConsumerOffset) {
				caughtUp = false
			}
		}
		if caughtUp {
			break
		}
		require.True(t, time.Now().Before(deadline), "mirror never caught up: %s %s", body, pb)
		time.Sleep(100 * time.Millisecond)
	}
}
