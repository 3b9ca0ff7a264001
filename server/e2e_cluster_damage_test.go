package server_test

import (
	"bytes"
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
)

// TestClusterDamageFoundWhileRunning: a byte of a message in the
// leader's CommitLog changes under it while it runs. Its next read of it
// (a pull), or its scrubber (a pass every 100 ms here, so that a
// leadership moved on a loaded machine does not keep the damage unread),
// finds the damage: the replica (a leader first hands its leadership to
// a follower) stops — it no longer votes, leads or serves, and its
// /readyz says why and how it is rebuilt. The others go on; the message
// the damaged copy lost is intact on them and delivered. Restarted, the
// damaged replica refuses to start; rebuilt from the others it serves
// again.
func TestClusterDamageFoundWhileRunning(t *testing.T) {
	t.Parallel()
	c := startCluster(t, func(cfg *server.Config) {
		cfg.ScrubRate = 64 << 20
		cfg.Storage.ScrubInterval = 100 * time.Millisecond
	})
	lead := c.leader(t, nil)
	body := func(k int) string { return fmt.Sprintf("dmg-%03d-%s", k, strings.Repeat("y", 300)) }
	send := func(i, from, to int) {
		for k := from; k < to; k++ {
			r := c.do(t, i, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(fmt.Sprintf(`{"body":%q}`, body(k))), nil)
			require.Equal(t, http.StatusOK, r.Status, r.String())
		}
	}
	send(lead, 0, 30)
	require.Eventually(t, func() bool {
		lv := c.view(t, lead, nil)
		for _, p := range lv.Peers {
			if p.MatchIndex != lv.CommitIndex {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)

	cfg := c.nodes[lead].Cfg
	seg := filepath.Join(cfg.DataDir, "commitlog", fmt.Sprintf("%020d", 0))
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	at := bytes.Index(data, []byte(body(7)))
	require.Positive(t, at)
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{data[at+20] ^ 0x10}, int64(at+20))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	// A pull on the leader reads the damaged record (or its scrubber does).
	c.nodes[lead].Do(t, http.MethodPost, "/v1/groups/scan/topics/orders/pull", "application/json", []byte(`{"maxMessages":32}`), nil)
	require.Eventually(t, func() bool {
		r := c.nodes[lead].Do(t, http.MethodGet, "/readyz", "", nil, nil)
		return r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Body), "damaged")
	}, 10*time.Second, 10*time.Millisecond)
	r := c.nodes[lead].Do(t, http.MethodGet, "/readyz", "", nil, nil)
	require.Contains(t, string(r.Body), "no longer votes or leads")
	require.Contains(t, string(r.Body), "mqgate replica rebuild")
	require.Equal(t, http.StatusServiceUnavailable, c.nodes[lead].Do(t, http.MethodGet, "/v1/cluster", "", nil, nil).Status)

	// The others elected a leader and go on; nothing is lost.
	next := c.leader(t, nil, lead)
	send(next, 30, 35)
	got := c.pullAtLeast(t, next, "all", "orders", 35)
	bodies := map[string]bool{}
	for _, m := range got {
		bodies[m.Body] = true
	}
	for k := range 35 {
		require.True(t, bodies[body(k)], "message %d", k)
	}

	// Restarted, it refuses: its data dir is marked damaged.
	c.nodes[lead].Close(t)
	c.nodes[lead] = nil
	_, err = server.Open(t.Context(), cfg)
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, "marked damaged")
	require.ErrorContains(t, err, "mqgate replica rebuild")

	// Rebuilt from the others (what `mqgate replica rebuild` does, then
	// --join), it is promoted and serves again.
	_, err = server.SetReplicaAside(cfg.DataDir, time.Now())
	require.NoError(t, err)
	id := uint64(lead + 1)
	var v api.Cluster
	servertest.Decode(t, c.do(t, next, http.MethodDelete, fmt.Sprintf("/v1/cluster/members/%d", id), "", nil, nil), http.StatusOK, &v)
	addr := strings.Split(strings.Split(cfg.Peers, ",")[lead], "=")[1]
	servertest.Decode(t, c.json(t, next, http.MethodPost, "/v1/cluster/learners", api.AddLearnerRequest{ID: id, Address: addr}), http.StatusOK, &v)
	rebuilt := cfg
	rebuilt.Join = true
	c.nodes[lead] = openE2E(t, rebuilt)
	require.Eventually(t, func() bool {
		return c.do(t, next, http.MethodPost, fmt.Sprintf("/v1/cluster/members/%d/promote", id), "", nil, nil).Status == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		return c.nodes[lead].Do(t, http.MethodGet, "/readyz", "", nil, nil).Status == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)
	send(lead, 35, 36)
}
