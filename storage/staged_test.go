package storage_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestPutClassStagedKeepsTheCallersOrder: appends staged under a caller's
// lock land in the order the lock was taken, whatever the order their
// flushes are awaited in, and each wait returns with its record durable
// (readable after a reopen).
func TestPutClassStagedKeepsTheCallersOrder(t *testing.T) {
	dir := t.TempDir()
	st := storagetest.MustOpen(t, storage.Options{Dir: dir})
	var mu sync.Mutex
	var order []int64
	var wg sync.WaitGroup
	const writers, each = 8, 50
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				mu.Lock()
				m := storagetest.NewMessage("staged", 0, "x", "")
				m.SetProperty("n", string(rune('a'+w))+string(rune('a'+i%26)))
				var res [1]storage.PutResult
				wait, err := st.PutClassStaged(storage.ClassSystem, []*message.Message{m}, res[:])
				if err != nil {
					mu.Unlock()
					t.Error(err)
					return
				}
				order = append(order, res[0].QueueOffset)
				mu.Unlock()
				if err := wait(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Len(t, order, writers*each)
	for i, off := range order {
		require.Equal(t, int64(i), off, "the log's order is the order the lock was taken in")
	}
	// An empty batch stages nothing and its wait returns at once.
	wait, err := st.PutClassStaged(storage.ClassSystem, nil, nil)
	require.NoError(t, err)
	require.NoError(t, wait())
	require.NoError(t, st.Close())

	st = storagetest.MustOpen(t, storage.Options{Dir: dir})
	require.Equal(t, int64(writers*each), st.MaxOffset("staged", 0), "every awaited record survived")
}
