package main

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// noRaceExitSleep is the GORACE of the servers the tests start: the race
// detector's runtime sleeps a second (atexit_sleep_ms=1000) before a
// process exits, after mqgate has shut down, so that a -race server
// otherwise takes over a second to exit after SIGTERM. A race found before
// the exit still fails the process (exit code 66). Other GORACE options
// are kept. Without -race the variable is ignored.
func noRaceExitSleep() string {
	v := "atexit_sleep_ms=0"
	if old := os.Getenv("GORACE"); old != "" {
		v = old + " " + v
	}
	return "GORACE=" + v
}

// TestSIGTERMExitsPromptly: the real binary exits soon after SIGTERM (a
// graceful shutdown of an idle server takes tens of milliseconds; the
// bound is generous for a loaded machine and a -race build). Nothing may
// run after the "shut down" log line: no worker, timer or mirror keeps the
// process alive.
func TestSIGTERMExitsPromptly(t *testing.T) {
	p := startServer(t, t.TempDir(), freeAddr(t))
	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, p.log.String())
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
	took := time.Since(start)
	t.Logf("exit %v after SIGTERM", took)
	require.Less(t, took, time.Second, "exit after SIGTERM\n%s", p.log.String())
}
