package shard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/storage"
)

// TestFollowerBehindRetention: a follower that was away while retention
// deleted the leader's first segments asks for entries whose bytes are
// gone. The leader cannot send them (raft's log answers ErrCompacted), and
// the log cannot bring the follower past them (a copy can: doc.go,
// "Copies"): the leader must neither crash (raft panics on an empty
// snapshot) nor stop committing with the other replica; the follower
// stays behind, and the leader's progress says it needs a copy.
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
	c.setDown(away, true)
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

	c.setDown(away, false)
	ticks := 0
	c.tickUntil(func() bool { ticks++; return ticks > 200 }) // heartbeats, probes: the leader learns how far behind the follower is
	for id, s := range shards {
		require.NoError(t, s.Err(), "replica %d still runs", id)
	}
	c.tickUntil(func() bool { return c.leader() != nil })
	lead = c.leader()
	put("after", 3)
	require.Less(t, shards[away].Status().AppliedIndex, lead.Status().CommitIndex,
		"the follower cannot catch up past a retention cut from the log")
	for _, p := range lead.Progress(context.Background()) {
		require.Equal(t, p.ID == away, p.NeedsCopy, "replica %d: only the one behind the cut needs a copy", p.ID)
	}
}

// TestCopyCatchesUpPastRetention: what a replica cannot get from the Raft
// log after a retention cut it gets from a copy (copy.go). The replica
// that was away is rebuilt from a copy of the leader's data, a new
// replica joins from a copy of a follower's; both then follow the log
// from the copy's point, hold every message from the cut on with the
// leader's ids and queue offsets, start their CommitLog where the
// source's starts, and carry the source's metadata files but not its
// own. A copy cut short or damaged is refused and leaves nothing.
func TestCopyCatchesUpPastRetention(t *testing.T) {
	t.Parallel()
	c, shards := startThree(t)
	c.tickUntil(func() bool { return c.leader() != nil })
	lead := c.leader()
	var acked []storage.PutResult
	put := func(tag string, n int) {
		for k := 0; k < n; k++ {
			acked = append(acked, c.put(c.leader(), batch(tag, 8))...)
		}
	}
	put("before", 2)
	var away, other uint64
	for id, s := range shards {
		switch {
		case s == lead:
		case away == 0:
			away = id
		default:
			other = id
		}
	}
	c.setDown(away, true)
	put("while-away", 40)
	cut := lead.Store().WriteOffset() / 2
	for _, id := range []uint64{lead.Status().ID, other} {
		s := shards[id]
		c.tickUntil(func() bool { return s.Status().AppliedIndex == lead.Status().CommitIndex })
		require.NoError(t, s.Store().WriteMeta("groups.json", []byte(`{"from":"replica `+fmt.Sprint(id)+`"}`)))
		require.NoError(t, s.Store().WriteMeta("scrub.json", []byte(`{"source":true}`)))
		n, err := s.Store().ApplyRetentionCut(cut)
		require.NoError(t, err)
		require.Positive(t, n, "replica %d deleted segments", id)
	}
	first := lead.Store().MinPhysicalOffset()

	// A copy cut short, or with one byte of its frames changed, is
	// refused, and nothing is left where it was being built.
	var whole bytes.Buffer
	_, err := lead.WriteCopy(context.Background(), &whole)
	require.NoError(t, err)
	bad := t.TempDir()
	for name, b := range map[string][]byte{
		"cut short": whole.Bytes()[:whole.Len()*2/3],
		"damaged":   flipFrameByte(whole.Bytes()),
	} {
		_, err := ReceiveCopy(context.Background(), bytes.NewReader(b), testLogOptions(filepath.Join(bad, "data")), 4)
		require.ErrorIs(t, err, ErrBadCopy, name)
		des, err := os.ReadDir(bad)
		require.NoError(t, err)
		require.Empty(t, des, "%s: nothing is left", name)
	}

	// The away replica is rebuilt from a copy of the leader's data: not as
	// long as it is a voter (it lost the vote it may have cast), but once
	// removed and added back as a learner.
	require.NoError(t, shards[away].Close())
	require.NoError(t, os.RemoveAll(c.dirs[away]))
	pr, pw := io.Pipe()
	go func() {
		_, err := lead.WriteCopy(context.Background(), pw)
		pw.CloseWithError(err)
	}()
	_, err = ReceiveCopy(context.Background(), pr, testLogOptions(c.dirs[away]), away)
	require.ErrorIs(t, err, ErrCannotReceive)
	require.ErrorContains(t, err, "is a voter")
	_ = pr.Close()
	delete(shards, away)
	c.changeConf(pb.ConfChangeRemoveNode, away)
	c.changeConf(pb.ConfChangeAddLearnerNode, away)
	h := copyTo(t, lead, c.dirs[away], away)
	require.Equal(t, first, h.First)
	require.Equal(t, lead.Status().ID, h.Source)
	shards[away] = c.open(away)
	c.setDown(away, false)
	put("after", 3)

	// A new replica joins from a copy of the other follower's.
	dir4 := t.TempDir()
	copyTo(t, shards[other], dir4, 4)
	c.dirs[4] = dir4
	joined := c.openJoin(4)
	shards[4] = joined
	c.changeConf(pb.ConfChangeAddLearnerNode, 4)
	put("learning", 3)

	for _, id := range []uint64{away, 4} {
		s := shards[id]
		c.tickUntil(func() bool { return s.Status().AppliedIndex == c.leader().Status().CommitIndex })
		require.Equal(t, first, s.Store().MinPhysicalOffset(), "replica %d's CommitLog starts where the source's does", id)
		got := readAll(t, s.Store())
		for _, r := range acked {
			if r.PhysicalOffset < first {
				continue
			}
			m, ok := got[r.ID]
			require.True(t, ok, "replica %d lacks %v", id, r.ID)
			require.Equal(t, r.QueueOffset, m.QueueOffset)
		}
		g, err := s.Store().ReadMeta("groups.json")
		require.NoError(t, err)
		require.Contains(t, string(g), "replica", "the source's metadata files travel")
		sc, err := s.Store().ReadMeta("scrub.json")
		if err == nil {
			require.NotContains(t, string(sc), "source", "the source's own files do not")
		}
	}
	require.Contains(t, c.leader().Status().Learners, uint64(4))
	for _, p := range c.leader().Progress(context.Background()) {
		require.False(t, p.NeedsCopy, "replica %d", p.ID)
	}
}

// copyTo writes a copy of src's data and receives it into dir.
func copyTo(t *testing.T, src *Shard, dir string, self uint64) CopyHeader {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		_, err := src.WriteCopy(context.Background(), pw)
		pw.CloseWithError(err)
	}()
	h, err := ReceiveCopy(context.Background(), pr, testLogOptions(dir), self)
	require.NoError(t, err)
	_ = pr.Close()
	return h
}

// flipFrameByte returns a copy of a copy stream with one byte changed
// inside its first frames entry.
func flipFrameByte(b []byte) []byte {
	out := bytes.Clone(b)
	// The entry's 512-byte header starts with its name; its data follows.
	i := bytes.Index(out, []byte(copyFramesDir+"0\x00"))
	out[i+512+100] ^= 0x40
	return out
}
