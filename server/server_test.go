package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

// The tests of this file and conn_test.go build servers from the
// package's internals (a fake broker, the listener's limits), so they
// stay in package server, which cannot import servertest (it imports
// server); everything that needs only the exported API is in package
// server_test and uses servertest.

// testConfig is a small configuration listening on a free loopback port.
func testConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		Listen:           "127.0.0.1:0",
		DataDir:          t.TempDir(),
		SegmentSize:      8 << 20,
		MaxMessageSize:   64 << 10,
		MaxRequestSize:   128 << 10,
		ShutdownTimeout:  5 * time.Second,
		AutoCreate:       true,
		AutoCreateGroups: true,
		LogOutput:        io.Discard,
	}
}

// testBundle is one running server and its base URL.
type testBundle struct {
	server *Server
	url    string
	// served receives Serve's result.
	served chan error
}

// start serves s in the background; cleanup closes it and checks that
// Serve returned cleanly.
func start(t *testing.T, s *Server) *testBundle {
	t.Helper()
	b := &testBundle{server: s, url: "http://" + s.Addr(), served: make(chan error, 1)}
	go func() { b.served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
		require.NoError(t, <-b.served)
	})
	return b
}

// mustOpenFake opens a server over a fake broker.
func mustOpenFake(t *testing.T, cfg Config, fake *fakeBackend) *testBundle {
	t.Helper()
	cfg = cfg.withDefaults()
	require.NoError(t, cfg.Validate())
	s, err := newServer(cfg, zerolog.New(io.Discard), fake)
	require.NoError(t, err)
	return start(t, s)
}

// get performs a GET and returns status, content type and body.
func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

// fakeBackend is a broker whose Pull, Ready, ListTopics and Close are
// scripted; the other methods are not used by these tests.
type fakeBackend struct {
	api.Broker // nil: unused methods panic
	// pull scripts Pull.
	pull func(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error)
	// listTopics scripts ListTopics (default: none).
	listTopics func(ctx context.Context) ([]broker.TopicConfig, error)
	// readyErr holds the error Ready returns (none when unset).
	readyErr atomic.Value
	// closed counts Close calls.
	closed atomic.Int32
}

// Degraded reports nothing wrong.
func (f *fakeBackend) Degraded() []string { return nil }

func (f *fakeBackend) Pull(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error) {
	return f.pull(ctx, req)
}

func (f *fakeBackend) ListTopics(ctx context.Context) ([]broker.TopicConfig, error) {
	if f.listTopics != nil {
		return f.listTopics(ctx)
	}
	return nil, nil
}

func (f *fakeBackend) Ready() error {
	if err, ok := f.readyErr.Load().(error); ok {
		return err
	}
	return nil
}

func (f *fakeBackend) Close(context.Context) error {
	f.closed.Add(1)
	return nil
}

func TestServerPprofWhenEnabled(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Pprof = true
	b := mustOpenFake(t, cfg, &fakeBackend{})
	status, _, body := get(t, b.url+"/debug/pprof/")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "goroutine")
}

