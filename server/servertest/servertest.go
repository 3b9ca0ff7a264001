// Package servertest is the test harness of the server layer: the real
// server (server.Open with the real broker and a real data dir) serving
// real HTTP on a free loopback port, HTTP helpers speaking the api
// package's wire types whose client validates every API response against
// the OpenAPI spec (spec.go), Eventually, and goroutine-leak checks. Tests
// only: no production package imports it (internal/archtest checks
// that). Tests inside package server cannot import it (it imports
// server); they keep their own fixtures for what needs the package's
// internals.
package servertest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/storage"
)

// DelayLevels are RocketMQ's 18 delay levels compressed to milliseconds
// (level 3, the first retry, is 60 ms; level 18 is 360 ms), in the text
// form of server.DelayLevels.
const DelayLevels = "20ms 40ms 60ms 80ms 100ms 120ms 140ms 160ms 180ms 200ms 220ms 240ms 260ms 280ms 300ms 320ms 340ms 360ms"

// Config is the configuration of a test server on dir: a free loopback
// port, 64 MiB segments, the delay levels of DelayLevels, no logs.
func Config(t testing.TB, dir string) server.Config {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = dir
	cfg.SegmentSize = 64 << 20
	require.NoError(t, cfg.DelayLevels.UnmarshalText([]byte(DelayLevels)))
	cfg.LogOutput = io.Discard
	cfg.LogFormat = "json"
	cfg.LogLevel = "warn"
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

// Server is one running server and an HTTP client of its own.
type Server struct {
	// Cfg is the configuration the server was opened with.
	Cfg server.Config
	// Srv is the server itself.
	Srv *server.Server
	// Base is the URL requests go to: http://host:port, with 127.0.0.1
	// (or ::1) for a server listening on an unspecified address.
	Base string
	// Client is the HTTP client of the helpers. It validates every API
	// response against the OpenAPI spec (spec.go).
	Client *http.Client

	served  chan error
	closed  bool
	checker *specChecker
}

// Start opens a server on a fresh data dir (t.TempDir()) with Config,
// adjusted by opts, and serves it in the background. Cleanup closes it.
func Start(t testing.TB, opts ...func(*server.Config)) *Server {
	t.Helper()
	cfg := Config(t, t.TempDir())
	for _, o := range opts {
		o(&cfg)
	}
	return Open(t, cfg)
}

// Open opens a server with cfg (e.g. again on the data dir of a closed
// one) and serves it in the background. Cleanup closes it.
func Open(t testing.TB, cfg server.Config) *Server {
	t.Helper()
	s, err := server.Open(context.Background(), cfg)
	// The data dir's lock (flock on its LOCK file) outlives a Close by as
	// long as a child process some other test forks at that moment takes
	// to exec: the child shares the descriptor until then. A reopen waits
	// that out instead of failing.
	for deadline := time.Now().Add(5 * time.Second); errors.Is(err, storage.ErrLocked) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		s, err = server.Open(context.Background(), cfg)
	}
	require.NoError(t, err)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	checker := &specChecker{}
	// Registered before the Close below, so it runs after it: every
	// response has arrived.
	t.Cleanup(func() { checker.report(t) })
	e := &Server{
		Cfg:     cfg,
		Srv:     s,
		Base:    "http://" + dialable(s.Addr()),
		Client:  checkedClient(&http.Client{Transport: transport, Timeout: 60 * time.Second}, checker),
		served:  make(chan error, 1),
		checker: checker,
	}
	go func() { e.served <- s.Serve() }()
	t.Cleanup(func() { e.Close(t) })
	return e
}

// dialable turns a listener's unspecified address (0.0.0.0 or [::], as
// ":0" listens) into 127.0.0.1 on the same port.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// Close shuts the server down gracefully (idempotent) and checks that
// Close and Serve returned cleanly.
func (e *Server) Close(t testing.TB) {
	t.Helper()
	if e.closed {
		return
	}
	e.closed = true
	e.Client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, e.Srv.Close(ctx))
	select {
	case err := <-e.served:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Serve did not return after Close")
	}
}

// Reopen closes the server (if it is still open) and opens a new one with
// the same configuration, adjusted by opts, on the same data dir.
func (e *Server) Reopen(t testing.TB, opts ...func(*server.Config)) *Server {
	t.Helper()
	e.Close(t)
	cfg := e.Cfg
	for _, o := range opts {
		o(&cfg)
	}
	return Open(t, cfg)
}

// With returns a copy of e whose helpers send to base (e.g. https://…)
// with (a copy of) client c, whose responses are validated against the
// spec like e's. The copy shares the server: closing it is the original's
// business (Close on a copy does nothing).
func (e *Server) With(base string, c *http.Client) *Server {
	copied := *e
	copied.Base = base
	copied.Client = checkedClient(c, e.checker)
	copied.closed = true
	return &copied
}

// LevelDelay is the configured delay of level (1-based).
func LevelDelay(t testing.TB, cfg server.Config, level int) time.Duration {
	t.Helper()
	require.True(t, level >= 1 && level <= len(cfg.DelayLevels), "level %d", level)
	return cfg.DelayLevels[level-1]
}
