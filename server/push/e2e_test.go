package push_test

// Webhook push over real HTTP: the real server (server.Open with the
// real broker on a temp dir, millisecond delay levels) delivering to real
// receivers (httptest servers on loopback), observed through the
// receivers and the public API only.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/push"
	"github.com/mqgate/mqgate/server/servertest"
)

// t25Levels compress the delay levels to milliseconds (level 3, the first
// retry, is 50 ms) but keep a 1 s level 10 for Retry-After: 1.
const t25Levels = "10ms 20ms 50ms 80ms 100ms 150ms 200ms 300ms 400ms 1s 2s 3s 4s 5s 6s 7s 8s 9s"

// deniedHost is a loopback address on the server's push deny list.
const deniedHost = "127.0.0.2"

// TestMain fails the binary when a test leaves goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// gateway is one running mqgate server.
type gateway struct{ *servertest.Server }

// startGateway opens a gateway on a fresh data dir with t25Levels and
// deniedHost on the push deny list; opts adjust the config.
func startGateway(t *testing.T, opts ...func(*server.Config)) *gateway {
	t.Helper()
	return &gateway{servertest.Start(t, append([]func(*server.Config){func(cfg *server.Config) {
		require.NoError(t, cfg.DelayLevels.UnmarshalText([]byte(t25Levels)))
		require.NoError(t, cfg.PushDenyCIDRs.UnmarshalText([]byte(deniedHost+"/32")))
	}}, opts...)...)}
}

// openGateway opens and serves a gateway with cfg (e.g. again on the
// data dir of a closed one). API calls go to 127.0.0.1 when it listens on
// an unspecified address.
func openGateway(t *testing.T, cfg server.Config) *gateway {
	t.Helper()
	return &gateway{servertest.Open(t, cfg)}
}

// level is the delay of level n (1-based).
func (g *gateway) level(n int) time.Duration { return g.Cfg.DelayLevels[n-1] }

// call performs one API request and decodes a 2xx answer into out.
func (g *gateway) call(t *testing.T, method, path string, in, out any) int {
	t.Helper()
	code, b := g.do(t, method, path, in)
	require.Less(t, code, 300, "%s %s: %d %s", method, path, code, b)
	if out != nil {
		require.NoError(t, json.Unmarshal(b, out), "%s", b)
	}
	return code
}

// putPushGroup creates group on topic with a push endpoint and returns
// the group as the creating PUT answered it (with the secret).
func (g *gateway) putPushGroup(t *testing.T, group, topic string, retryMaxTimes int, p api.PushRequest) api.Group {
	t.Helper()
	g.call(t, http.MethodPut, "/v1/topics/"+topic, api.TopicRequest{Queues: 2}, nil)
	var out api.Group
	require.Equal(t, http.StatusCreated, g.call(t, http.MethodPut, "/v1/groups/"+group, api.GroupRequest{
		RetryMaxTimes: retryMaxTimes, Subscriptions: []api.Subscription{{Topic: topic}}, Push: &p,
	}, &out))
	require.NotNil(t, out.Push)
	require.True(t, strings.HasPrefix(out.Push.Secret, "whsec_"), "the creating PUT returns the generated secret")
	return out
}

// send stores one message and returns its id.
func (g *gateway) send(t *testing.T, topic, body string) string {
	t.Helper()
	var out api.SendResponse
	g.call(t, http.MethodPost, "/v1/topics/"+topic+"/messages", api.SendMessage{Body: body, Tag: "t25"}, &out)
	return out.Results[0].MessageID
}

// dlq waits until group's DLQ holds n letters and returns them.
func (g *gateway) dlq(t *testing.T, group string, n int) []api.DeadLetter {
	t.Helper()
	var out api.DeadLetterList
	servertest.Eventually(t, 20*time.Second, func() (bool, string) {
		out = api.DeadLetterList{}
		g.call(t, http.MethodGet, "/v1/groups/"+group+"/dlq", nil, &out)
		return len(out.Items) >= n, fmt.Sprintf("%d of %d dead letters", len(out.Items), n)
	})
	require.Len(t, out.Items, n)
	return out.Items
}

