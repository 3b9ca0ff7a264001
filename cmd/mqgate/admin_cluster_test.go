package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// clusterParts splits `cluster status`'s table into its key/value rows
// and its replicas' rows.
func clusterParts(t *testing.T, out string) (map[string]string, []map[string]string) {
	t.Helper()
	head, replicas, ok := strings.Cut(out, "\n\n")
	require.True(t, ok, "a blank line between the node and its replicas:\n%s", out)
	return kvRows(head), rows(t, replicas)
}

// startCluster opens n replicas of one cluster in this process (ids 1…n,
// Raft's tick 50 ms) on fresh data dirs and free loopback ports; Cleanup
// closes them.
func startCluster(t *testing.T, n int) []*servertest.Server {
	t.Helper()
	peers := make([]string, n)
	for i := range peers {
		peers[i] = fmt.Sprintf("%d=%s", i+1, freeAddr(t))
	}
	nodes := make([]*servertest.Server, n)
	for i := range nodes {
		cfg := servertest.Config(t, t.TempDir())
		cfg.NodeID = uint64(i + 1)
		cfg.Peers = strings.Join(peers, ",")
		cfg.RaftTick = 50 * time.Millisecond
		cfg.ShutdownTimeout = 5 * time.Second
		nodes[i] = servertest.Open(t, cfg)
	}
	return nodes
}

// servingLeader waits until the open nodes (all but the id gone, 0 for
// none) agree on a leader other than gone that serves; it returns its id.
func servingLeader(t *testing.T, nodes []*servertest.Server, gone int64) int64 {
	t.Helper()
	var leader int64
	servertest.Eventually(t, 15*time.Second, func() (bool, string) {
		leader = 0
		var agreed int64
		var views []string
		for i, e := range nodes {
			if int64(i+1) == gone {
				continue
			}
			var cl api.Cluster
			servertest.Decode(t, e.Get(t, "/v1/cluster"), http.StatusOK, &cl)
			views = append(views, fmt.Sprintf("node %d: %s, leader %d, serving %v", cl.NodeID, cl.Role, cl.Leader, cl.Serving))
			l := int64(cl.Leader)
			if l == 0 || l == gone || (agreed != 0 && l != agreed) {
				return false, strings.Join(views, "; ")
			}
			agreed = l
			if cl.Serving {
				leader = l
			}
		}
		return leader != 0, strings.Join(views, "; ")
	})
	return leader
}

