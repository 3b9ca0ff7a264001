package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The checkpointer is an internal/worker periodic pass: a kick runs it at
// once, and the test waits for "a pass completed" instead of sleeping
// through CheckpointInterval.
func TestCheckpointerKick(t *testing.T) {
	opts := storagetest.SmallOptions(t.TempDir())
	opts.CheckpointInterval = time.Hour // never on its own during the test
	s, err := storage.Open(opts)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	r, err := s.Put(storagetest.NewMessage("kick", 0, "body", "tag", "k"))
	require.NoError(t, err)

	select {
	case <-storage.KickCheckpointerForTest(s):
	case <-time.After(10 * time.Second):
		t.Fatal("the kicked checkpointer did not run")
	}
	clean, flushed, _, err := storage.CheckpointForTest(opts.Dir)
	require.NoError(t, err)
	require.False(t, clean, "a running store's checkpoint is not clean")
	require.Greater(t, flushed, r.PhysicalOffset, "the checkpoint covers the put")
}
