package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestE2EDerivedFilesRebuiltAfterDamage: a group acks some messages, the
// server stops, a ConsumeQueue or index is damaged on disk, and the server
// starts again. The unacknowledged messages keep their leases; given up
// (a lease changed to 0), the group gets exactly them again (no loss, no
// redelivery after ack), new sends get fresh queue offsets and are
// delivered, lookups by key still work, and no pull answers an error.
func TestE2EDerivedFilesRebuiltAfterDamage(t *testing.T) {
	t.Parallel()
	damages := map[string]func(t *testing.T, dir string){
		"QueueDirectoryDeleted": func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue", "heal")))
		},
		"QueueFilesZeroed": func(t *testing.T, dir string) {
			files, _ := filepath.Glob(filepath.Join(dir, "consumequeue", "heal", "*", "[0-9]*"))
			require.NotEmpty(t, files)
			for _, f := range files {
				storagetest.ZeroFrom(t, f, 0)
			}
		},
		"QueueFilesTruncated": func(t *testing.T, dir string) {
			files, _ := filepath.Glob(filepath.Join(dir, "consumequeue", "heal", "*", "[0-9]*"))
			require.NotEmpty(t, files)
			for _, f := range files {
				require.NoError(t, os.Truncate(f, 40))
			}
		},
		"IndexDeleted": func(t *testing.T, dir string) {
			files, _ := filepath.Glob(filepath.Join(dir, "index", "[0-9]*"))
			require.NotEmpty(t, files)
			for _, f := range files {
				require.NoError(t, os.Remove(f))
			}
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := startE2E(t)
			cfg := e.Cfg
			e.topicAndGroup(t, "heal", 2, "healers")
			const n = 20
			used := map[int32]map[int64]bool{0: {}, 1: {}}
			for i := 0; i < n; i++ {
				r := e.Send(t, "heal", api.SendMessage{Body: fmt.Sprintf("h%02d", i), Keys: []string{fmt.Sprintf("key%02d", i)}})
				used[r.QueueID][r.QueueOffset] = true
			}
			got := e.PullN(t, "healers", "heal", n, 60_000, 10*time.Second)
			sort.Slice(got, func(i, j int) bool { return got[i].Body < got[j].Body })
			acked := map[string]bool{}
			var receipts []string
			for _, m := range got[:n/2] {
				acked[m.Body] = true
				receipts = append(receipts, m.Receipt)
			}
			for _, st := range e.Ack(t, "healers", receipts...) {
				require.Equal(t, "ok", st)
			}
			e.Close(t)
			damage(t, cfg.DataDir)
			e = openE2E(t, cfg)

			require.Empty(t, e.Pull(t, "healers", "heal", api.PullRequest{WaitMs: 100}), "the leases outlive the restart")
			var release []api.LeaseItem
			for _, m := range got[n/2:] {
				release = append(release, api.LeaseItem{Receipt: m.Receipt})
			}
			for _, r := range e.Receipts(t, "healers", "leases", api.LeaseRequest{Items: release}) {
				require.Equal(t, "ok", r.Status, "the lease of %s, granted before the restart", r.Receipt)
			}
			again := e.PullN(t, "healers", "heal", n/2, 60_000, 10*time.Second)
			for _, m := range again {
				require.False(t, acked[m.Body], "%s was acknowledged before the restart and delivered again", m.Body)
			}
			require.Empty(t, e.Pull(t, "healers", "heal", api.PullRequest{WaitMs: 200}), "nothing else is delivered")
			for i := 0; i < 4; i++ {
				r := e.Send(t, "heal", api.SendMessage{Body: fmt.Sprintf("new%d", i)})
				require.False(t, used[r.QueueID][r.QueueOffset], "queue %d offset %d given out twice", r.QueueID, r.QueueOffset)
				used[r.QueueID][r.QueueOffset] = true
			}
			fresh := e.PullN(t, "healers", "heal", 4, 60_000, 10*time.Second)
			for _, m := range fresh {
				require.Contains(t, m.Body, "new")
			}
			require.Len(t, e.ByKey(t, "heal", "key07"), 1, "lookups by key still work")
		})
	}
}

