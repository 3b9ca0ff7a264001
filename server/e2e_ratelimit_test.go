package server_test

// End-to-end tests of the abuse limits per account (api/limits.go): the
// request rate, the message rate and the cap on waiting pulls, set per
// account in the ACL file or by the flags, answered 429 with Retry-After,
// counted per account and never per header; without authentication every
// caller is one account.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// limitsACL has accounts with limits of their own and one without.
func limitsACL(slowRate string) string {
	return `
accounts:
  - accessKey: root
    secretKey: root-secret-1
    admin: true
  - accessKey: fast
    secretKey: fast-secret-1
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: slow
    secretKey: slow-secret-1
    defaultTopicPerm: PUB|SUB
    requestsPerSecond: ` + slowRate + `
  - accessKey: trickle
    secretKey: trickle-secret-1
    defaultTopicPerm: PUB|SUB
    messagesPerSecond: 10
  - accessKey: poller
    secretKey: poller-secret-1
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    maxLongPolls: 2
`
}

// batchOf is a send request of n messages.
func batchOf(n int) []byte {
	msgs := make([]api.SendMessage, n)
	for i := range msgs {
		msgs[i] = api.SendMessage{Body: "m" + strconv.Itoa(i)}
	}
	b, _ := json.Marshal(api.SendRequest{Messages: &msgs})
	return b
}

// retryAfter is the Retry-After of r in seconds.
func retryAfter(t *testing.T, r servertest.Resp) int {
	t.Helper()
	n, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After of %s", r)
	return n
}

// TestE2ERateLimitsPerAccount: an account over its requestsPerSecond gets
// 429 rate-limited with Retry-After while other accounts go on; spoofed
// address headers change nothing; messagesPerSecond counts the messages
// of a batch; maxLongPolls caps the account's waiting pulls; a reload of
// the file changes the limits.
func TestE2ERateLimitsPerAccount(t *testing.T) {
	t.Parallel()
	path := newACL(t, limitsACL("5"))
	e := startAuthE2E(t, path)
	slow, fast := basic("slow", "slow-secret-1"), basic("fast", "fast-secret-1")
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/limits/messages", "application/json", []byte(`{"body":"x"}`), fast), http.StatusOK, nil)

	// The bucket holds one second's worth: 5 requests pass, the 6th not,
	// whatever address headers it carries.
	var refused servertest.Resp
	for i := 0; ; i++ {
		h := slow.Clone()
		h.Set("X-Forwarded-For", fmt.Sprintf("10.9.8.%d", i))
		h.Set("X-Real-Ip", fmt.Sprintf("10.9.7.%d", i))
		r := e.Do(t, http.MethodGet, "/v1/topics/limits", "", nil, h)
		if r.Status == http.StatusTooManyRequests {
			refused = r
			require.GreaterOrEqual(t, i, 5, "the first five requests pass")
			break
		}
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
		require.Less(t, i, 8, "the 6th request within a second is refused")
	}
	p := servertest.WantProblem(t, refused, http.StatusTooManyRequests, "rate-limited")
	require.Contains(t, p.Detail, `account "slow" is over its 5 requests per second (requestsPerSecond)`)
	require.Equal(t, 5, p.Limit)
	require.Equal(t, "requests per second", p.LimitUnit)
	require.GreaterOrEqual(t, retryAfter(t, refused), 1)

	// Another account is not slowed.
	for range 20 {
		servertest.Decode(t, e.Do(t, http.MethodGet, "/v1/topics/limits", "", nil, fast), http.StatusOK, nil)
	}
	// The bucket refills.
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		r := e.Do(t, http.MethodGet, "/v1/topics/limits", "", nil, slow)
		return r.Status == http.StatusOK, r.String()
	})

	t.Run("Messages", func(t *testing.T) {
		trickle := basic("trickle", "trickle-secret-1")
		// The burst is at least one full batch.
		servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/limits/messages", "application/json", batchOf(api.MaxBatchMessages), trickle), http.StatusOK, nil)
		r := e.Do(t, http.MethodPost, "/v1/topics/limits/messages", "application/json", batchOf(2), trickle)
		p := servertest.WantProblem(t, r, http.StatusTooManyRequests, "rate-limited")
		require.Contains(t, p.Detail, "10 messages per second (messagesPerSecond)")
		require.Equal(t, 1, retryAfter(t, r))
		// A refused batch stored nothing of itself and took no tokens.
		servertest.Eventually(t, 5*time.Second, func() (bool, string) {
			r := e.Do(t, http.MethodPost, "/v1/topics/limits/messages", "application/json", batchOf(2), trickle)
			return r.Status == http.StatusOK, r.String()
		})
	})

	t.Run("LongPolls", func(t *testing.T) {
		poller := basic("poller", "poller-secret-1")
		servertest.Decode(t, e.Do(t, http.MethodPut, "/v1/topics/limits-empty", "application/json", []byte(`{"queues":1}`), basic("root", "root-secret-1")), http.StatusCreated, nil)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.Base+"/v1/groups/pollers/topics/limits-empty/pull", strings.NewReader(`{"waitMs":20000}`))
				req.Header = poller.Clone()
				req.Header.Set("Content-Type", "application/json")
				if resp, err := e.Client.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
		}
		defer func() { cancel(); wg.Wait() }()
		// Both are waiting once the server serves them and this /metrics.
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			r := e.Do(t, http.MethodGet, "/metrics", "", nil, basic("root", "root-secret-1"))
			for _, line := range strings.Split(string(r.Body), "\n") {
				if v, ok := strings.CutPrefix(line, "mqgate_http_requests_in_flight "); ok {
					return strings.TrimSpace(v) == "3", line
				}
			}
			return false, "no in-flight gauge"
		})
		p := servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/groups/pollers/topics/limits-empty/pull", "application/json", []byte(`{"waitMs":10}`), poller),
			http.StatusTooManyRequests, "too-many-waiters")
		require.Contains(t, p.Detail, `account "poller" has 2 pulls waiting, its limit (maxLongPolls)`)
		// A pull that does not wait is not a long poll; other accounts poll.
		servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/groups/pollers/topics/limits-empty/pull", "application/json", []byte(`{"waitMs":0}`), poller), http.StatusOK, nil)
		servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/groups/pollers/topics/limits-empty/pull", "application/json", []byte(`{"waitMs":10}`), fast), http.StatusOK, nil)
	})

	t.Run("Reload", func(t *testing.T) {
		writeACL(t, path, limitsACL("0"))
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			for range 20 {
				if r := e.Do(t, http.MethodGet, "/v1/topics/limits", "", nil, slow); r.Status != http.StatusOK {
					return false, r.String()
				}
			}
			return true, ""
		})
	})
}

