package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// diskE2E starts a server whose data dir is on a fresh tmpfs of size
// bytes (skipping unless root): 1 MiB segments, small ConsumeQueue and
// index files, the disk sampled every 10 ms and retention every 50 ms.
func diskE2E(t *testing.T, size int64, opts ...func(*server.Config)) (*e2eServer, string) {
	t.Helper()
	mount := storagetest.MountTmpfs(t, size)
	cfg := servertest.Config(t, filepath.Join(mount, "data"))
	cfg.SegmentSize = 1 << 20
	cfg.MaxMessageSize = 64 << 10
	cfg.DiskCheckInterval = 10 * time.Millisecond
	cfg.RetentionInterval = 50 * time.Millisecond
	cfg.Storage = storage.Options{QueueEntriesPerFile: 4096, IndexSlots: 1024, IndexEntries: 8192}
	for _, o := range opts {
		o(&cfg)
	}
	return openE2E(t, cfg), mount
}

// diskBody is message i of a disk test: its name, then padding to 4 KiB.
func diskBody(i int) string {
	name := fmt.Sprintf("m%05d", i)
	return name + strings.Repeat("x", 4096-len(name))
}

// sendUntilRefused sends batches of 16 until a send gets 507 disk-full and
// returns how many messages were accepted (from first on) and the refusal.
func (e *e2eServer) sendUntilRefused(t *testing.T, topic string, first int) (int, servertest.Resp) {
	t.Helper()
	n := first
	for range 100_000 {
		batch := make([]api.SendMessage, 16)
		for i := range batch {
			batch[i] = api.SendMessage{Body: diskBody(n + i)}
		}
		r := e.JSON(t, http.MethodPost, "/v1/topics/"+topic+"/messages", api.SendRequest{Messages: &batch})
		if r.Status != http.StatusOK {
			servertest.WantProblem(t, r, http.StatusInsufficientStorage, "disk-full")
			return n - first, r
		}
		n += len(batch)
	}
	t.Fatal("sends were never refused")
	return 0, servertest.Resp{}
}

// brokerDisk reads the disk part of GET /v1/broker/status.
func (e *e2eServer) brokerDisk(t *testing.T) api.BrokerStatus {
	t.Helper()
	var st api.BrokerStatus
	servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &st)
	return st
}

