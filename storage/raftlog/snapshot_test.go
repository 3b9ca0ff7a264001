package raftlog

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestAdoptExistingStore: a store written before Raft keeps its log as
// the prefix the first snapshot covers (index 0); its messages stay
// visible, and Raft entries follow them.
func TestAdoptExistingStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	so := testOptions(dir).Store
	st, err := storage.Open(so)
	require.NoError(t, err)
	for i := 0; i < 50; i++ {
		storagetest.MustPut(t, st, storagetest.NewMessage("orders", 0, "before raft", ""))
	}
	end := st.WriteOffset()
	require.NoError(t, st.Close())

	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.True(t, s.Report().Adopted)
	first, _ := s.FirstIndex()
	require.Equal(t, uint64(1), first)
	require.Equal(t, end, s.NextOffset())
	_, err = s.Snapshot()
	require.ErrorIs(t, err, raft.ErrSnapshotTemporarilyUnavailable, "the adoption point is no snapshot raft can send")
	s.mu.Lock()
	snap := s.snapshotLocked()
	s.mu.Unlock()
	require.Zero(t, snap.GetMetadata().GetIndex())
	off, err := DecodeSnapshotData(snap.GetData())
	require.NoError(t, err)
	require.Equal(t, end, off)
	require.Eventually(t, func() bool { return s.Store().MaxOffset("orders", 0) == 50 }, 10e9, 1e6)

	src := newFrameSource(t, t.TempDir())
	defer src.close()
	_, err = src.st.AppendFrames(mustFrames(t, s.Store(), 0, end))
	require.NoError(t, err)
	ents := writeLog(t, s, src, rand.New(rand.NewPCG(11, 12)), 10, 1)
	requireHolds(t, s, ents)
}

func mustFrames(t *testing.T, st *storage.Store, from, to int64) []byte {
	t.Helper()
	b, err := st.ReadFrameRange(from, to, nil)
	require.NoError(t, err)
	return b
}

// TestLearnerCatchesUpFromSnapshot: a leader compacts its log; a new
// replica gets the CommitLog up to the snapshot's offset as frame
// streams, applies the snapshot, and then takes the entries after it; a
// snapshot whose offset its CommitLog has not reached is refused.
func TestLearnerCatchesUpFromSnapshot(t *testing.T) {
	t.Parallel()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	leader, err := Open(testOptions(t.TempDir()))
	require.NoError(t, err)
	defer func() { _ = leader.Close() }()
	rng := rand.New(rand.NewPCG(13, 14))
	ents := writeLog(t, leader, src, rng, 40, 3)
	hs, _, _ := leader.InitialState()
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}
	snap, err := leader.CreateSnapshot(hs.GetCommit()-5, cs, nil)
	require.NoError(t, err)
	// A retention cut at the snapshot's offset compacts to it.
	off, err := DecodeSnapshotData(snap.GetData())
	require.NoError(t, err)
	i, err := leader.CompactBelow(off, hs.GetCommit())
	require.NoError(t, err)
	require.Equal(t, snap.GetMetadata().GetIndex(), i)
	_, err = leader.Entries(i, i+1, 1<<20)
	require.ErrorIs(t, err, raft.ErrCompacted)

	learner, err := Open(testOptions(t.TempDir()))
	require.NoError(t, err)
	defer func() { _ = learner.Close() }()
	require.ErrorIs(t, learner.ApplySnapshot(snap), ErrSnapshotNeedsLog)
	for from := int64(0); from < off; {
		b, next, err := leader.Store().ReadFrames(from, 64<<10, nil)
		require.NoError(t, err)
		if next > off { // frames past the snapshot come as entries
			b = mustFrames(t, leader.Store(), from, off)
			next = off
		}
		_, err = learner.Store().AppendFrames(b)
		require.NoError(t, err)
		from = next
	}
	require.NoError(t, learner.ApplySnapshot(snap))
	require.ErrorIs(t, learner.ApplySnapshot(snap), raft.ErrSnapOutOfDate)
	_, lcs, err := learner.InitialState()
	require.NoError(t, err)
	require.True(t, proto.Equal(pb.EnsureConfState(cs), lcs))
	first, _ := learner.FirstIndex()
	last, _ := leader.LastIndex()
	rest, err := leader.Entries(first, last+1, 1<<40)
	require.NoError(t, err)
	require.NoError(t, learner.Append(rest))
	requireHolds(t, learner, ents)
	require.NoError(t, learner.SetHardState(hs))
	require.Equal(t, leader.CommitOffset(), learner.CommitOffset())
}

// TestIndexLayoutKept: the entries per index file are those the files
// were created with (the meta file keeps them), whatever a later Open is
// given.
func TestIndexLayoutKept(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	ents := writeLog(t, s, src, rand.New(rand.NewPCG(15, 16)), 30, 1)
	require.NoError(t, s.Close())
	o := testOptions(dir)
	o.IndexFileEntries = 1000
	s, err = Open(o)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.Equal(t, uint64(8), s.index.per)
	requireHolds(t, s, ents)
}
