package server_test

// Helpers of the end-to-end tests (e2e_*_test.go): the real server —
// server.Open with the real broker and a real data dir — serving real HTTP
// on 127.0.0.1, driven with net/http and the api package's wire types.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
)

// e2eDelayLevels are RocketMQ's 18 delay levels compressed to milliseconds
// (level 3, the first retry, is 60 ms; level 18 is 360 ms).
const e2eDelayLevels = "20ms 40ms 60ms 80ms 100ms 120ms 140ms 160ms 180ms 200ms 220ms 240ms 260ms 280ms 300ms 320ms 340ms 360ms"

// problemType prefixes every problem code in the `type` member.
const problemType = "urn:mqgate:problem:"

// e2eConfig is the configuration of an end-to-end server on dir: a free
// loopback port, 64 MiB segments, millisecond delay levels, no logs.
func e2eConfig(t *testing.T, dir string) server.Config {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.SegmentSize = 64 << 20
	require.NoError(t, cfg.DelayLevels.UnmarshalText([]byte(e2eDelayLevels)))
	cfg.LogOutput = io.Discard
	cfg.LogFormat = "json"
	cfg.LogLevel = "warn"
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// e2eServer is one running server and an HTTP client of its own.
type e2eServer struct {
	cfg    server.Config
	srv    *server.Server
	base   string
	client *http.Client
	served chan error
	closed bool
}

// startE2E opens a server on a fresh data dir; opts adjust the config.
// Cleanup closes it.
func startE2E(t *testing.T, opts ...func(*server.Config)) *e2eServer {
	t.Helper()
	cfg := e2eConfig(t, t.TempDir())
	for _, o := range opts {
		o(&cfg)
	}
	return openE2E(t, cfg)
}

// openE2E opens a server with cfg (e.g. again on the data dir of a closed
// one) and serves it in the background. Cleanup closes it.
func openE2E(t *testing.T, cfg server.Config) *e2eServer {
	t.Helper()
	s, err := server.Open(context.Background(), cfg)
	require.NoError(t, err)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	e := &e2eServer{
		cfg:    cfg,
		srv:    s,
		base:   "http://" + s.Addr(),
		client: &http.Client{Transport: transport, Timeout: 60 * time.Second},
		served: make(chan error, 1),
	}
	go func() { e.served <- s.Serve() }()
	t.Cleanup(func() { e.close(t) })
	return e
}

// close shuts the server down gracefully (idempotent) and checks that
// Close and Serve returned cleanly.
func (e *e2eServer) close(t *testing.T) {
	t.Helper()
	if e.closed {
		return
	}
	e.closed = true
	e.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, e.srv.Close(ctx))
	select {
	case err := <-e.served:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Serve did not return after Close")
	}
}

// e2eResp is a whole HTTP response.
type e2eResp struct {
	Status int
	Header http.Header
	Body   []byte
}

// String shows the response in failure messages.
func (r e2eResp) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// do performs one request. contentType "" sends none. Every 4xx/5xx
// answer is checked to be an RFC 9457 problem whose status equals the
// HTTP status and which has a code (the API's rule for every error, here over real HTTP).
func (e *e2eServer) do(t *testing.T, method, path, contentType string, body []byte, header http.Header) e2eResp {
	t.Helper()
	return e.doCtx(t, context.Background(), method, path, contentType, body, header)
}

// doCtx is do with a request context.
func (e *e2eServer) doCtx(t *testing.T, ctx context.Context, method, path, contentType string, body []byte, header http.Header) e2eResp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return e.doReader(t, ctx, method, path, contentType, rd, header)
}

// doReader is doCtx with a body reader; a reader other than *bytes.Reader,
// *bytes.Buffer or *strings.Reader is sent chunked (unknown length).
func (e *e2eServer) doReader(t *testing.T, ctx context.Context, method, path, contentType string, rd io.Reader, header http.Header) e2eResp {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.base+path, rd)
	require.NoError(t, err)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := e2eResp{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if r.Status >= 400 {
		checkProblem(t, method+" "+path, r)
	}
	return r
}

