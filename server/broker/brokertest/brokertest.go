// Package brokertest is the test harness of the broker layer: delay
// levels compressed to milliseconds, small store options, and a real
// broker over a real store in a test's temporary directory, closed when
// the test ends. Tests only: no production package imports it
// (internal/archtest checks that).
package brokertest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/storage"
)

// Levels returns RocketMQ's 18 delay levels compressed to milliseconds:
// level n is n×10 ms (level 3, the first retry, is 30 ms; level 18 is
// 180 ms). Each call returns a fresh slice.
func Levels() []time.Duration {
	out := make([]time.Duration, 18)
	for i := range out {
		out[i] = time.Duration(10*(i+1)) * time.Millisecond
	}
	return out
}

// Options are the options of a test broker on dir: auto-created topics
// and groups, the delay levels of Levels, a 50 ms progress snapshot,
// 64 KiB messages, and a store of 1 MiB segments with small queue files
// and index.
func Options(dir string) broker.Options {
	return broker.Options{
		DataDir:          dir,
		AutoCreate:       true,
		SnapshotInterval: 50 * time.Millisecond,
		DelayLevels:      Levels(),
		MaxMessageSize:   64 << 10,
		Storage: storage.Options{
			SegmentSize:         1 << 20,
			QueueEntriesPerFile: 1024,
			IndexSlots:          1024,
			IndexEntries:        4096,
		},
	}
}

// Open opens a broker with opts and closes it when the test ends. The
// close's error is not checked there: tests close brokers themselves
// (Close is idempotent), some over a failing disk on purpose.
func Open(t testing.TB, opts broker.Options) *broker.Broker {
	t.Helper()
	b, err := broker.Open(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

// MustOpen opens a broker with Options(dir), adjusted by tweaks, and
// closes it when the test ends. An empty dir is a fresh t.TempDir().
func MustOpen(t testing.TB, dir string, tweaks ...func(*broker.Options)) *broker.Broker {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	opts := Options(dir)
	for _, tw := range tweaks {
		tw(&opts)
	}
	return Open(t, opts)
}

// Eventually polls cond every 10 ms until it holds, failing with its last
// explanation after timeout. It polls a condition; it never sleeps in
// place of one. cond runs on the test's goroutine, so it may use require.
// (servertest.Eventually is this one.)
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
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

// VerifyNoLeaks runs the package's tests (call it from TestMain) and
// then fails the binary if goroutines are left running once every test
// and its cleanups have finished: a broker, store or worker that was not
// closed, or one whose Close returned before its goroutines ended. The
// idle connections of http.DefaultTransport (tests that call http.Get)
// are closed first; goleak retries for a while, so goroutines on their
// way out are not reported. opts name goroutines that may stay
// (goleak.IgnoreTopFunction).
func VerifyNoLeaks(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		http.DefaultClient.CloseIdleConnections()
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left running after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
