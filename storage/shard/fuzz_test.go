package shard

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/raftlog"
)

// FuzzReceiveCopy: whatever a peer sends as a copy, ReceiveCopy neither
// panics nor leaves anything behind when it refuses it; what it accepts
// opens as a Raft log at the header's point with the CommitLog ending at
// its offset. Seeds: a whole copy of a single voter's data (with a
// metadata file), cut short at several places.
func FuzzReceiveCopy(f *testing.F) {
	src := openSingle(f, f.TempDir())
	require.NoError(f, src.Store().WriteMeta("topics.json", []byte(`{"topics":[]}`)))
	for k := 0; k < 2; k++ { // small: the fuzzer minimizes what it finds
		ms := batch("seed", 2)
		require.NoError(f, src.Put(context.Background(), storage.ClassSend, ms, make([]storage.PutResult, len(ms))))
	}
	var whole bytes.Buffer
	if _, err := src.WriteCopy(context.Background(), &whole); err != nil {
		f.Fatal(err)
	}
	w := whole.Bytes()
	f.Add(w)
	for _, n := range []int{0, 100, 512, 1024, 1536, len(w) / 2, len(w) - 1024} {
		f.Add(w[:n])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		base := t.TempDir()
		dir := filepath.Join(base, "data")
		h, err := ReceiveCopy(context.Background(), bytes.NewReader(b), testLogOptions(dir), 2)
		if err != nil {
			des, rerr := os.ReadDir(base)
			require.NoError(t, rerr)
			require.Empty(t, des, "a refused copy leaves nothing: %v", err)
			return
		}
		lg, err := raftlog.Open(testLogOptions(dir))
		require.NoError(t, err)
		defer lg.Close()
		require.Equal(t, h.Offset, lg.Store().WriteOffset())
		first, err := lg.FirstIndex()
		require.NoError(t, err)
		require.Equal(t, h.Index+1, first)
	})
}
