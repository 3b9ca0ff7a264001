package server_test

// End-to-end tests of the transport: a 413 reaches clients that write
// their whole request before reading (lingering close, server/conn.go),
// the errors net/http answers itself are problem responses too
// (server/problems.go), and message ids carry the node's store host
// (server/advertise.go).

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
	"github.com/mqgate/mqgate/storage/message"
)

// pythonUpload POSTs a body of size bytes with Python's urllib, which
// writes the whole request before it reads the answer. mode "chunked"
// sends the body with Transfer-Encoding: chunked. The script prints
// "<status> <problem code>" or "error <exception>".
const pythonUpload = `
import json, sys, urllib.error, urllib.request
url, size, mode, ctype = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
chunk = b"x" * 65536
if mode == "chunked":
    def body():
        for _ in range(size // len(chunk)):
            yield chunk
    data = body()
else:
    data = b"x" * size
req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": ctype})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        print(r.status, "-")
except urllib.error.HTTPError as e:
    problem = json.loads(e.read())
    print(e.code, problem["code"], e.headers.get("Content-Type"))
except Exception as e:
    print("error", type(e).__name__, e)
`

// runPython runs pythonUpload and returns its output line and duration.
func runPython(t *testing.T, url string, size int, mode, contentType string) (string, time.Duration) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	start := time.Now()
	out, err := exec.Command(python, "-c", pythonUpload, url, strconv.Itoa(size), mode, contentType).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out)), time.Since(start)
}

// TestE2ETooLargeReachesClientsThatWriteFirst: a body over the send
// route's limit gets its 413 problem even when the client writes the whole
// body before it reads the answer — Python's urllib with a declared
// length and chunked, and a raw Go connection — because the server reads
// and discards the rest before it closes. A body beyond the lingering
// byte limit (64 MiB) has its connection closed promptly instead.
func TestE2ETooLargeReachesClientsThatWriteFirst(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) {
		c.MaxMessageSize = 1 << 20
		c.MaxRequestSize = 2 << 20
	})
	send := e.Base + "/v1/topics/uploads/messages"
	const want = "413 body-too-large application/problem+json"

	for _, tc := range []struct {
		name, mode, contentType string
	}{
		{"RawLength", "length", "application/octet-stream"},
		{"RawChunked", "chunked", "application/octet-stream"},
		{"JSONLength", "length", "application/json"},
		{"JSONChunked", "chunked", "application/json"},
	} {
		t.Run("Python/"+tc.name, func(t *testing.T) {
			out, took := runPython(t, send, 5<<20, tc.mode, tc.contentType)
			require.Equal(t, want, out)
			t.Logf("python urllib, 5 MiB %s %s: %q in %s", tc.mode, tc.contentType, out, took)
		})
	}

	t.Run("GoWritesAllThenReads", func(t *testing.T) {
		for _, chunked := range []bool{false, true} {
			conn, err := net.Dial("tcp", e.Srv.Addr())
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
			body := bytes.Repeat([]byte("y"), 5<<20)
			head := fmt.Sprintf("POST /v1/topics/uploads/messages HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", len(body))
			if chunked {
				head = "POST /v1/topics/uploads/messages HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
				var framed bytes.Buffer
				for i := 0; i < len(body); i += 64 << 10 {
					fmt.Fprintf(&framed, "%x\r\n%s\r\n", 64<<10, body[i:i+64<<10])
				}
				framed.WriteString("0\r\n\r\n")
				body = framed.Bytes()
			}
			_, err = conn.Write(append([]byte(head), body...))
			require.NoError(t, err, "the whole request is written (chunked %v)", chunked)
			r := readRawResponse(t, conn, http.MethodPost)
			servertest.WantProblem(t, r, http.StatusRequestEntityTooLarge, "body-too-large")
			require.Equal(t, "close", r.Header.Get("Connection"))
		}
	})

	t.Run("PastTheLingerLimit", func(t *testing.T) {
		out, took := runPython(t, send, 100<<20, "length", "application/octet-stream")
		t.Logf("python urllib, 100 MiB: %q in %s", out, took)
		// Either the client read the answer before the cut or it saw the
		// connection close; it never hangs.
		require.True(t, out == want || strings.HasPrefix(out, "error "), out)
		require.Less(t, took, 20*time.Second)
	})

	// The server is fine afterwards.
	e.Send(t, "uploads", api.SendMessage{Body: "after"})
}

