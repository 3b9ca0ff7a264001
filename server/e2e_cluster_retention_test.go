package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestClusterCatchesUpPastRetention: retention works in a cluster and
// replicas still catch up past it. A group consumes on the leader (its
// progress and lease records are what a leader that wrote no snapshots
// kept forever); the leader's old segments expire (their modification
// times are set back two hours) and its retention deletes them, the
// followers with it. A follower that was away meanwhile cannot catch up
// from the log; rebuilt (data dir set aside, removed, added back as a
// learner, started with --join) it starts from a copy of the leader's
// data, as a new replica joining after the cut does. Both then hold the
// leader's segments byte for byte from its first one on, and the group
// goes on where it was, on the new replica too.
func TestClusterCatchesUpPastRetention(t *testing.T) {
	t.Parallel()
	small := func(cfg *server.Config) {
		cfg.SegmentSize, cfg.MaxMessageSize, cfg.MaxRequestSize = 1<<20, 256<<10, 512<<10
		cfg.Retention, cfg.RetentionInterval = time.Hour, 50*time.Millisecond
	}
	c := startCluster(t, small)
	var aside string
	lead := c.leader(t, nil)
	away := (lead + 1) % 3
	send := func(tag string, n int) {
		for k := range n {
			r := c.do(t, lead, http.MethodPost, "/v1/topics/orders/messages", "application/json",
				[]byte(fmt.Sprintf(`{"body":"%s-%d-%s"}`, tag, k, strings.Repeat("z", 100_000))), nil)
			require.Equal(t, http.StatusOK, r.Status, r.String())
		}
	}
	consume := func(n int) {
		t.Helper()
		for got := 0; got < n; {
			for _, m := range c.nodes[lead].PullN(t, "billing", "orders", 1, 30_000, 5*time.Second) {
				c.nodes[lead].Ack(t, "billing", m.Receipt)
				got++
			}
		}
	}
	send("early", 20)
	consume(20)

	c.nodes[away].Close(t)
	awayCfg := c.nodes[away].Cfg
	c.nodes[away] = nil
	awaySegs := segmentNames(t, filepath.Join(awayCfg.DataDir, "commitlog"))
	awayEnd, err := strconv.ParseInt(awaySegs[len(awaySegs)-1], 10, 64)
	require.NoError(t, err)
	awayEnd += int64(awayCfg.SegmentSize) // at most the end of its last segment
	send("while-away", 30)
	consume(30) // retention by age drops what is not consumed; here, nothing

	// The leader's sealed segments grow old; its retention deletes them
	// once its snapshots cover the progress and lease records in them.
	leaderLog := filepath.Join(c.nodes[lead].Cfg.DataDir, "commitlog")
	old := time.Now().Add(-2 * time.Hour)
	require.Eventually(t, func() bool {
		segs := segmentNames(t, leaderLog)
		for _, name := range segs[:len(segs)-1] {
			_ = os.Chtimes(filepath.Join(leaderLog, name), old, old)
		}
		base, err := strconv.ParseInt(segs[0], 10, 64)
		require.NoError(t, err)
		return base >= awayEnd
	}, 30*time.Second, 100*time.Millisecond, "the leader's retention deletes its old segments, past the away replica's log")
	cutFirst := segmentNames(t, leaderLog)[0]
	other := 3 - lead - away
	require.Eventually(t, func() bool {
		return segmentNames(t, filepath.Join(c.nodes[other].Cfg.DataDir, "commitlog"))[0] == cutFirst
	}, 10*time.Second, 10*time.Millisecond, "the follower applies the leader's cut")

	// A new replica joins after the cut.
	addr4 := freeAddrs(t, 1)[0]
	cfg4 := servertest.Config(t, t.TempDir())
	small(&cfg4)
	cfg4.NodeID, cfg4.Join, cfg4.RaftTick = 4, true, 50*time.Millisecond
	cfg4.Peers = awayCfg.Peers + ",4=" + addr4
	c.nodes = append(c.nodes, openE2E(t, cfg4))
	var v api.Cluster
	servertest.Decode(t, c.json(t, lead, http.MethodPost, "/v1/cluster/learners", api.AddLearnerRequest{ID: 4, Address: addr4}), http.StatusOK, &v)

	// The away replica comes back: the log cannot bring it up to date.
	c.nodes[away] = openE2E(t, awayCfg)
	send("back", 5)
	time.Sleep(time.Second)
	require.Less(t, matchIndex(t, c.view(t, lead, nil), uint64(away+1)), c.view(t, lead, nil).CommitIndex,
		"a replica behind a retention cut stays behind")
	require.Eventually(t, func() bool { return peerOf(c.view(t, lead, nil), uint64(away+1)).NeedsRebuild }, 10*time.Second, 10*time.Millisecond,
		"the leader's view says it needs a rebuild")
	require.False(t, peerOf(c.view(t, lead, nil), 4).NeedsRebuild, "the replica that started from a copy does not")

	// Rebuilt, it starts from a copy.
	c.nodes[away].Close(t)
	c.nodes[away] = nil
	aside, err = server.SetReplicaAside(awayCfg.DataDir, time.Now())
	require.NoError(t, err)
	require.NotEmpty(t, aside)
	servertest.Decode(t, c.do(t, lead, http.MethodDelete, fmt.Sprintf("/v1/cluster/members/%d", away+1), "", nil, nil), http.StatusOK, &v)
	addrAway := strings.Split(strings.Split(awayCfg.Peers, ",")[away], "=")[1]
	servertest.Decode(t, c.json(t, lead, http.MethodPost, "/v1/cluster/learners", api.AddLearnerRequest{ID: uint64(away + 1), Address: addrAway}), http.StatusOK, &v)
	rebuilt := awayCfg
	rebuilt.Join = true
	c.nodes[away] = openE2E(t, rebuilt)

	send("after", 5)
	for _, id := range []int{4, away + 1} {
		require.Eventually(t, func() bool {
			lv := c.view(t, lead, nil)
			return matchIndex(t, lv, uint64(id)) == lv.CommitIndex
		}, 20*time.Second, 10*time.Millisecond, "replica %d catches up", id)
		require.Eventually(t, func() bool {
			return c.do(t, lead, http.MethodPost, fmt.Sprintf("/v1/cluster/members/%d/promote", id), "", nil, nil).Status == http.StatusOK
		}, 20*time.Second, 20*time.Millisecond)
	}
	for _, p := range c.view(t, lead, nil).Peers {
		require.False(t, p.NeedsRebuild, "replica %d", p.ID)
	}
	// Byte for byte the leader's segments, from its first one on (the
	// active one aside, which a write may still be filling).
	lsegs := segmentNames(t, leaderLog)
	require.Equal(t, cutFirst, lsegs[0])
	for _, dir := range []string{cfg4.DataDir, awayCfg.DataDir} {
		segs := segmentNames(t, filepath.Join(dir, "commitlog"))
		require.Equal(t, lsegs[0], segs[0], "%s starts where the leader's log does", dir)
		for _, name := range lsegs[:len(lsegs)-1] {
			want, err := os.ReadFile(filepath.Join(leaderLog, name))
			require.NoError(t, err)
			got, err := os.ReadFile(filepath.Join(dir, "commitlog", name))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got), "%s: segment %s differs", dir, name)
		}
	}
	// The group goes on where it was: the ten sent since, none of the fifty
	// it acknowledged before.
	got := c.pullAtLeast(t, 3, "billing", "orders", 10)
	require.Len(t, got, 10)
	for _, m := range got {
		require.True(t, strings.HasPrefix(m.Body, "back-") || strings.HasPrefix(m.Body, "after-"), "an acknowledged message came back: %s", m.Body[:20])
	}
}

// segmentNames lists a CommitLog directory's segment files in order.
func segmentNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		if len(de.Name()) == 20 && !strings.Contains(de.Name(), ".") {
			out = append(out, de.Name())
		}
	}
	sort.Strings(out)
	require.NotEmpty(t, out)
	return out
}

// matchIndex is how far the view's leader knows replica id holds its log.
func matchIndex(t *testing.T, v api.Cluster, id uint64) uint64 {
	t.Helper()
	return peerOf(v, id).MatchIndex
}

// peerOf is replica id in the view (zero when it is not there).
func peerOf(v api.Cluster, id uint64) api.ClusterPeer {
	for _, p := range v.Peers {
		if p.ID == id {
			return p
		}
	}
	return api.ClusterPeer{}
}
