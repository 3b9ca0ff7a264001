package storage_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestTruncateFromIsNeverHavingWritten: a store that writes a suffix
// beyond its dispatch limit, cuts it off (TruncateFrom) and goes on is
// the store that never wrote it: the same queue offsets and ids for the
// next batches, the same ConsumeQueues once the limit rises, and the same
// segment files byte for byte — through reopenings with the dispatcher
// held (the offsets of undispatched records are counted at Open) and
// segment rolls inside the cut suffix.
func TestTruncateFromIsNeverHavingWritten(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel()
			truncateWalk(t, seed)
		})
	}
}

func truncateWalk(t *testing.T, seed uint64) {
	now := time.Now()
	scrubNow := func() time.Time { // every step may start a pass
		now = now.Add(25 * time.Hour)
		return now
	}
	const segment = 16 << 10
	start := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	id := message.Host{9, 9, 9, 9, 9, 9, 9, 9}
	options := func(dir string, fc *clockwork.FakeClock, limit int64) storage.Options {
		opts := storagetest.SmallOptions(dir)
		opts.SegmentSize, opts.MaxMessageSize = segment, 4<<10
		opts.StoreID, opts.Clock = id, fc
		opts.HoldDispatch, opts.DispatchLimit = true, limit
		return opts
	}
	fcA, fcB := clockwork.NewFakeClockAt(start), clockwork.NewFakeClockAt(start)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, err := storage.Open(options(dirA, fcA, 0))
	require.NoError(t, err)
	b, err := storage.Open(options(dirB, fcB, 0))
	require.NoError(t, err)
	defer func() { _ = a.Close(); _ = b.Close() }()

	rng := rand.New(rand.NewPCG(seed, 28))
	topics := []string{"orders", "payments"}
	batch := func(tag string) []*message.Message {
		ms := make([]*message.Message, 1+rng.IntN(6))
		for i := range ms {
			ms[i] = storagetest.NewMessage(topics[rng.IntN(2)], int32(rng.IntN(3)), fmt.Sprintf("%s-%d-%s", tag, i, bytes.Repeat([]byte("z"), rng.IntN(3000))), "t")
		}
		return ms
	}
	clone := func(ms []*message.Message) []*message.Message {
		out := make([]*message.Message, len(ms))
		for i, m := range ms {
			c := *m
			c.Properties = map[string]string{}
			for k, v := range m.Properties {
				c.Properties[k] = v
			}
			out[i] = &c
		}
		return out
	}
	for step := 0; step < 60; step++ {
		x := batch(fmt.Sprint("common", step))
		resA, resB := make([]storage.PutResult, len(x)), make([]storage.PutResult, len(x))
		require.NoError(t, a.PutBatch(x, resA))
		require.NoError(t, b.PutBatch(clone(x), resB))
		require.Equal(t, resB, resA, "step %d: the same offsets and ids", step)
		switch r := rng.IntN(10); {
		case r < 4: // a suffix the other never writes, then cut
			mark := a.WriteOffset()
			for k := 1 + rng.IntN(4); k > 0; k-- {
				s := batch("suffix")
				require.NoError(t, a.PutBatch(s, make([]storage.PutResult, len(s))))
			}
			if rng.IntN(3) == 0 { // reopen before the cut: offsets counted at Open
				limit := a.DispatchLimit()
				require.NoError(t, a.Close())
				a, err = storage.Open(options(dirA, fcA, limit))
				require.NoError(t, err)
			}
			for k := rng.IntN(4); k > 0; k-- { // the scrubber reaches into the suffix
				_, err := storage.RunScrubForTest(a, scrubNow(), 64<<10)
				require.NoError(t, err)
			}
			require.NoError(t, a.TruncateFrom(mark))
			require.Equal(t, mark, a.WriteOffset())
		case r < 6: // the commit point moves: the dispatcher follows
			a.SetDispatchLimit(a.WriteOffset())
			b.SetDispatchLimit(b.WriteOffset())
		case r == 6:
			require.ErrorIs(t, a.TruncateFrom(a.DispatchLimit()-1), storage.ErrTruncate, "below the limit")
		}
		if rng.IntN(3) == 0 { // the scrubber walks A's log, cut or not
			_, err := storage.RunScrubForTest(a, scrubNow(), int64(1+rng.IntN(8<<10)))
			require.NoError(t, err)
		}
		d := time.Duration(rng.IntN(3)) * time.Millisecond
		fcA.Advance(d)
		fcB.Advance(d)
	}
	for k := 0; k < 50; k++ {
		_, err := storage.RunScrubForTest(a, scrubNow(), 16<<10)
		require.NoError(t, err)
	}
	require.Zero(t, a.ScrubStatus().BadFrames, "no frame the scrubber read was a cut or re-appended one out of step")
	require.Zero(t, a.Quarantined().Count)
	a.SetDispatchLimit(a.WriteOffset())
	b.SetDispatchLimit(b.WriteOffset())
	require.Eventually(t, func() bool { return a.Dispatched() == a.WriteOffset() && b.Dispatched() == b.WriteOffset() }, 10*time.Second, time.Millisecond)
	for _, topic := range topics {
		for q := int32(0); q < 3; q++ {
			want := b.MaxOffset(topic, q)
			require.Equal(t, want, a.MaxOffset(topic, q), "%s/%d", topic, q)
			ra, err := a.ReadQueue(topic, q, 0, 1000, nil)
			require.NoError(t, err)
			rb, err := b.ReadQueue(topic, q, 0, 1000, nil)
			require.NoError(t, err)
			require.Equal(t, len(rb.Messages), len(ra.Messages))
			for i := range ra.Messages {
				require.Equal(t, rb.Messages[i].Body, ra.Messages[i].Body)
			}
		}
	}
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	segsA, segsB := storagetest.Segments(t, dirA), storagetest.Segments(t, dirB)
	require.Equal(t, len(segsB), len(segsA))
	require.Greater(t, len(segsA), 3, "the walk rolled segments")
	for _, path := range segsA {
		name := filepath.Base(path)
		x, err := os.ReadFile(path)
		require.NoError(t, err)
		y, err := os.ReadFile(filepath.Join(dirB, "commitlog", name))
		require.NoError(t, err)
		require.True(t, bytes.Equal(x, y), "segment %s differs", name)
	}
}

