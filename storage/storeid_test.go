package storage_test

import (
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestStoreID covers where the store id in message ids comes from: chosen
// once for a store that has never written, then kept by its log.
func TestStoreID(t *testing.T) {
	t.Parallel()
	put := func(t *testing.T, s *storage.Store, body string) message.ID {
		t.Helper()
		r, err := s.Put(storagetest.NewMessage("ids", 0, body, ""))
		require.NoError(t, err)
		m, err := s.LookupID(r.ID)
		require.NoError(t, err)
		require.Equal(t, s.StoreID(), m.StoreHost, "the record carries the store id")
		return r.ID
	}
	reopen := func(t *testing.T, s *storage.Store, opts storage.Options) *storage.Store {
		t.Helper()
		require.NoError(t, s.Close())
		return storagetest.MustOpen(t, opts)
	}
	idFile := func(dir string) string { return filepath.Join(dir, "storeid") }

	t.Run("FreshStoresDiffer", func(t *testing.T) {
		t.Parallel()
		a := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
		b := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
		require.NotEqual(t, a.StoreID(), b.StoreID())
		require.NotEqual(t, message.Host{}, a.StoreID())
		require.Equal(t, a.StoreID(), put(t, a, "x").Host())
	})

	t.Run("KeptBeforeTheFirstRecord", func(t *testing.T) {
		t.Parallel()
		opts := storagetest.SmallOptions(t.TempDir())
		s := storagetest.MustOpen(t, opts)
		id := s.StoreID()
		s = reopen(t, s, opts)
		require.Equal(t, id, s.StoreID(), "no record yet: the file keeps the id")
		require.Equal(t, id, put(t, s, "x").Host())
	})

	t.Run("TheLogWins", func(t *testing.T) {
		t.Parallel()
		// A data dir written before store ids: records carry the node's
		// address and there is no storeid file. It keeps that address, so
		// its old and new ids share their first half.
		opts := storagetest.SmallOptions(t.TempDir())
		legacy := message.HostFrom(netip.MustParseAddrPort("127.0.0.1:8080"))
		withID := opts
		withID.StoreID = legacy
		s := storagetest.MustOpen(t, withID)
		old := put(t, s, "old")
		require.NoError(t, s.Close())
		require.NoError(t, os.Remove(idFile(opts.Dir)))

		s = storagetest.MustOpen(t, opts)
		require.Equal(t, legacy, s.StoreID())
		require.Equal(t, legacy, put(t, s, "new").Host())
		m, err := s.LookupID(old)
		require.NoError(t, err, "an old id still finds its message")
		require.Equal(t, "old", string(m.Body))

		// A file that disagrees with the log is rewritten from the log.
		other := message.HostFrom(netip.MustParseAddrPort("10.0.0.1:1"))
		require.NoError(t, s.Close())
		require.NoError(t, os.WriteFile(idFile(opts.Dir), []byte(hex.EncodeToString(other[:])+"\n"), 0o644))
		s = storagetest.MustOpen(t, opts)
		require.Equal(t, legacy, s.StoreID())
		b, err := os.ReadFile(idFile(opts.Dir))
		require.NoError(t, err)
		require.Equal(t, hex.EncodeToString(legacy[:])+"\n", string(b))

		// So is a damaged one.
		require.NoError(t, s.Close())
		require.NoError(t, os.WriteFile(idFile(opts.Dir), []byte("not hex at all!!\n"), 0o644))
		s = storagetest.MustOpen(t, opts)
		require.Equal(t, legacy, s.StoreID())
	})
}