// TestE2EDiskFullFromSends fills a 48 MiB tmpfs through the API (after
// another process took part of it): sends get 507 disk-full with
// Retry-After at the send ceiling, while pulls, acks, nacks, lease changes
// and offset commits keep working; /readyz stays ready and says why sends
// fail. Deleting the other process's file lets sends resume without a
// restart, and every accepted message is delivered exactly once to the
// group that acknowledged it, across a restart too.
func TestE2EDiskFullFromSends(t *testing.T) {
	e, mount := diskE2E(t, 48<<20)
	filler := filepath.Join(mount, "filler")
	storagetest.FillTo(t, filler, 0.40)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/disk", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/g", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "disk"}}}), http.StatusCreated, nil)

	accepted, refused := e.sendUntilRefused(t, "disk", 0)
	require.Equal(t, "5", refused.Header.Get("Retry-After"))
	st := e.brokerDisk(t)
	require.True(t, st.Disk.SendsRefused, "%+v", st.Disk)
	require.False(t, st.Disk.SystemRefused)
	require.Greater(t, st.Disk.UsedRatio, st.Disk.SendCeiling)
	require.Zero(t, st.CommitLogMinOffset, "nothing is consumed: nothing is deleted")
	ready := e.Get(t, "/readyz")
	require.Equal(t, http.StatusOK, ready.Status, "a full disk does not make the server unready")
	require.Contains(t, string(ready.Body), "sends are refused")
	v, ok := e.MetricValue(t, "mqgate_disk_sends_refused")
	require.True(t, ok)
	require.Equal(t, 1.0, v)
	t.Logf("sends accepted until the ceiling: %d messages of 4 KiB; disk %.1f%% used", accepted, 100*st.Disk.UsedRatio)

	// Consumers keep working above the send ceiling.
	acked := map[string]bool{}
	got := e.PullN(t, "g", "disk", 64, 60_000, 10*time.Second)
	var ackReceipts []string
	for _, m := range got[:60] {
		ackReceipts = append(ackReceipts, m.Receipt)
		acked[m.Body[:6]] = true
	}
	for _, status := range e.Ack(t, "g", ackReceipts...) {
		require.Equal(t, "ok", status)
	}
	e.Nack(t, "g", got[60].Receipt, 1, "nack above the send ceiling")
	e.Nack(t, "g", got[61].Receipt, 1, "nack above the send ceiling")
	res := e.Receipts(t, "g", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: got[62].Receipt, InvisibleMs: 0}, {Receipt: got[63].Receipt, InvisibleMs: 0}}})
	require.Equal(t, "ok", res[0].Status)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/offsets-mode/offsets", api.Offsets{Offsets: []api.QueueOffset{{Topic: "disk", QueueID: 0, Offset: 10}}}), http.StatusNoContent, nil)
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/disk/messages", api.SendMessage{Body: "still refused"}), http.StatusInsufficientStorage, "disk-full")
	t.Logf("above the ceiling: %d acks, 2 nacks, 2 lease changes and an offset commit answered 200", len(ackReceipts))

	// The other process's file goes: sends resume without a restart.
	require.NoError(t, os.Remove(filler))
	freed := time.Now()
	require.Eventually(t, func() bool {
		return e.JSON(t, http.MethodPost, "/v1/topics/disk/messages", api.SendMessage{Body: diskBody(accepted)}).Status == http.StatusOK
	}, 10*time.Second, 5*time.Millisecond)
	t.Logf("sends resumed %v after the space was freed", time.Since(freed).Round(time.Millisecond))
	accepted++
	require.NotContains(t, string(e.Get(t, "/readyz").Body), "refused")

	// Everything accepted and not acknowledged is delivered once (the two
	// nacked as retries), across a restart.
	delivered := map[string]int{}
	consume := func(e *e2eServer, n int) {
		for _, m := range e.PullN(t, "g", "disk", n, 60_000, 30*time.Second) {
			delivered[m.Body[:6]]++
			require.Equal(t, []string{"ok"}, e.Ack(t, "g", m.Receipt))
		}
	}
	half := (accepted - len(acked)) / 2
	consume(e, half)
	e.Close(t)
	e = openE2E(t, e.Cfg)
	consume(e, accepted-len(acked)-half)
	require.Empty(t, e.Pull(t, "g", "disk", api.PullRequest{MaxMessages: 32, WaitMs: 200}), "nothing is delivered twice")
	for i := range accepted {
		name := diskBody(i)[:6]
		if acked[name] {
			require.Zero(t, delivered[name], "%s was acknowledged before", name)
			continue
		}
		require.Equal(t, 1, delivered[name], "%s", name)
	}
}