// settled waits until group has nothing left to consume nor in flight.
func (g *gateway) settled(t *testing.T, group string) {
	t.Helper()
	servertest.Eventually(t, 20*time.Second, func() (bool, string) {
		var p api.Progress
		g.call(t, http.MethodGet, "/v1/groups/"+group+"/progress", nil, &p)
		inFlight := 0
		for _, q := range p.Queues {
			inFlight += q.InFlight
		}
		return p.TotalLag == 0 && inFlight == 0 && len(p.Queues) > 0, fmt.Sprintf("lag %d, in flight %d", p.TotalLag, inFlight)
	})
}

// metric returns the value of one /metrics series (0 when absent).
func (g *gateway) metric(t *testing.T, series string) float64 {
	t.Helper()
	v, _ := g.MetricValue(t, series)
	return v
}

// hit is one request a receiver got.
type hit struct {
	At     time.Time
	Header http.Header
	Body   []byte
	Msg    push.Message
}

// receiver is a webhook endpoint whose answers a test scripts. Every
// request it gets is checked against the push callback of the OpenAPI
// spec; a mismatch fails the test at its end.
type receiver struct {
	URL        string
	mu         sync.Mutex
	hits       []hit
	mismatches []string
	answer     func(n int, w http.ResponseWriter, r *http.Request)
}

// newReceiver serves answer on a fresh port of host (127.0.0.1 or the
// denied 127.0.0.2).
func newReceiver(t *testing.T, host string, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := hit{At: time.Now(), Header: r.Header.Clone(), Body: body}
		_ = json.Unmarshal(body, &h.Msg)
		specErr := servertest.ValidatePushRequest(r, body)
		rc.mu.Lock()
		n := len(rc.hits)
		rc.hits = append(rc.hits, h)
		if specErr != nil {
			rc.mismatches = append(rc.mismatches, specErr.Error())
		}
		rc.mu.Unlock()
		rc.answer(n, w, r)
	}))
	l, err := net.Listen("tcp", host+":0")
	require.NoError(t, err)
	srv.Listener = l
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		rc.mu.Lock()
		defer rc.mu.Unlock()
		for _, m := range rc.mismatches {
			t.Error(m)
		}
	})
	rc.URL = srv.URL
	return rc
}

func (rc *receiver) got() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

// waitHits waits until the receiver got n requests.
func (rc *receiver) waitHits(t *testing.T, n int) []hit {
	t.Helper()
	servertest.Eventually(t, 20*time.Second, func() (bool, string) {
		got := len(rc.got())
		return got >= n, fmt.Sprintf("%d of %d requests", got, n)
	})
	return rc.got()
}

func answer(code int, body string, header ...string) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// verifyAll checks every hit's signature with our verifier.
func verifyAll(t *testing.T, secret string, hits []hit) {
	t.Helper()
	for i, h := range hits {
		require.NoError(t, push.Verify(secret, h.Header, h.Body, time.Now(), push.DefaultTolerance), "request %d", i)
	}
}

