package shard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// localNet delivers messages between Shards of one process straight into
// their inboxes (Step drops when an inbox is full: raft retransmits).
type localNet struct {
	mu    sync.Mutex
	peers map[uint64]*Shard
	down  map[uint64]bool
}

type localTransport struct {
	net  *localNet
	from uint64
}

func (t localTransport) Send(msgs []*pb.Message) {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	if t.net.down[t.from] {
		return
	}
	for _, m := range msgs {
		if p := t.net.peers[m.GetTo()]; p != nil && !t.net.down[m.GetTo()] {
			p.Step(proto.Clone(m).(*pb.Message))
		}
	}
}

type cluster struct {
	t     *testing.T
	net   *localNet
	dirs  map[uint64]string
	ticks map[uint64]chan time.Time
}

func (c *cluster) open(id uint64) *Shard { return c.openWith(id, false) }

// openJoin opens replica id (its directory in c.dirs) with Join.
func (c *cluster) openJoin(id uint64) *Shard { return c.openWith(id, true) }

func (c *cluster) openWith(id uint64, join bool) *Shard {
	c.t.Helper()
	ticks := make(chan time.Time)
	s, err := Open(Options{ID: id, Peers: []uint64{1, 2, 3}, Join: join, Log: testLogOptions(c.dirs[id]),
		Transport: localTransport{net: c.net, from: id}, Ticks: ticks})
	require.NoError(c.t, err)
	c.net.mu.Lock()
	c.net.peers[id], c.net.down[id] = s, false
	c.ticks[id] = ticks
	c.net.mu.Unlock()
	return s
}

// startThree opens replicas 1, 2 and 3 on fresh directories over a
// localNet; the map is the test's to update (a replica reopened), and
// Cleanup closes what it holds then.
func startThree(t *testing.T) (*cluster, map[uint64]*Shard) {
	t.Helper()
	c := &cluster{t: t, net: &localNet{peers: map[uint64]*Shard{}, down: map[uint64]bool{}},
		dirs: map[uint64]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()}, ticks: map[uint64]chan time.Time{}}
	shards := map[uint64]*Shard{}
	for id := uint64(1); id <= 3; id++ {
		shards[id] = c.open(id)
	}
	t.Cleanup(func() {
		for _, s := range shards {
			_ = s.Close()
		}
	})
	return c, shards
}

// put puts ms through s, ticking the replicas until it answers, and
// requires it ok.
func (c *cluster) put(s *Shard, ms []*message.Message) []storage.PutResult {
	c.t.Helper()
	res := make([]storage.PutResult, len(ms))
	require.NoError(c.t, c.await(func() error { return s.Put(context.Background(), storage.ClassSend, ms, res) }))
	return res
}

// await runs fn in a goroutine of its own, ticking the replicas until it
// returns, and returns its error.
func (c *cluster) await(fn func() error) error {
	c.t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	var err error
	c.tickUntil(func() bool {
		select {
		case err = <-done:
			return true
		default:
			return false
		}
	})
	return err
}

// tickUntil ticks every live replica, one tick at a time, until cond.
func (c *cluster) tickUntil(cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.True(c.t, time.Now().Before(deadline), "condition not reached")
		c.net.mu.Lock()
		var chans []chan time.Time
		for id, ch := range c.ticks {
			if !c.net.down[id] {
				chans = append(chans, ch)
			}
		}
		c.net.mu.Unlock()
		for _, ch := range chans {
			ch <- time.Time{}
		}
		time.Sleep(time.Millisecond) // let the messages of this tick land; the condition is what the test waits for
	}
}

// setDown cuts replica id off the network (its messages and ticks) or
// brings it back.
func (c *cluster) setDown(id uint64, down bool) {
	c.net.mu.Lock()
	c.net.down[id] = down
	c.net.mu.Unlock()
}

// changeConf proposes one configuration change through the leader,
// ticking until it is applied there.
func (c *cluster) changeConf(typ pb.ConfChangeType, id uint64) {
	c.t.Helper()
	c.tickUntil(func() bool {
		l := c.leader()
		if l == nil {
			return false
		}
		return c.await(func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return l.ChangeConf(ctx, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: &id}}})
		}) == nil
	})
}

func (c *cluster) leader() *Shard {
	c.net.mu.Lock()
	defer c.net.mu.Unlock()
	for id, s := range c.net.peers {
		if !c.net.down[id] && s.Status().Role == "leader" {
			return s
		}
	}
	return nil
}

// TestThreeShards: three Shards with their node loops, over an
// in-process transport, ticked by the test: one is elected, a follower
// refuses a Put naming the leader, the leader's Puts are committed and
// readable on every replica with the same ids and queue offsets; the
// leader is closed, the other two elect a new one that takes Puts, and
// the old one reopened from its files catches up.
func TestThreeShards(t *testing.T) {
	t.Parallel()
	c, shards := startThree(t)
	// Every replica knows the leader: a follower that has not yet heard
	// from it would refuse the Put below naming no one.
	c.tickUntil(func() bool {
		l := c.leader()
		if l == nil {
			return false
		}
		for _, s := range shards {
			if s.Status().Leader != l.Status().ID {
				return false
			}
		}
		return true
	})
	lead := c.leader()
	var follower *Shard
	for _, s := range shards {
		if s != lead {
			follower = s
		}
	}
	ctx := context.Background()
	err := follower.Put(ctx, storage.ClassSend, batch("f", 1), make([]storage.PutResult, 1))
	var nl *NotLeaderError
	require.True(t, errors.As(err, &nl), "%v", err)
	require.Equal(t, lead.Status().ID, nl.Leader)

	var acked []storage.PutResult
	put := func(s *Shard, tag string, n int) {
		for k := 0; k < n; k++ {
			acked = append(acked, c.put(s, batch(tag, 1+k%3))...)
		}
	}
	put(lead, "first", 20)
	converged := func() bool {
		want := lead.Status().CommitIndex
		for id, s := range shards {
			if !c.net.down[id] && s.Status().AppliedIndex != want {
				return false
			}
		}
		return true
	}
	c.tickUntil(converged)
	for _, s := range shards {
		got := readAll(t, s.Store())
		require.Len(t, got, len(acked))
		for _, r := range acked {
			require.Equal(t, r.QueueOffset, got[r.ID].QueueOffset)
		}
	}

	// The leader goes away; the others elect a new one.
	oldID := lead.Status().ID
	c.net.mu.Lock()
	c.net.down[oldID] = true
	c.net.mu.Unlock()
	require.NoError(t, lead.Close())
	c.tickUntil(func() bool { l := c.leader(); return l != nil && l.Status().ID != oldID })
	lead = c.leader()
	put(lead, "second", 10)

	shards[oldID] = c.open(oldID)
	c.tickUntil(converged)
	for _, s := range shards {
		got := readAll(t, s.Store())
		require.Len(t, got, len(acked), "replica %d", s.Status().ID)
		for _, r := range acked {
			require.Equal(t, r.QueueOffset, got[r.ID].QueueOffset)
		}
	}
}
