package storage_test

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// Footprint of many small queues: 1 000 topics x 4 queues with one message
// each, with the store's default file sizes. The derived files
// (ConsumeQueues, index, metadata) must stay under 100 MB of disk, and a
// process that reopens the store under 200 MB of RSS. The CommitLog is
// reported apart (its blocks are allocated ahead of the writes, and the
// next segment's reserve is removed at Close).
const (
	footprintTopics  = 1000
	footprintQueues  = 4
	footprintSegment = 64 << 20
	footprintChild   = "MQGATE_FOOTPRINT_CHILD"
)

func TestFootprintManySmallQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 4 000 queues")
	}
	dir := t.TempDir()
	opts := storage.Options{Dir: dir, SegmentSize: footprintSegment}
	start := time.Now()
	s, err := storage.Open(opts)
	require.NoError(t, err)
	for topic := 0; topic < footprintTopics; topic += 50 {
		var ms []*message.Message
		for i := topic; i < topic+50; i++ {
			for q := int32(0); q < footprintQueues; q++ {
				ms = append(ms, storagetest.NewMessage(fmt.Sprintf("fp-%04d", i), q, "x", "", fmt.Sprintf("k-%d-%d", i, q)))
			}
		}
		require.NoError(t, s.PutBatch(ms, make([]storage.PutResult, len(ms))))
	}
	require.NoError(t, s.AwaitDispatch(context.Background()))
	require.NoError(t, s.Close())
	wrote := time.Since(start)

	derived, commitLog := diskUsage(t, dir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestFootprintReopenChild$", "-test.v")
	cmd.Env = append(os.Environ(), footprintChild+"="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	rss := parseChild(t, string(out))
	t.Logf("footprint of %d topics x %d queues, one message each (write+close %v):", footprintTopics, footprintQueues, wrote.Round(time.Millisecond))
	t.Logf("  disk: derived files %.1f MB, CommitLog %.1f MB (segment %d MB, allocated ahead of the writes)", mb(derived), mb(commitLog), footprintSegment>>20)
	t.Logf("  reopen in a child process: open took %s; VmRSS %s MB (before open %s MB), RssFile %s MB, RssAnon %s MB",
		rss["open"], rss["VmRSS"], rss["VmRSSBefore"], rss["RssFile"], rss["RssAnon"])
	require.Less(t, derived, int64(100<<20), "derived files on disk")
	vmRSS, err := strconv.ParseFloat(rss["VmRSS"], 64)
	require.NoError(t, err)
	require.Less(t, vmRSS, 200.0, "RSS after reopening")
}

// TestFootprintReopenChild is the child process of
// TestFootprintManySmallQueues: it opens the store, checks one queue and
// prints its memory figures. It does nothing unless started by the parent.
func TestFootprintReopenChild(t *testing.T) {
	dir := os.Getenv(footprintChild)
	if dir == "" {
		t.Skip("only run as the child of TestFootprintManySmallQueues")
	}
	before := procStatus(t)
	start := time.Now()
	s, err := storage.Open(storage.Options{Dir: dir, SegmentSize: footprintSegment})
	require.NoError(t, err)
	took := time.Since(start)
	after := procStatus(t)
	require.EqualValues(t, 1, s.MaxOffset("fp-0999", 3))
	require.Len(t, s.Topics(), footprintTopics)
	fmt.Printf("FOOTPRINT open=%s VmRSSBefore=%.1f VmRSS=%.1f RssFile=%.1f RssAnon=%.1f\n",
		took.Round(time.Millisecond), before["VmRSS"], after["VmRSS"], after["RssFile"], after["RssAnon"])
	require.NoError(t, s.Close())
}

// procStatus reads this process's VmRSS, RssFile and RssAnon in MB.
func procStatus(t *testing.T) map[string]float64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	require.NoError(t, err)
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "RssFile" && k != "RssAnon") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		require.NoError(t, err)
		out[k] = kb / 1024
	}
	return out
}

func parseChild(t *testing.T, out string) map[string]string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "FOOTPRINT "); ok {
			m := map[string]string{}
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				m[k] = v
			}
			return m
		}
	}
	t.Fatalf("child printed no figures:\n%s", out)
	return nil
}

// diskUsage sums the allocated blocks under dir (du), split into the
// CommitLog and everything else.
func diskUsage(t *testing.T, dir string) (derived, commitLog int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("no stat for %s", path)
		}
		if strings.HasPrefix(path, filepath.Join(dir, "commitlog")) {
			commitLog += st.Blocks * 512
		} else {
			derived += st.Blocks * 512
		}
		return nil
	})
	require.NoError(t, err)
	return derived, commitLog
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// TestFootprintFreshDataDir: a fresh data dir with the default options
// (1 GiB segments) and a few messages takes tens of MB of disk, not the
// gigabytes of whole preallocated segments: the CommitLog allocates its
// blocks ahead of the write position in steps and keeps only its reserve
// (commitlog.DefaultReserve) allocated in the next segment.
func TestFootprintFreshDataDir(t *testing.T) {
	dir := t.TempDir()
	s, err := storage.Open(storage.Options{Dir: dir})
	require.NoError(t, err)
	defer s.Close()
	for i := range 10 {
		_, err := s.Put(storagetest.NewMessage("fresh", int32(i%4), fmt.Sprintf("message %d", i), "", ""))
		require.NoError(t, err)
	}
	require.NoError(t, s.AwaitDispatch(context.Background()))
	// Let the allocator prepare the next segment, as it does at once.
	var derived, commitLog int64
	require.Eventually(t, func() bool {
		derived, commitLog = diskUsage(t, dir)
		return commitLog > 16<<20
	}, 10*time.Second, 10*time.Millisecond, "the next segment's reserve is allocated")
	t.Logf("fresh data dir with 10 messages: CommitLog %.1f MB, other files %.1f MB allocated", mb(commitLog), mb(derived))
	require.Less(t, derived+commitLog, int64(64<<20), "a fresh data dir takes tens of MB")
}
