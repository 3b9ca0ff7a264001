package raftlog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// leaderWrite appends n messages to the Raft log's own store as a leader
// does when it proposes (no flush wait) and returns the frames it wrote.
// leaderEntries writes n batches as a leader does when it proposes
// (leaderWrite, each of msgs messages, tagged prefix1…prefixN) and
// returns them as the entries 1..n of term.
func leaderEntries(t *testing.T, s *Storage, prefix string, n, msgs int, term uint64) []*pb.Entry {
	t.Helper()
	var ents []*pb.Entry
	for i := uint64(1); i <= uint64(n); i++ {
		data, _ := leaderWrite(t, s, fmt.Sprint(prefix, i), msgs)
		ents = append(ents, pbEntry(i, term, pb.EntryNormal, data))
	}
	return ents
}

func leaderWrite(t *testing.T, s *Storage, tag string, n int) ([]byte, []storage.PutResult) {
	t.Helper()
	st := s.Store()
	start := st.WriteOffset()
	ms := make([]*message.Message, n)
	for i := range ms {
		ms[i] = storagetest.NewMessage("orders", int32(i%2), fmt.Sprintf("%s-%d-%0400d", tag, i, i), "t")
	}
	res := make([]storage.PutResult, n)
	require.NoError(t, st.PutClassNoWait(storage.ClassSend, ms, res))
	data, err := st.ReadFrameRange(start, st.WriteOffset(), nil)
	require.NoError(t, err)
	return data, res
}

// TestAppendVerifiesPreWrittenFrames: a leader's entries whose frames it
// wrote when proposing are verified in place, not appended twice — the
// CommitLog does not grow, the index points at the frames, Entries reads
// them back — across segment rolls (the Blank frame belongs to the entry
// that rolls). A tail that differs from the entries (another leader's)
// is cut and the entries appended, the queue offsets given back; a stale
// tail no entry claims is cut by DropUnindexed.
func TestAppendVerifiesPreWrittenFrames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	st := s.Store()
	require.NoError(t, s.SetHardState(hs(1, 1, 0)))

	var want []*pb.Entry
	idx := uint64(0)
	for round := 0; round < 30; round++ {
		// Several proposals outstanding, then one Append of all of them.
		var batch []*pb.Entry
		for k := 0; k < 1+round%3; k++ {
			data, _ := leaderWrite(t, s, fmt.Sprintf("r%d", round), 1+k)
			idx++
			batch = append(batch, pbEntry(idx, 1, pb.EntryNormal, data))
		}
		written := st.WriteOffset()
		require.NoError(t, s.Append(batch))
		require.Equal(t, written, st.WriteOffset(), "the frames are not written twice")
		require.Equal(t, written, s.NextOffset())
		want = append(want, batch...)
	}
	require.Greater(t, st.WriteOffset(), int64(3*testSegment), "the run rolled segments")
	require.Equal(t, Stats{Verified: idx}, s.Stats(), "every entry verified in place, none appended")
	got, err := s.Entries(1, idx+1, 1<<30)
	require.NoError(t, err)
	requireSameEntries(t, want, got)

	// A pre-written tail of two proposals at term 1, but the entries that
	// arrive are another leader's (term 2) at the same place: the tail is
	// cut and the entries appended.
	mine, _ := leaderWrite(t, s, "mine", 3)
	_, _ = leaderWrite(t, s, "mine-too", 2)
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	// The source holds the same log below the tail.
	prefix, err := st.ReadFrameRange(0, s.NextOffset(), nil)
	require.NoError(t, err)
	_, err = src.st.AppendFrames(prefix)
	require.NoError(t, err)
	theirs := src.frames(t, s.NextOffset(), 2, 300)
	require.NotEqual(t, mine, theirs)
	require.NoError(t, s.Append([]*pb.Entry{pbEntry(idx+1, 2, pb.EntryNormal, theirs)}))
	_, end, err := commitlogExtent(theirs)
	require.NoError(t, err)
	require.Equal(t, end, st.WriteOffset(), "the tail was replaced by the entry")
	got, err = s.Entries(idx+1, idx+2, 1<<30)
	require.NoError(t, err)
	require.Equal(t, theirs, got[0].GetData())
	idx++
	require.Equal(t, Stats{Verified: idx - 1, Appended: 1, TailCuts: 1, TailBytes: s.Stats().TailBytes}, s.Stats())
	require.Positive(t, s.Stats().TailBytes)

	// A stale tail (a dropped proposal) is cut by DropUnindexed, and the
	// queue offsets it took are given back.
	before := st.WriteOffset()
	_, res := leaderWrite(t, s, "dropped", 2)
	cut, err := s.DropUnindexed()
	require.NoError(t, err)
	require.Equal(t, st.WriteOffset()-before, int64(0))
	require.Positive(t, cut)
	_, again := leaderWrite(t, s, "again", 2)
	require.Equal(t, res[0].QueueOffset, again[0].QueueOffset, "the cut gave the queue offset back")
	require.Equal(t, res[0].PhysicalOffset, again[0].PhysicalOffset)

	// The tail survives nothing: Open cuts what no entry names.
	require.NoError(t, s.Close())
	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	require.Equal(t, before, s.Store().WriteOffset())
	require.Equal(t, idx, mustLast(t, s))
}

func hs(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: &term, Vote: &vote, Commit: &commit}
}

func mustLast(t *testing.T, s *Storage) uint64 {
	t.Helper()
	i, err := s.LastIndex()
	require.NoError(t, err)
	return i
}

// TestCommitPointNeverMovesBack: a hard state written after a later one
// (a leader answers Puts committed while it persists a Ready, and the
// Ready's own hard state lands after) keeps the later commit point, on
// disk and in the dispatcher's limit (the file is not written again: it
// holds that hard state already); its term and vote are written.
func TestCommitPointNeverMovesBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	require.NoError(t, s.SetHardState(hs(1, 1, 0)))
	require.NoError(t, s.Append(leaderEntries(t, s, "c", 3, 1, 1)))
	require.NoError(t, s.SetHardState(hs(1, 1, 3)))
	limit := s.Store().DispatchLimit()
	require.Equal(t, s.Store().WriteOffset(), limit)

	before, err := os.ReadFile(filepath.Join(s.dir, hardName))
	require.NoError(t, err)
	require.NoError(t, s.SetHardState(hs(1, 1, 2)))
	after, err := os.ReadFile(filepath.Join(s.dir, hardName))
	require.NoError(t, err)
	require.Equal(t, before, after, "a hard state equal to the last one (once clamped) is not written again")
	got, _, err := s.InitialState()
	require.NoError(t, err)
	require.Equal(t, uint64(3), got.GetCommit())
	require.Equal(t, limit, s.Store().DispatchLimit(), "the dispatch limit stays")

	require.NoError(t, s.SetHardState(hs(2, 2, 1))) // a new term: written, the commit point kept
	require.NoError(t, s.Close())
	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	got, _, err = s.InitialState()
	require.NoError(t, err)
	require.Equal(t, []uint64{2, 2, 3}, []uint64{got.GetTerm(), got.GetVote(), got.GetCommit()})
}
