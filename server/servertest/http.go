package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
)

// ProblemType prefixes every problem code in the `type` member.
const ProblemType = "urn:mqgate:problem:"

// Resp is a whole HTTP response.
type Resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// String shows the response in failure messages.
func (r Resp) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// Do performs one request. contentType "" sends none. Every 4xx/5xx
// answer is checked to be an RFC 9457 problem whose status equals the
// HTTP status and which has a code (the API's rule for every error, here
// over real HTTP).
func (e *Server) Do(t testing.TB, method, path, contentType string, body []byte, header http.Header) Resp {
	t.Helper()
	return e.DoCtx(t, context.Background(), method, path, contentType, body, header)
}

// DoCtx is Do with a request context.
func (e *Server) DoCtx(t testing.TB, ctx context.Context, method, path, contentType string, body []byte, header http.Header) Resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	return e.DoReader(t, ctx, method, path, contentType, rd, header)
}

// DoReader is DoCtx with a body reader; a reader other than
// *bytes.Reader, *bytes.Buffer or *strings.Reader is sent chunked
// (unknown length).
func (e *Server) DoReader(t testing.TB, ctx context.Context, method, path, contentType string, rd io.Reader, header http.Header) Resp {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.Base+path, rd)
	require.NoError(t, err)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := e.Client.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if r.Status >= 400 {
		CheckProblem(t, method+" "+path, r)
	}
	return r
}

// CheckProblem asserts that r is a well-formed problem response.
func CheckProblem(t testing.TB, what string, r Resp) api.Problem {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), "%s: %s", what, r)
	var p api.Problem
	require.NoError(t, json.Unmarshal(r.Body, &p), "%s: %s", what, r)
	require.Equal(t, r.Status, p.Status, "%s: problem status", what)
	require.NotEmpty(t, p.Code, "%s: problem code", what)
	require.Equal(t, ProblemType+p.Code, p.Type, "%s: problem type", what)
	require.NotEmpty(t, p.Title, "%s: problem title", what)
	require.NoError(t, CheckDetail(p.Detail), "%s: %s", what, r)
	return p
}

// layerLike is a detail that starts like an error of a Go package
// ("broker: …", "json: …").
var layerLike = regexp.MustCompile(`^[a-z]+: `)

// internalWords are what a detail never contains: a package of the
// server as a prefix, or Go's own words for values and failures.
var internalWords = []string{"broker:", "api:", "auth:", "storage:", "commitlog:", "push:", "consumequeue:",
	"timerindex:", "pgmirror:", "json:", "strconv.", "Go struct", "Go value", "%!", "<nil>", "0xc", "goroutine", "runtime error"}

// CheckDetail returns an error when a problem's detail does not speak to
// the caller about the request: when it starts like a Go package's error
// (^[a-z]+: ) or names a layer of the server or a Go-internal thing.
// CheckProblem and the spec check of every response (spec.go) apply it.
func CheckDetail(detail string) error {
	if layerLike.MatchString(detail) {
		return fmt.Errorf("problem detail %q starts like a Go package's error", detail)
	}
	for _, w := range internalWords {
		if strings.Contains(detail, w) {
			return fmt.Errorf("problem detail %q names %q, a layer of the server or of Go", detail, w)
		}
	}
	return nil
}

// JSON performs a request with a JSON body (in marshalled; a string or
// []byte is sent as is; nil sends no body).
func (e *Server) JSON(t testing.TB, method, path string, in any) Resp {
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
	return e.Do(t, method, path, ct, body, nil)
}

// Get performs a GET.
func (e *Server) Get(t testing.TB, path string) Resp {
	t.Helper()
	return e.Do(t, http.MethodGet, path, "", nil, nil)
}

// Decode asserts r's status and decodes its JSON body into out (may be
// nil).
func Decode(t testing.TB, r Resp, status int, out any) {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r)
	if out != nil {
		require.NoError(t, json.Unmarshal(r.Body, out), "%s", r)
	}
}

// WantProblem asserts that r is a problem with the given status and code
// and returns it.
func WantProblem(t testing.TB, r Resp, status int, code string) api.Problem {
	t.Helper()
	require.Equal(t, status, r.Status, "%s", r)
	p := CheckProblem(t, "response", r)
	require.Equal(t, code, p.Code, "%s", r)
	return p
}

