package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/internal/testnet"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/peer"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
	"github.com/mqgate/mqgate/server/servertest"
	"github.com/mqgate/mqgate/storage"
)

// freeAddrs reserves n loopback addresses for servers started later.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = testnet.FreeAddr(t)
	}
	return out
}

// e2eCluster is three replicas in this process, each a server on its own
// data dir, client port and peer port.
type e2eCluster struct {
	nodes []*e2eServer
	peers []string
}

func startCluster(t *testing.T, opts ...func(*server.Config)) *e2eCluster {
	t.Helper()
	c := &e2eCluster{peers: freeAddrs(t, 3)}
	var spec []string
	for i, p := range c.peers {
		spec = append(spec, fmt.Sprintf("%d=%s", i+1, p))
	}
	for i := range 3 {
		cfg := servertest.Config(t, t.TempDir())
		cfg.NodeID, cfg.Peers, cfg.RaftTick = uint64(i+1), strings.Join(spec, ","), 50*time.Millisecond
		for _, o := range opts {
			o(&cfg)
		}
		c.nodes = append(c.nodes, openE2E(t, cfg))
	}
	return c
}

// do is a request to node i, retried as a careful client would: while
// the answer is 503 no-leader (nothing was written: between leaders, or a
// leader change on a loaded machine), and, for a send, which do gives an
// Idempotency-Key, while it is 503 write-outcome-unknown. Any other
// answer is returned.
func (c *e2eCluster) do(t *testing.T, i int, method, path, contentType string, body []byte, header http.Header) servertest.Resp {
	t.Helper()
	if method == http.MethodPost && strings.HasSuffix(path, "/messages") {
		header = header.Clone()
		if header == nil {
			header = http.Header{}
		}
		if header.Get("Idempotency-Key") == "" {
			header.Set("Idempotency-Key", fmt.Sprintf("e2e-%d", sendKeys.Add(1)))
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.nodes[i].Do(t, method, path, contentType, body, header)
		retry := r.Status == http.StatusServiceUnavailable && (strings.Contains(string(r.Body), `"code":"no-leader"`) ||
			header.Get("Idempotency-Key") != "" && strings.Contains(string(r.Body), `"code":"write-outcome-unknown"`))
		if !retry || time.Now().After(deadline) {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendKeys numbers the Idempotency-Keys do gives sends.
var sendKeys atomic.Int64

// json is do with a JSON body.
func (c *e2eCluster) json(t *testing.T, i int, method, path string, in any) servertest.Resp {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	return c.do(t, i, method, path, "application/json", b, nil)
}

// pullAtLeast pulls group's messages of topic through node i (without
// acknowledging them) until n distinct ones came, and returns them by id.
func (c *e2eCluster) pullAtLeast(t *testing.T, i int, group, topic string, n int) map[string]api.PulledMessage {
	t.Helper()
	got := map[string]api.PulledMessage{}
	require.Eventually(t, func() bool {
		var p api.PullResponse
		r := c.do(t, i, http.MethodPost, "/v1/groups/"+group+"/topics/"+topic+"/pull", "application/json", []byte(`{"maxMessages":16,"waitMs":200}`), nil)
		if r.Status != http.StatusOK {
			return false
		}
		require.NoError(t, json.Unmarshal(r.Body, &p))
		for _, m := range p.Messages {
			got[m.MessageID] = m
		}
		return len(got) >= n
	}, 30*time.Second, 10*time.Millisecond, "%d messages of %s for %s", n, topic, group)
	return got
}

// view is GET /v1/cluster on node i.
func (c *e2eCluster) view(t *testing.T, i int, header http.Header) api.Cluster {
	t.Helper()
	var v api.Cluster
	servertest.Decode(t, c.nodes[i].Do(t, http.MethodGet, "/v1/cluster", "", nil, header), http.StatusOK, &v)
	return v
}

// leader waits for the replica that serves and returns its index.
func (c *e2eCluster) leader(t *testing.T, header http.Header, skip ...int) int {
	t.Helper()
	lead := -1
	require.Eventually(t, func() bool {
		for i := range c.nodes {
			if c.nodes[i] == nil || contains(skip, i) {
				continue
			}
			if c.view(t, i, header).Serving {
				lead = i
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond)
	return lead
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// TestClusterServesFromAnyNode: three replicas with accounts and a
// cluster secret. Every node answers GET /v1/cluster for itself; the
// followers forward the API to the leader with the caller's credentials
// and address: a producer sends through one follower, a consumer pulls
// and acks through the other, a wrong secret gets 401 and a caller from
// an address its account does not allow 403, as on the leader. The peer
// port refuses a request without the cluster secret. The leader closed,
// the others elect another and serve what was sent; with one replica
// left, it reports no quorum (/readyz 503) and answers 503 no-leader.
func TestClusterServesFromAnyNode(t *testing.T) {
	t.Parallel()
	acl := newACL(t, matrixACL(t))
	c := startCluster(t, func(cfg *server.Config) {
		cfg.ACLFile, cfg.ClusterSecret = acl, "cluster-secret-0001"
		cfg.AuthFailuresPerMinute = 100_000
	})
	admin := basic("admin", adminSecret)
	lead := c.leader(t, admin)
	f1, f2 := (lead+1)%3, (lead+2)%3
	for i := range c.nodes {
		// A follower learns the leader from its first message; the leader
		// serves once one follower has answered, maybe before the other
		// has heard from it.
		require.Eventually(t, func() bool { return c.view(t, i, admin).Leader == uint64(lead+1) }, 10*time.Second, 10*time.Millisecond)
		v := c.view(t, i, admin)
		require.Equal(t, uint64(i+1), v.NodeID)
		require.Equal(t, uint64(lead+1), v.Leader)
		require.Len(t, v.Peers, 3)
		require.Equal(t, i == lead, v.Serving)
	}
	lv := c.view(t, lead, admin)
	require.Equal(t, "leader", lv.Role)
	for _, p := range lv.Peers {
		require.Positive(t, p.MatchIndex, "the leader knows every replica's match index")
	}

	// A producer through one follower, a consumer through the other.
	body := []byte(`{"body":"through a follower"}`)
	sent := c.do(t, f1, http.MethodPost, "/v1/topics/orders/messages", "application/json", body, basic("producer", producerSecret))
	require.Equal(t, http.StatusOK, sent.Status, sent.String())
	var pulled api.PullResponse
	servertest.Decode(t, c.do(t, f2, http.MethodPost, "/v1/groups/billing/topics/orders/pull", "application/json", []byte(`{"maxMessages":4,"waitMs":2000}`),
		basic("consumer", consumerSecret)), http.StatusOK, &pulled)
	require.Len(t, pulled.Messages, 1)
	require.Equal(t, "through a follower", pulled.Messages[0].Body)
	ack := c.do(t, f1, http.MethodPost, "/v1/groups/billing/ack", "application/json",
		[]byte(`{"receipts":["`+pulled.Messages[0].Receipt+`"]}`), basic("consumer", consumerSecret))
	require.Equal(t, http.StatusOK, ack.Status, ack.String())

	// The leader checks the caller's credentials and address.
	servertest.WantProblem(t, c.nodes[f1].Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", body,
		basic("producer", "wrong-secret")), http.StatusUnauthorized, "unauthenticated")
	servertest.WantProblem(t, c.nodes[f1].from(t, "127.0.0.3").Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", body,
		basic("producer", producerSecret)), http.StatusForbidden, "forbidden")

	// A body over the limit, through a follower: 413 as on the leader.
	big := []byte(`{"body":"` + strings.Repeat("x", int(c.nodes[f1].Cfg.MaxRequestSize)+1) + `"}`)
	servertest.WantProblem(t, c.nodes[f1].Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", big,
		basic("producer", producerSecret)), http.StatusRequestEntityTooLarge, "body-too-large")

	// The peer port wants the cluster secret.
	for _, path := range []string{"/raft/v1/messages", "/forward/v1/topics"} {
		resp, err := http.Post("http://"+c.peers[f1]+path, "application/octet-stream", bytes.NewReader(nil))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
	}
	for _, i := range []int{f1, lead} { // a copy of the data, too
		resp, err := http.Get("http://" + c.peers[i] + peer.CopyPath)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}

	// The leader goes; the others elect another and keep what was sent.
	c.nodes[lead].Close(t)
	c.nodes[lead] = nil
	next := c.leader(t, admin, lead)
	require.NotEqual(t, lead, next)
	other := f1
	if other == next {
		other = f2
	}
	found := c.do(t, other, http.MethodGet, "/v1/messages/"+pulled.Messages[0].MessageID, "", nil, admin)
	require.Equal(t, http.StatusOK, found.Status, found.String())

	// One replica left: no quorum.
	c.nodes[next].Close(t)
	c.nodes[next] = nil
	require.Eventually(t, func() bool {
		r := c.nodes[other].Do(t, http.MethodGet, "/readyz", "", nil, nil)
		return r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Body), "quorum")
	}, 20*time.Second, 20*time.Millisecond)
	servertest.WantProblem(t, c.nodes[other].Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", body,
		basic("producer", producerSecret)), http.StatusServiceUnavailable, "no-leader")
}

// TestClusterReplacesADeadNode: a replica whose disk died is replaced
// under writes, through the API any node serves: a new empty replica
// started with --join is added as a learner, catches up, is promoted and
// the dead one removed; the cluster then needs the new replica for its
// majority, and still has every message it acknowledged.
func TestClusterReplacesADeadNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	lead := c.leader(t, nil)
	dead := (lead + 1) % 3
	keep := (lead + 2) % 3
	var ids []string
	send := func(via int, tag string, n int) {
		for k := range n {
			var res api.SendResponse
			servertest.Decode(t, c.do(t, via, http.MethodPost, "/v1/topics/orders/messages", "application/json",
				[]byte(fmt.Sprintf(`{"body":"%s-%d"}`, tag, k)), nil), http.StatusOK, &res)
			ids = append(ids, res.Results[0].MessageID)
		}
	}
	send(keep, "before", 10)

	// The dead replica's disk is gone.
	deadDir := c.nodes[dead].Cfg.DataDir
	c.nodes[dead].Close(t)
	c.nodes[dead] = nil
	require.NoError(t, os.RemoveAll(deadDir))
	send(keep, "degraded", 5)

	// A new replica, 4, joins.
	addr4 := freeAddrs(t, 1)[0]
	cfg := servertest.Config(t, t.TempDir())
	cfg.NodeID, cfg.Join, cfg.RaftTick = 4, true, 50*time.Millisecond
	cfg.Peers = c.nodes[keep].Cfg.Peers + ",4=" + addr4
	c.nodes = append(c.nodes, openE2E(t, cfg))
	// It started from a copy of the leader's data, so it knows the
	// configuration, which does not hold it yet.
	joined := c.view(t, 3, nil)
	require.Len(t, joined.Peers, 3)
	for _, p := range joined.Peers {
		require.NotEqual(t, uint64(4), p.ID, "a joining replica is in no configuration yet")
	}

	var v api.Cluster
	servertest.Decode(t, c.json(t, keep, http.MethodPost, "/v1/cluster/learners", api.AddLearnerRequest{ID: 4, Address: addr4}), http.StatusOK, &v)
	require.Len(t, v.Peers, 4)
	servertest.WantProblem(t, c.nodes[keep].JSON(t, http.MethodPost, "/v1/cluster/learners", api.AddLearnerRequest{ID: 4, Address: addr4}),
		http.StatusConflict, "membership-conflict")
	require.Eventually(t, func() bool {
		lv := c.view(t, lead, nil)
		for _, p := range lv.Peers {
			if p.ID == 4 {
				return p.Role == "learner" && p.MatchIndex == lv.CommitIndex
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond)
	servertest.Decode(t, c.do(t, 3, http.MethodPost, "/v1/cluster/members/4/promote", "", nil, nil), http.StatusOK, &v)
	servertest.Decode(t, c.do(t, 3, http.MethodDelete, fmt.Sprintf("/v1/cluster/members/%d", dead+1), "", nil, nil), http.StatusOK, &v)
	require.Len(t, v.Peers, 3)
	for _, p := range v.Peers {
		require.NotEqual(t, uint64(dead+1), p.ID)
		require.NotEqual(t, "learner", p.Role)
	}
	send(3, "replaced", 5)

	// The new replica is now part of every majority: with the other
	// follower gone, the leader and it still commit.
	c.nodes[keep].Close(t)
	c.nodes[keep] = nil
	send(lead, "needs-4", 3)
	for _, id := range ids {
		r := c.do(t, 3, http.MethodGet, "/v1/messages/"+id, "", nil, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", id, r.String())
	}

	// Removing the leader: it hands its role to 4 first (503 no-leader;
	// or write-outcome-unknown when 4, which forwarded the request, learns
	// it leads before the answer comes back and abandons the forward), and
	// the same request, retried, removes it.
	removeLead := fmt.Sprintf("/v1/cluster/members/%d", lead+1)
	first := c.nodes[3].Do(t, http.MethodDelete, removeLead, "", nil, nil)
	require.Equal(t, http.StatusServiceUnavailable, first.Status, first.String())
	require.True(t, strings.Contains(string(first.Body), `"code":"no-leader"`) || strings.Contains(string(first.Body), `"code":"write-outcome-unknown"`), first.String())
	require.Eventually(t, func() bool {
		r := c.nodes[3].Do(t, http.MethodDelete, removeLead, "", nil, nil)
		return r.Status == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)
	v = c.view(t, 3, nil)
	require.Equal(t, uint64(4), v.Leader)
	require.Len(t, v.Peers, 2, "4 and the follower closed above")
	for _, p := range v.Peers {
		require.NotEqual(t, uint64(lead+1), p.ID)
	}
}

// TestClusterDamagedReplicaDoesNotStart: a replica whose CommitLog is
// damaged below what it acknowledged refuses to start — so it never votes
// with a log shorter than the one it promised — and says how to rebuild
// it; `mqgate repair`, which would cut the log, refuses a replica.
func TestClusterDamagedReplicaDoesNotStart(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	lead := c.leader(t, nil)
	f := (lead + 1) % 3
	for k := range 50 {
		r := c.do(t, lead, http.MethodPost, "/v1/topics/orders/messages", "application/json",
			[]byte(fmt.Sprintf(`{"body":"m-%d-%s"}`, k, strings.Repeat("x", 200))), nil)
		require.Equal(t, http.StatusOK, r.Status, r.String())
	}
	require.Eventually(t, func() bool {
		lv, fv := c.view(t, lead, nil), c.view(t, f, nil)
		return fv.AppliedIndex == lv.CommitIndex
	}, 10*time.Second, 10*time.Millisecond)
	cfg := c.nodes[f].Cfg
	c.nodes[f].Close(t)
	c.nodes[f] = nil
	seg := filepath.Join(cfg.DataDir, "commitlog", fmt.Sprintf("%020d", 0))
	file, err := os.OpenFile(seg, os.O_RDWR, 0)
	require.NoError(t, err)
	b := make([]byte, 1)
	_, err = file.ReadAt(b, 4000)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = file.WriteAt(b, 4000)
	require.NoError(t, err)
	require.NoError(t, file.Close())

	_, err = server.Open(t.Context(), cfg)
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, "never votes")
	require.ErrorContains(t, err, "--join")
	_, err = server.Repair(server.RepairConfig{DataDir: cfg.DataDir, LogOutput: io.Discard})
	require.ErrorContains(t, err, "rebuilt from the others, never repaired")

	// Its data dir emptied by hand and started with --join, without the
	// rebuild's removal: it is still a voter, and a voter that lost the
	// vote it may have cast must not start from a copy (it would vote
	// again in the same term).
	require.NoError(t, os.RemoveAll(cfg.DataDir))
	wiped := cfg
	wiped.Join = true
	_, err = server.Open(t.Context(), wiped)
	require.ErrorContains(t, err, "is a voter")
	require.ErrorContains(t, err, "mqgate replica rebuild")
	empty, err := os.ReadDir(filepath.Dir(cfg.DataDir))
	require.NoError(t, err)
	for _, de := range empty {
		require.NotContains(t, de.Name(), ".copying", "nothing of the refused copy is left")
	}

	// The other two go on.
	r := c.do(t, (lead+2)%3, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(`{"body":"after"}`), nil)
	require.Equal(t, http.StatusOK, r.Status, r.String())
}

// TestClusterMirrorCarriesAcrossFailover: the PostgreSQL mirror runs on
// the leader only, and its cursor (queue offsets of the progress records,
// the same on every replica) carries to the next leader: acks made under
// two leaders end up in consumer_offsets as one consumed topic.
func TestClusterMirrorCarriesAcrossFailover(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	c := startCluster(t, mirrorConfig(url), func(cfg *server.Config) { cfg.AutoCreate = true })
	lead := c.leader(t, nil)
	const n = 20
	for k := range n {
		r := c.do(t, lead, http.MethodPost, "/v1/topics/mirrored/messages", "application/json", []byte(fmt.Sprintf(`{"body":"m%d"}`, k)), nil)
		require.Equal(t, http.StatusOK, r.Status, r.String())
	}
	got := 0
	consume := func(via, want int) {
		require.Eventually(t, func() bool {
			var p api.PullResponse
			r := c.do(t, via, http.MethodPost, "/v1/groups/mg/topics/mirrored/pull", "application/json", []byte(`{"maxMessages":4,"waitMs":200}`), nil)
			if r.Status != http.StatusOK {
				return false
			}
			require.NoError(t, json.Unmarshal(r.Body, &p))
			for _, m := range p.Messages {
				a := c.do(t, via, http.MethodPost, "/v1/groups/mg/ack", "application/json", []byte(`{"receipts":["`+m.Receipt+`"]}`), nil)
				if a.Status == http.StatusOK {
					got++
				}
			}
			return got >= want
		}, 20*time.Second, 10*time.Millisecond)
	}
	consume(lead, n/2)
	c.nodes[lead].Close(t)
	c.nodes[lead] = nil
	next := c.leader(t, nil, lead)
	consume(next, n)

	// The mirror of the new leader catches up: every queue of the topic is
	// consumed to its end in PostgreSQL.
	require.Eventually(t, func() bool {
		st := mirrorStats(t, c.nodes[next].Server)
		return st.Enabled && st.Healthy && st.BehindRecords == 0
	}, 20*time.Second, 20*time.Millisecond)
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Eventually(t, func() bool {
		var total int64
		err := conn.QueryRow(t.Context(), `SELECT coalesce(sum(committed_offset), 0) FROM consumer_offsets WHERE group_name = 'mg' AND topic = 'mirrored' AND queue_id >= 0`).Scan(&total)
		return err == nil && total == n
	}, 20*time.Second, 50*time.Millisecond)
}

// copyDir copies the regular files of src into dst (a stopped store's
// data dir: segments are sparse, so holes are copied as zeros).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if d.Name() == "LOCK" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o600)
	}))
}

// adoptedCluster runs a single node with small segments, sends it 30
// messages of 100 kB (several segments), has group billing consume ten,
// and starts three replicas on copies of its data dir (the README's
// "From a single node to a cluster"). It returns the ids and the acked
// ones.
func adoptedCluster(t *testing.T) (*e2eCluster, []string, map[string]bool) {
	t.Helper()
	single := startE2E(t, func(cfg *server.Config) {
		cfg.SegmentSize, cfg.MaxMessageSize, cfg.MaxRequestSize = 1<<20, 256<<10, 512<<10
	})
	var ids []string
	for k := range 30 {
		var res api.SendResponse
		servertest.Decode(t, single.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json",
			[]byte(fmt.Sprintf(`{"body":"single-%d-%s"}`, k, strings.Repeat("y", 100_000))), nil), http.StatusOK, &res)
		ids = append(ids, res.Results[0].MessageID)
	}
	// A group consumes ten of them first.
	acked := map[string]bool{}
	for len(acked) < 10 {
		for _, m := range single.PullN(t, "billing", "orders", 10-len(acked), 30_000, 5*time.Second) {
			single.Ack(t, "billing", m.Receipt)
			acked[m.MessageID] = true
		}
	}
	dir := single.Cfg.DataDir
	single.Close(t)

	peers := freeAddrs(t, 3)
	var spec []string
	for i, p := range peers {
		spec = append(spec, fmt.Sprintf("%d=%s", i+1, p))
	}
	var nodes []*e2eServer
	for i := range 3 {
		d := dir
		if i > 0 {
			d = t.TempDir()
			copyDir(t, dir, d)
		}
		cfg := servertest.Config(t, d)
		cfg.SegmentSize, cfg.MaxMessageSize, cfg.MaxRequestSize = 1<<20, 256<<10, 512<<10
		cfg.NodeID, cfg.Peers, cfg.RaftTick = uint64(i+1), strings.Join(spec, ","), 50*time.Millisecond
		nodes = append(nodes, openE2E(t, cfg))
	}
	return &e2eCluster{nodes: nodes, peers: peers}, ids, acked
}