// TestE2ERateLimitAnonymous: without authentication every caller is the
// one account "anonymous", with the flags' limits.
func TestE2ERateLimitAnonymous(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) { c.RequestsPerSecond = 3 })
	statuses := []int{}
	for range 4 {
		statuses = append(statuses, e.Get(t, "/v1/topics").Status)
	}
	require.Equal(t, []int{200, 200, 200, 429}, statuses)
	p := servertest.WantProblem(t, e.Get(t, "/v1/topics"), http.StatusTooManyRequests, "rate-limited")
	require.Contains(t, p.Detail, `account "anonymous" is over its 3 requests per second`)
	// The probes are not rate limited.
	require.Equal(t, http.StatusOK, e.Get(t, "/readyz").Status)
}

// TestE2ERateLimitAccuracy: over two seconds of requests as fast as one
// client sends them, an account limited to 50 per second gets its burst
// (50) plus 50 per second: never more than 10 % above, and not more than
// 10 % below unless the client itself stalled (a starved test process
// sends nothing for a while, and a full bucket keeps no more than its
// burst meanwhile; so the lower bound holds for a client that sent at
// least twice what the limit allows with no gap of 100 ms).
func TestE2ERateLimitAccuracy(t *testing.T) {
	t.Parallel()
	e := startAuthE2E(t, newACL(t, limitsACL("50")))
	slow := basic("slow", "slow-secret-1")
	const span = 2 * time.Second
	start := time.Now()
	ok, refused := 0, 0
	var stalled time.Duration // the longest time between two requests
	last := start
	for time.Since(start) < span {
		switch r := e.Do(t, http.MethodGet, "/v1/topics/nothing", "", nil, slow); r.Status {
		case http.StatusTooManyRequests:
			refused++
		default:
			ok++
		}
		now := time.Now()
		stalled, last = max(stalled, now.Sub(last)), now
	}
	elapsed := time.Since(start)
	want := 50 + 50*elapsed.Seconds()
	t.Logf("rate limit 50/s, burst 50: %d passed and %d refused in %s (expected %.0f passed; longest gap %s)",
		ok, refused, elapsed.Round(time.Millisecond), want, stalled.Round(time.Millisecond))
	require.LessOrEqual(t, float64(ok), want*1.1)
	if stalled < 100*time.Millisecond && float64(ok+refused) >= 2*want { // it pushed well above the limit throughout
		require.GreaterOrEqual(t, float64(ok), want*0.9)
	}
	require.Positive(t, refused)
}
