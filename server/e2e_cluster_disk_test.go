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

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestClusterFollowerDiskFull: another process takes every free block of
// one follower's disk. The follower cannot persist what the leader sends
// it: it acknowledges none of it and falls behind, its /readyz says why,
// and it does not stop; the leader goes on with the third replica. Once
// the space is freed it catches up by itself (no restart) and is a
// replica the quorum can count on again: with the third one closed, the
// writes go on with it, and every message is delivered.
func TestClusterFollowerDiskFull(t *testing.T) {
	t.Parallel()
	mount := storagetest.MountTmpfs(t, 24<<20)
	c := &e2eCluster{peers: freeAddrs(t, 3), nodes: make([]*e2eServer, 3)}
	var spec []string
	for i, p := range c.peers {
		spec = append(spec, fmt.Sprintf("%d=%s", i+1, p))
	}
	cfgs := make([]server.Config, 3)
	for i := range 3 {
		dir := t.TempDir()
		if i == 2 {
			dir = filepath.Join(mount, "data")
		}
		cfg := servertest.Config(t, dir)
		cfg.NodeID, cfg.Peers, cfg.RaftTick = uint64(i+1), strings.Join(spec, ","), 50*time.Millisecond
		cfg.SegmentSize = 1 << 20
		cfg.MaxMessageSize = 64 << 10
		cfg.DiskCheckInterval = 10 * time.Millisecond
		cfg.Storage = storage.Options{QueueEntriesPerFile: 4096, IndexSlots: 1024, IndexEntries: 8192}
		cfgs[i] = cfg
	}
	// Node 3 (on the small disk) starts once 1 and 2 elected a leader,
	// so that it is a follower.
	c.nodes[0], c.nodes[1] = openE2E(t, cfgs[0]), openE2E(t, cfgs[1])
	lead := c.leader(t, nil)
	c.nodes[2] = openE2E(t, cfgs[2])
	sent := 0
	send := func(n int) {
		for range n {
			r := c.do(t, lead, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(fmt.Sprintf(`{"body":%q}`, diskBody(sent))), nil)
			require.Equal(t, http.StatusOK, r.Status, r.String())
			sent++
		}
	}
	caughtUp := func() bool {
		lv := c.view(t, lead, nil)
		return matchIndex(t, lv, 3) == lv.CommitIndex
	}
	send(50)
	require.Eventually(t, caughtUp, 20*time.Second, 10*time.Millisecond)

	storagetest.FillTo(t, filepath.Join(mount, "filler"), 1)
	send(600) // 2.4 MiB: more than the follower's active segment can take
	require.Eventually(t, func() bool {
		r := c.nodes[2].Do(t, http.MethodGet, "/readyz", "", nil, nil)
		return r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Body), "disk space")
	}, 20*time.Second, 10*time.Millisecond, "the full follower says why it is not ready")
	require.False(t, caughtUp(), "the full follower acknowledged what it could not persist")

	require.NoError(t, os.Remove(filepath.Join(mount, "filler")))
	require.Eventually(t, caughtUp, 30*time.Second, 10*time.Millisecond, "the follower catches up once space returns")
	require.Eventually(t, func() bool {
		return c.nodes[2].Do(t, http.MethodGet, "/readyz", "", nil, nil).Status == http.StatusOK
	}, 20*time.Second, 10*time.Millisecond)

	// The quorum counts on it again: the other follower goes away.
	other := 1 - lead // nodes 1 and 2 are 0 and 1 here
	c.nodes[other].Close(t)
	c.nodes[other] = nil
	send(20)
	got := c.pullAtLeast(t, lead, "all", "orders", sent)
	require.Len(t, got, sent)
}