// TestE2EErrorBeforeBodyIsReadReachesClient: an error answered before the
// body is read (an invalid topic name here) reaches a client that writes
// its whole 5 MiB body first, like a 413 does.
func TestE2EErrorBeforeBodyIsReadReachesClient(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	out, _ := runPython(t, e.Base+"/v1/topics/bad.name/messages", 5<<20, "length", "application/octet-stream")
	require.Equal(t, "400 invalid-name application/problem+json", out)
}

// readRawResponse reads one response from conn.
func readRawResponse(t *testing.T, conn net.Conn, method string) servertest.Resp {
	t.Helper()
	return readResponse(t, bufio.NewReader(conn), method)
}

// readResponse reads one response from br.
func readResponse(t *testing.T, br *bufio.Reader, method string) servertest.Resp {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.Close {
		// ReadResponse turns "Connection: close" into resp.Close.
		resp.Header.Set("Connection", "close")
	}
	return servertest.Resp{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// TestE2ENetHTTPErrorsAreProblems: the requests net/http refuses before
// any handler runs get problem+json bodies with the same status, over real
// TCP, on fresh and on kept-alive connections.
func TestE2ENetHTTPErrorsAreProblems(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	for _, tc := range []struct {
		name    string
		request string
		status  int
		code    string
		detail  string
	}{
		{"HeaderTooLarge", "GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("h", 100<<10) + "\r\n\r\n",
			http.StatusRequestHeaderFieldsTooLarge, "header-too-large", "64KiB"},
		{"BadPercentEscape", "GET /v1/topics/%zz/messages HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusBadRequest, "malformed-request", ""},
		{"BadRequestLine", "THIS IS NOT HTTP\r\n\r\n", http.StatusBadRequest, "malformed-request", ""},
		{"HTTP09", "GET /\r\n\r\n", http.StatusBadRequest, "malformed-request", ""},
		{"NoHost", "GET /livez HTTP/1.1\r\n\r\n", http.StatusBadRequest, "malformed-request", "missing required Host header"},
		{"MalformedHost", "GET /livez HTTP/1.1\r\nHost: a b\r\n\r\n", http.StatusBadRequest, "malformed-request", "malformed Host header"},
		{"BadHeaderLine", "GET /livez HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", http.StatusBadRequest, "malformed-request", ""},
		{"UnknownTransferEncoding", "POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
			http.StatusNotImplemented, "not-implemented", "transfer encoding"},
		{"HTTP2Version", "GET /livez HTTP/2.0\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported, "http-version-not-supported", ""},
		{"UnknownExpectation", "POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nExpect: tea\r\nContent-Length: 1\r\n\r\nx",
			http.StatusExpectationFailed, "expectation-failed", "100-continue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", e.Srv.Addr())
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
			_, err = io.WriteString(conn, tc.request)
			require.NoError(t, err, "the whole request is written")
			r := readRawResponse(t, conn, http.MethodGet)
			p := servertest.WantProblem(t, r, tc.status, tc.code)
			require.Contains(t, p.Detail, tc.detail)
			require.Equal(t, "close", r.Header.Get("Connection"))
			require.Equal(t, strconv.Itoa(len(r.Body)), r.Header.Get("Content-Length"))
		})
	}

	t.Run("AfterKeptAliveResponses", func(t *testing.T) {
		conn, err := net.Dial("tcp", e.Srv.Addr())
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		br := bufio.NewReader(conn)
		// Good requests first, among them a handler's own 404 problem
		// (which must pass unchanged) and a plain-text 200.
		for _, path := range []string{"/livez", "/v1/topics/nope", "/livez"} {
			_, err = fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
			require.NoError(t, err)
			r := readResponse(t, br, http.MethodGet)
			if path == "/livez" {
				require.Equal(t, http.StatusOK, r.Status, "%s", r)
				require.Equal(t, "ok\n", string(r.Body))
				continue
			}
			p := servertest.WantProblem(t, r, http.StatusNotFound, "topic-not-found")
			require.Equal(t, "/v1/topics/nope", p.Instance, "the handler's problem is not rewritten")
		}
		_, err = io.WriteString(conn, "GET /v1/topics/%zz/messages HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		servertest.WantProblem(t, readResponse(t, br, http.MethodGet), http.StatusBadRequest, "malformed-request")
		_, err = br.ReadByte()
		require.ErrorIs(t, err, io.EOF, "the server closes after the canned error")
	})

	t.Run("PipelinedAfterGoodRequest", func(t *testing.T) {
		conn, err := net.Dial("tcp", e.Srv.Addr())
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\nGET /%zz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(conn)
		require.Equal(t, http.StatusOK, readResponse(t, br, http.MethodGet).Status)
		servertest.WantProblem(t, readResponse(t, br, http.MethodGet), http.StatusBadRequest, "malformed-request")
	})
}

// TestE2ERootErrorsAreProblems: the root router's 404 and 405 (outside
// /v1) and the console's and API docs' missing files are problems too.
func TestE2ERootErrorsAreProblems(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.WantProblem(t, e.Get(t, "/no/such/path"), http.StatusNotFound, "not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/livez", "text/plain", []byte("x"), nil), http.StatusMethodNotAllowed, "method-not-allowed")
	servertest.WantProblem(t, e.Get(t, "/ui/no-such-file.js"), http.StatusNotFound, "not-found")
	servertest.WantProblem(t, e.Get(t, "/swagger/no-such-file.js"), http.StatusNotFound, "not-found")
	// Files that exist are served as before.
	r := e.Get(t, "/ui/")
	require.Equal(t, http.StatusOK, r.Status)
	require.Contains(t, r.Header.Get("Content-Type"), "text/html")
	r = e.Get(t, "/openapi.json")
	require.Equal(t, http.StatusOK, r.Status)
	require.True(t, json.Valid(r.Body))
}

// TestE2EMessageIDsNameTheStore: a message id begins with the data
// directory's store id (GET /v1/broker/status storeId), not the server's
// address: two fresh data dirs mint different ids, and a data dir keeps its
// id across a restart on another address and after its storeid file is
// deleted (the log holds the id); ids minted before the restart still find
// their messages.
func TestE2EMessageIDsNameTheStore(t *testing.T) {
	t.Parallel()
	send := func(t *testing.T, e *e2eServer, body string) message.ID {
		t.Helper()
		res := e.Send(t, "ids", api.SendMessage{Body: body})
		id, err := message.ParseID(res.MessageID)
		require.NoError(t, err)
		require.Equal(t, res.MessageID, e.Message(t, res.MessageID).MessageID, "the id finds the message")
		return id
	}
	storeID := func(t *testing.T, e *e2eServer) string {
		t.Helper()
		var st api.BrokerStatus
		servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &st)
		require.Len(t, st.StoreID, 16)
		return st.StoreID
	}
	a := startE2E(t, func(c *server.Config) { c.AdvertiseAddr = "10.1.2.3:7001" })
	b := startE2E(t, func(c *server.Config) { c.AdvertiseAddr = "10.1.2.3:7001" })
	idA, idB := send(t, a, "first"), send(t, b, "first")
	require.NotEqual(t, idA.Host(), idB.Host(), "two data dirs, two store ids, though the addresses are the same")
	require.Equal(t, storeID(t, a), strings.ToUpper(hex.EncodeToString(idA[:8])))

	a.Close(t)
	require.NoError(t, os.Remove(filepath.Join(a.Cfg.DataDir, "storeid")))
	a2 := &e2eServer{a.Reopen(t, func(c *server.Config) { c.AdvertiseAddr = "10.9.9.9:7002" })}
	require.Equal(t, "first", a2.Message(t, idA.String()).Body, "an id minted before the restart")
	again := send(t, a2, "second")
	require.Equal(t, idA.Host(), again.Host(), "the log keeps the store id")
	require.Equal(t, strings.ToUpper(hex.EncodeToString(idA[:8])), storeID(t, a2))
	stored, err := os.ReadFile(filepath.Join(a.Cfg.DataDir, "storeid"))
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(idA[:8])+"\n", string(stored), "the file is written again from the log")
}

