package shard

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// damage flips a bit in the body of the message at phys on replica id's
// files and has its store read it, which finds the damage (as the
// scrubber or any reader would).
func (c *cluster) damage(s *Shard, id uint64, phys int64, body string) {
	c.t.Helper()
	path, off := storagetest.BodyOffset(c.t, c.dirs[id], phys, []byte(body))
	storagetest.FlipBit(c.t, path, off, 2)
	_, err := s.Store().Lookup(phys)
	require.ErrorIs(c.t, err, storage.ErrCorrupt)
}

// TestADamagedReplicaStops: a replica whose store finds its own copy of
// the log damaged stops at once (Err wraps ErrDamaged; its store stays
// fenced) and never votes again. A damaged leader first hands its
// leadership to a follower that holds its whole log, so the next leader
// is elected within a round trip, not an election timeout; the writes go
// on with the other two. With the healthy leader gone too, the last
// healthy replica cannot be elected: the damaged one does not vote. It
// does not start again until it is rebuilt (its data dir is marked).
func TestADamagedReplicaStops(t *testing.T) {
	t.Parallel()
	c, shards := startThree(t)
	c.tickUntil(func() bool { return c.leader() != nil })
	lead := c.leader()
	var res []storage.PutResult
	for k := range 10 {
		res = append(res, c.put(lead, batch("before", 1+k%2))...)
	}
	c.tickUntil(func() bool {
		for _, s := range shards {
			if s.Status().AppliedIndex != lead.Status().CommitIndex {
				return false
			}
		}
		return true
	})

	// The leader finds damage: it hands over, then stops.
	leadID := lead.Status().ID
	c.damage(lead, leadID, res[3].PhysicalOffset, fmt.Sprintf("%s-%d-%0200d", "before", 0, 0))
	require.Eventually(t, func() bool { return lead.Err() != nil }, 5*time.Second, time.Millisecond)
	require.ErrorIs(t, lead.Err(), ErrDamaged)
	require.ErrorContains(t, lead.Err(), "CRC-32C mismatch")
	require.True(t, lead.Store().Fenced())
	c.net.mu.Lock()
	delete(c.ticks, leadID) // its loop has ended: nothing takes its ticks
	c.net.mu.Unlock()
	ticks := 0
	c.tickUntil(func() bool {
		ticks++
		l := c.leader()
		return l != nil && l.Status().ID != leadID
	})
	require.Less(t, ticks, DefaultElectionTicks, "elected by the hand-over, not by an election timeout")
	next := c.leader()
	c.put(next, batch("after", 2))

	// A damaged replica never votes: with the new leader gone as well,
	// the last healthy one stays a candidate.
	nextID := next.Status().ID
	c.setDown(nextID, true)
	var last *Shard
	for id, s := range shards {
		if id != leadID && id != nextID {
			last = s
		}
	}
	n := 0
	c.tickUntil(func() bool {
		n++
		require.NotEqual(t, "leader", last.Status().Role, "elected with the damaged replica's vote")
		return n > 10*DefaultElectionTicks
	})

	// It does not start again: its data dir is marked damaged.
	require.NoError(t, lead.Close())
	_, err := Open(Options{ID: leadID, Peers: []uint64{1, 2, 3}, Log: testLogOptions(c.dirs[leadID]),
		Transport: localTransport{net: c.net, from: leadID}, Ticks: make(chan time.Time)})
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, "marked damaged")
}
