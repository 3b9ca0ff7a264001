package storage_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

func openReplicated(t *testing.T) *storage.Store {
	t.Helper()
	opts := storagetest.SmallOptions(t.TempDir())
	opts.Replicated = true
	s, err := storage.Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func msg(body string) *message.Message {
	return &message.Message{Topic: "t", QueueID: 0, Body: []byte(body)}
}

// TestAReplicatedStoreAnswersAtTheCommitPoint: a replicated store opens
// fenced (appends refused, nothing written); unfenced, a write returns
// only once the commit point passes it, a no-wait write at once; a fence
// answers the writes still waiting with an unknown outcome and refuses
// new ones; a cut of the tail does the same for the writes above it.
func TestAReplicatedStoreAnswersAtTheCommitPoint(t *testing.T) {
	t.Parallel()
	s := openReplicated(t)
	require.True(t, s.Fenced())
	_, err := s.Put(msg("refused"))
	require.ErrorIs(t, err, storage.ErrNotLeader)
	require.Zero(t, s.WriteOffset(), "a refused append writes nothing")

	s.Unfence()
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(msg("one"))
		done <- err
	}()
	require.Eventually(t, func() bool { return s.WriteOffset() > 0 }, 5*time.Second, time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("answered before the commit point passed it: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.SetDispatchLimit(s.WriteOffset())
	require.NoError(t, <-done)
	require.Equal(t, s.WriteOffset(), s.CommitOffset())

	// A no-wait write does not wait; a batch waits as a single write does.
	require.NoError(t, s.PutClassNoWait(storage.ClassSystem, []*message.Message{msg("nowait")}, make([]storage.PutResult, 1)))
	require.Greater(t, s.WriteOffset(), s.CommitOffset())
	s.SetDispatchLimit(s.WriteOffset())
	batch := make(chan error, 1)
	go func() {
		batch <- s.PutBatch([]*message.Message{msg("a"), msg("b")}, make([]storage.PutResult, 2))
	}()
	require.Eventually(t, func() bool { return s.WriteOffset() > s.CommitOffset() }, 5*time.Second, time.Millisecond)

	// The fence answers the waiting batch: unknown, never a success.
	s.Fence()
	require.ErrorIs(t, <-batch, storage.ErrUnknownOutcome)
	_, err = s.Put(msg("after the fence"))
	require.ErrorIs(t, err, storage.ErrNotLeader)

	// A cut answers the writes above it.
	s.Unfence()
	before := s.WriteOffset()
	s.SetDispatchLimit(before)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Put(msg("to be cut"))
		}()
	}
	require.Eventually(t, func() bool { return s.WriteOffset() > before }, 5*time.Second, time.Millisecond)
	s.Fence() // the writers are done appending (a cut needs no append in flight)
	require.NoError(t, s.TruncateFrom(before))
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, storage.ErrUnknownOutcome) && !errors.Is(err, storage.ErrNotLeader) {
			t.Fatalf("a cut write answered %v", err)
		}
		require.Error(t, err, "no write above the cut may succeed")
	}
	require.Equal(t, before, s.WriteOffset())
}

// TestAStoreNotReplicatedIsNotGated: without Replicated nothing waits or
// is fenced.
func TestAStoreNotReplicatedIsNotGated(t *testing.T) {
	t.Parallel()
	s, err := storage.Open(storagetest.SmallOptions(t.TempDir()))
	require.NoError(t, err)
	defer s.Close()
	s.Fence()
	require.False(t, s.Fenced())
	_, err = s.Put(msg("x"))
	require.NoError(t, err)
	require.NoError(t, s.WaitCommitted(s.WriteOffset()))
	require.Equal(t, s.WriteOffset(), s.CommitOffset())
}