// TestTruncateFromRefusesWithoutHold: a store whose dispatcher follows
// the log freely never truncates.
func TestTruncateFromRefusesWithoutHold(t *testing.T) {
	t.Parallel()
	s := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, "one", ""))
	require.ErrorIs(t, s.TruncateFrom(0), storage.ErrTruncate)
}

// TestScrubAfterTruncate: a scrubber pass that had verified part of the
// cut suffix resumes at the cut, not inside the records appended after it.
func TestScrubAfterTruncate(t *testing.T) {
	t.Parallel()
	opts := storagetest.SmallOptions(t.TempDir())
	opts.HoldDispatch = true
	s := storagetest.MustOpen(t, opts)
	put := func(n, size int) {
		for i := 0; i < n; i++ {
			storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, string(bytes.Repeat([]byte("s"), size)), ""))
		}
	}
	put(10, 1000)
	mark := s.WriteOffset()
	put(10, 700)
	now := time.Now().Add(25 * time.Hour)
	for s.ScrubStatus().Position <= mark+1500 {
		_, err := storage.RunScrubForTest(s, now, 1)
		require.NoError(t, err)
	}
	require.NoError(t, s.TruncateFrom(mark))
	require.LessOrEqual(t, s.ScrubStatus().Position, mark)
	put(10, 1300)
	for k := 0; k < 40; k++ {
		_, err := storage.RunScrubForTest(s, now, 1)
		require.NoError(t, err)
	}
	require.Zero(t, s.ScrubStatus().BadFrames)
	require.Zero(t, s.Quarantined().Count)
}