// series returns the label sets and values of metric name in /metrics.
func (e *e2eServer) series(t *testing.T, name string) map[string]float64 {
	t.Helper()
	r := e.Get(t, "/metrics")
	require.Equal(t, http.StatusOK, r.Status)
	out := map[string]float64{}
	for _, line := range strings.Split(string(r.Body), "\n") {
		labels, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(labels, "} ")
		require.True(t, ok, line)
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(t, err, line)
		out[labels] = v
	}
	return out
}

// TestE2EMetricLabelsStayBounded: with --metrics-max-label-values 10,
// sends to 50 auto-created topics expose at most 11 topic values (10 and
// _other) whose sum is the number of sends; deleting a topic removes its
// series and keeps the sum; requests to random missing paths add no HTTP
// metric series.
func TestE2EMetricLabelsStayBounded(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) { c.MetricsMaxLabelValues = 10 })
	const topics, perTopic = 50, 3
	for i := range topics {
		for range perTopic {
			e.Send(t, fmt.Sprintf("spam-%02d", i), api.SendMessage{Body: "x"})
		}
	}
	total := func(s map[string]float64) (sum float64) {
		for _, v := range s {
			sum += v
		}
		return sum
	}
	sent := e.series(t, "mqgate_messages_sent_total")
	require.LessOrEqual(t, len(sent), 11, "%v", sent)
	require.Contains(t, sent, `topic="_other"`)
	require.Equal(t, float64(topics*perTopic), total(sent))
	require.Len(t, e.series(t, "mqgate_message_bytes_sent_total"), len(sent))

	var own string
	for labels := range sent {
		if labels != `topic="_other"` {
			own = strings.TrimSuffix(strings.TrimPrefix(labels, `topic="`), `"`)
			break
		}
	}
	require.Equal(t, http.StatusNoContent, e.Do(t, http.MethodDelete, "/v1/topics/"+own, "", nil, nil).Status)
	after := e.series(t, "mqgate_messages_sent_total")
	require.NotContains(t, after, `topic="`+own+`"`, "a deleted topic's series is gone")
	require.Equal(t, float64(topics*perTopic), total(after), "its count moved to _other")

	// HTTP metrics are labelled by route pattern, never by raw path.
	spam := func(n int) {
		for i := range n {
			for _, path := range []string{"/nope-%d", "/v1/nope-%d/x", "/ui/nope-%d.js", "/v1/topics/t/queues/%d/nope"} {
				r := e.Get(t, fmt.Sprintf(path, i))
				require.Equal(t, http.StatusNotFound, r.Status, "%s", r)
			}
		}
	}
	spam(3)
	before := len(e.series(t, "mqgate_http_requests_total"))
	durations := len(e.series(t, "mqgate_http_request_duration_seconds_count"))
	spam(100)
	require.Equal(t, before, len(e.series(t, "mqgate_http_requests_total")))
	require.Equal(t, durations, len(e.series(t, "mqgate_http_request_duration_seconds_count")))
}

