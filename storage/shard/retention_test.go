package shard

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFollowerBehindRetention: a follower that was away while retention
// deleted the leader's first segments asks for entries whose bytes are
// gone. The leader cannot send them (raft's log answers ErrCompacted), and
// no snapshot can bring the follower past them yet (storage/shard/doc.go,
// "Not here yet"): the leader must neither crash (raft panics on an empty
// snapshot) nor stop committing with the other replica; the follower
// stays behind, and says so.
func TestFollowerBehindRetention(t *testing.T) {
	t.Parallel()
	c, shards := startThree(t)
	c.tickUntil(func() bool { return c.leader() != nil })
	lead := c.leader()
	put := func(tag string, n int) {
		for k := 0; k < n; k++ {
			c.put(lead, batch(tag, 8))
		}
	}
	put("before", 2)
	var away uint64
	for id, s := range shards {
		if s != lead {
			away = id
		}
	}
	c.net.mu.Lock()
	c.net.down[away] = true
	c.net.mu.Unlock()
	put("while-away", 40) // several 32 KiB segments
	cut := lead.Store().WriteOffset() / 2
	for id, s := range shards {
		if id != away {
			c.tickUntil(func() bool { return s.Status().AppliedIndex == lead.Status().CommitIndex })
			n, err := s.Store().ApplyRetentionCut(cut)
			require.NoError(t, err)
			require.Positive(t, n, "replica %d deleted segments", id)
		}
	}

	c.net.mu.Lock()
	c.net.down[away] = false
	c.net.mu.Unlock()
	ticks := 0
	c.tickUntil(func() bool { ticks++; return ticks > 200 }) // heartbeats, probes: the leader learns how far behind the follower is
	for id, s := range shards {
		require.NoError(t, s.Err(), "replica %d still runs", id)
	}
	c.tickUntil(func() bool { return c.leader() != nil })
	lead = c.leader()
	put("after", 3)
	require.Less(t, shards[away].Status().AppliedIndex, lead.Status().CommitIndex,
		"the follower cannot catch up past a retention cut (no snapshots yet)")
}