// TestE2EConsumerOffsetAboveMaxIsClamped: the CommitLog loses its tail
// while the group's committed offset (in the offset snapshot) is beyond it
// (what an async-flush crash does). The pull never answers 400 forever:
// the offset is lowered to the queue's maximum, visibly (status and a
// counter), and the messages sent afterwards are delivered.
func TestE2EConsumerOffsetAboveMaxIsClamped(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	cfg := e.Cfg
	e.topicAndGroup(t, "lossy", 1, "eater")
	var cut int64
	for i := 0; i < 10; i++ {
		r := e.Send(t, "lossy", api.SendMessage{Body: fmt.Sprintf("l%d", i)})
		if i == 5 {
			id, err := message.ParseID(r.MessageID)
			require.NoError(t, err)
			cut = id.Offset()
		}
	}
	got := e.PullN(t, "eater", "lossy", 10, 60_000, 10*time.Second)
	var receipts []string
	for _, m := range got {
		receipts = append(receipts, m.Receipt)
	}
	e.Ack(t, "eater", receipts...)
	e.Close(t)

	// Lose everything from message 5 on, as a crash before the flush would.
	segs := storagetest.Segments(t, cfg.DataDir)
	storagetest.ZeroFrom(t, segs[len(segs)-1], cut-segmentBase(t, segs[len(segs)-1]))
	storagetest.RemoveCheckpoint(t, cfg.DataDir)
	storagetest.SimulateCrash(t, cfg.DataDir)
	e = openE2E(t, cfg)

	r := e.Send(t, "lossy", api.SendMessage{Body: "after"})
	require.EqualValues(t, 5, r.QueueOffset)
	m := e.PullN(t, "eater", "lossy", 1, 60_000, 10*time.Second)
	require.Equal(t, "after", m[0].Body)
	v, ok := e.MetricValue(t, "mqgate_consumer_offsets_clamped_total")
	require.True(t, ok)
	require.EqualValues(t, 1, v)
}

func segmentBase(t *testing.T, path string) int64 {
	t.Helper()
	var base int64
	_, err := fmt.Sscanf(filepath.Base(path), "%d", &base)
	require.NoError(t, err)
	return base
}

// TestE2EProgressReplayedPastADamagedEntry: the offset snapshot is gone
// (so the restart replays every progress record) and two entries of the
// progress records' ConsumeQueue are swapped on disk, entries that each
// look valid. Whether the store's open or a read finds them, the replay
// must still apply every record: no acknowledged message is delivered
// again and the committed offset is where the acks left it.
func TestE2EProgressReplayedPastADamagedEntry(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	cfg := e.Cfg
	e.topicAndGroup(t, "replay", 1, "replayers")
	const n = 12
	for i := 0; i < n; i++ {
		e.Send(t, "replay", api.SendMessage{Body: fmt.Sprintf("r%02d", i)})
	}
	got := e.PullN(t, "replayers", "replay", n, 60_000, 10*time.Second)
	for _, m := range got { // one progress record per ack
		for _, st := range e.Ack(t, "replayers", m.Receipt) {
			require.Equal(t, "ok", st)
		}
	}
	e.Close(t)

	require.NoError(t, os.Remove(filepath.Join(cfg.DataDir, "config", "offsets.snapshot")))
	files, _ := filepath.Glob(filepath.Join(cfg.DataDir, "consumequeue", "rmq_sys_OFFSET", "0", "[0-9]*"))
	require.Len(t, files, 1)
	f, err := os.OpenFile(files[0], os.O_RDWR, 0)
	require.NoError(t, err)
	a, b := make([]byte, consumequeue.EntrySize), make([]byte, consumequeue.EntrySize)
	at := int64(n/2) * consumequeue.EntrySize // two entries among the acks' records
	_, err = f.ReadAt(a, at)
	require.NoError(t, err)
	_, err = f.ReadAt(b, at+consumequeue.EntrySize)
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
	_, err = f.WriteAt(a, at+consumequeue.EntrySize)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	e = openE2E(t, cfg)
	require.Empty(t, e.Pull(t, "replayers", "replay", api.PullRequest{WaitMs: 300}), "acknowledged before the restart, delivered again")
	var progress api.Progress
	servertest.Decode(t, e.JSON(t, http.MethodGet, "/v1/groups/replayers/progress", nil), http.StatusOK, &progress)
	for _, q := range progress.Queues {
		if q.QueueID >= 0 {
			require.EqualValues(t, n, q.ConsumerOffset, "the committed offset after the replay")
		}
	}
}

// topicAndGroup creates a topic of queues queues and a group subscribed to
// it, with leases of a minute.
func (e *e2eServer) topicAndGroup(t *testing.T, topic string, queues int, group string) {
	t.Helper()
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/"+topic, api.TopicRequest{Queues: queues}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/"+group, api.GroupRequest{InvisibleMs: 60_000,
		Subscriptions: []api.Subscription{{Topic: topic}}}), http.StatusCreated, nil)
}
