package clustercheck_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/internal/clustercheck"
	"github.com/mqgate/mqgate/internal/testnet"
)

// TestKill9UnderLoad runs the workload against the real binary (built
// from ./cmd/mqgate, --flush sync) while the test kills it with SIGKILL
// and restarts it on the same data directory and port, then checks the
// history: nothing sent ok is lost, nothing acked ok comes back, every
// position holds one message. LONG=1 runs longer with more kills.
func TestKill9UnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and spawns the server")
	}
	runFor, kills := 4*time.Second, 1
	if os.Getenv("LONG") != "" {
		runFor, kills = 40*time.Second, 10
	}
	bin := buildServer(t)
	dir, addr := t.TempDir(), freeAddr(t)
	srv, err := startServer(t, bin, dir, addr)
	require.NoError(t, err)

	h := clustercheck.NewHistory()
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	start := time.Now()
	var (
		wg         sync.WaitGroup
		restartErr error
	)
	wg.Go(func() {
		for i := range kills {
			// The kills are spread evenly over the run: the sleep is the load
			// running between them.
			time.Sleep(time.Until(start.Add(time.Duration(i+1) * runFor / time.Duration(kills+1))))
			srv.kill9()
			// Recorded once the process is gone: a send invoked between
			// the signal and the death could still be ok.
			h.Fault("kill -9", time.Now())
			if srv, restartErr = startServer(t, bin, dir, addr); restartErr != nil {
				cancel()
				return
			}
		}
	})
	hist, err := clustercheck.Run(ctx, clustercheck.Config{
		URLs:      []string{"http://" + addr},
		Topic:     "clustercheck",
		Groups:    []string{"g1", "g2"},
		Producers: 4,
		Consumers: 2,
		Rate:      400,
		History:   h,
		Logf:      t.Logf,
	})
	wg.Wait()
	require.NoError(t, restartErr)
	require.NoError(t, err)
	r := clustercheck.Check(hist)
	t.Log("\n" + r.String())
	require.True(t, r.OK(), "the history shows an anomaly; server log tail:\n%s", srv.logTail(30))
	// The checker checked something.
	require.Greater(t, r.SendsOK, int(runFor.Seconds())*100)
	require.Len(t, r.Groups, 2)
	for _, g := range r.Groups {
		require.GreaterOrEqual(t, g.Delivered, r.SendsOK)
	}
	require.Len(t, r.Unavailability, kills)
	for _, u := range r.Unavailability {
		require.True(t, u.Recovered, "no ok send after %s", u.Fault.Name)
	}
	require.Positive(t, r.Duplicates.Nack, "the workload nacks")
}

// buildServer builds ./cmd/mqgate into a temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mqgate")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/mqgate/mqgate/cmd/mqgate")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// freeAddr is a loopback address for a server started later
// (testnet.FreeAddr: a port no outgoing connection takes meanwhile).
func freeAddr(t *testing.T) string { return testnet.FreeAddr(t) }

// server is one run of the binary.
type server struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
}

// lockedBuffer is the server's output, written by exec's copier and read
// by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServer runs `mqgate serve` on dir and addr and waits until
// /readyz answers 200. It may run on any goroutine (it does not fail the
// test itself).
func startServer(t *testing.T, bin, dir, addr string) (*server, error) {
	s := &server{done: make(chan struct{}), log: &lockedBuffer{}}
	s.cmd = exec.Command(bin, "serve", "--listen", addr, "--data-dir", dir, "--flush", "sync", "--segment-size", "64MiB",
		"--log-format", "json", "--log-level", "warn", "--shutdown-delay", "0s")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := client.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("server exited before it was ready:\n%s", s.log.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("server not ready after 30 s:\n%s", s.log.String())
}

func (s *server) kill9() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// logTail is the last n lines of the server's output.
func (s *server) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(s.log.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