// TestCLIClusterStatus: `mqgate cluster status` against a single node
// (standalone) and against each replica of an in-process cluster of three,
// before and after its leader is closed, in the three outputs.
func TestCLIClusterStatus(t *testing.T) {
	t.Parallel()
	t.Run("Standalone", func(t *testing.T) {
		t.Parallel()
		cli := cliOf(t, servertest.Start(t))
		kv := kvRows(cli.ok("cluster", "status"))
		require.Equal(t, "standalone", kv["role"])
		require.Contains(t, kv["replicas"], "a single node")
		var cl api.Cluster
		cli.json(&cl, "cluster", "status")
		require.Equal(t, "standalone", cl.Role)
		require.Empty(t, cl.Peers)
		var y map[string]any
		require.NoError(t, yaml.Unmarshal([]byte(cli.ok("cluster", "status", "-o", "yaml")), &y))
		require.Equal(t, "standalone", y["role"])
	})

	t.Run("ThreeReplicas", func(t *testing.T) {
		t.Parallel()
		nodes := startCluster(t, 3)
		leader := servingLeader(t, nodes, 0)
		peers := strings.Split(nodes[0].Cfg.Peers, ",")
		address := func(id int64) string { return strings.TrimPrefix(peers[id-1], fmt.Sprintf("%d=", id)) }

		for i, e := range nodes {
			id := int64(i + 1)
			cli := cliOf(t, e)
			kv, replicas := clusterParts(t, cli.ok("cluster", "status"))
			role := "follower"
			wantLeader := fmt.Sprintf("%d (%s)", leader, address(leader))
			if id == leader {
				role, wantLeader = "leader", fmt.Sprintf("%d (this node)", leader)
			}
			require.Equal(t, fmt.Sprint(id), kv["nodeId"], "node %d", id)
			require.Equal(t, role, kv["role"], "node %d", id)
			require.Equal(t, wantLeader, kv["leader"], "node %d", id)
			require.Equal(t, map[bool]string{true: "yes", false: "no"}[id == leader], kv["serving"], "node %d", id)
			require.NotEqual(t, "0", kv["term"], "node %d", id)
			require.Len(t, replicas, 3, "node %d", id)
			for j, r := range replicas {
				rid := int64(j + 1)
				require.Equal(t, fmt.Sprint(rid), r["ID"])
				require.Equal(t, address(rid), r["ADDRESS"])
				require.Equal(t, map[bool]string{true: "yes", false: ""}[rid == id], r["THIS-NODE"])
				require.Equal(t, map[bool]string{true: "leader", false: "follower"}[rid == leader], r["ROLE"], "node %d's view of %d", id, rid)
				if id == leader {
					// Every replica has at least the entry of the leader's term.
					require.NotEqual(t, "-", r["MATCH-INDEX"], "the leader knows %d's match index", rid)
					require.NotEqual(t, "0", r["MATCH-INDEX"], "the leader knows %d's match index", rid)
					require.Regexp(t, `^\d+$`, r["LAG-BYTES"])
				} else {
					require.Equal(t, "-", r["MATCH-INDEX"], "a follower knows no match index")
					require.Equal(t, "-", r["LAG-BYTES"])
				}
			}
			var cl api.Cluster
			cli.json(&cl, "cluster", "status")
			require.Equal(t, uint64(id), cl.NodeID)
			require.Equal(t, uint64(leader), cl.Leader)
			require.Len(t, cl.Peers, 3)
			if id != 1 {
				continue // -o yaml once: it is the same answer
			}
			var y struct {
				NodeID uint64 `yaml:"nodeId"`
				Leader uint64 `yaml:"leader"`
				Peers  []struct {
					Address string `yaml:"address"`
				} `yaml:"peers"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(cli.ok("cluster", "status", "-o", "yaml")), &y))
			require.Equal(t, uint64(id), y.NodeID)
			require.Equal(t, uint64(leader), y.Leader)
			require.Len(t, y.Peers, 3)
		}

		// The leader goes: each survivor names the new one (by --server,
		// no forwarding: a node answers for itself).
		nodes[leader-1].Close(t)
		next := servingLeader(t, nodes, leader)
		require.NotEqual(t, leader, next)
		for i, e := range nodes {
			id := int64(i + 1)
			if id == leader {
				continue
			}
			kv, replicas := clusterParts(t, cliOf(t, e).ok("cluster", "status"))
			require.Equal(t, fmt.Sprint(next), strings.Fields(kv["leader"])[0], "node %d after the leader closed", id)
			require.Equal(t, "follower", replicas[leader-1]["ROLE"], "the closed replica is still listed")
			require.Equal(t, "leader", replicas[next-1]["ROLE"])
		}
		// The closed node's own port refuses.
		cliOf(t, nodes[leader-1]).fails(1, []string{"connection refused"}, "cluster", "status")
	})
}

// TestCLIClusterMembership: a dead replica replaced with the CLI — a new
// one started with --join is added as a learner, promoted, and the dead
// one removed; removing the leader waits while it hands its role over.
// A single node refuses (not a cluster).
func TestCLIClusterMembership(t *testing.T) {
	t.Parallel()
	cliOf(t, servertest.Start(t)).fails(1, []string{"not a cluster"}, "cluster", "add-learner", "4", "127.0.0.1:7104")

	nodes := startCluster(t, 3)
	leader := servingLeader(t, nodes, 0)
	dead := leader%3 + 1 // a follower
	nodes[dead-1].Close(t)

	addr4 := freeAddr(t)
	cfg := servertest.Config(t, t.TempDir())
	cfg.NodeID, cfg.Join, cfg.RaftTick = 4, true, 50*time.Millisecond
	cfg.Peers = nodes[0].Cfg.Peers + ",4=" + addr4
	cfg.ShutdownTimeout = 5 * time.Second
	nodes = append(nodes, servertest.Open(t, cfg))
	via := cliOf(t, nodes[leader-1])

	_, replicas := clusterParts(t, via.ok("cluster", "add-learner", "4", addr4))
	require.Len(t, replicas, 4)
	require.Equal(t, "learner", replicas[3]["ROLE"])
	via.fails(1, []string{"already a member"}, "cluster", "add-learner", "4", addr4)
	servertest.Eventually(t, 15*time.Second, func() (bool, string) {
		var cl api.Cluster
		servertest.Decode(t, nodes[leader-1].Get(t, "/v1/cluster"), http.StatusOK, &cl)
		return cl.Peers[3].MatchIndex == cl.CommitIndex, fmt.Sprintf("%+v", cl.Peers)
	})
	via.ok("cluster", "promote", "4")
	_, replicas = clusterParts(t, via.ok("cluster", "remove", fmt.Sprint(dead)))
	require.Len(t, replicas, 3)
	for _, r := range replicas {
		require.NotEqual(t, fmt.Sprint(dead), r["ID"])
		require.NotEqual(t, "learner", r["ROLE"])
	}

	// Removing the leader: the command waits for the hand-over.
	other := int64(1)
	for other == leader || other == dead {
		other++
	}
	_, replicas = clusterParts(t, cliOf(t, nodes[other-1]).ok("cluster", "remove", fmt.Sprint(leader), "--timeout", "30s"))
	require.Len(t, replicas, 2)
	for _, r := range replicas {
		require.NotEqual(t, fmt.Sprint(leader), r["ID"])
	}
}

// TestCLIReplicaRebuild: a replica whose log is damaged refuses to start;
// `mqgate replica rebuild`, run against another replica, refuses while
// the replica's server runs and when --server is the replica itself,
// then moves its data dir aside (kept, damage included), removes the
// voter and adds it back as a learner. A promotion before it caught up
// is refused (learner-behind); started again with --join, it catches up,
// `cluster promote --wait` promotes it, and the cluster then needs it for
// every majority: with the third replica gone, writes still commit.
func TestCLIReplicaRebuild(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3)
	leader := servingLeader(t, nodes, 0)
	f := leader%3 + 1 // the replica rebuilt, a follower
	third := 6 - leader - f
	lead := nodes[leader-1]
	for k := range 60 {
		lead.Send(t, "orders", api.SendMessage{Body: fmt.Sprintf("m-%d-%s", k, strings.Repeat("x", 300))})
	}
	fcfg := nodes[f-1].Cfg
	rebuild := []string{"replica", "rebuild", "--data-dir", fcfg.DataDir, "--node-id", fmt.Sprint(f), "--peers", fcfg.Peers}
	cliOf(t, lead).fails(1, []string{"stop the server first"}, rebuild...)
	cliOf(t, nodes[f-1]).fails(1, []string{fmt.Sprintf("is replica %d itself", f)}, rebuild...)

	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		var lv, fv api.Cluster
		servertest.Decode(t, lead.Get(t, "/v1/cluster"), http.StatusOK, &lv)
		servertest.Decode(t, nodes[f-1].Get(t, "/v1/cluster"), http.StatusOK, &fv)
		return fv.AppliedIndex == lv.CommitIndex, "the follower applies the log"
	})
	nodes[f-1].Close(t)
	seg := filepath.Join(fcfg.DataDir, "commitlog", fmt.Sprintf("%020d", 0))
	file, err := os.OpenFile(seg, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = file.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, 4000)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	_, err = server.Open(t.Context(), fcfg)
	require.ErrorContains(t, err, "mqgate replica rebuild")

	var r cliResult
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		// A child process another test forks may hold the closed
		// server's lock until it execs.
		r = runCLI(t, []string{"MQGATE_SERVER=" + lead.Base}, "", rebuild...)
		return r.code == 0 || !strings.Contains(r.stderr, "stop the server first"), r.stderr
	})
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	require.Contains(t, r.stderr, fmt.Sprintf("removed voter %d", f))
	require.Contains(t, r.stderr, fmt.Sprintf("added %d as a learner", f))
	_, replicas := clusterParts(t, r.stdout)
	require.Len(t, replicas, 3, "the view the rebuild prints holds the learner it added:\n%s", r.stdout)
	require.Equal(t, "learner", replicas[f-1]["ROLE"])
	aside, err := filepath.Glob(fcfg.DataDir + ".damaged-*")
	require.NoError(t, err)
	require.Len(t, aside, 1, "the damaged dir is kept")
	require.FileExists(t, filepath.Join(aside[0], "commitlog", fmt.Sprintf("%020d", 0)))
	entries, err := os.ReadDir(fcfg.DataDir)
	require.NoError(t, err)
	require.Empty(t, entries)

	via := cliOf(t, lead)
	via.fails(1, []string{"behind the leader's log", "learner-behind"}, "cluster", "promote", fmt.Sprint(f))
	fcfg.Join = true
	nodes[f-1] = servertest.Open(t, fcfg)
	_, replicas = clusterParts(t, via.ok("cluster", "promote", fmt.Sprint(f), "--wait", "30s"))
	for _, r := range replicas {
		require.NotEqual(t, "learner", r["ROLE"])
	}

	nodes[third-1].Close(t)
	sent := lead.Send(t, "orders", api.SendMessage{Body: "needs the rebuilt replica"})
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		var fv api.Cluster
		servertest.Decode(t, nodes[f-1].Get(t, "/v1/cluster"), http.StatusOK, &fv)
		return fv.AppliedIndex >= fv.CommitIndex && fv.CommitIndex > 0, fmt.Sprintf("%+v", fv)
	})
	got := nodes[f-1].Message(t, sent.MessageID)
	require.Equal(t, "needs the rebuilt replica", got.Body)
}