// TestClusterAdoptsASingleNodeDataDir: a single node's data dir becomes
// a cluster's by starting it with --node-id and --peers, with copies of
// it (taken while it is stopped) on the other replicas: its log is the
// prefix of the Raft log on every one. Every message stays readable by
// its id through any node, a consumer group goes on where it was, and
// new writes are replicated.
func TestClusterAdoptsASingleNodeDataDir(t *testing.T) {
	t.Parallel()
	c, ids, acked := adoptedCluster(t)
	nodes := c.nodes
	lead := c.leader(t, nil)
	for i := range nodes {
		for _, id := range ids {
			r := nodes[i].Do(t, http.MethodGet, "/v1/messages/"+id, "", nil, nil)
			require.Equal(t, http.StatusOK, r.Status, "node %d, %s: %s", i+1, id, r.String())
		}
	}
	// The group goes on: the other twenty, and a new message.
	var res api.SendResponse
	servertest.Decode(t, nodes[(lead+1)%3].Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(`{"body":"replicated"}`), nil),
		http.StatusOK, &res)
	got := c.pullAtLeast(t, (lead+2)%3, "billing", "orders", 21)
	require.Len(t, got, 21, "the twenty not consumed and the new one")
	require.Contains(t, got, res.Results[0].MessageID)
	for id := range acked {
		require.NotContains(t, got, id, "%s was acknowledged before the adoption", id)
	}
}

