package peer_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/peer"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/raftlog"
	"github.com/mqgate/mqgate/storage/shard"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// replica is one shard with its transport and peer server.
type replica struct {
	id    uint64
	dir   string
	addr  string
	shard *shard.Shard
	tr    *peer.Transport
	srv   *server
}

const clusterSecret = "cluster-secret"

// start opens the replica's shard on its directory, its transport to the
// others, and its peer server on its address.
func (r *replica) start(t *testing.T, peers map[uint64]string) {
	t.Helper()
	ln, err := net.Listen("tcp", r.addr) // first: the address must be free again
	require.NoError(t, err)
	require.NoError(t, ln.Close())
	r.tr, err = peer.NewTransport(peer.Options{ID: r.id, Peers: peers, Secret: clusterSecret,
		BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	require.NoError(t, err)
	so := storagetest.SmallOptions(r.dir)
	so.StoreID = message.Host{9, 9, 9, 9, 9, 9, 9, 9} // the shard's, the same on every replica
	r.shard, err = shard.Open(shard.Options{ID: r.id, Peers: []uint64{1, 2, 3},
		Log: raftlog.Options{Store: so, IndexFileEntries: 64}, Transport: r.tr, TickInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	mux := newMux(r.shard.Step, r.id)
	r.srv = startServer(t, r.addr, mux)
}

// stop closes the server, the shard and the transport (twice is harmless).
func (r *replica) stop(t *testing.T) {
	t.Helper()
	if r.shard == nil {
		return
	}
	r.srv.stop()
	require.NoError(t, r.shard.Close())
	require.NoError(t, r.tr.Close())
	r.shard = nil
}

// TestThreeReplicasOverHTTP: three shards on real peer transports and
// servers (h2c on loopback, with the cluster secret) elect a leader and
// commit Puts; with one follower's server and shard stopped the other
// two still commit; reopened on the same directory and address, the
// follower catches up to the same commit index and CommitLog offset.
func TestThreeReplicasOverHTTP(t *testing.T) {
	t.Parallel()
	rs := map[uint64]*replica{}
	addrs := map[uint64]string{}
	for id := uint64(1); id <= 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs[id] = ln.Addr().String()
		require.NoError(t, ln.Close())
		rs[id] = &replica{id: id, dir: t.TempDir(), addr: addrs[id]}
	}
	for _, r := range rs {
		r.start(t, addrs)
	}
	defer func() {
		for _, r := range rs {
			r.stop(t)
		}
	}()

	puts, unknown := 0, 0
	put := func(n int) {
		for k := 0; k < n; k++ {
			unknown += putOne(t, rs, fmt.Sprintf("m%d", puts))
			puts++
		}
	}
	put(20)
	converged(t, rs)

	var follower *replica
	for _, r := range rs {
		if r.shard.Status().Role != "leader" {
			follower = r
		}
	}
	follower.stop(t)
	put(20)
	down := follower.shard
	require.Nil(t, down)

	follower.start(t, addrs)
	st := converged(t, rs)
	require.Positive(t, st.CommitOffset)
	put(5)
	converged(t, rs)
	for _, r := range rs {
		// Applied is not yet in the ConsumeQueues: the dispatcher follows.
		require.NoError(t, r.shard.Store().AwaitDispatch(context.Background()))
		n := countMessages(r.shard.Store())
		require.True(t, n >= int64(puts) && n <= int64(puts+unknown), "replica %d holds %d messages, %d put (%d retried after an unknown outcome)", r.id, n, puts, unknown)
		require.Positive(t, r.tr.Stats().Sent)
	}
}

// putOne puts one message through whichever replica leads, retrying the
// refusals a leadership change brings; it returns how many tries had an
// unknown outcome (each may have stored the message once more).
func putOne(t *testing.T, rs map[uint64]*replica, body string) (unknown int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		require.True(t, time.Now().Before(deadline), "no leader took the put")
		for _, r := range rs {
			if r.shard == nil || r.shard.Status().Role != "leader" {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := r.shard.Put(ctx, storage.ClassSend, []*message.Message{storagetest.NewMessage("orders", 0, body, "t")}, make([]storage.PutResult, 1))
			cancel()
			if err == nil {
				return unknown
			}
			if errors.Is(err, shard.ErrUnknownOutcome) {
				unknown++
				continue
			}
			require.True(t, errors.Is(err, shard.ErrNotLeader) || errors.Is(err, shard.ErrDropped), "%v", err)
		}
		time.Sleep(10 * time.Millisecond) // waiting for an election
	}
}

// converged waits until every live replica has applied the leader's
// commit index and ends its committed entries at the same CommitLog
// offset, and returns the leader's status.
func converged(t *testing.T, rs map[uint64]*replica) shard.Status {
	t.Helper()
	var lead shard.Status
	eventually(t, func() bool {
		lead = shard.Status{}
		for _, r := range rs {
			if st := r.shard.Status(); st.Role == "leader" {
				lead = st
			}
		}
		if lead.ID == 0 {
			return false
		}
		for _, r := range rs {
			st := r.shard.Status()
			if st.CommitIndex != lead.CommitIndex || st.AppliedIndex != lead.CommitIndex || st.CommitOffset != lead.CommitOffset {
				return false
			}
		}
		return true
	})
	return lead
}

// countMessages counts what the store's queues hold.
func countMessages(st *storage.Store) int64 {
	var n int64
	for _, topic := range st.Topics() {
		for _, q := range st.QueueIDs(topic) {
			n += st.MaxOffset(topic, q) - st.MinOffset(topic, q)
		}
	}
	return n
}
