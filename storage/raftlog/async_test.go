package raftlog

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// gateFS holds every fdatasync of a Raft index file while it is closed:
// an Append then waits in its flush for as long as the test wants.
type gateFS struct {
	vfs.FS
	mu      sync.Mutex
	closed  bool
	open    chan struct{} // closed to let the held syncs through
	waiting chan struct{} // a sync waits (capacity 1)
}

func newGateFS() *gateFS {
	return &gateFS{FS: vfs.OS(), open: make(chan struct{}), waiting: make(chan struct{}, 1)}
}

func (g *gateFS) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.open = true, make(chan struct{})
}

func (g *gateFS) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
}

func (g *gateFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.Contains(f.Name(), string(filepath.Separator)+indexDirName+string(filepath.Separator)) {
		return f, err
	}
	return &gatedFile{File: f, g: g}, nil
}

func (g *gateFS) Create(name string) (vfs.File, error) { return g.wrap(g.FS.Create(name)) }

func (g *gateFS) OpenReadWrite(name string) (vfs.File, error) {
	return g.wrap(g.FS.OpenReadWrite(name))
}

type gatedFile struct {
	vfs.File
	g *gateFS
}

func (f *gatedFile) Sync() error {
	f.g.mu.Lock()
	closed, open := f.g.closed, f.g.open
	f.g.mu.Unlock()
	if closed {
		select {
		case f.g.waiting <- struct{}{}:
		default:
		}
		<-open
	}
	return f.File.Sync()
}

// within fails the test if fn does not return within d, or fails.
func within(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		require.NoError(t, err, what)
	case <-time.After(d):
		t.Fatalf("%s waited for an Append's flush", what)
	}
}

// TestReadsAndCommitGoOnDuringAnAppendsFlush: while an Append waits for
// its flush (here the index's fdatasync, held), raft's reads (LastIndex,
// Term, Entries of the entries persisted before), SetHardState and
// SetCommit return at once — a node loop with asynchronous storage
// writes steps messages and answers commits beside its append worker —
// and they see the log without the entries being persisted; once the
// Append returns, they are there.
func TestReadsAndCommitGoOnDuringAnAppendsFlush(t *testing.T) {
	t.Parallel()
	g := newGateFS()
	opts := testOptions(t.TempDir())
	opts.Store.FS = g
	s, err := Open(opts)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.NoError(t, s.SetHardState(hs(1, 1, 0)))
	require.NoError(t, s.Append(leaderEntries(t, s, "a", 2, 2, 1)))

	data, _ := leaderWrite(t, s, "b", 2)
	g.close()
	appended := make(chan error, 1)
	go func() { appended <- s.Append([]*pb.Entry{pbEntry(3, 1, pb.EntryNormal, data)}) }()
	select {
	case <-g.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the Append never reached its index's fdatasync")
	}
	defer g.release() // a failed check must not leave the Append hanging

	within(t, 2*time.Second, "LastIndex", func() error {
		if i, err := s.LastIndex(); err != nil || i != 2 {
			return fmt.Errorf("last index %d, %v", i, err)
		}
		return nil
	})
	within(t, 2*time.Second, "Term", func() error {
		if tm, err := s.Term(2); err != nil || tm != 1 {
			return fmt.Errorf("term %d, %v", tm, err)
		}
		return nil
	})
	within(t, 2*time.Second, "Entries", func() error {
		got, err := s.Entries(1, 3, 1<<20)
		if err == nil && len(got) != 2 {
			err = fmt.Errorf("%d entries", len(got))
		}
		return err
	})
	within(t, 2*time.Second, "SetCommit", func() error { return s.SetCommit(2) })
	within(t, 2*time.Second, "SetHardState", func() error { return s.SetHardState(hs(1, 1, 2)) })
	end, ok := s.EndOffset(2)
	require.True(t, ok)
	require.Equal(t, end, s.Store().DispatchLimit(), "the dispatch limit is at the committed entries' end")
	select {
	case err := <-appended:
		t.Fatalf("the Append returned before its flush: %v", err)
	default:
	}

	g.release()
	require.NoError(t, <-appended)
	require.Equal(t, uint64(3), mustLast(t, s))
}

// TestSetCommit: SetCommit raises the commit point with the term and
// vote the file holds, no further than the last persisted entry, never
// lowers it, and moves the dispatch limit; a later SetHardState with a
// lower commit point keeps it, across a reopen.
func TestSetCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	require.NoError(t, err)
	require.NoError(t, s.SetCommit(1), "no hard state yet: nothing to raise")
	require.NoError(t, s.SetHardState(hs(3, 2, 0)))
	require.NoError(t, s.Append(leaderEntries(t, s, "c", 3, 1, 3)))

	require.NoError(t, s.SetCommit(2))
	end2, _ := s.EndOffset(2)
	require.Equal(t, end2, s.Store().DispatchLimit())
	got, _, err := s.InitialState()
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 2, 2}, []uint64{got.GetTerm(), got.GetVote(), got.GetCommit()})

	require.NoError(t, s.SetCommit(1))
	require.NoError(t, s.SetHardState(hs(3, 2, 1)))
	got, _, _ = s.InitialState()
	require.Equal(t, uint64(2), got.GetCommit(), "the commit point never moves back")
	require.Equal(t, end2, s.Store().DispatchLimit())

	require.NoError(t, s.SetCommit(9))
	got, _, _ = s.InitialState()
	require.Equal(t, uint64(3), got.GetCommit(), "no further than the last persisted entry")
	require.Equal(t, s.Store().WriteOffset(), s.Store().DispatchLimit())

	require.NoError(t, s.Close())
	s, err = Open(testOptions(dir))
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	got, _, err = s.InitialState()
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 2, 3}, []uint64{got.GetTerm(), got.GetVote(), got.GetCommit()})
}
