package raftlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// writeLog appends n entries of mixed kinds in the given term through s
// (frames from src), commits all but the last few and returns them.
func writeLog(t *testing.T, s *Storage, src *frameSource, rng *rand.Rand, n int, term uint64) []*pb.Entry {
	t.Helper()
	var out []*pb.Entry
	for k := 0; k < n; k++ {
		i, _ := s.LastIndex()
		i++
		var e *pb.Entry
		switch rng.IntN(6) {
		case 0:
			e = pbEntry(i, term, pb.EntryNormal, nil)
		case 1:
			e = pbEntry(i, term, pb.EntryConfChangeV2, []byte(fmt.Sprint("conf ", i)))
		default:
			e = pbEntry(i, term, pb.EntryNormal, src.frames(t, s.NextOffset(), 1+rng.IntN(3), 1+rng.IntN(1200)))
		}
		require.NoError(t, s.Append([]*pb.Entry{e}))
		out = append(out, e)
	}
	last, _ := s.LastIndex()
	require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(term), Commit: proto.Uint64(last - 3)}))
	return out
}

// requireHolds: s holds exactly want (from its first index) and its
// index and CommitLog end together.
func requireHolds(t *testing.T, s *Storage, want []*pb.Entry) {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	require.Equal(t, want[len(want)-1].GetIndex(), last)
	got, err := s.Entries(first, last+1, 1<<40)
	require.NoError(t, err)
	requireSameEntries(t, want[first-want[0].GetIndex():], got)
	require.Equal(t, s.NextOffset(), s.Store().WriteOffset())
}

// TestIndexTailLostIsCut: an index that lost its last entries (a torn
// write, a file cut short) above the commit point is cut there, and so
// is the CommitLog: the entries before it read back as written, and the
// log goes on from there.
func TestIndexTailLostIsCut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	ents := writeLog(t, s, src, rng, 30, 2)
	require.NoError(t, s.Close())

	// The last index file loses its last two entries and half of the one
	// before.
	x := indexFiles{fs: s.fs, dir: filepath.Join(dir, raftDirName, indexDirName), per: 8}
	bases, err := x.list()
	require.NoError(t, err)
	top := x.path(bases[len(bases)-1])
	st, err := os.Stat(top)
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(3*IndexEntrySize), "the last file holds three entries at least")
	require.NoError(t, os.Truncate(top, st.Size()-2*IndexEntrySize-IndexEntrySize/2))

	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	r := s.Report()
	require.Equal(t, uint64(len(ents)-3), r.Entries)
	requireHolds(t, s, ents[:len(ents)-3])
	if ents[len(ents)-1].GetData() != nil || ents[len(ents)-2].GetData() != nil || ents[len(ents)-3].GetData() != nil {
		require.Positive(t, r.TruncatedBytes, "the CommitLog bytes of the lost entries are cut")
	}
	more := writeLog(t, s, src, rng, 5, 3)
	requireHolds(t, s, append(ents[:len(ents)-3:len(ents)-3], more...))
}

// TestIndexLostBelowCommitRefuses: an index that lost committed entries
// is damage no scan mends: Open refuses (the replica must be rebuilt,
// and must not vote meanwhile).
func TestIndexLostBelowCommitRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	writeLog(t, s, src, rand.New(rand.NewPCG(3, 4)), 30, 2)
	require.NoError(t, s.Close())
	x := indexFiles{fs: s.fs, dir: filepath.Join(dir, raftDirName, indexDirName), per: 8}
	bases, err := x.list()
	require.NoError(t, err)
	require.NoError(t, os.Remove(x.path(bases[len(bases)-2])))
	_, err = Open(testOptions(dir))
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestDamagedIndexEntryIsRebuilt: an index entry whose bytes were damaged
// between two entries of the same term is rebuilt from them (offset and
// size from theirs, the type from the confs file).
func TestDamagedIndexEntryIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	ents := writeLog(t, s, src, rand.New(rand.NewPCG(5, 6)), 20, 2)
	require.NoError(t, s.Close())
	x := indexFiles{fs: s.fs, dir: filepath.Join(dir, raftDirName, indexDirName), per: 8}
	for _, i := range []uint64{3, 10, 12} { // a data entry, a conf entry or an empty one
		p := x.path(x.base(i))
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[(i-x.base(i))*IndexEntrySize+9] ^= 0x10
		require.NoError(t, os.WriteFile(p, b, 0o644))
	}
	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.Equal(t, uint64(3), s.Report().Repaired)
	requireHolds(t, s, ents)
}

// TestHardStateTornSlot: a torn write of the hard state leaves the other
// slot, which wins; with both slots damaged Open refuses (the term and
// vote are what keep a replica from voting twice).
func TestHardStateTornSlot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	for term := uint64(1); term <= 5; term++ {
		require.NoError(t, s.SetHardState(&pb.HardState{Term: proto.Uint64(term), Vote: proto.Uint64(term % 3)}))
	}
	require.NoError(t, s.Close())
	p := filepath.Join(dir, raftDirName, hardName)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	// Tear the newer slot (seq 5).
	_, newer, ok := decodeHardState(b)
	require.True(t, ok)
	torn := append([]byte(nil), b...)
	for k := newer*hardSlotSize + 20; k < (newer+1)*hardSlotSize; k++ {
		torn[k] = 0
	}
	require.NoError(t, os.WriteFile(p, torn, 0o644))
	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	hs, _, err := s.InitialState()
	require.NoError(t, err)
	require.Equal(t, uint64(4), hs.GetTerm(), "the older slot")
	require.Equal(t, uint64(1), hs.GetVote())
	require.NoError(t, s.Close())
	for k := (1-newer)*hardSlotSize + 10; k < (1-newer)*hardSlotSize+20; k++ {
		torn[k] ^= 0xff
	}
	require.NoError(t, os.WriteFile(p, torn, 0o644))
	_, err = Open(testOptions(dir))
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestCutBetweenIndexAndCommitLog: a conflicting suffix cut whose index
// half is done and whose CommitLog half is not (a crash between the two)
// is finished by Open.
func TestCutBetweenIndexAndCommitLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	ents := writeLog(t, s, src, rand.New(rand.NewPCG(7, 8)), 20, 2)
	// The first half of truncateLocked at the last data entry.
	at := len(ents) - 1
	for ents[at].GetData() == nil {
		at--
	}
	s.mu.Lock()
	require.NoError(t, s.index.truncateFrom(ents[at].GetIndex()))
	s.mu.Unlock()
	require.NoError(t, s.Close())

	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.Positive(t, s.Report().TruncatedBytes)
	requireHolds(t, s, ents[:at])
}

