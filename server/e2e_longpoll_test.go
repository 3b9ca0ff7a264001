package server_test

// End-to-end tests of long polls over real HTTP: waitMs bounds, wake-ups,
// clients that go away, a thousand idle polls.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestE2ELongPoll: waitMs bounds, an answer at once for
// waitMs 0, and a message sent to an idle topic waking a waiting poll
// (wake latency over 50 trials, logged).
func TestE2ELongPoll(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/idle", api.TopicRequest{Queues: 4}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/wake", api.TopicRequest{Queues: 4}), http.StatusCreated, nil)

	t.Run("WaitMsBounds", func(t *testing.T) {
		start := time.Now()
		require.Empty(t, e.Pull(t, "g", "idle", api.PullRequest{WaitMs: 0}))
		require.Less(t, time.Since(start), time.Second, "waitMs 0 answers at once")
		start = time.Now()
		require.Empty(t, e.Pull(t, "g", "idle", api.PullRequest{WaitMs: 300}))
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "an empty long poll waits waitMs")
		// The longest wait is accepted (a message is ready, so it answers at once).
		e.Send(t, "idle", api.SendMessage{Body: "ready"})
		got := e.Pull(t, "g", "idle", api.PullRequest{WaitMs: api.MaxWaitMs, MaxMessages: 1})
		require.Len(t, got, 1)
		require.Equal(t, []string{"ok"}, e.Ack(t, "g", got[0].Receipt))
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/g/topics/idle/pull", api.PullRequest{WaitMs: api.MaxWaitMs + 1}), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "waitMs")

		// Options in the query string are refused, not ignored: the pull
		// would otherwise answer at once with its waitMs never read.
		start = time.Now()
		p = servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/groups/g/topics/idle/pull?waitMs=20000&maxMessages=4", "", nil, nil),
			http.StatusBadRequest, "invalid-argument")
		require.Less(t, time.Since(start), time.Second)
		require.Contains(t, p.Detail, "JSON body")
		require.Contains(t, p.Detail, `"maxMessages, waitMs"`)
	})

	t.Run("SendWakesPoll", func(t *testing.T) {
		const trials = 50
		latencies := make([]time.Duration, 0, trials)
		for i := 0; i < trials; i++ {
			type result struct {
				msgs []api.PulledMessage
				at   time.Time
				err  error
			}
			done := make(chan result, 1)
			go func() {
				var out api.PullResponse
				body, _ := json.Marshal(api.PullRequest{WaitMs: 10_000, MaxMessages: 1})
				resp, err := e.Client.Post(e.Base+"/v1/groups/waker/topics/wake/pull", "application/json", bytes.NewReader(body))
				if err == nil {
					err = json.NewDecoder(resp.Body).Decode(&out)
					resp.Body.Close()
				}
				done <- result{out.Messages, time.Now(), err}
			}()
			e.WaitInFlight(t, 1, 5*time.Second)
			sent := time.Now()
			want := fmt.Sprintf("wake-%d", i)
			e.Send(t, "wake", api.SendMessage{Body: want})
			var res result
			select {
			case res = <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("trial %d: the poll did not return", i)
			}
			require.NoError(t, res.err)
			require.Len(t, res.msgs, 1, "trial %d", i)
			require.Equal(t, want, res.msgs[0].Body)
			latency := res.at.Sub(sent)
			require.Less(t, latency, time.Second, "trial %d: wake latency", i)
			latencies = append(latencies, latency)
		}
		t.Logf("long-poll wake latency over %d trials (send start -> poll return, loopback, sync flush): p50 %v, p99 %v, max %v",
			trials, percentile(latencies, 0.50), percentile(latencies, 0.99), percentile(latencies, 1))
	})
}

// TestE2ELongPollClientDisconnect: clients that go away
// while their polls wait end those polls; no goroutine is left behind.
// Not parallel: it counts the process's goroutines.
func TestE2ELongPollClientDisconnect(t *testing.T) {
	e := startE2E(t)
	e.Send(t, "quiet", api.SendMessage{Body: "warm-up"})
	require.Len(t, e.Pull(t, "g", "quiet", api.PullRequest{MaxMessages: 1}), 1)
	polls := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	baseline := servertest.SettledGoroutines(t, e.Client, polls)

	const n = 20
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Base+"/v1/groups/g/topics/quiet/pull",
				strings.NewReader(`{"waitMs":30000}`))
			if err != nil {
				errs <- err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := polls.Do(req)
			if err == nil {
				resp.Body.Close()
				err = fmt.Errorf("the poll answered %d before the client went away", resp.StatusCode)
			}
			errs <- err
		}()
	}
	e.WaitInFlight(t, n, 10*time.Second)
	start := time.Now()
	cancel()
	for i := 0; i < n; i++ {
		require.ErrorIs(t, <-errs, context.Canceled)
	}
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		v, _ := e.MetricValue(t, "mqgate_http_requests_in_flight")
		return v == 1, fmt.Sprintf("%v requests in flight", v)
	})
	e.Client.CloseIdleConnections()
	servertest.WaitGoroutines(t, baseline, 5*time.Second)
	t.Logf("long-poll disconnect: %d abandoned polls ended and goroutines back to baseline %d within %v", n, baseline, time.Since(start))
	// The server still serves polls afterwards.
	e.Send(t, "quiet", api.SendMessage{Body: "after"})
	require.Len(t, e.Pull(t, "g", "quiet", api.PullRequest{WaitMs: 2000}), 1)
}

// TestE2ELongPollThousandIdle: 1 000 concurrent idle polls
// all answer 200 with an empty list after their wait, and the goroutines
// return to the baseline. Not parallel: it counts the process's goroutines.
func TestE2ELongPollThousandIdle(t *testing.T) {
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/sleepy", api.TopicRequest{Queues: 4}), http.StatusCreated, nil)
	polls := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, MaxConnsPerHost: 0}}
	baseline := servertest.SettledGoroutines(t, e.Client, polls)

	const n, waitMs = 1000, 2000
	type result struct {
		status int
		body   string
		took   time.Duration
		err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			resp, err := polls.Post(e.Base+"/v1/groups/idlers/topics/sleepy/pull", "application/json",
				strings.NewReader(fmt.Sprintf(`{"waitMs":%d}`, waitMs)))
			if err != nil {
				results[i].err = err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results[i] = result{status: resp.StatusCode, body: strings.TrimSpace(string(b)), took: time.Since(began), err: err}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var tooks []time.Duration
	for i, r := range results {
		require.NoError(t, r.err, "poll %d", i)
		require.Equal(t, http.StatusOK, r.status, "poll %d: %s", i, r.body)
		require.Equal(t, `{"messages":[]}`, r.body, "poll %d", i)
		require.GreaterOrEqual(t, r.took, time.Duration(waitMs)*time.Millisecond, "poll %d returned before its wait", i)
		tooks = append(tooks, r.took)
	}
	took := servertest.WaitGoroutines(t, baseline, 10*time.Second)
	t.Logf("%d idle polls (waitMs %d): all empty 200 in %v (per poll p50 %v, max %v); goroutines back to baseline %d %v after the last answer",
		n, waitMs, elapsed, percentile(tooks, 0.5), percentile(tooks, 1), baseline, took)
}
