package storage_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestPurgeTopic: a purged topic's messages are gone from its queues, from
// the lookups by id and by key, and stay gone after a crash that forces a
// full re-dispatch; its queue offsets continue; other topics keep theirs.
func TestPurgeTopic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := storagetest.SmallOptions(dir)
	s := storagetest.MustOpen(t, opts)
	var old []storage.PutResult
	for i := 0; i < 150; i++ { // several queue files per queue
		old = append(old, storagetest.MustPut(t, s, storagetest.NewMessage("gone", int32(i%2), fmt.Sprint("old", i), "", fmt.Sprint("k", i))))
		storagetest.MustPut(t, s, storagetest.NewMessage("kept", 0, fmt.Sprint("kept", i), "", fmt.Sprint("k", i)))
	}
	dedup := storagetest.NewMessage("gone", 0, "dedup", "")
	dedup.SetProperty("DEDUP_ID", "d1")
	storagetest.MustPut(t, s, dedup)

	floor := s.WriteOffset()
	require.NoError(t, s.Settle(context.Background(), floor))
	max0, max1 := s.MaxOffset("gone", 0), s.MaxOffset("gone", 1)
	require.NoError(t, s.PurgeTopic("gone", floor))
	require.NoError(t, s.PurgeTopic("gone", floor), "idempotent")

	check := func(s *storage.Store) {
		t.Helper()
		require.Equal(t, max0, s.MinOffset("gone", 0))
		require.Equal(t, max1, s.MinOffset("gone", 1))
		_, err := s.ReadQueue("gone", 0, 0, 10, nil)
		require.ErrorIs(t, err, storage.ErrOffsetTooSmall)
		for _, r := range []storage.PutResult{old[0], old[77], old[149]} {
			_, err := s.LookupID(r.ID)
			require.ErrorIs(t, err, storage.ErrNotFound)
		}
		ms, err := s.QueryByKey("gone", "k3", 0, 0, 10)
		require.NoError(t, err)
		require.Empty(t, ms)
		_, err = s.FindByDedupID("gone", "d1", 0)
		require.ErrorIs(t, err, storage.ErrNotFound)
		ms, err = s.QueryByKey("kept", "k3", 0, 0, 10)
		require.NoError(t, err)
		require.Len(t, ms, 1, "other topics keep their messages")
		require.Zero(t, s.MinOffset("kept", 0))
	}
	check(s)

	// New messages continue the offsets and are found.
	fresh := storagetest.MustPut(t, s, storagetest.NewMessage("gone", 0, "new", "", "fresh"))
	require.Equal(t, max0, fresh.QueueOffset)

	// A crash without a checkpoint: everything is re-dispatched from the
	// start of the CommitLog; the purged entries stay out.
	require.NoError(t, s.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "checkpoint")))
	storagetest.SimulateCrash(t, dir)
	s = storagetest.MustOpen(t, opts)
	require.True(t, s.Recovery().Abnormal)
	require.Positive(t, s.Recovery().Redispatched)
	check(s)
	require.Equal(t, max0+1, s.MaxOffset("gone", 0))
	m, err := s.LookupID(fresh.ID)
	require.NoError(t, err)
	require.Equal(t, "new", string(m.Body))
	ms, err := s.QueryByKey("gone", "fresh", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, "new", string(ms[0].Body))
	again := storagetest.MustPut(t, s, storagetest.NewMessage("gone", 0, "newer", ""))
	require.Equal(t, max0+1, again.QueueOffset, "offsets never reused")
}
