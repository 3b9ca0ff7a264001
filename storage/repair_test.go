package storage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

const repairMessages = 200 // with SmallOptions' 64 entries per file: 4 files per queue

// repairFixture stores repairMessages messages in each of queues 0 and 1 of
// topic "rq" (equal sizes, one key each) and closes the store.
func repairFixture(t *testing.T) (storage.Options, string) {
	t.Helper()
	dir := t.TempDir()
	opts := storagetest.SmallOptions(dir)
	s := storagetest.MustOpen(t, opts)
	for i := 0; i < repairMessages; i++ {
		for q := int32(0); q < 2; q++ {
			storagetest.MustPut(t, s, storagetest.NewMessage("rq", q, fmt.Sprintf("body-%d-%04d", q, i), "", fmt.Sprintf("key-%d-%04d", q, i)))
		}
	}
	require.NoError(t, s.Close())
	return opts, dir
}

func cqFile(dir string, queue int, first int64) string {
	return filepath.Join(dir, "consumequeue", "rq", fmt.Sprint(queue), fmt.Sprintf("%020d", first*20))
}

// requireQueueIntact reads queue 0 of "rq" whole and checks every message
// is its own, then checks a new send gets the next offset, never a used one.
func requireQueueIntact(t *testing.T, s *storage.Store) {
	t.Helper()
	require.EqualValues(t, repairMessages, s.MaxOffset("rq", 0))
	for next := int64(0); next < repairMessages; {
		res, err := s.ReadQueue("rq", 0, next, 32, nil)
		require.NoError(t, err)
		require.NotEmpty(t, res.Messages, "offset %d", next)
		for _, m := range res.Messages {
			require.Equal(t, "rq", m.Topic)
			require.EqualValues(t, 0, m.QueueID)
			require.Equal(t, next, m.QueueOffset)
			require.Equal(t, fmt.Sprintf("body-0-%04d", next), string(m.Body))
			next++
		}
	}
	r := storagetest.MustPut(t, s, storagetest.NewMessage("rq", 0, "after", ""))
	require.EqualValues(t, repairMessages, r.QueueOffset, "queue offsets are never reused")
}

// Every way a ConsumeQueue's files can be damaged while the store is
// stopped is detected at start-up and rebuilt from the CommitLog: no
// message lost, no offset reused.
func TestRepairDamagedConsumeQueueAtOpen(t *testing.T) {
	t.Parallel()
	damages := map[string]func(t *testing.T, dir string){
		"DirectoryDeleted": func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue", "rq", "0")))
		},
		"TopicDeleted": func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue", "rq")))
		},
		"FirstFileDeleted": func(t *testing.T, dir string) { require.NoError(t, os.Remove(cqFile(dir, 0, 0))) },
		"MiddleFileDeleted": func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(cqFile(dir, 0, 64)))
		},
		"LastFileDeleted": func(t *testing.T, dir string) { require.NoError(t, os.Remove(cqFile(dir, 0, 192))) },
		"LastFileZeroed":  func(t *testing.T, dir string) { storagetest.ZeroFrom(t, cqFile(dir, 0, 192), 0) },
		"MiddleFileZeroed": func(t *testing.T, dir string) {
			storagetest.ZeroFrom(t, cqFile(dir, 0, 64), 0)
		},
		"MiddleFileTruncated": func(t *testing.T, dir string) { require.NoError(t, os.Truncate(cqFile(dir, 0, 128), 640)) },
		"LastFileTruncated":   func(t *testing.T, dir string) { require.NoError(t, os.Truncate(cqFile(dir, 0, 192), 20)) },
		"AllFilesTruncated": func(t *testing.T, dir string) {
			for _, first := range []int64{0, 64, 128, 192} {
				require.NoError(t, os.Truncate(cqFile(dir, 0, first), 0))
			}
		},
		"MinOffsetGarbage": func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "consumequeue", "rq", "0", "MINOFFSET"), []byte("garbage"), 0o644))
		},
	}
	for name, damage := range damages {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/crash=%v", name, crash), func(t *testing.T) {
				t.Parallel()
				opts, dir := repairFixture(t)
				damage(t, dir)
				if crash {
					storagetest.SimulateCrash(t, dir)
				}
				s := storagetest.MustOpen(t, opts)
				requireQueueIntact(t, s)
				require.Equal(t, "body-1-0199", readOne(t, s, "rq", 1, repairMessages-1), "the other queue is untouched")
			})
		}
	}
}

