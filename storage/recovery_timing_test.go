package storage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestRecoveryTimingOneGiB measures start-up over a 1 GiB CommitLog: after
// a clean close, after a crash, after a lost ConsumeQueue (one queue rebuilt
// from a scan of the whole log), and without checkpoint and queue table
// (every record re-dispatched). It writes 1 GiB, so it runs only with
// MQGATE_RECOVERY_TIMING=1.
func TestRecoveryTimingOneGiB(t *testing.T) {
	if os.Getenv("MQGATE_RECOVERY_TIMING") == "" {
		t.Skip("set MQGATE_RECOVERY_TIMING=1 to write a 1 GiB CommitLog and time its recovery")
	}
	dir := t.TempDir()
	opts := storage.Options{Dir: dir, SegmentSize: 256 << 20, FlushMode: storage.FlushAsync}
	s, err := storage.Open(opts)
	require.NoError(t, err)
	body := strings.Repeat("b", 4000)
	const queues = 64
	batch := make([]*message.Message, 0, 256)
	for written := int64(0); written < 1<<30; {
		batch = batch[:0]
		for i := 0; i < 256; i++ {
			batch = append(batch, storagetest.NewMessage(fmt.Sprintf("t%02d", i%16), int32(i%(queues/16)), body, "", fmt.Sprintf("k%d", written+int64(i))))
		}
		require.NoError(t, s.PutBatch(batch, make([]storage.PutResult, len(batch))))
		written = s.WriteOffset()
	}
	require.NoError(t, s.Close())

	reopen := func(what string) {
		start := time.Now()
		s, err := storage.Open(opts)
		require.NoError(t, err)
		took := time.Since(start)
		rec := s.Recovery()
		t.Logf("%-32s %8v  redispatched %d, rebuilt %d", what, took.Round(time.Millisecond), rec.Redispatched, s.RepairStats().QueuesRebuilt)
		require.NoError(t, s.Close())
		require.Less(t, took, 5*time.Second, what)
	}
	reopen("clean close")
	storagetest.SimulateCrash(t, dir)
	reopen("crash (abort marker)")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue", "t03", "3")))
	reopen("one queue lost: rebuilt")
	storagetest.RemoveCheckpoint(t, dir)
	require.NoError(t, os.Remove(filepath.Join(dir, "queues")))
	reopen("no checkpoint, no queue table")
}
