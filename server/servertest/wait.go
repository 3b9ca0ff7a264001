package servertest

import (
	"bytes"
	"fmt"
	"net/http"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// Eventually polls cond every 10 ms until it holds, failing with its last
// explanation after timeout (brokertest.Eventually: one implementation
// for both layers). It polls a condition; it never sleeps in place of
// one. cond runs on the test's goroutine, so it may use require.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	brokertest.Eventually(t, timeout, cond)
}

// WaitGoroutines waits until the process runs at most baseline goroutines
// and fails with a dump of them after timeout. It returns how long it
// took.
func WaitGoroutines(t testing.TB, baseline int, timeout time.Duration) time.Duration {
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

// SettledGoroutines closes the idle connections of clients and returns
// the goroutine count once it has stopped changing (the baseline of a
// leak check).
func SettledGoroutines(t testing.TB, clients ...*http.Client) int {
	t.Helper()
	for _, c := range clients {
		c.CloseIdleConnections()
	}
	last, stable := runtime.NumGoroutine(), 0
	Eventually(t, 5*time.Second, func() (bool, string) {
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

// VerifyNoLeaks runs the package's tests (call it from TestMain) and
// then fails the binary if goroutines are left running once every test
// and its cleanups have finished (brokertest.VerifyNoLeaks: a server,
// broker, store or push dispatcher that was not closed, or one whose
// Close returned before its goroutines ended). opts name goroutines that
// may stay (goleak.IgnoreTopFunction).
func VerifyNoLeaks(m *testing.M, opts ...goleak.Option) {
	brokertest.VerifyNoLeaks(m, opts...)
}
