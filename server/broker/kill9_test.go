package broker_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// killRounds is the parent side of a kill -9 test: rounds times it runs
// child (a test of this binary, by name) with dirEnv=dir and roundEnv=the
// round (from 1), waits for its "ready" line, and SIGKILLs it at a random
// moment within [minDelay, minDelay+1.2 s). Every whole line the child
// printed before the kill is passed to step as its fields; a partial last
// line acknowledges nothing. Rounds share dir, so each child also
// recovers from the previous kill.
func killRounds(t *testing.T, child, dirEnv, roundEnv, dir string, rounds int, minDelay time.Duration, step func(line string, f []string)) {
	t.Helper()
	for round := 1; round <= rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), dirEnv+"="+dir, roundEnv+"="+strconv.Itoa(round))
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := bufio.NewReader(stdout)
		first, err := lines.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ready\n", first, "the child failed to open the broker")
		delay := minDelay + time.Duration(rand.IntN(1200))*time.Millisecond
		killer := time.AfterFunc(delay, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		steps := 0
		for {
			line, err := lines.ReadString('\n')
			if err == io.EOF {
				break // a partial last line acknowledges nothing
			}
			require.NoError(t, err)
			steps++
			step(line, strings.Fields(line))
		}
		killer.Stop()
		_ = cmd.Wait()
		t.Logf("round %d: killed after %v, %d steps", round, delay, steps)
	}
}

// snapshotRaceOptions are the options of a crash child whose progress and
// lease snapshots race the kill (every 30 ms).
func snapshotRaceOptions(dir string) broker.Options {
	o := brokertest.Options(dir)
	o.SnapshotInterval = 30 * time.Millisecond
	return o
}

// childSay is a crash child's printer: one whole line per call, from any
// goroutine (the parent reads the child's output line by line).
func childSay() func(format string, args ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
}