// TestCopyMidWayReopens: copies of the data directory taken while
// entries are appended and committed — the Raft files first, the
// CommitLog last, so each file is at least as new as the ones that are
// written after it (what a kill -9 can leave) — open, hold a prefix of
// what was appended (every committed entry at least), with the index and
// the CommitLog ending together, and take appends.
func TestCopyMidWayReopens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := newFrameSource(t, t.TempDir())
	defer src.close()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	rng := rand.New(rand.NewPCG(9, 10))

	var mu sync.Mutex
	var written []*pb.Entry
	stop := atomic.Bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 0; !stop.Load() && k < 400; k++ {
			i, _ := s.LastIndex()
			var e *pb.Entry
			if rng.IntN(5) == 0 {
				e = pbEntry(i+1, 1, pb.EntryNormal, nil)
			} else {
				e = pbEntry(i+1, 1, pb.EntryNormal, src.frames(t, s.NextOffset(), 1+rng.IntN(3), 1+rng.IntN(1500)))
			}
			if s.Append([]*pb.Entry{e}) != nil {
				return
			}
			mu.Lock()
			written = append(written, e)
			mu.Unlock()
			if s.SetHardState(&pb.HardState{Term: proto.Uint64(1), Commit: proto.Uint64(i + 1)}) != nil {
				return
			}
		}
	}()
	var copies []string
	for c := 0; c < 6; c++ {
		for { // spread the copies over the run
			mu.Lock()
			n := len(written)
			mu.Unlock()
			if n >= c*50 {
				break
			}
			select {
			case <-done:
			default:
				runtime.Gosched()
				continue
			}
			break
		}
		dst := filepath.Join(t.TempDir(), fmt.Sprint("copy", c))
		copyDataDir(t, dir, dst)
		copies = append(copies, dst)
	}
	stop.Store(true)
	<-done
	mu.Lock()
	all := append([]*pb.Entry(nil), written...)
	mu.Unlock()
	require.NotEmpty(t, all)

	held := 0
	for _, dst := range copies {
		c, err := Open(testOptions(dst))
		require.NoError(t, err, dst)
		hs, _, err := c.InitialState()
		require.NoError(t, err)
		last, _ := c.LastIndex()
		require.GreaterOrEqual(t, last, hs.GetCommit(), "every committed entry is held")
		if last > 0 {
			requireHolds(t, c, all[:last])
			held++
		}
		more := writeLog(t, c, newCopySource(t, src, c), rng, 3, 2)
		require.Len(t, more, 3)
		require.NoError(t, c.Close())
	}
	require.Greater(t, held, 3, "copies taken along the run")
}

// newCopySource is a frame source for a reopened copy: a fresh source
// store fed the copy's log, so it continues where the copy ends.
func newCopySource(t *testing.T, _ *frameSource, c *Storage) *frameSource {
	t.Helper()
	f := newFrameSource(t, t.TempDir())
	t.Cleanup(f.close)
	end := c.Store().WriteOffset()
	for from := int64(0); from < end; {
		b, next, err := c.Store().ReadFrames(from, 1<<20, nil)
		require.NoError(t, err)
		require.NotEmpty(t, b)
		_, err = f.st.AppendFrames(b)
		require.NoError(t, err)
		from = next
	}
	return f
}

// copyDataDir copies a store's data directory in phases, each listing
// the files anew: the hard state, the store's other files, the rest of
// raft/ (meta, confs, then the index), the CommitLog last.
func copyDataDir(t *testing.T, from, to string) {
	t.Helper()
	rank := func(p string) int {
		rel, _ := filepath.Rel(from, p)
		switch {
		case rel == filepath.Join(raftDirName, hardName):
			return 0
		case strings.HasPrefix(rel, raftDirName+string(filepath.Separator)+indexDirName):
			return 3
		case strings.HasPrefix(rel, raftDirName):
			return 2
		case strings.HasPrefix(rel, "commitlog"):
			return 4
		}
		// The store's own files (its checkpoint, queues and index) before
		// the Raft index: a checkpoint is written after the entries it
		// covers are indexed, so no image holds one newer than the index.
		return 1
	}
	for phase := 0; phase <= 4; phase++ {
		require.NoError(t, filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() || strings.HasSuffix(p, ".tmp") || filepath.Base(p) == "LOCK" || rank(p) != phase {
				return nil
			}
			rel, _ := filepath.Rel(from, p)
			dst := filepath.Join(to, rel)
			require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
			in, err := os.Open(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil // replaced meanwhile (tmp, rename) or removed
			}
			require.NoError(t, err)
			defer in.Close()
			out, err := os.Create(dst)
			require.NoError(t, err)
			_, err = io.Copy(out, in)
			require.NoError(t, err)
			return out.Close()
		}))
	}
}
