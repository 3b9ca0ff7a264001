package server_test

// End-to-end tests of the request id and the log lines: a well-formed
// incoming X-Request-Id is kept (echoed, in problem bodies and in the log
// lines of the request), anything else is replaced; log timestamps carry
// milliseconds.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/xid"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// accessLines returns the JSON access-log lines of logs.
func accessLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"http request"`) {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func TestE2ERequestIDKeptWhenWellFormed(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := startE2E(t, func(c *server.Config) { c.LogOutput, c.LogLevel, c.LogFormat = &logs, "info", "json" })

	for _, tc := range []struct {
		name, id string
		kept     bool
	}{
		{"uuid", "3f2b8c1e-9a4d-4e7b-b1c2-0d5e6f7a8b9c", true},
		{"xid", "d4m1c8sl0s73b0h3ds2g", true},
		{"trace id with colons and dots", "svc.edge:0af7651916cd43dd8448eb211c80319c", true},
		{"space", "abc def", false},
		{"quote", `abc"def`, false},
		{"newline escape", "abc\\ndef", false},
		{"too long", strings.Repeat("a", 129), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.Do(t, http.MethodGet, "/v1/topics/no-such-topic", "", nil, http.Header{"X-Request-Id": {tc.id}})
			p := servertest.WantProblem(t, r, http.StatusNotFound, "topic-not-found")
			got := r.Header.Get("X-Request-Id")
			require.Equal(t, got, p.RequestID, "the problem names the id the header answers")
			if tc.kept {
				require.Equal(t, tc.id, got, "a well-formed incoming id is kept")
			} else {
				require.NotEqual(t, tc.id, got)
				_, err := xid.FromString(got)
				require.NoError(t, err, "a malformed incoming id is replaced by a fresh one")
			}
			servertest.Eventually(t, 5*time.Second, func() (bool, string) {
				for _, l := range accessLines(t, logs.String()) {
					if l["req_id"] == got {
						return true, ""
					}
				}
				return false, "no access-log line with req_id " + got
			})
		})
	}

	// Two ids in one request: ambiguous, replaced.
	r := e.Do(t, http.MethodGet, "/v1/topics", "", nil, http.Header{"X-Request-Id": {"a1", "b2"}})
	require.Equal(t, http.StatusOK, r.Status)
	require.NotContains(t, []string{"a1", "b2"}, r.Header.Get("X-Request-Id"))
}

func TestE2ELogTimestampsHaveMilliseconds(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := startE2E(t, func(c *server.Config) { c.LogOutput, c.LogLevel, c.LogFormat = &logs, "info", "json" })
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/ms", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	var lines []map[string]any
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		lines = accessLines(t, logs.String())
		return len(lines) > 0, "no access-log line yet"
	})
	ms := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$`)
	for _, l := range lines {
		ts, _ := l["time"].(string)
		require.Regexp(t, ms, ts, "access-log time")
		at, err := time.Parse(time.RFC3339Nano, ts)
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), at, time.Minute)
	}
	// Every line of the process, not only the access log.
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		ts, _ := m["time"].(string)
		require.Regexp(t, ms, ts, line)
	}
}

// TestE2EPushFailureLoggedAsFailure: a push the endpoint fails is a warn
// line "push: delivery failed" with the status; a success stays at debug.
func TestE2EPushFailureLoggedAsFailure(t *testing.T) {
	t.Parallel()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer receiver.Close()
	var logs syncBuffer
	e := startE2E(t, func(c *server.Config) { c.LogOutput, c.LogLevel, c.LogFormat = &logs, "info", "json" })
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/failing", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/failing-hook", map[string]any{
		"subscriptions": []map[string]string{{"topic": "failing"}},
		"push":          map[string]any{"url": receiver.URL},
	}), http.StatusCreated, nil)
	e.Send(t, "failing", api.SendMessage{Body: "x"})
	servertest.Eventually(t, 15*time.Second, func() (bool, string) {
		for _, line := range strings.Split(logs.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) != nil || m["message"] != "push: delivery failed" {
				continue
			}
			return m["level"] == "warn" && m["status"] == float64(503) && m["result"] == "5xx", line
		}
		return false, "no push failure logged yet"
	})
}
