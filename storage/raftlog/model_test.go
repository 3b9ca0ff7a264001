package raftlog

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// TestModelAgainstMemoryStorage drives the Storage and raft's
// MemoryStorage with the same operations — appends that extend, repeat
// or conflict with the log (a new term's entries replacing a suffix above
// the commit point), hard states, compactions, snapshots, reopenings —
// and requires the same answers from both: first and last index, every
// term, entries (data read back from the CommitLog) under size limits,
// the hard state and the snapshot's metadata.
func TestModelAgainstMemoryStorage(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(t.TempDir(), "m")
		require.NoError(rt, err)
		srcDir, err := os.MkdirTemp(t.TempDir(), "src")
		require.NoError(rt, err)
		src := newFrameSource(rt, srcDir)
		defer src.close()
		s, err := Open(testOptions(dir))
		require.NoError(rt, err)
		defer func() { _ = s.Close() }()
		ms := raft.NewMemoryStorage()
		var curTerm, commit, hsTerm uint64 = 1, 0, 0

		last := func() uint64 { l, _ := ms.LastIndex(); return l }
		first := func() uint64 { f, _ := ms.FirstIndex(); return f }
		endOf := func(i uint64) int64 { // our CommitLog offset after entry i
			s.mu.Lock()
			defer s.mu.Unlock()
			if c := s.meta.compact; i == c.index {
				return c.offset
			}
			return s.ents[i-s.meta.compact.index-1].end()
		}
		check := func(rt *rapid.T) {
			f1, _ := s.FirstIndex()
			l1, _ := s.LastIndex()
			require.Equal(rt, first(), f1, "first index")
			require.Equal(rt, last(), l1, "last index")
			for i := f1 - 1; i <= l1+1; i++ {
				t0, e0 := ms.Term(i)
				t1, e1 := s.Term(i)
				require.Equal(rt, t0, t1, "term %d", i)
				require.Equal(rt, errors.Is(e0, raft.ErrCompacted), errors.Is(e1, raft.ErrCompacted), "term %d: %v / %v", i, e0, e1)
				require.Equal(rt, errors.Is(e0, raft.ErrUnavailable), errors.Is(e1, raft.ErrUnavailable), "term %d: %v / %v", i, e0, e1)
			}
			if f1 > 1 {
				_, err := s.Entries(f1-1, f1, 1<<20)
				require.ErrorIs(rt, err, raft.ErrCompacted)
			}
			lo := rapid.Uint64Range(f1, l1+1).Draw(rt, "lo")
			hi := rapid.Uint64Range(lo, l1+1).Draw(rt, "hi")
			max := rapid.Uint64Range(0, 4<<10).Draw(rt, "maxSize")
			want, e0 := ms.Entries(lo, hi, max)
			got, e1 := s.Entries(lo, hi, max)
			require.Equal(rt, e0 == nil, e1 == nil, "entries [%d,%d): %v / %v", lo, hi, e0, e1)
			requireSameEntries(rt, want, got, "entries [%d,%d) max %d", lo, hi, max)
			h0, c0, _ := ms.InitialState()
			h1, c1, _ := s.InitialState()
			require.Equal(rt, h0.GetTerm(), h1.GetTerm())
			require.Equal(rt, h0.GetVote(), h1.GetVote())
			require.Equal(rt, h0.GetCommit(), h1.GetCommit())
			require.True(rt, proto.Equal(pb.EnsureConfState(c0), pb.EnsureConfState(c1)), "conf state")
			sn0, _ := ms.Snapshot()
			sn1, _ := s.Snapshot()
			require.Equal(rt, sn0.GetMetadata().GetIndex(), sn1.GetMetadata().GetIndex())
			require.Equal(rt, sn0.GetMetadata().GetTerm(), sn1.GetMetadata().GetTerm())
			require.True(rt, proto.Equal(pb.EnsureConfState(sn0.GetMetadata().GetConfState()), pb.EnsureConfState(sn1.GetMetadata().GetConfState())))
			require.Equal(rt, s.NextOffset(), s.Store().WriteOffset(), "the index and the CommitLog end together")
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				lo := max(commit+1, first())
				start := rapid.Uint64Range(lo, last()+1).Draw(rt, "start")
				if start <= last() || rapid.Bool().Draw(rt, "new term") {
					curTerm++ // a new leader: its entries replace any suffix
				}
				pos := endOf(start - 1)
				var ents []*pb.Entry
				for k := uint64(0); k < uint64(rapid.IntRange(1, 4).Draw(rt, "n")); k++ {
					var e *pb.Entry
					switch rapid.IntRange(0, 5).Draw(rt, "kind") {
					case 0:
						e = pbEntry(start+k, curTerm, pb.EntryNormal, nil)
					case 1:
						e = pbEntry(start+k, curTerm, pb.EntryConfChangeV2, []byte(rapid.StringN(0, 20, -1).Draw(rt, "conf")))
					default:
						data := src.frames(rt, pos, rapid.IntRange(1, 4).Draw(rt, "msgs"), rapid.IntRange(1, 1500).Draw(rt, "size"))
						_, pos, err = commitlogExtent(data)
						require.NoError(rt, err)
						e = pbEntry(start+k, curTerm, pb.EntryNormal, data)
					}
					ents = append(ents, e)
				}
				require.NoError(rt, ms.Append(ents))
				require.NoError(rt, s.Append(ents))
			},
			"repeat": func(rt *rapid.T) { // a retransmission of entries already held
				if last() < first() {
					return
				}
				lo := rapid.Uint64Range(first(), last()).Draw(rt, "from")
				ents, err := ms.Entries(lo, last()+1, 1<<30)
				require.NoError(rt, err)
				require.NoError(rt, ms.Append(ents))
				require.NoError(rt, s.Append(ents))
			},
			"hardstate": func(rt *rapid.T) {
				commit = rapid.Uint64Range(commit, last()).Draw(rt, "commit")
				hsTerm = max(hsTerm, curTerm)
				hs := &pb.HardState{Term: proto.Uint64(hsTerm), Vote: proto.Uint64(rapid.Uint64Range(0, 3).Draw(rt, "vote")), Commit: proto.Uint64(commit)}
				require.NoError(rt, ms.SetHardState(hs))
				require.NoError(rt, s.SetHardState(hs))
				require.Equal(rt, endOf(max(commit, first()-1)), s.Store().DispatchLimit(), "the dispatcher stops at the commit point")
			},
			"compact": func(rt *rapid.T) {
				if commit < first() {
					return
				}
				i := rapid.Uint64Range(first(), commit).Draw(rt, "compact")
				require.NoError(rt, ms.Compact(i))
				require.NoError(rt, s.Compact(i))
			},
			"snapshot": func(rt *rapid.T) {
				sn, _ := ms.Snapshot()
				from := max(sn.GetMetadata().GetIndex()+1, first())
				if commit < from {
					return
				}
				i := rapid.Uint64Range(from, commit).Draw(rt, "snapshot")
				cs := &pb.ConfState{Voters: []uint64{1, rapid.Uint64Range(2, 5).Draw(rt, "voter")}}
				_, e0 := ms.CreateSnapshot(i, cs, nil)
				_, e1 := s.CreateSnapshot(i, cs, nil)
				require.NoError(rt, e0)
				require.NoError(rt, e1)
			},
			"reopen": func(rt *rapid.T) {
				require.NoError(rt, s.Close())
				s, err = Open(testOptions(dir))
				require.NoError(rt, err)
				r := s.Report()
				require.Zero(rt, r.CutEntries+r.Repaired)
				require.Zero(rt, r.TruncatedBytes)
			},
			"": check,
		})
	})
}

