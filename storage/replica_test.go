package storage_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestFollowerHoldsTheLeadersLog: a store that follows another through
// frame streams (ReadFrames on the leader, AppendFrames on the follower)
// holds the leader's segments byte for byte across rolls, serves the same
// messages from its own ConsumeQueues, takes the leader's store id, and,
// once it writes itself, continues the leader's queue offsets. A stream
// with one byte changed is refused whole and changes nothing.
func TestFollowerHoldsTheLeadersLog(t *testing.T) {
	t.Parallel()
	const segment = 64 << 10
	open := func(id message.Host, mode commitlog.FlushMode) (*storage.Store, string) {
		opts := storagetest.SmallOptions(t.TempDir())
		opts.SegmentSize, opts.MaxMessageSize, opts.FlushMode = segment, 16<<10, mode
		opts.StoreID, opts.Clock = id, clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
		return storagetest.MustOpen(t, opts), opts.Dir
	}
	leader, dirL := open(message.Host{1, 1, 1, 1, 1, 1, 1, 1}, commitlog.FlushSync)
	follower, dirF := open(message.Host{2, 2, 2, 2, 2, 2, 2, 2}, commitlog.FlushAsync)

	rng := rand.New(rand.NewPCG(7, 28))
	topics := []string{"orders", "payments"}
	var sent []storage.PutResult
	ship := func(t *testing.T, maxBytes int) {
		t.Helper()
		for {
			stream, next, err := leader.ReadFrames(follower.WriteOffset(), maxBytes, nil)
			require.NoError(t, err)
			if len(stream) == 0 {
				require.Equal(t, leader.WriteOffset(), follower.WriteOffset(), "everything durable was shipped")
				return
			}
			end, err := follower.AppendFrames(stream)
			require.NoError(t, err)
			require.Equal(t, next, end)
		}
	}
	for round := 0; leader.Stats().CommitLogMax < 12*segment; round++ {
		n := 1 + rng.IntN(8)
		ms := make([]*message.Message, n)
		for i := range ms {
			ms[i] = storagetest.NewMessage(topics[rng.IntN(2)], int32(rng.IntN(3)), fmt.Sprintf("r%d-m%d-%s", round, i, bytes.Repeat([]byte("x"), rng.IntN(4000))), "t")
		}
		res := make([]storage.PutResult, n)
		require.NoError(t, leader.PutBatch(ms, res))
		sent = append(sent, res...)
		if round%5 == 4 {
			ship(t, 1+rng.IntN(20000)) // streams cut at any frame, blanks included
		}
	}
	ship(t, 1<<20)
	require.Equal(t, leader.StoreID(), follower.StoreID(), "the follower takes the leader's store id")

	// A damaged stream is refused whole.
	m := storagetest.NewMessage("orders", 0, "one more", "t")
	r, err := leader.Put(m)
	require.NoError(t, err)
	sent = append(sent, r)
	stream, _, err := leader.ReadFrames(follower.WriteOffset(), 1<<20, nil)
	require.NoError(t, err)
	before := follower.WriteOffset()
	for _, at := range []int{0, 5, 13, len(stream) - 1} {
		bad := bytes.Clone(stream)
		bad[at] ^= 0x40
		_, err := follower.AppendFrames(bad)
		require.ErrorIs(t, err, storage.ErrCorrupt, "byte %d changed", at)
		require.Equal(t, before, follower.WriteOffset(), "nothing written")
	}
	_, err = follower.AppendFrames(stream[:len(stream)-1])
	require.ErrorIs(t, err, storage.ErrCorrupt, "a cut frame")
	ship(t, 1<<20)

	// The same messages, from the follower's own queues and by id (the
	// leader's queues compared once its own dispatcher indexed it all).
	require.NoError(t, leader.AwaitDispatch(context.Background()))
	for _, res := range sent {
		got, err := follower.LookupID(res.ID)
		require.NoError(t, err)
		want, err := leader.LookupID(res.ID)
		require.NoError(t, err)
		require.Equal(t, want.Body, got.Body)
		require.Equal(t, res.QueueOffset, got.QueueOffset)
	}
	for _, topic := range topics {
		for q := int32(0); q < 3; q++ {
			waitDispatched(t, follower, topic, q, leader.MaxOffset(topic, q))
			require.Equal(t, leader.MaxOffset(topic, q), follower.MaxOffset(topic, q), "%s/%d", topic, q)
		}
	}

	// Promoted, the follower continues the leader's offsets and ids.
	next := leader.MaxOffset("orders", 0)
	own, err := follower.Put(storagetest.NewMessage("orders", 0, "after the failover", "t"))
	require.NoError(t, err)
	require.Equal(t, next, own.QueueOffset)
	require.Equal(t, leader.StoreID(), own.ID.Host())

	require.NoError(t, leader.Close())
	require.NoError(t, follower.Close())
	segs, err := os.ReadDir(filepath.Join(dirL, "commitlog"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(segs), 12)
	for _, e := range segs[:len(segs)-1] { // the follower's active segment has its own last record
		a, err := os.ReadFile(filepath.Join(dirL, "commitlog", e.Name()))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(dirF, "commitlog", e.Name()))
		require.NoError(t, err)
		require.True(t, bytes.Equal(a, b), "segment %s differs", e.Name())
	}
}

// FuzzAppendFrames: whatever bytes arrive as a frame stream, AppendFrames
// never panics, and what it accepts reads back as valid records at the
// offsets the stream named.
func FuzzAppendFrames(f *testing.F) {
	src := storagetest.MustOpen(f, storagetest.SmallOptions(f.TempDir()))
	for i := 0; i < 40; i++ {
		_, err := src.Put(storagetest.NewMessage("fz", 0, fmt.Sprint("seed ", i, string(bytes.Repeat([]byte("y"), i*97))), ""))
		require.NoError(f, err)
	}
	stream, _, err := src.ReadFrames(0, 1<<20, nil)
	require.NoError(f, err)
	f.Add(stream)
	f.Add(stream[:30])
	f.Add([]byte{})
	hdr := make([]byte, 20)
	binary.BigEndian.PutUint32(hdr, 20)
	f.Add(hdr)
	f.Fuzz(func(t *testing.T, b []byte) {
		dst := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
		end, err := dst.AppendFrames(b)
		if err != nil {
			require.True(t, errors.Is(err, storage.ErrCorrupt), "%v", err)
			require.Zero(t, dst.WriteOffset())
			return
		}
		require.Equal(t, end, dst.WriteOffset())
		again, next, err := dst.ReadFrames(0, 1<<30, nil)
		require.NoError(t, err)
		require.Equal(t, end, next)
		require.True(t, bytes.Equal(b, again), "the log holds the stream it accepted")
	})
}