// TestClusterJoinsAnAdoptedCluster: a replica that joins a cluster made
// from a single node's data dir cannot get that prefix from the Raft log
// (its entries start past it); it starts from a copy of the leader's
// data, fetched over the peer port (the follower it asks first redirects
// it to the leader). Once promoted and left the only voter, it serves
// every message of the prefix and the group's progress on its own.
func TestClusterJoinsAnAdoptedCluster(t *testing.T) {
	t.Parallel()
	c, ids, acked := adoptedCluster(t)
	lead := c.leader(t, nil)
	// The copy route on the peer port: GET only; a follower sends the
	// asker to the leader.
	follower := (lead + 1) % 3
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Post("http://"+c.peers[follower]+peer.CopyPath, "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	resp, err = noRedirect.Get("http://" + c.peers[follower] + peer.CopyPath)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	require.Equal(t, "http://"+c.peers[lead]+peer.CopyPath, resp.Header.Get("Location"))

	addr4 := freeAddrs(t, 1)[0]
	cfg := servertest.Config(t, t.TempDir())
	cfg.SegmentSize, cfg.MaxMessageSize, cfg.MaxRequestSize = 1<<20, 256<<10, 512<<10
	cfg.NodeID, cfg.Join, cfg.RaftTick = 4, true, 50*time.Millisecond
	cfg.Peers = c.nodes[0].Cfg.Peers + ",4=" + addr4
	c.nodes = append(c.nodes, openE2E(t, cfg))

	var v api.Cluster
	servertest.Decode(t, c.json(t, lead, http.MethodPost, "/v1/cluster/learners", api.AddLearnerRequest{ID: 4, Address: addr4}), http.StatusOK, &v)
	require.Eventually(t, func() bool {
		return c.do(t, 3, http.MethodPost, "/v1/cluster/members/4/promote", "", nil, nil).Status == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)
	// The others leave, the leader last: it hands its role to 4.
	for i := range 3 {
		if i == lead {
			continue
		}
		servertest.Decode(t, c.do(t, 3, http.MethodDelete, fmt.Sprintf("/v1/cluster/members/%d", i+1), "", nil, nil), http.StatusOK, &v)
	}
	require.Eventually(t, func() bool {
		return c.do(t, 3, http.MethodDelete, fmt.Sprintf("/v1/cluster/members/%d", lead+1), "", nil, nil).Status == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond)
	for i := range 3 {
		c.nodes[i].Close(t)
		c.nodes[i] = nil
	}
	require.Eventually(t, func() bool { return c.view(t, 3, nil).Leader == 4 }, 20*time.Second, 10*time.Millisecond)
	for _, id := range ids {
		r := c.do(t, 3, http.MethodGet, "/v1/messages/"+id, "", nil, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", id, r.String())
	}
	got := c.pullAtLeast(t, 3, "billing", "orders", 20)
	require.Len(t, got, 20, "the twenty not consumed before the adoption")
	for id := range acked {
		require.NotContains(t, got, id, "%s was acknowledged before the adoption", id)
	}
}

// issuePeer makes a replica's peer certificate files: for server and
// client authentication, naming 127.0.0.1.
func (ca *testCA) issuePeer(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	out := ca.issueWith(t, name, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writeFile(t, certFile, out.certPEM)
	writeFile(t, keyFile, out.keyPEM)
	return certFile, keyFile
}

// startTLSCluster starts a cluster whose replicas speak mutual TLS on the
// peer port: replica N's key pair is replica-N.crt/.key in dir, ca signed
// it, and caFile holds ca's certificate; opt sets the rest.
func startTLSCluster(t *testing.T, ca *testCA, opt func(*server.Config)) (c *e2eCluster, dir, caFile string) {
	t.Helper()
	dir = t.TempDir()
	caFile = filepath.Join(dir, "ca.crt")
	writeFile(t, caFile, ca.pemCrt)
	node := 0
	c = startCluster(t, func(cfg *server.Config) {
		node++
		cfg.PeerTLSCertFile, cfg.PeerTLSKeyFile = ca.issuePeer(t, dir, fmt.Sprintf("replica-%d", node))
		cfg.PeerTLSCAFile = caFile
		opt(cfg)
	})
	return c, dir, caFile
}

// TestClusterPeerTLS: with --peer-tls-*, the replicas speak mutual TLS on
// the peer port: they elect a leader, replicate, and forward a client's
// request to the leader over it. The peer port refuses cleartext, a
// client without a certificate, and one whose certificate another CA
// signed; a replica given a half of the flags does not start.
func TestClusterPeerTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "mqgate cluster CA")
	c, dir, caFile := startTLSCluster(t, ca, func(cfg *server.Config) { cfg.ClusterSecret = "cluster-secret-0001" })
	lead := c.leader(t, nil)
	f := (lead + 1) % 3
	var res api.SendResponse
	servertest.Decode(t, c.do(t, f, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(`{"body":"over tls"}`), nil), http.StatusOK, &res)
	got := c.do(t, (lead+2)%3, http.MethodGet, "/v1/messages/"+res.Results[0].MessageID, "", nil, nil)
	require.Equal(t, http.StatusOK, got.Status, got.String())
	require.Contains(t, string(got.Body), "over tls")

	// A fourth replica joins over TLS: its copy of the leader's data comes
	// through the peer port (redirected by the first replica it asks,
	// when that one does not lead).
	addr4 := freeAddrs(t, 1)[0]
	cfg4 := servertest.Config(t, t.TempDir())
	cfg4.NodeID, cfg4.Join, cfg4.RaftTick, cfg4.ClusterSecret = 4, true, 50*time.Millisecond, "cluster-secret-0001"
	cfg4.Peers = c.nodes[0].Cfg.Peers + ",4=" + addr4
	cfg4.PeerTLSCertFile, cfg4.PeerTLSKeyFile = ca.issuePeer(t, dir, "replica-4")
	cfg4.PeerTLSCAFile = caFile
	c.nodes = append(c.nodes, openE2E(t, cfg4))
	var v api.Cluster
	servertest.Decode(t, c.json(t, lead, http.MethodPost, "/v1/cluster/learners", api.AddLearnerRequest{ID: 4, Address: addr4}), http.StatusOK, &v)
	require.Eventually(t, func() bool {
		lv := c.view(t, lead, nil)
		for _, p := range lv.Peers {
			if p.MatchIndex != lv.CommitIndex {
				return false
			}
		}
		return len(lv.Peers) == 4
	}, 20*time.Second, 10*time.Millisecond, "every replica, the one that joined too, replicates over TLS")

	peerURL := "https://" + c.peers[f] + "/raft/v1/messages"
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := plain.Post("http://"+c.peers[f]+"/raft/v1/messages", "application/octet-stream", nil); err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "cleartext on the TLS port")
	}
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: ca.pool(), Certificates: certs}}}
	}
	_, err := client().Post(peerURL, "application/octet-stream", nil)
	require.Error(t, err, "a peer without a certificate is refused at the handshake")
	stranger := newTestCA(t, "another CA").issue(t, "stranger", true)
	_, err = client(stranger.pair).Post(peerURL, "application/octet-stream", nil)
	require.Error(t, err, "a certificate another CA signed is refused")

	half := c.nodes[f].Cfg
	half.PeerTLSCAFile = ""
	require.ErrorContains(t, half.Validate(), "go together")
}