// checkProblem asserts that r is a well-formed problem response.
func checkProblem(t *testing.T, what string, r e2eResp) api.Problem {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), "%s: %s", what, r)
	var p api.Problem
	require.NoError(t, json.Unmarshal(r.Body, &p), "%s: %s", what, r)
	require.Equal(t, r.Status, p.Status, "%s: problem status", what)
	require.NotEmpty(t, p.Code, "%s: problem code", what)
	require.Equal(t, problemType+p.Code, p.Type, "%s: problem type", what)
	require.NotEmpty(t, p.Title, "%s: problem title", what)
	return p
}

// json performs a request with a JSON body (in marshalled; a string or
// []byte is sent as is; nil sends no body).
func (e *e2eServer) json(t *testing.T, method, path string, in any) e2eResp {
	t.Helper()
	var body []byte
	switch v := in.(type) {
	case nil:
	case string:
		body = []byte(v)
	case []byte:
		body = v
	default:
		var err error
		body, err = json.Marshal(in)
		require.NoError(t, err)
	}
	ct := "application/json"
	if body == nil {
		ct = ""
	}
	return e.do(t, method, path, ct, body, nil)
}

// get performs a GET.
func (e *e2eServer) get(t *testing.T, path string) e2eResp {
	t.Helper()
	return e.do(t, http.MethodGet, path, "", nil, nil)
}

// decode asserts r's status and decodes its JSON body into out (may be nil).
func decode(t *testing.T, r e2eResp, status int, out any) {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r)
	if out != nil {
		require.NoError(t, json.Unmarshal(r.Body, out), "%s", r)
	}
}

// problem asserts that r is a problem with the given status and code and
// returns it.
func problem(t *testing.T, r e2eResp, status int, code string) api.Problem {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r)
	p := checkProblem(t, "response", r)
	require.Equal(t, code, p.Code, "%s", r)
	return p
}

// send sends one UTF-8 message and returns its result.
func (e *e2eServer) send(t *testing.T, topic string, msg api.SendMessage) api.SendResult {
	t.Helper()
	var out api.SendResponse
	decode(t, e.json(t, http.MethodPost, "/v1/topics/"+topic+"/messages", msg), http.StatusOK, &out)
	require.Len(t, out.Results, 1)
	return out.Results[0]
}

// message looks a message up by id (a fresh value each time: decoding
// into a used one would merge its properties map).
func (e *e2eServer) message(t *testing.T, id string) api.Message {
	t.Helper()
	var m api.Message
	decode(t, e.get(t, "/v1/messages/"+id), http.StatusOK, &m)
	return m
}

// byKey looks messages of topic up by key. It first reads queue 0 of the
// topic, which waits for the dispatcher (read-your-writes), because the key
// lookup itself does not (TestE2EKeyLookupReadYourWrites).
func (e *e2eServer) byKey(t *testing.T, topic, key string) []api.Message {
	t.Helper()
	require.Equal(t, http.StatusOK, e.get(t, "/v1/topics/"+topic+"/queues/0/messages?max=1").Status)
	var found api.MessageList
	decode(t, e.get(t, "/v1/messages?topic="+topic+"&key="+key), http.StatusOK, &found)
	require.NotNil(t, found.Messages, "messages is a list, never null")
	return found.Messages
}

// pull pulls once and returns the messages.
func (e *e2eServer) pull(t *testing.T, group, topic string, req api.PullRequest) []api.Message {
	t.Helper()
	var out api.PullResponse
	decode(t, e.json(t, http.MethodPost, "/v1/groups/"+group+"/topics/"+topic+"/pull", req), http.StatusOK, &out)
	require.NotNil(t, out.Messages, "messages is a list, never null")
	return out.Messages
}

