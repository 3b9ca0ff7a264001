package raftlog

import (
	"bytes"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/storage/storagetest"
)

// imageLabel is what was acknowledged before a crash point: the entries
// Append returned for (they must survive), the term and vote of the last
// SetHardState that changed them (it must not go back).
type imageLabel struct {
	acked      int
	term, vote uint64
}

// TestPowerLossImages: power-loss images of a run of appends, hard
// states that change the term and vote (synced) or only the commit point
// (not synced), and a conflicting suffix cut above the commit point —
// every file through the recording file system, so each image keeps what
// the last fdatasync, msync or directory fsync of each file covered and
// any of what was pending — all open, keep every entry Append returned
// for with its bytes, never go back on a term or vote, and keep the index
// and the CommitLog ending together.
func TestPowerLossImages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := storagetest.NewCrashRecorder(t, dir, 2)
	opts := testOptions(dir)
	opts.Store.FS = rec.FS()
	src := newFrameSource(t, t.TempDir())
	defer src.close()

	var mu sync.Mutex // guards written and label (the recorder reads label from the store's goroutines)
	var written []*pb.Entry
	label := imageLabel{}
	rec.Label(func() any {
		mu.Lock()
		defer mu.Unlock()
		return label
	})
	s, err := Open(opts)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(21, 22))
	var term, vote, commit uint64 = 1, 1, 0
	setHS := func() {
		require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)}))
		mu.Lock()
		label.term, label.vote = term, vote
		mu.Unlock()
	}
	setHS()
	appendOne := func(e *pb.Entry) {
		require.NoError(t, s.Append([]*pb.Entry{e}))
		mu.Lock()
		written = append(written[:e.GetIndex()-1], e)
		label.acked = len(written)
		mu.Unlock()
	}
	for step := 0; step < 60; step++ {
		i, _ := s.LastIndex()
		switch r := rng.IntN(10); {
		case r < 6:
			appendOne(pbEntry(i+1, term, pb.EntryNormal, src.frames(t, s.NextOffset(), 1+rng.IntN(3), 1+rng.IntN(900))))
		case r == 6:
			appendOne(pbEntry(i+1, term, pb.EntryConfChangeV2, []byte("conf")))
		case r == 7 && i > commit+2: // a new leader replaces the last two entries
			term, vote = term+1, uint64(1+rng.IntN(3))
			setHS()
			mu.Lock()
			label.acked = int(i - 2) // the two are given up: not acknowledged to any client
			mu.Unlock()
			s.mu.Lock()
			pos := s.ents[i-2].offset // where entry i-1 begins
			s.mu.Unlock()
			appendOne(pbEntry(i-1, term, pb.EntryNormal, src.frames(t, pos, 1+rng.IntN(3), 1+rng.IntN(900))))
		default: // the commit point moves (no sync)
			commit = i
			hs := &pb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(vote), Commit: proto.Uint64(commit)}
			require.NoError(t, s.SetHardState(hs))
		}
	}
	require.NoError(t, s.Close())
	points := rec.Points()
	require.NotEmpty(t, points)

	lim := storagetest.SweepLimits{Points: 120, PerPoint: 3, Seed: 5}
	if os.Getenv("LONG") != "" {
		lim = storagetest.SweepLimits{PerPoint: 20, Seed: 5}
	}
	n := storagetest.ForEachImage(t, points, lim, func(t testing.TB, img string, l any, name string) {
		lab := l.(imageLabel)
		o := testOptions(img)
		c, err := Open(o)
		require.NoError(t, err, name)
		defer func() { _ = c.Close() }()
		hs, _, err := c.InitialState()
		require.NoError(t, err)
		require.GreaterOrEqual(t, hs.GetTerm(), lab.term, "%s: the term went back", name)
		if hs.GetTerm() == lab.term {
			require.Equal(t, lab.vote, hs.GetVote(), "%s: the vote changed within a term", name)
		}
		last, _ := c.LastIndex()
		require.GreaterOrEqual(t, last, uint64(lab.acked), "%s: an acknowledged entry is lost", name)
		require.Equal(t, c.NextOffset(), c.Store().WriteOffset(), name)
		if lab.acked > 0 {
			got, err := c.Entries(1, uint64(lab.acked)+1, 1<<40)
			require.NoError(t, err, name)
			mu.Lock()
			want := written[:lab.acked]
			mu.Unlock()
			for k := range got {
				if k < len(want) && want[k].GetTerm() == got[k].GetTerm() {
					require.True(t, bytes.Equal(want[k].GetData(), got[k].GetData()), "%s: entry %d", name, k+1)
				}
			}
		}
	})
	t.Logf("%d crash points, %d images checked", len(points), n)
}