func readOne(t *testing.T, s *storage.Store, topic string, queue int32, off int64) string {
	t.Helper()
	res, err := s.ReadQueue(topic, queue, off, 1, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	return string(res.Messages[0].Body)
}

// rewriteEntry makes entry off of queue 0 a copy of entry src of queue
// srcQueue: a valid-looking pointer at another message of the same size.
func rewriteEntry(t *testing.T, dir string, off int64, srcQueue int, src int64) {
	t.Helper()
	from, err := os.ReadFile(cqFile(dir, srcQueue, src-src%64))
	require.NoError(t, err)
	f, err := os.OpenFile(cqFile(dir, 0, off-off%64), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(from[(src%64)*20:(src%64)*20+20], (off%64)*20)
	require.NoError(t, err)
}

// A ConsumeQueue entry rewritten to point at another valid record of the
// same size is never served as that queue's message: the read stops before
// it, the queue is rebuilt, and the right message is served at that offset.
func TestWrongEntryIsNeverServed(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]struct {
		queue int
		off   int64
	}{"OtherQueue": {1, 100}, "SameQueueOtherOffset": {0, 101}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts, dir := repairFixture(t)
			rewriteEntry(t, dir, 100, src.queue, src.off) // not a sampled position
			s := storagetest.MustOpen(t, opts)
			// Open may catch it already (two equal CommitLog offsets break
			// the order its tail check verifies); otherwise the read must.
			atOpen := s.RepairStats().QueuesRebuilt
			res, err := s.ReadQueue("rq", 0, 90, 32, nil)
			require.NoError(t, err)
			for _, m := range res.Messages {
				require.EqualValues(t, 0, m.QueueID)
				require.Equal(t, fmt.Sprintf("body-0-%04d", m.QueueOffset), string(m.Body))
			}
			if atOpen == 0 {
				require.Equal(t, int64(100), res.Next, "the read stops before the bad entry")
				require.Equal(t, 1, res.Bad)
			}
			require.Eventually(t, func() bool { return s.RepairStats().QueuesRebuilt >= 1 }, 10*time.Second, 5*time.Millisecond)
			require.Equal(t, "body-0-0100", readOne(t, s, "rq", 0, 100))
			if atOpen == 0 {
				require.GreaterOrEqual(t, s.RepairStats().BadEntries, int64(1))
			}
			requireQueueIntact(t, s)
		})
	}
}

// The same rewrite at a position start-up samples (the queue's last entry)
// is caught at Open.
func TestWrongTailEntryIsRepairedAtOpen(t *testing.T) {
	t.Parallel()
	opts, dir := repairFixture(t)
	rewriteEntry(t, dir, repairMessages-1, 1, repairMessages-1)
	s := storagetest.MustOpen(t, opts)
	require.EqualValues(t, 1, s.RepairStats().QueuesRebuilt)
	requireQueueIntact(t, s)
}

// Index files that are deleted, zeroed or truncated while the store is
// stopped are rebuilt: every key is found again.
func TestRepairDamagedIndexAtOpen(t *testing.T) {
	t.Parallel()
	damages := map[string]func(t *testing.T, files []string){
		"AllDeleted": func(t *testing.T, files []string) {
			for _, f := range files {
				require.NoError(t, os.Remove(f))
			}
		},
		"NewestDeleted": func(t *testing.T, files []string) { require.NoError(t, os.Remove(files[len(files)-1])) },
		"NewestZeroed":  func(t *testing.T, files []string) { storagetest.ZeroFrom(t, files[len(files)-1], 0) },
		"OldestZeroed":  func(t *testing.T, files []string) { storagetest.ZeroFrom(t, files[0], 0) },
		"NewestTruncated": func(t *testing.T, files []string) {
			require.NoError(t, os.Truncate(files[len(files)-1], 100))
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts, dir := repairFixture(t)
			files, err := filepath.Glob(filepath.Join(dir, "index", "[0-9]*[0-9]"))
			require.NoError(t, err)
			require.Greater(t, len(files), 1)
			damage(t, files)
			s := storagetest.MustOpen(t, opts)
			for _, i := range []int{0, 77, repairMessages - 1} {
				ms, err := s.QueryByKey("rq", fmt.Sprintf("key-0-%04d", i), 0, 0, 4)
				require.NoError(t, err)
				require.Len(t, ms, 1, "key %d", i)
				require.Equal(t, fmt.Sprintf("body-0-%04d", i), string(ms[0].Body))
			}
			requireQueueIntact(t, s)
		})
	}
}