// TestWebhookPush: deliveries, signatures, settlement by status code, the
// retry ladder and the DLQ, 410, redirects and the SSRF guard.
func TestWebhookPush(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)

	t.Run("ServerErrorWalksTheLadderIntoTheDLQ", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, "127.0.0.1", answer(http.StatusInternalServerError, "database down"))
		g := gw.putPushGroup(t, "t25-500", "t25-500", 3, api.PushRequest{URL: rc.URL + "/hook"})
		id := gw.send(t, "t25-500", `{"order":1}`)

		dead := gw.dlq(t, "t25-500", 1)[0]
		hits := rc.got()
		require.Len(t, hits, 4, "retryMaxTimes 3: one delivery and three retries")
		for i, h := range hits {
			require.EqualValues(t, i, h.Msg.ReconsumeTimes, "request %d", i)
			require.Equal(t, id, h.Header.Get(push.HeaderID), "webhook-id is the first message id on every attempt")
			require.Equal(t, `{"order":1}`, h.Msg.Body)
			if i > 0 {
				require.Equal(t, id, h.Msg.OriginMessageID)
				// the ladder: level 3 + reconsumeTimes of the failed delivery
				gap, want := h.At.Sub(hits[i-1].At), gw.level(3+i-1)
				require.GreaterOrEqual(t, gap, want, "retry %d came after %v, its level's delay is %v", i, gap, want)
				t.Logf("retry %d after %v (level %d = %v)", i, gap, 3+i-1, want)
			}
		}
		verifyAll(t, g.Push.Secret, hits)
		require.Equal(t, id, dead.OriginMessageID)
		require.Equal(t, "t25-500", dead.OriginalTopic)
		require.Len(t, dead.Attempts, 4)
		for _, a := range dead.Attempts {
			require.Equal(t, "nack", a.Outcome)
			require.Equal(t, "mqgate-push", a.Client)
			require.Equal(t, "push: HTTP 500 Internal Server Error: database down", a.Reason)
		}
		require.Contains(t, dead.Reason, "HTTP 500")
		require.EqualValues(t, 4, gw.metric(t, `mqgate_push_deliveries_total{group="t25-500",result="5xx"}`))
		require.EqualValues(t, 4, gw.metric(t, `mqgate_push_request_duration_seconds_count{group="t25-500"}`))
	})

	t.Run("RetryAfterIsHonoured", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, "127.0.0.1", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				answer(http.StatusTooManyRequests, "slow down", "Retry-After", "1")(n, w, r)
				return
			}
			answer(http.StatusOK, "")(n, w, r)
		})
		g := gw.putPushGroup(t, "t25-429", "t25-429", 0, api.PushRequest{URL: rc.URL})
		id := gw.send(t, "t25-429", "rate me")
		hits := rc.waitHits(t, 2)
		gw.settled(t, "t25-429")
		require.Len(t, rc.got(), 2, "acked after the second attempt")

		gap := hits[1].At.Sub(hits[0].At)
		require.GreaterOrEqual(t, gap, time.Second, "Retry-After: 1 is honoured")
		t.Logf("429 Retry-After 1 -> next attempt after %v", gap)
		require.Equal(t, id, hits[0].Header.Get(push.HeaderID))
		require.Equal(t, id, hits[1].Header.Get(push.HeaderID), "webhook-id is stable across attempts")
		ts0, err := strconv.ParseInt(hits[0].Header.Get(push.HeaderTimestamp), 10, 64)
		require.NoError(t, err)
		ts1, err := strconv.ParseInt(hits[1].Header.Get(push.HeaderTimestamp), 10, 64)
		require.NoError(t, err)
		require.Greater(t, ts1, ts0, "webhook-timestamp is per attempt")
		require.NotEqual(t, hits[0].Header.Get(push.HeaderSignature), hits[1].Header.Get(push.HeaderSignature))
		require.EqualValues(t, 1, hits[1].Msg.ReconsumeTimes)
		verifyAll(t, g.Push.Secret, hits)

		t.Run("StandardWebhooksNPM", func(t *testing.T) {
			verifyWithNPM(t, g.Push.Secret, hits)
		})
	})

	t.Run("TimeoutIsANack", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, "127.0.0.1", func(_ int, w http.ResponseWriter, r *http.Request) {
			select { // hold the request until the gateway gives up
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			w.WriteHeader(http.StatusOK)
		})
		gw.putPushGroup(t, "t25-timeout", "t25-timeout", 1, api.PushRequest{URL: rc.URL, TimeoutMs: 200})
		gw.send(t, "t25-timeout", "too slow")
		dead := gw.dlq(t, "t25-timeout", 1)[0]
		require.Len(t, rc.got(), 2)
		require.Len(t, dead.Attempts, 2)
		for _, a := range dead.Attempts {
			require.Equal(t, "push: timeout: no answer within 200ms", a.Reason)
		}
		require.EqualValues(t, 2, gw.metric(t, `mqgate_push_deliveries_total{group="t25-timeout",result="timeout"}`))
	})

	t.Run("GoneDisablesTheEndpoint", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, "127.0.0.1", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 0 {
				answer(http.StatusGone, "unsubscribed")(n, w, r)
				return
			}
			answer(http.StatusOK, "")(n, w, r)
		})
		created := gw.putPushGroup(t, "t25-410", "t25-410", 0, api.PushRequest{URL: rc.URL})
		first := gw.send(t, "t25-410", "first")
		rc.waitHits(t, 1)
		var g api.Group
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			g = api.Group{}
			gw.call(t, http.MethodGet, "/v1/groups/t25-410", nil, &g)
			return g.Push != nil && g.Push.Disabled, fmt.Sprintf("push %+v", g.Push)
		})
		require.Contains(t, g.Push.DisabledReason, "HTTP 410 Gone")
		require.Empty(t, g.Push.Secret, "GET never shows the secret")

		// No further deliveries: what arrives now (and the 410'd message's
		// retry) waits in the group, where a pull consumer finds it.
		second := gw.send(t, "t25-410", "second")
		var pulled []api.PulledMessage
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			var out api.PullResponse
			gw.call(t, http.MethodPost, "/v1/groups/t25-410/topics/t25-410/pull", api.PullRequest{MaxMessages: 8, WaitMs: 200}, &out)
			pulled = append(pulled, out.Messages...)
			return len(pulled) >= 2, fmt.Sprintf("pulled %d", len(pulled))
		})
		ids := map[string]int32{}
		for _, m := range pulled {
			key := m.MessageID
			if m.OriginMessageID != "" {
				key = m.OriginMessageID
			}
			ids[key] = m.ReconsumeTimes
			var res api.ReceiptResponse
			gw.call(t, http.MethodPost, "/v1/groups/t25-410/ack", api.AckRequest{Receipts: []string{m.Receipt}}, &res)
			require.Equal(t, "ok", res.Results[0].Status)
		}
		require.Equal(t, map[string]int32{first: 1, second: 0}, ids, "the 410 was a nack; the later message was never pushed")
		require.Len(t, rc.got(), 1, "no delivery after the 410")

		// A PUT enables the endpoint again, keeping its secret.
		var again api.Group
		gw.call(t, http.MethodPut, "/v1/groups/t25-410", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "t25-410"}}, Push: &api.PushRequest{URL: rc.URL}}, &again)
		require.False(t, again.Push.Disabled)
		require.Empty(t, again.Push.Secret, "the kept secret is not shown")
		third := gw.send(t, "t25-410", "third")
		hits := rc.waitHits(t, 2)
		require.Equal(t, third, hits[1].Header.Get(push.HeaderID))
		verifyAll(t, created.Push.Secret, hits)
		gw.settled(t, "t25-410")
		require.EqualValues(t, 1, gw.metric(t, `mqgate_push_deliveries_total{group="t25-410",result="gone"}`))
	})

	t.Run("SuccessAcks", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		inFlight, most := 0, 0
		rc := newReceiver(t, "127.0.0.1", func(_ int, w http.ResponseWriter, _ *http.Request) {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the receiver's work, so that requests overlap
			mu.Lock()
			inFlight--
			mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
		})
		g := gw.putPushGroup(t, "t25-ok", "t25-ok", 0, api.PushRequest{URL: rc.URL, MaxConcurrency: 2})
		var res api.SendResponse
		var batch []api.SendMessage
		for i := range 8 {
			batch = append(batch, api.SendMessage{Body: fmt.Sprintf("m%d", i)})
		}
		gw.call(t, http.MethodPost, "/v1/topics/t25-ok/messages", map[string]any{"messages": batch}, &res)
		hits := rc.waitHits(t, 8)
		gw.settled(t, "t25-ok")
		require.Len(t, rc.got(), 8, "each message once")
		seen := map[string]bool{}
		for _, h := range hits {
			seen[h.Header.Get(push.HeaderID)] = true
			require.Zero(t, h.Msg.ReconsumeTimes)
		}
		for _, r := range res.Results {
			require.True(t, seen[r.MessageID], r.MessageID)
		}
		verifyAll(t, g.Push.Secret, hits)
		mu.Lock()
		require.LessOrEqual(t, most, 2, "maxConcurrency 2")
		t.Logf("at most %d requests in flight (maxConcurrency 2)", most)
		mu.Unlock()
		require.EqualValues(t, 8, gw.metric(t, `mqgate_push_deliveries_total{group="t25-ok",result="ok"}`))
	})

	t.Run("SSRFIsRefused", func(t *testing.T) {
		t.Parallel()
		denied := newReceiver(t, deniedHost, answer(http.StatusOK, ""))
		local := newReceiver(t, "127.0.0.1", answer(http.StatusOK, ""))
		_, port, err := net.SplitHostPort(strings.TrimPrefix(local.URL, "http://"))
		require.NoError(t, err)
		_, deniedPort, err := net.SplitHostPort(strings.TrimPrefix(denied.URL, "http://"))
		require.NoError(t, err)
		gw.call(t, http.MethodPut, "/v1/topics/t25-ssrf", api.TopicRequest{Queues: 2}, nil)
		// A literal address delivery would refuse is refused when saved.
		for _, tc := range []struct{ url, reason string }{
			{denied.URL, deniedHost + " is in the denied range " + deniedHost + "/32"},
			{"http://[::ffff:" + deniedHost + "]:" + deniedPort + "/", deniedHost + " (::ffff:" + deniedHost + ") is in the denied range " + deniedHost + "/32"},
			// 0.0.0.0 would reach this host's listeners: always refused.
			{"http://0.0.0.0:" + port + "/", "0.0.0.0 is unspecified"},
			{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 is the cloud metadata address"},
		} {
			p := gw.problem(t, http.MethodPut, "/v1/groups/t25-ssrf", api.GroupRequest{
				Subscriptions: []api.Subscription{{Topic: "t25-ssrf"}}, Push: &api.PushRequest{URL: tc.url},
			}, http.StatusBadRequest, "invalid-argument")
			require.Equal(t, "invalid argument: push url: forbidden address: "+tc.reason, p.Detail, tc.url)
		}
		require.Equal(t, http.StatusNotFound, gw.status(t, http.MethodGet, "/v1/groups/t25-ssrf"), "nothing was stored")
		require.Empty(t, denied.got(), "nothing was sent to the denied range")
		require.Empty(t, local.got(), "nothing was sent through 0.0.0.0")
		// Refusals at delivery time (names, groups saved before a flag
		// changed): TestSSRF, TestOwnListenerIsRefusedAtDelivery,
		// TestDenyPrivateAtDelivery and TestPushDenyPrivate.
	})

	t.Run("RedirectsAreNotFollowed", func(t *testing.T) {
		t.Parallel()
		target := newReceiver(t, "127.0.0.1", answer(http.StatusOK, ""))
		rc := newReceiver(t, "127.0.0.1", func(_ int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		})
		gw.putPushGroup(t, "t25-redirect", "t25-redirect", 1, api.PushRequest{URL: rc.URL})
		gw.send(t, "t25-redirect", "go elsewhere")
		dead := gw.dlq(t, "t25-redirect", 1)[0]
		require.Len(t, rc.got(), 2)
		require.Empty(t, target.got(), "the redirect target got nothing")
		require.True(t, strings.HasPrefix(dead.Attempts[0].Reason, "push: HTTP 307 Temporary Redirect (redirects are not followed)"), dead.Attempts[0].Reason)
	})
}
