package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// openLingering opens the real server with the given lingering close
// limits and serves it.
func openLingering(t *testing.T, limits lingerLimits) *testBundle {
	t.Helper()
	s, err := Open(context.Background(), testConfig(t))
	require.NoError(t, err)
	s.listener.(*connListener).limits = limits
	return start(t, s)
}

// dribbleAfter413 sends a send request declaring a 10 MiB body (over the
// 128 KiB request limit), reads the 413, then keeps sending a KiB every
// 10 ms until a write fails. It returns how long after the answer the
// server cut the connection.
func dribbleAfter413(t *testing.T, addr string, whileDribbling func()) time.Duration {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = fmt.Fprintf(conn, "POST /v1/topics/t/messages HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s",
		10<<20, strings.Repeat("x", 4<<10))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodPost})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	answered := time.Now()
	if whileDribbling != nil {
		go whileDribbling()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	chunk := []byte(strings.Repeat("x", 1<<10))
	for {
		if _, err := conn.Write(chunk); err != nil {
			return time.Since(answered)
		}
		<-tick.C
	}
}

// TestLingeringCloseTimeLimit: a client that keeps sending after its 413
// is cut off once the lingering close's time limit has passed.
func TestLingeringCloseTimeLimit(t *testing.T) {
	t.Parallel()
	b := openLingering(t, lingerLimits{maxBytes: lingerMaxBytes, time: 300 * time.Millisecond, timeout: time.Second})
	took := dribbleAfter413(t, b.server.Addr(), nil)
	t.Logf("connection cut %s after the answer", took)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.Less(t, took, 10*time.Second)
}

// TestLingeringCloseEndsAtShutdown: Close does not wait for lingering
// closes; they end when the listener closes.
func TestLingeringCloseEndsAtShutdown(t *testing.T) {
	t.Parallel()
	b := openLingering(t, lingerLimits{maxBytes: lingerMaxBytes, time: time.Minute, timeout: time.Minute})
	l := b.server.listener.(*connListener)
	lingering := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.lingering) == 1
	}
	closed := make(chan time.Duration, 1)
	took := dribbleAfter413(t, b.server.Addr(), func() {
		// Wait until the connection lingers (net/http waits 500 ms before
		// it closes a connection with unread input), then shut down.
		poll := time.NewTicker(10 * time.Millisecond)
		defer poll.Stop()
		for deadline := time.Now().Add(10 * time.Second); !lingering(); <-poll.C {
			if time.Now().After(deadline) {
				closed <- -1 // never lingered
				return
			}
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = b.server.Close(ctx)
		closed <- time.Since(start)
	})
	shutdown := <-closed
	t.Logf("Close took %s; connection cut %s after the answer", shutdown, took)
	require.Positive(t, shutdown, "the connection lingered")
	require.Less(t, shutdown, 5*time.Second)
	require.Less(t, took, 15*time.Second)
}