// TestConflictAtOrBelowCommitRefused: an entry that conflicts with the
// log at or below the persisted commit point is refused (ErrCommitted)
// and nothing changes; above it the suffix is replaced. A normal entry
// whose data is not a frame stream at the log's end is refused whole.
func TestConflictAtOrBelowCommitRefused(t *testing.T) {
	t.Parallel()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	s, err := Open(testOptions(t.TempDir()))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	for i := uint64(1); i <= 8; i++ {
		require.NoError(t, s.Append([]*pb.Entry{pbEntry(i, 1, pb.EntryNormal, src.frames(t, s.NextOffset(), 2, 200))}))
	}
	require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(2), Commit: proto.Uint64(5)}))
	end := s.Store().WriteOffset()
	for _, at := range []uint64{3, 5} {
		err := s.Append([]*pb.Entry{pbEntry(at, 2, pb.EntryNormal, nil)})
		require.ErrorIs(t, err, ErrCommitted, "at %d", at)
		last, _ := s.LastIndex()
		require.Equal(t, uint64(8), last)
		require.Equal(t, end, s.Store().WriteOffset())
	}
	require.NoError(t, s.Append([]*pb.Entry{pbEntry(6, 2, pb.EntryNormal, nil)}))
	last, _ := s.LastIndex()
	require.Equal(t, uint64(6), last)
	require.Less(t, s.Store().WriteOffset(), end, "the CommitLog bytes of entries 6-8 are cut")

	bad := src.frames(t, s.NextOffset(), 1, 100)
	bad[len(bad)-1] ^= 1
	require.ErrorIs(t, s.Append([]*pb.Entry{pbEntry(7, 2, pb.EntryNormal, bad)}), ErrNotFrames)
	require.ErrorIs(t, s.Append([]*pb.Entry{pbEntry(7, 2, pb.EntryNormal, []byte("not frames"))}), ErrNotFrames)
	last, _ = s.LastIndex()
	require.Equal(t, uint64(6), last)
	require.Equal(t, s.NextOffset(), s.Store().WriteOffset())
	good := src.frames(t, s.NextOffset(), 1, 100)
	require.NoError(t, s.Append([]*pb.Entry{pbEntry(7, 2, pb.EntryNormal, good)}))
}