// TestClusterPeerTLSRotation: the peer port's key pairs and CA bundle are
// re-read when their files change, without a restart: the cluster moves
// from one CA to another (the bundle holds both, every replica gets a
// certificate of the new CA, the bundle drops the old one). Afterwards
// each peer port serves its new certificate and refuses the old CA's,
// and a replica restarted then (so every connection to it is new, and it
// trusts the new CA only) is replicated to: the others dial it with their
// rotated certificates.
func TestClusterPeerTLSRotation(t *testing.T) {
	t.Parallel()
	oldCA, newCA := newTestCA(t, "old cluster CA"), newTestCA(t, "new cluster CA")
	c, dir, caFile := startTLSCluster(t, oldCA, func(cfg *server.Config) { cfg.TLSReloadInterval = 10 * time.Millisecond })
	lead := c.leader(t, nil)
	send := func(via int, body string) string {
		var res api.SendResponse
		servertest.Decode(t, c.do(t, via, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(`{"body":"`+body+`"}`), nil), http.StatusOK, &res)
		return res.Results[0].MessageID
	}
	send((lead+1)%3, "before")

	writeFile(t, caFile, append(append([]byte{}, oldCA.pemCrt...), newCA.pemCrt...))
	for i := range c.nodes {
		newCA.issuePeer(t, dir, fmt.Sprintf("replica-%d", i+1)) // over the files the replica reads
	}
	time.Sleep(50 * time.Millisecond)
	send((lead+1)%3, "during")
	writeFile(t, caFile, newCA.pemCrt)
	time.Sleep(50 * time.Millisecond)

	oldClient, newClient := oldCA.issue(t, "old", true), newCA.issue(t, "new", true)
	dial := func(i int, cert tls.Certificate) (*tls.Conn, error) {
		return tls.Dial("tcp", c.peers[i], &tls.Config{RootCAs: newCA.pool(), Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	}
	for i := range c.nodes {
		require.Eventually(t, func() bool {
			conn, err := dial(i, newClient.pair)
			if err != nil {
				return false
			}
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].Issuer.CommonName == "new cluster CA"
		}, 10*time.Second, 20*time.Millisecond, "replica %d serves its new certificate", i+1)
		require.Eventually(t, func() bool {
			conn, err := dial(i, oldClient.pair)
			if err != nil {
				return true
			}
			defer conn.Close()
			// TLS 1.3: the server's refusal of a client certificate comes with
			// the first read.
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			_, err = conn.Read(make([]byte, 1))
			return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
		}, 10*time.Second, 20*time.Millisecond, "replica %d refuses the old CA's certificates", i+1)
	}

	f := (lead + 2) % 3
	cfg := c.nodes[f].Cfg
	c.nodes[f].Close(t)
	c.nodes[f] = openE2E(t, cfg)
	lead = c.leader(t, nil)
	id := send(lead, "after")
	require.Eventually(t, func() bool {
		v := c.view(t, lead, nil)
		for _, p := range v.Peers {
			if p.ID == uint64(f+1) {
				return p.MatchIndex >= v.CommitIndex
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "the restarted replica is replicated to over the rotated certificates")
	got := c.do(t, f, http.MethodGet, "/v1/messages/"+id, "", nil, nil)
	require.Equal(t, http.StatusOK, got.Status, got.String())
}