// TestE2EDiskFilledByAnotherProcess: another process takes the disk above
// the send ceiling while group g has consumed half of its messages. Sends
// get 507; retention deletes the segments g has consumed, and only those;
// every unconsumed message stays readable. Restarted with
// --disk-pressure-delete, the server deletes unconsumed segments too and
// counts what g lost (metric and progress).
func TestE2EDiskFilledByAnotherProcess(t *testing.T) {
	e, mount := diskE2E(t, 32<<20)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/disk", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/g", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "disk"}}}), http.StatusCreated, nil)
	const total = 1200
	var ids []string
	for i := 0; i < total; i += 100 {
		batch := make([]api.SendMessage, 100)
		for j := range batch {
			batch[j] = api.SendMessage{Body: diskBody(i + j)}
		}
		var out api.SendResponse
		servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/topics/disk/messages", api.SendRequest{Messages: &batch}), http.StatusOK, &out)
		for _, r := range out.Results {
			ids = append(ids, r.MessageID)
		}
	}
	for _, m := range e.PullN(t, "g", "disk", total/2, 60_000, 30*time.Second) {
		require.Equal(t, []string{"ok"}, e.Ack(t, "g", m.Receipt))
	}
	firstUnconsumed := e.Message(t, ids[total/2])
	require.True(t, diskBody(total/2) == firstUnconsumed.Body)

	storagetest.FillTo(t, filepath.Join(mount, "filler"), 0.95)
	require.Eventually(t, func() bool {
		return e.JSON(t, http.MethodPost, "/v1/topics/disk/messages", api.SendMessage{Body: "refused?"}).Status == http.StatusInsufficientStorage
	}, 10*time.Second, 5*time.Millisecond)
	// Retention deletes the consumed segments (all of them: the first
	// unconsumed message's segment is the lowest left) and nothing else.
	id, err := message.ParseID(ids[total/2])
	require.NoError(t, err)
	segment := int64(e.Cfg.SegmentSize)
	want := id.Offset() - id.Offset()%segment
	require.Positive(t, want)
	var min int64
	require.Eventually(t, func() bool {
		min = e.brokerDisk(t).CommitLogMinOffset
		require.LessOrEqual(t, min, want, "a segment holding unconsumed messages was deleted")
		return min == want
	}, 10*time.Second, 5*time.Millisecond, "consumed data is deleted under pressure")
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+ids[0]), http.StatusBadRequest, "offset-out-of-range") // deleted
	requireReadable := func(e *e2eServer, from int) {
		t.Helper()
		off := int64(from)
		for off < total {
			var page api.QueueMessages
			servertest.Decode(t, e.Get(t, fmt.Sprintf("/v1/topics/disk/queues/0/messages?offset=%d&max=32", off)), http.StatusOK, &page)
			require.NotEmpty(t, page.Messages, "offset %d", off)
			for _, m := range page.Messages {
				if m.QueueOffset < total { // the probes above may have slipped in before the sample
					require.True(t, m.Body == diskBody(int(m.QueueOffset)), "offset %d holds %.10s", m.QueueOffset, m.Body)
				}
			}
			off = page.NextOffset
		}
	}
	requireReadable(e, total/2)
	_, ok := e.MetricValue(t, `mqgate_retention_dropped_unconsumed_total{group="g"}`)
	require.False(t, ok, "nothing unconsumed was dropped")
	t.Logf("pressure retention deleted the %d consumed segments and stopped at the first unconsumed message's", min/segment)

	// Opt-in: RocketMQ's behaviour deletes what g has not consumed, and
	// counts it.
	e.Close(t)
	cfg := e.Cfg
	cfg.DiskPressureDelete = true
	e = openE2E(t, cfg)
	var lost float64
	require.Eventually(t, func() bool {
		lost, ok = e.MetricValue(t, `mqgate_retention_dropped_unconsumed_total{group="g"}`)
		return ok && lost > 0
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, os.Remove(filepath.Join(mount, "filler")))
	var prog api.Progress
	require.Eventually(t, func() bool {
		servertest.Decode(t, e.Get(t, "/v1/groups/g/progress"), http.StatusOK, &prog)
		lost, _ = e.MetricValue(t, `mqgate_retention_dropped_unconsumed_total{group="g"}`)
		return len(prog.Queues) == 1 && float64(prog.Queues[0].DroppedUnconsumed) == lost &&
			prog.Queues[0].ConsumerOffset == total/2+prog.Queues[0].DroppedUnconsumed
	}, 10*time.Second, 5*time.Millisecond, "the progress counts every message g lost: %+v", prog)
	got := e.Pull(t, "g", "disk", api.PullRequest{MaxMessages: 1, WaitMs: 1000})
	require.Len(t, got, 1)
	require.Equal(t, prog.Queues[0].ConsumerOffset, got[0].QueueOffset, "delivery goes on after what was dropped")
	t.Logf("--disk-pressure-delete dropped %.0f unconsumed messages of group g", lost)
}

