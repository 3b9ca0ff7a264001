package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// ownedCluster is three Owned replicas on real tickers, each with an
// owner goroutine that lifts the fence the way the broker's does: once
// its replica leads and the commit point reached the leader's first
// entry.
type ownedCluster struct {
	t      *testing.T
	net    *localNet
	dirs   map[uint64]string
	mu     sync.Mutex
	shards map[uint64]*Shard
	stops  map[uint64]chan struct{}
	wg     sync.WaitGroup
}

func (c *ownedCluster) open(id uint64) {
	c.t.Helper()
	s, err := Open(Options{ID: id, Peers: []uint64{1, 2, 3}, Log: testLogOptions(c.dirs[id]),
		Transport: localTransport{net: c.net, from: id}, TickInterval: 5 * time.Millisecond, Owned: true})
	require.NoError(c.t, err)
	c.net.mu.Lock()
	c.net.peers[id], c.net.down[id] = s, false
	c.net.mu.Unlock()
	stop := make(chan struct{})
	c.mu.Lock()
	c.shards[id], c.stops[id] = s, stop
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-s.RoleChanged():
			case <-tick.C:
			}
			st := s.Status()
			if st.Role == "leader" && !st.Serving && st.CommitIndex >= st.LeadIndex && st.LeadIndex > 0 {
				_ = s.Serve(context.Background(), st.Gen)
			}
		}
	}()
}

func (c *ownedCluster) close(id uint64) {
	c.net.mu.Lock()
	c.net.down[id] = true
	c.net.mu.Unlock()
	c.mu.Lock()
	s, stop := c.shards[id], c.stops[id]
	delete(c.shards, id)
	c.mu.Unlock()
	close(stop)
	require.NoError(c.t, s.Close())
}

func (c *ownedCluster) serving() *Shard {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.shards {
		if s.Status().Serving {
			return s
		}
	}
	return nil
}

// TestOwnedWritersGoThroughTheLog: the store's own writers (as the broker
// writes: PutBatch on the leader's store, concurrently) are replicated
// without a Put of the shard: the node loop proposes what they appended,
// and a write returns only once committed. A follower's store refuses
// them (ErrNotLeader), and so does a leader whose owner has not lifted
// the fence. The leader is closed mid-run and the writers move to the
// next one; the old one comes back. At the end every replica holds the
// same messages, every acknowledged write among them with its id and
// queue offset, and nothing a writer was told is unknown is anywhere but
// everywhere or nowhere.
func TestOwnedWritersGoThroughTheLog(t *testing.T) {
	t.Parallel()
	c := &ownedCluster{t: t, net: &localNet{peers: map[uint64]*Shard{}, down: map[uint64]bool{}},
		dirs:   map[uint64]string{1: t.TempDir(), 2: t.TempDir(), 3: t.TempDir()},
		shards: map[uint64]*Shard{}, stops: map[uint64]chan struct{}{}}
	for id := uint64(1); id <= 3; id++ {
		c.open(id)
	}
	defer func() {
		c.mu.Lock()
		ids := make([]uint64, 0, len(c.shards))
		for id := range c.shards {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		for _, id := range ids {
			c.close(id)
		}
		c.wg.Wait()
	}()
	require.Eventually(t, func() bool { return c.serving() != nil }, 10*time.Second, time.Millisecond)
	c.mu.Lock()
	for _, s := range c.shards {
		if !s.Status().Serving {
			_, err := s.Store().Put(batch("refused", 1)[0])
			require.ErrorIs(t, err, storage.ErrNotLeader, "a replica that does not serve refuses its writers")
		}
	}
	c.mu.Unlock()

	var (
		mu      sync.Mutex
		acked   = map[message.ID]storage.PutResult{}
		unknown atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; !stop.Load(); k++ {
				s := c.serving()
				if s == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				ms := batch(fmt.Sprintf("w%d-%d", w, k), 1+k%3)
				res := make([]storage.PutResult, len(ms))
				err := s.Store().PutBatch(ms, res)
				switch {
				case err == nil:
					mu.Lock()
					for _, r := range res {
						acked[r.ID] = r
					}
					mu.Unlock()
				case errors.Is(err, storage.ErrUnknownOutcome):
					unknown.Add(1)
				case errors.Is(err, storage.ErrNotLeader), errors.Is(err, storage.ErrClosed):
				default:
					t.Errorf("write: %v", err)
					return
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	old := c.serving()
	require.NotNil(t, old)
	oldID := old.Status().ID
	c.close(oldID)
	require.Eventually(t, func() bool { s := c.serving(); return s != nil && s.Status().ID != oldID }, 10*time.Second, time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	c.open(oldID)
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		var commit uint64
		for _, s := range c.shards {
			if s.Status().Role == "leader" {
				commit = s.Status().CommitIndex
			}
		}
		for _, s := range c.shards {
			if commit == 0 || s.Status().AppliedIndex != commit {
				return false
			}
		}
		return true
	}, 20*time.Second, 5*time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	var first map[message.ID]*message.Message
	for id, s := range c.shards {
		got := readAll(t, s.Store())
		for mid, r := range acked {
			m, ok := got[mid]
			require.True(t, ok, "replica %d lacks acknowledged %v", id, mid)
			require.Equal(t, r.QueueOffset, m.QueueOffset)
		}
		if first == nil {
			first = got
			continue
		}
		require.Equal(t, len(first), len(got), "replica %d", id)
		for mid, m := range first {
			require.Equal(t, string(m.Body), string(got[mid].Body), "replica %d at %v", id, mid)
		}
	}
	require.NotEmpty(t, acked)
	t.Logf("acknowledged %d messages, %d batches with an unknown outcome", len(acked), unknown.Load())
}