// TestServerShutdown (in process): Close turns readiness to 503,
// answers new API requests 503 shutting-down with Retry-After, ends
// waiting long polls with an empty 200, then closes the listener and the
// broker exactly once.
func TestServerShutdown(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	// The drain delay is the window in which the assertions below run; the
	// listener closes when it ends.
	cfg.ShutdownDelay = 5 * time.Second
	waiting := make(chan struct{})
	fake := &fakeBackend{pull: func(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error) {
		close(waiting)
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	b := mustOpenFake(t, cfg, fake)
	status, _, _ := get(t, b.url+"/readyz")
	require.Equal(t, http.StatusOK, status)

	polled := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(b.url+"/v1/groups/g/topics/t/pull", "application/json", strings.NewReader(`{"waitMs":30000}`))
		if err != nil {
			t.Error(err)
			close(polled)
			return
		}
		polled <- resp
	}()
	<-waiting

	closed := make(chan error, 1)
	go func() { closed <- b.server.Close(context.Background()) }()

	// The waiting poll is answered at once, empty.
	resp := <-polled
	require.NotNil(t, resp)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"messages":[]}`, string(body))

	// Draining (the poll ended after the state flip): not ready, API 503.
	status, contentType, body2 := get(t, b.url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "application/problem+json", contentType)
	require.Contains(t, body2, `"code":"not-ready"`)
	resp, err = http.Get(b.url + "/v1/topics")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, "5", resp.Header.Get("Retry-After"))
	require.Contains(t, string(body), `"code":"shutting-down"`)
	status, _, _ = get(t, b.url+"/livez")
	require.Equal(t, http.StatusOK, status, "liveness holds while draining")
	require.Zero(t, fake.closed.Load(), "the broker stays open while draining")

	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return")
	}
	require.Equal(t, int32(1), fake.closed.Load())
	_, err = http.Get(b.url + "/livez")
	require.Error(t, err, "the listener is closed")
	require.NoError(t, b.server.Close(context.Background()), "Close is idempotent")
	require.Equal(t, int32(1), fake.closed.Load())
}

func TestServerReadiness(t *testing.T) {
	t.Parallel()
	fake := &fakeBackend{}
	b := mustOpenFake(t, testConfig(t), fake)
	status, _, _ := get(t, b.url+"/readyz")
	require.Equal(t, http.StatusOK, status)

	fake.readyErr.Store(fmt.Errorf("%w: fsync failed", broker.ErrReadOnly))
	status, contentType, body := get(t, b.url+"/readyz")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "application/problem+json", contentType)
	require.Contains(t, body, `"code":"not-ready"`)
	require.Contains(t, body, "read-only")
	status, _, _ = get(t, b.url+"/livez")
	require.Equal(t, http.StatusOK, status, "liveness does not depend on the broker")
}

// TestServerHeaderLimit: a header block over MaxHeaderBytes gets 431.
func TestServerHeaderLimit(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxHeaderBytes = 8 << 10
	b := mustOpenFake(t, cfg, &fakeBackend{})
	req, err := http.NewRequest(http.MethodGet, b.url+"/livez", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("x", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}

// TestServerCloseDeadline: a request that outlives Close's context is cut
// off, Close reports it, and the broker is closed all the same.
func TestServerCloseDeadline(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	fake := &fakeBackend{listTopics: func(context.Context) ([]broker.TopicConfig, error) {
		close(entered)
		<-release // a stuck broker call that ignores its context
		return nil, nil
	}}
	cfg := testConfig(t).withDefaults()
	s, err := newServer(cfg, zerolog.New(io.Discard), fake)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()

	requestErr := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr() + "/v1/topics")
		if err == nil {
			resp.Body.Close()
		}
		requestErr <- err
	}()
	<-entered

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = s.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, int32(1), fake.closed.Load(), "the broker is closed after the deadline too")
	require.Error(t, <-requestErr, "the stuck request's connection was closed")
	require.NoError(t, <-served)
}

// TestServerLongPollOutlivesWriteTimeout: a pull extends its own write and
// read deadlines, so a long poll longer than WriteTimeout/ReadTimeout
// still delivers, while an ordinary slow response is cut by WriteTimeout.
func TestServerLongPollOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReadHeaderTimeout = 200 * time.Millisecond
	cfg.ReadTimeout = 300 * time.Millisecond
	cfg.WriteTimeout = 300 * time.Millisecond
	fake := &fakeBackend{pull: func(ctx context.Context, req broker.PullRequest) ([]broker.ReceivedMessage, error) {
		// The fake broker answers after 1 s either way: at the end of the
		// wait for a long poll, and (misbehaving) for a short poll too.
		timer := time.NewTimer(time.Second)
		defer timer.Stop()
		select {
		case <-timer.C:
			return []broker.ReceivedMessage{{MessageID: "7F00000100001F900000000000000000", Receipt: "r", Topic: "t", Body: []byte("late")}}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	b := mustOpenFake(t, cfg, fake)

	t.Run("OKLongPoll", func(t *testing.T) {
		resp, err := http.Post(b.url+"/v1/groups/g/topics/t/pull", "application/json", strings.NewReader(`{"waitMs":1000}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var pulled api.PullResponse
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&pulled))
		require.Len(t, pulled.Messages, 1)
		require.Equal(t, "late", pulled.Messages[0].Body)
	})
	t.Run("ShortPollIsCutByWriteTimeout", func(t *testing.T) {
		resp, err := http.Post(b.url+"/v1/groups/g/topics/t/pull", "application/json", strings.NewReader(`{"waitMs":0}`))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		require.Error(t, err, "without the extension the 1 s answer misses the 300 ms write deadline")
	})
}

// TestServerSlowloris (small): a client that sends its headers too
// slowly is disconnected after ReadHeaderTimeout while others are served.
func TestServerSlowloris(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ReadHeaderTimeout = 300 * time.Millisecond
	b := mustOpenFake(t, cfg, &fakeBackend{})

	conn, err := net.Dial("tcp", b.server.Addr())
	require.NoError(t, err)
	defer conn.Close()
	start := time.Now()
	_, err = conn.Write([]byte("GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: "))
	require.NoError(t, err)

	status, _, _ := get(t, b.url+"/livez")
	require.Equal(t, http.StatusOK, status, "others are served meanwhile")

	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := conn.Read(make([]byte, 512))
	elapsed := time.Since(start)
	require.Zero(t, n, "no response to an incomplete header block")
	require.True(t, errors.Is(err, io.EOF) || isConnReset(err), "connection closed by the server, got %v", err)
	require.GreaterOrEqual(t, elapsed, 250*time.Millisecond)
	require.Less(t, elapsed, 5*time.Second)
}

// isConnReset reports a reset connection.
func isConnReset(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && strings.Contains(opErr.Err.Error(), "reset")
}

func TestHealthCheck(t *testing.T) {
	t.Parallel()

	t.Run("OKUnspecifiedHostMeansLoopback", func(t *testing.T) {
		t.Parallel()
		b := mustOpenFake(t, testConfig(t), &fakeBackend{})
		_, port, err := net.SplitHostPort(b.server.Addr())
		require.NoError(t, err)
		require.NoError(t, HealthCheck(context.Background(), ":"+port))
		require.NoError(t, HealthCheck(context.Background(), "0.0.0.0:"+port))
	})
	t.Run("ErrUnhealthy", func(t *testing.T) {
		t.Parallel()
		sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			require.Equal(t, "/livez", r.URL.Path)
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer sick.Close()
		require.ErrorIs(t, HealthCheck(context.Background(), sick.Listener.Addr().String()), ErrUnhealthy)
	})
	t.Run("ErrNoServer", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		require.Error(t, HealthCheck(context.Background(), addr))
	})
	t.Run("ErrBadAddress", func(t *testing.T) {
		t.Parallel()
		require.Error(t, HealthCheck(context.Background(), "no-port"))
	})
}

func TestRun(t *testing.T) {
	t.Parallel()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	started := make(chan *Server, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, testConfig(t), func(s *Server) { started <- s }) }()
	s := <-started
	require.NoError(t, HealthCheck(context.Background(), s.Addr()))
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	require.Error(t, HealthCheck(context.Background(), s.Addr()))
}

func TestOpenRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Flush = "sometimes"
	_, err := Open(context.Background(), cfg)
	require.ErrorIs(t, err, ErrInvalidConfig)
}