// TestE2EDiskFilledBySendsDrains fills a 64 MiB tmpfs with 64 KiB sends
// on 8 MiB segments, with the disk sampled only once a second and no
// retention: the send ceiling is checked on the write path, so sends get
// 507 disk-full before they eat the room kept for the broker's own
// records (the next segment's first 8 MiB, allocated ahead). Then every
// consumer operation works until everything is drained: pulls of 32 with
// leases, acks, nacks whose retry copies come back and are acked, lease
// changes and offset commits — the second half of them after another
// process has taken every free block. /readyz says sends are refused and
// acks go on, which is true. After a restart nothing acknowledged comes
// back.
func TestE2EDiskFilledBySendsDrains(t *testing.T) {
	e, mount := diskE2E(t, 64<<20, func(c *server.Config) {
		c.SegmentSize = 8 << 20
		c.MaxMessageSize = 128 << 10
		c.DiskCheckInterval = time.Second
		c.RetentionInterval = time.Hour
	})
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/fill", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/g", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "fill"}}}), http.StatusCreated, nil)
	body := func(i int) string {
		name := fmt.Sprintf("m%05d", i)
		return name + strings.Repeat("f", 64<<10-len(name))
	}
	accepted := 0
	for ; ; accepted++ {
		require.Less(t, accepted, 2000, "sends were never refused")
		r := e.JSON(t, http.MethodPost, "/v1/topics/fill/messages", api.SendMessage{Body: body(accepted)})
		if r.Status != http.StatusOK {
			servertest.WantProblem(t, r, http.StatusInsufficientStorage, "disk-full")
			break
		}
	}
	usage := storagetest.Usage(t, mount)
	ready := e.Get(t, "/readyz")
	t.Logf("%d sends of 64 KiB accepted before 507; disk %.1f%% used; readyz: %s", accepted, 100*usage, ready.Body)
	require.Equal(t, http.StatusOK, ready.Status)
	require.Contains(t, string(ready.Body), "sends are refused")
	require.Contains(t, string(ready.Body), "acks, nacks and commits go on")
	st := e.brokerDisk(t)
	require.True(t, st.Disk.SendsRefused, "%+v", st.Disk)
	require.False(t, st.Disk.SystemRefused, "%+v", st.Disk)
	room, ok := e.MetricValue(t, "mqgate_commitlog_system_room_bytes")
	require.True(t, ok)
	require.GreaterOrEqual(t, room, float64(8<<20), "the next segment's reserve (a segment's worth here) is allocated")
	require.Equal(t, int64(room), st.Disk.SystemRoomBytes)

	// Drain: ack most, nack every eighth once (its retry comes back and is
	// acked), hand every eighth other back with a lease change, commit
	// offsets of another group as we go.
	acked := map[string]bool{}
	nacked := map[string]bool{}
	leased := map[string]bool{}
	ops := map[string]int{}
	deadline := time.Now().Add(90 * time.Second)
	filled := false
	for len(acked) < accepted {
		require.True(t, time.Now().Before(deadline), "drained %d of %d; ops %v", len(acked), accepted, ops)
		if !filled && len(acked) > accepted/2 {
			// Another process takes every free block: the broker's own
			// records go on in the room the CommitLog keeps allocated.
			filled = true
			storagetest.FillTo(t, filepath.Join(mount, "filler"), 1)
			t.Logf("another process filled the disk (%.1f%% used) after %d acks", 100*storagetest.Usage(t, mount), len(acked))
		}
		got := e.Pull(t, "g", "fill", api.PullRequest{MaxMessages: 32, WaitMs: 1500, InvisibleMs: 60_000})
		ops["pull"]++
		var receipts []string
		for i, m := range got {
			name := m.Body[:6]
			require.False(t, acked[name], "%s was acknowledged before", name)
			switch {
			case i%8 == 3 && !nacked[name] && m.ReconsumeTimes == 0:
				nacked[name] = true
				e.Nack(t, "g", m.Receipt, 1, "nack on a full disk")
				ops["nack"]++
			case i%8 == 5 && !leased[name]:
				leased[name] = true
				res := e.Receipts(t, "g", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: m.Receipt, InvisibleMs: 0}}})
				require.Equal(t, "ok", res[0].Status, "%+v", res[0])
				ops["lease"]++
			default:
				receipts = append(receipts, m.Receipt)
				acked[name] = true
				if m.ReconsumeTimes > 0 {
					ops["retry-acked"]++
				}
			}
		}
		if len(receipts) > 0 {
			for _, status := range e.Ack(t, "g", receipts...) {
				require.Equal(t, "ok", status)
			}
			ops["ack"] += len(receipts)
		}
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/committer/offsets", api.Offsets{Offsets: []api.QueueOffset{{Topic: "fill", QueueID: 0, Offset: int64(ops["pull"])}}}), http.StatusNoContent, nil)
		ops["commit"]++
	}
	require.Positive(t, ops["retry-acked"], "nacked messages came back as retries")
	t.Logf("drained on the full disk: %v; disk %.1f%% used", ops, 100*storagetest.Usage(t, mount))
	require.Empty(t, e.Pull(t, "g", "fill", api.PullRequest{MaxMessages: 32, WaitMs: 1500}), "nothing is left")
	st = e.brokerDisk(t)
	require.False(t, st.Disk.SystemRefused, "%+v", st.Disk)
	require.True(t, st.Disk.SendsRefused, "%+v", st.Disk)
	require.Contains(t, string(e.Get(t, "/readyz").Body), "acks, nacks and commits go on", "on the full disk too")

	// Nothing acknowledged comes back after a restart (the other process
	// gives its space back first: closing writes snapshots).
	require.NoError(t, os.Remove(filepath.Join(mount, "filler")))
	e.Close(t)
	e = openE2E(t, e.Cfg)
	require.Empty(t, e.Pull(t, "g", "fill", api.PullRequest{MaxMessages: 32, WaitMs: 1500}), "an acknowledged message came back")
	for i := range accepted {
		if !acked[body(i)[:6]] {
			t.Fatalf("%s was never acknowledged", body(i)[:6])
		}
	}
}
