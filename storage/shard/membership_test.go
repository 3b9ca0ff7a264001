package shard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/storage"
)

// TestReplaceAReplica: a replica whose disk is gone is replaced under
// writes — a new, empty replica joins as a learner (it does not start a
// group of its own), catches up from the leader's log, is promoted to a
// voter, and the dead one is removed; the group then commits with the
// new one among its majority, and every acknowledged message is on it.
func TestReplaceAReplica(t *testing.T) {
	t.Parallel()
	net := &localNet{peers: map[uint64]*Shard{}, down: map[uint64]bool{}}
	var mu sync.Mutex
	shards := map[uint64]*Shard{}
	open := func(id uint64, join bool) *Shard {
		s, err := Open(Options{ID: id, Peers: []uint64{1, 2, 3}, Join: join, Log: testLogOptions(t.TempDir()),
			Transport: localTransport{net: net, from: id}, TickInterval: 5 * time.Millisecond})
		require.NoError(t, err)
		net.mu.Lock()
		net.peers[id], net.down[id] = s, false
		net.mu.Unlock()
		mu.Lock()
		shards[id] = s
		mu.Unlock()
		return s
	}
	for id := uint64(1); id <= 3; id++ {
		open(id, false)
	}
	defer func() {
		for _, s := range shards {
			_ = s.Close()
		}
	}()
	leader := func() *Shard {
		mu.Lock()
		defer mu.Unlock()
		for id, s := range shards {
			if !net.down[id] && s.Status().Serving {
				return s
			}
		}
		return nil
	}
	ctx := context.Background()
	var acked []storage.PutResult
	put := func(tag string, n int) {
		for k := 0; k < n; k++ {
			require.Eventually(t, func() bool {
				l := leader()
				if l == nil {
					return false
				}
				ms := batch(tag, 1+k%3)
				res := make([]storage.PutResult, len(ms))
				if l.Put(ctx, storage.ClassSend, ms, res) != nil {
					return false
				}
				acked = append(acked, res...)
				return true
			}, 10*time.Second, time.Millisecond)
		}
	}
	require.Eventually(t, func() bool { return leader() != nil }, 10*time.Second, time.Millisecond)
	put("before", 20)

	// Replica 3's disk dies.
	net.mu.Lock()
	net.down[3] = true
	net.mu.Unlock()
	require.NoError(t, shards[3].Close())
	mu.Lock()
	delete(shards, 3)
	mu.Unlock()

	joined := open(4, true)
	require.Empty(t, joined.Status().Voters, "a joining replica starts no group")
	change := func(typ pb.ConfChangeType, id uint64) {
		require.Eventually(t, func() bool {
			l := leader()
			if l == nil {
				return false
			}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if l.ChangeConf(cctx, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: &id}}}) != nil {
				return false
			}
			// ChangeConf returns once Status shows the change.
			st := l.Status()
			switch typ {
			case pb.ConfChangeAddLearnerNode:
				require.Contains(t, st.Learners, id)
			case pb.ConfChangeAddNode:
				require.Contains(t, st.Voters, id)
			case pb.ConfChangeRemoveNode:
				require.NotContains(t, append(st.Voters, st.Learners...), id)
			}
			return true
		}, 10*time.Second, 5*time.Millisecond)
	}
	change(pb.ConfChangeAddLearnerNode, 4)
	put("learning", 10)
	require.Eventually(t, func() bool { return joined.Status().AppliedIndex == leader().Status().CommitIndex }, 10*time.Second, time.Millisecond)
	change(pb.ConfChangeAddNode, 4)
	change(pb.ConfChangeRemoveNode, 3)
	require.ElementsMatch(t, []uint64{1, 2, 4}, leader().Status().Voters)
	put("after", 10)

	// The new replica is needed for a majority now: with 1 or 2 gone, the
	// others still commit.
	var gone uint64 = 1
	if leader().Status().ID == 1 {
		gone = 2
	}
	net.mu.Lock()
	net.down[gone] = true
	net.mu.Unlock()
	put("without", 5)
	net.mu.Lock()
	net.down[gone] = false
	net.mu.Unlock()

	require.Eventually(t, func() bool { return joined.Status().AppliedIndex == leader().Status().CommitIndex }, 10*time.Second, time.Millisecond)
	got := readAll(t, joined.Store())
	for _, r := range acked {
		m, ok := got[r.ID]
		require.True(t, ok, "the new replica lacks %v", r.ID)
		require.Equal(t, r.QueueOffset, m.QueueOffset)
	}
}