// TestE2EAnswersCarryContentLength: a small answer (a send's, whose
// Content-Length net/http computes) and a large one (a pull of a 3 KiB
// message, which sets it) both arrive with a Content-Length equal to the
// body and without chunking, over real TCP on one kept-alive connection.
func TestE2EAnswersCarryContentLength(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	conn, err := net.Dial("tcp", e.Srv.Addr())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	br := bufio.NewReader(conn)
	roundTrip := func(method, path, contentType, body string) servertest.Resp {
		t.Helper()
		_, err := fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
			method, path, contentType, len(body), body)
		require.NoError(t, err)
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Empty(t, resp.TransferEncoding, "not chunked")
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(len(got)), resp.Header.Get("Content-Length"))
		require.Equal(t, int64(len(got)), resp.ContentLength)
		return servertest.Resp{Status: resp.StatusCode, Header: resp.Header, Body: got}
	}
	small := roundTrip(http.MethodPost, "/v1/topics/lengths/messages", "application/octet-stream", "x")
	require.Equal(t, http.StatusOK, small.Status, string(small.Body))
	require.Less(t, len(small.Body), 2048)
	require.NotEmpty(t, small.Header.Get("X-Request-Id"))

	big := roundTrip(http.MethodPost, "/v1/topics/lengths/messages", "application/octet-stream", strings.Repeat("y", 3<<10))
	require.Equal(t, http.StatusOK, big.Status, string(big.Body))
	pulled := roundTrip(http.MethodPost, "/v1/groups/lengths/topics/lengths/pull", "application/json",
		`{"maxMessages":2,"waitMs":2000,"invisibleMs":30000}`)
	require.Equal(t, http.StatusOK, pulled.Status, string(pulled.Body))
	require.Greater(t, len(pulled.Body), 3<<10)
	var got api.PullResponse
	require.NoError(t, json.Unmarshal(pulled.Body, &got))
	require.Len(t, got.Messages, 2)
}
