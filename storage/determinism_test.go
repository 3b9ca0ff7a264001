package storage_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestSameBatchesSameBytes: two stores with the same store id and the
// same clock, fed the same batches, hold byte-identical CommitLog
// segments — across 50 segment rolls, with the Blank padding at each
// segment's end, and with properties given in maps filled in different
// orders (the encoding is canonical). This is what lets a replica encode
// a batch the leader sequenced and hold the leader's bytes.
func TestSameBatchesSameBytes(t *testing.T) {
	t.Parallel()
	const segment = 64 << 10
	id := message.Host{0x6d, 0x71, 0x67, 0x61, 0x74, 0x65, 0x00, 0x01}
	open := func(fc *clockwork.FakeClock) (*storage.Store, string) {
		opts := storagetest.SmallOptions(t.TempDir())
		opts.SegmentSize, opts.MaxMessageSize = segment, 16<<10
		opts.StoreID, opts.Clock = id, fc
		return storagetest.MustOpen(t, opts), opts.Dir
	}
	start := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	fcA, fcB := clockwork.NewFakeClockAt(start), clockwork.NewFakeClockAt(start)
	a, dirA := open(fcA)
	b, dirB := open(fcB)

	rng := rand.New(rand.NewPCG(27, 50))
	topics := []string{"orders", "payments", "audit"}
	// build returns one batch twice: the same messages, their property
	// maps filled in opposite orders.
	build := func() (x, y []*message.Message) {
		n := 1 + rng.IntN(12)
		for i := 0; i < n; i++ {
			body := make([]byte, rng.IntN(3000))
			for j := range body {
				body[j] = byte(rng.Uint32())
			}
			m := &message.Message{Topic: topics[rng.IntN(len(topics))], QueueID: int32(rng.IntN(4)), Body: body, BornTimestamp: start.UnixMilli()}
			keys := make([]string, rng.IntN(20))
			for k := range keys {
				keys[k] = fmt.Sprintf("p%02d", rng.IntN(40))
			}
			m2 := *m
			m.Properties, m2.Properties = map[string]string{}, map[string]string{}
			for _, k := range keys {
				m.Properties[k] = k + "-value"
			}
			for k := len(keys) - 1; k >= 0; k-- {
				m2.Properties[keys[k]] = keys[k] + "-value"
			}
			x, y = append(x, m), append(y, &m2)
		}
		return x, y
	}
	for rolls := 0; a.Stats().CommitLogMax < 51*segment; rolls++ {
		x, y := build()
		resA, resB := make([]storage.PutResult, len(x)), make([]storage.PutResult, len(y))
		require.NoError(t, a.PutBatch(x, resA))
		require.NoError(t, b.PutBatch(y, resB))
		require.Equal(t, resA, resB, "the same batch, sequenced the same")
		d := time.Duration(rng.IntN(5)) * time.Millisecond
		fcA.Advance(d)
		fcB.Advance(d)
	}
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())

	files := func(dir string) []string {
		entries, err := os.ReadDir(filepath.Join(dir, "commitlog"))
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		return names
	}
	namesA, namesB := files(dirA), files(dirB)
	require.Equal(t, namesA, namesB)
	require.GreaterOrEqual(t, len(namesA), 51, "50 rolls at least")
	for _, name := range namesA {
		ba, err := os.ReadFile(filepath.Join(dirA, "commitlog", name))
		require.NoError(t, err)
		bb, err := os.ReadFile(filepath.Join(dirB, "commitlog", name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(ba, bb), "segment %s differs", name)
	}
}