// Send sends one UTF-8 message and returns its result.
func (e *Server) Send(t testing.TB, topic string, msg api.SendMessage) api.SendResult {
	t.Helper()
	var out api.SendResponse
	Decode(t, e.JSON(t, http.MethodPost, "/v1/topics/"+topic+"/messages", msg), http.StatusOK, &out)
	require.Len(t, out.Results, 1)
	return out.Results[0]
}

// Message looks a message up by id (a fresh value each time: decoding
// into a used one would merge its properties map).
func (e *Server) Message(t testing.TB, id string) api.Message {
	t.Helper()
	var m api.Message
	Decode(t, e.Get(t, "/v1/messages/"+id), http.StatusOK, &m)
	return m
}

// ByKey looks messages of topic up by key. It first reads queue 0 of the
// topic, which waits for the dispatcher (read-your-writes), because the
// key lookup itself does not (TestE2EKeyLookupReadYourWrites in server).
func (e *Server) ByKey(t testing.TB, topic, key string) []api.Message {
	t.Helper()
	require.Equal(t, http.StatusOK, e.Get(t, "/v1/topics/"+topic+"/queues/0/messages?max=1").Status)
	var found api.MessageList
	Decode(t, e.Get(t, "/v1/messages?topic="+topic+"&key="+key), http.StatusOK, &found)
	require.NotNil(t, found.Messages, "messages is a list, never null")
	return found.Messages
}

// Pull pulls once and returns the messages.
func (e *Server) Pull(t testing.TB, group, topic string, req api.PullRequest) []api.PulledMessage {
	t.Helper()
	var out api.PullResponse
	Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/"+group+"/topics/"+topic+"/pull", req), http.StatusOK, &out)
	require.NotNil(t, out.Messages, "messages is a list, never null")
	return out.Messages
}

// PullN pulls until n messages arrived (failing after timeout) and
// returns them.
func (e *Server) PullN(t testing.TB, group, topic string, n int, invisibleMs int64, timeout time.Duration) []api.PulledMessage {
	t.Helper()
	var got []api.PulledMessage
	deadline := time.Now().Add(timeout)
	for len(got) < n {
		left := time.Until(deadline)
		require.Positive(t, left, "only %d of %d messages arrived within %s", len(got), n, timeout)
		wait := min(left.Milliseconds(), api.MaxWaitMs)
		got = append(got, e.Pull(t, group, topic, api.PullRequest{MaxMessages: min(n-len(got), api.MaxPullMessages), WaitMs: wait, InvisibleMs: invisibleMs})...)
	}
	require.Len(t, got, n, "more messages than expected")
	return got
}

// Receipts posts receipts to ack, or items to nack or leases, and
// returns the per-receipt results.
func (e *Server) Receipts(t testing.TB, group, op string, body any) []api.ReceiptResult {
	t.Helper()
	var out api.ReceiptResponse
	Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/"+group+"/"+op, body), http.StatusOK, &out)
	return out.Results
}

// Ack acknowledges receipts and returns the statuses in order.
func (e *Server) Ack(t testing.TB, group string, receipts ...string) []string {
	t.Helper()
	res := e.Receipts(t, group, "ack", api.AckRequest{Receipts: receipts})
	require.Len(t, res, len(receipts))
	out := make([]string, len(res))
	for i, r := range res {
		require.Equal(t, receipts[i], r.Receipt)
		out[i] = r.Status
	}
	return out
}

// Nack sends one receipt back and requires status ok.
func (e *Server) Nack(t testing.TB, group, receipt string, level int, reason string) {
	t.Helper()
	res := e.Receipts(t, group, "nack", api.NackRequest{Items: []api.NackItem{{Receipt: receipt, DelayLevel: level, Reason: reason}}})
	require.Len(t, res, 1)
	require.Equal(t, "ok", res[0].Status, "nack: %+v", res[0])
}

// MetricValue returns the value of the sample of /metrics whose line
// starts with series ("name" or "name{labels}"), and whether it exists.
func (e *Server) MetricValue(t testing.TB, series string) (float64, bool) {
	t.Helper()
	r := e.Get(t, "/metrics")
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

// WaitInFlight waits until the server is serving at least n requests
// besides the /metrics request asking (long polls parked in the broker).
func (e *Server) WaitInFlight(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() (bool, string) {
		v, _ := e.MetricValue(t, "mqgate_http_requests_in_flight")
		return int(v)-1 >= n, fmt.Sprintf("%v requests in flight, want %d + 1", v, n)
	})
}
