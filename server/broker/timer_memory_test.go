package broker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
)

// What pending timers cost after a restart, measured in a fresh process
// (this test binary re-executed) that opens the broker and reports its
// Go heap and its anonymous memory (RssAnon: the mmap'd CommitLog,
// queues and index files are page cache and count as RssFile).

const timerMemChildEnv = "MQGATE_TIMER_MEM_DIR"

func timerMemOptions(dir string) broker.Options {
	return broker.Options{
		DataDir:    dir,
		AutoCreate: true,
		FlushMode:  "async",
		Storage:    storage.Options{IndexSlots: 1 << 16, IndexEntries: 1 << 18},
	}
}

// timerMemReport is what the child prints.
type timerMemReport struct {
	Pending   int
	OpenMs    int64
	HeapInuse uint64
	RssAnon   uint64 // bytes
	RssFile   uint64
	Recovery  broker.TimerRecovery
	Index     timerindex.Stats
}

// TestTimerMemoryChild is the child's body; it does nothing in a normal
// run.
func TestTimerMemoryChild(t *testing.T) {
	dir := os.Getenv(timerMemChildEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestTimersMemory")
	}
	start := time.Now()
	b, err := broker.Open(context.Background(), timerMemOptions(dir))
	require.NoError(t, err)
	open := time.Since(start)
	n, _ := b.TimerCount()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep := timerMemReport{Pending: n, OpenMs: open.Milliseconds(), HeapInuse: ms.HeapInuse,
		Recovery: b.TimerRecovered(), Index: b.TimerIndexStats()}
	rep.RssAnon, rep.RssFile = procStatus(t, "RssAnon"), procStatus(t, "RssFile")
	out, err := json.Marshal(rep)
	require.NoError(t, err)
	fmt.Printf("timermem %s\n", out)
	require.NoError(t, b.Close(context.Background()))
}

// procStatus reads a kB field of /proc/self/status, in bytes (0 where
// there is no /proc).
func procStatus(t *testing.T, field string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	return 0
}

// measureTimers opens dir in a child process and returns its report.
func measureTimers(t *testing.T, dir string) timerMemReport {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTimerMemoryChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), timerMemChildEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "timermem "); ok {
			var rep timerMemReport
			require.NoError(t, json.Unmarshal([]byte(rest), &rep))
			return rep
		}
	}
	t.Fatalf("no report from the child:\n%s", out)
	return timerMemReport{}
}

// registerTimers sends n timers with 1-byte bodies, due between an hour
// and a year ahead, broker.MaxSendBatch a send.
func registerTimers(t *testing.T, b *broker.Broker, n int, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	const year = int64(365 * 24 * time.Hour / time.Millisecond)
	msgs := make([]broker.SendMessage, broker.MaxSendBatch)
	for sent := 0; sent < n; {
		k := min(len(msgs), n-sent)
		for i := range msgs[:k] {
			msgs[i] = broker.SendMessage{Body: []byte{'x'}, DelayMs: 3_600_000 + rng.Int64N(year)}
		}
		_, err := b.Send(context.Background(), fmt.Sprint("mem", sent%7), msgs[:k])
		require.NoError(t, err)
		sent += k
		if sent%1_000_000 == 0 {
			t.Logf("%d timers registered", sent)
		}
	}
}

// TestTimersMemory registers timers in two steps, restarting after each,
// and bounds the memory each pending timer costs after a restart: the Go
// heap may grow by less than 16 bytes a timer between the two (the index
// keeps about a bit of each in memory; the pending set used to be a heap
// entry of about 190 bytes). The restart reads no timer record. Then it
// deletes the index and measures its rebuild. With LONG=1 it registers 10
// million (TIMERS=n for another count) and holds their RssAnon after a
// restart under 64 MiB.
func TestTimersMemory(t *testing.T) {
	if os.Getenv(timerMemChildEnv) != "" {
		t.Skip("the child runs TestTimerMemoryChild only")
	}
	total, first := 100_000, 10_000
	if os.Getenv("LONG") != "" {
		total = 10_000_000
		if s := os.Getenv("TIMERS"); s != "" {
			var err error
			total, err = strconv.Atoi(s)
			require.NoError(t, err)
		}
		first = total / 10
	} else if testing.Short() {
		t.Skip("registers 100 000 timers")
	}
	dir := t.TempDir()
	step := func(n int, seed uint64) timerMemReport {
		b, err := broker.Open(context.Background(), timerMemOptions(dir))
		require.NoError(t, err)
		start := time.Now()
		registerTimers(t, b, n, seed)
		t.Logf("registered %d timers in %v", n, time.Since(start).Round(time.Millisecond))
		require.NoError(t, b.Close(context.Background()))
		rep := measureTimers(t, dir)
		logReport(t, "restart", rep)
		require.Zero(t, rep.Recovery.Births, "a clean restart reads no timer record")
		require.False(t, rep.Recovery.Rebuilt)
		return rep
	}
	small := step(first, 1)
	require.Equal(t, first, small.Pending)
	big := step(total-first, 2)
	require.Equal(t, total, big.Pending)
	perTimer := (float64(big.HeapInuse) - float64(small.HeapInuse)) / float64(total-first)
	t.Logf("heap growth per pending timer: %.2f bytes", perTimer)
	require.Less(t, perTimer, 16.0, "heap growth per pending timer after a restart")
	if os.Getenv("LONG") != "" && big.RssAnon > 0 {
		require.Less(t, big.RssAnon, uint64(64<<20), "anonymous memory after a restart")
	}

	require.NoError(t, os.RemoveAll(filepath.Join(dir, "timers")))
	rebuilt := measureTimers(t, dir)
	logReport(t, "rebuild", rebuilt)
	require.True(t, rebuilt.Recovery.Rebuilt)
	require.Equal(t, total, rebuilt.Pending)
	require.EqualValues(t, total, rebuilt.Recovery.Births)
	require.Less(t, (float64(rebuilt.HeapInuse)-float64(small.HeapInuse))/float64(total-first), 16.0, "heap growth per pending timer after a rebuild")
}

func logReport(t *testing.T, what string, rep timerMemReport) {
	t.Helper()
	t.Logf("%s with %d pending timers: open %d ms (%d timer records read), heap in use %.1f MiB, RssAnon %.1f MiB, RssFile %.1f MiB; index: %d runs of %d entries, live set %.1f KiB",
		what, rep.Pending, rep.OpenMs, rep.Recovery.Births, mib(rep.HeapInuse), mib(rep.RssAnon), mib(rep.RssFile),
		rep.Index.Runs, rep.Index.RunEntries, float64(rep.Index.LiveBytes)/1024)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