// pullN pulls until n messages arrived (failing after timeout) and
// returns them.
func (e *e2eServer) pullN(t *testing.T, group, topic string, n int, invisibleMs int64, timeout time.Duration) []api.Message {
	t.Helper()
	var got []api.Message
	deadline := time.Now().Add(timeout)
	for len(got) < n {
		left := time.Until(deadline)
		require.Positive(t, left, "only %d of %d messages arrived within %s", len(got), n, timeout)
		wait := min(left.Milliseconds(), api.MaxWaitMs)
		got = append(got, e.pull(t, group, topic, api.PullRequest{MaxMessages: min(n-len(got), api.MaxPullMessages), WaitMs: wait, InvisibleMs: invisibleMs})...)
	}
	require.Len(t, got, n, "more messages than expected")
	return got
}

// receipts posts receipts to ack, or items to nack or leases, and returns
// the per-receipt results.
func (e *e2eServer) receipts(t *testing.T, group, op string, body any) []api.ReceiptResult {
	t.Helper()
	var out api.ReceiptResponse
	decode(t, e.json(t, http.MethodPost, "/v1/groups/"+group+"/"+op, body), http.StatusOK, &out)
	return out.Results
}

// ack acknowledges receipts and returns the statuses in order.
func (e *e2eServer) ack(t *testing.T, group string, receipts ...string) []string {
	t.Helper()
	res := e.receipts(t, group, "ack", api.AckRequest{Receipts: receipts})
	require.Len(t, res, len(receipts))
	out := make([]string, len(res))
	for i, r := range res {
		require.Equal(t, receipts[i], r.Receipt)
		out[i] = r.Status
	}
	return out
}

// nack sends one receipt back and requires status ok.
func (e *e2eServer) nack(t *testing.T, group, receipt string, level int, reason string) {
	t.Helper()
	res := e.receipts(t, group, "nack", api.NackRequest{Items: []api.NackItem{{Receipt: receipt, DelayLevel: level, Reason: reason}}})
	require.Len(t, res, 1)
	require.Equal(t, "ok", res[0].Status, "nack: %+v", res[0])
}

// metricValue returns the value of the sample of /metrics whose line
// starts with series ("name" or "name{labels}"), and whether it exists.
func (e *e2eServer) metricValue(t *testing.T, series string) (float64, bool) {
	t.Helper()
	r := e.get(t, "/metrics")
	require.Equal(t, http.StatusOK, r.Status)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			require.NoError(t, err, line)
			return v, true
		}
	}
	return 0, false
}

// waitInFlight waits until the server is serving at least n requests
// besides the /metrics request asking (long polls parked in the broker).
func (e *e2eServer) waitInFlight(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() (bool, string) {
		v, _ := e.metricValue(t, "mqgate_http_requests_in_flight")
		return int(v)-1 >= n, fmt.Sprintf("%v requests in flight, want %d + 1", v, n)
	})
}

// eventually polls cond every 10 ms until it holds, failing with its last
// explanation after timeout. It polls a condition; it never sleeps in
// place of one.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %s", timeout, why)
		}
		<-tick.C
	}
}

// waitGoroutines waits until the process runs at most baseline goroutines
// and fails with a dump of them after timeout. It returns how long it took.
func waitGoroutines(t *testing.T, baseline int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		n := runtime.NumGoroutine()
		if n <= baseline {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			var dump bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
			t.Fatalf("%d goroutines after %s, baseline %d:\n%s", n, timeout, baseline, dump.String())
		}
		<-tick.C
	}
}

// settledGoroutines closes the idle connections of clients and returns the
// goroutine count once it has stopped changing (the baseline of a leak
// check).
func settledGoroutines(t *testing.T, clients ...*http.Client) int {
	t.Helper()
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	last, stable := runtime.NumGoroutine(), 0
	eventually(t, 5*time.Second, func() (bool, string) {
		n := runtime.NumGoroutine()
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
		return stable >= 10, fmt.Sprintf("goroutine count still changing (%d)", n)
	})
	return last
}

// percentile returns the q-quantile (0..1) of ds (nearest rank).
func percentile(ds []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// levelDelay is the configured delay of level (1-based).
func levelDelay(t *testing.T, cfg server.Config, level int) time.Duration {
	t.Helper()
	require.True(t, level >= 1 && level <= len(cfg.DelayLevels), "level %d", level)
	return cfg.DelayLevels[level-1]
}
