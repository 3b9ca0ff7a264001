package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestAReplicatedLeaderSnapshotsWhatIsCommitted: the leader of a
// replicated store writes its offsets and leases snapshots — without them
// retention would keep every progress and lease record it ever appended
// (the Keep floor) and its log would only grow — but only what is
// committed: a lease granted whose record is not committed yet is not in
// its leases snapshot, and once its store is fenced (deposed, a write's
// outcome unknown) it writes no offsets snapshot at all. Its fold of the
// committed lease records keeps the live leases only.
func TestAReplicatedLeaderSnapshotsWhatIsCommitted(t *testing.T) {
	ctx := context.Background()
	opts := replicaOptions(nil, true)
	opts.DataDir = memDir(t)
	so, err := StorageOptions(opts)
	require.NoError(t, err)
	so.Replicated, so.HoldDispatch = true, true
	st, err := storage.Open(so)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	opts.Store = st
	b, err := Open(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(ctx) })

	held := storagetest.FollowWrites(t, st) // the commit point follows the log, except while held
	require.NoError(t, b.Follow(ctx))
	st.Unfence()
	require.NoError(t, b.Promote(ctx))

	for round := 0; round < 20; round++ {
		_, err := b.Send(ctx, "orders", []SendMessage{{Body: []byte("a")}, {Body: []byte("b")}, {Body: []byte("c")}})
		require.NoError(t, err)
		got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "orders", MaxMessages: 3, Invisible: time.Minute, Wait: time.Second})
		require.NoError(t, err)
		for _, m := range got {
			_, err := b.Ack(ctx, "g", []string{m.Receipt})
			require.NoError(t, err)
		}
	}
	firstProgress, err := st.PhysicalOffset(offsetTopic, 0, 0)
	require.NoError(t, err)
	firstLease, err := st.PhysicalOffset(leaseTopic, 0, 0)
	require.NoError(t, err)
	require.NoError(t, b.snapshot())
	f, err := retentionPolicy{b}.Floors(time.Now())
	require.NoError(t, err)
	require.Greater(t, f.Keep, max(firstProgress, firstLease), "the snapshots let retention go past the first progress and lease records")
	b.leases.WithFold(func(fold *leaselog.Fold) {
		require.Zero(t, fold.Len(), "every lease was acknowledged: the fold keeps none")
	})

	// A lease whose record is not committed stays out of the snapshot.
	_, err = b.Send(ctx, "orders", []SendMessage{{Body: []byte("held")}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return st.MaxOffset("orders", 0)+st.MaxOffset("orders", 1)+st.MaxOffset("orders", 2)+st.MaxOffset("orders", 3) == 61
	},
		5*time.Second, time.Millisecond)
	held.Store(true)
	before := st.WriteOffset()
	pulled := make(chan error, 1)
	go func() {
		_, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "orders", MaxMessages: 1, Invisible: time.Minute, Wait: time.Second})
		pulled <- err
	}()
	require.Eventually(t, func() bool { return st.WriteOffset() > before }, 5*time.Second, time.Millisecond, "the pull's lease record is appended")
	require.NoError(t, b.snapshotLeases())
	raw, err := st.ReadMeta(leasesSnapshot)
	require.NoError(t, err)
	_, _, rec, err := leaselog.DecodeSnapshot(raw)
	require.NoError(t, err)
	require.Empty(t, rec.Entries, "the uncommitted lease is not in the snapshot")

	// Deposed: the pull's outcome is unknown, and no offsets snapshot is
	// written from a memory that may lack a committed change.
	offsetsBefore, err := st.ReadMeta(progress.SnapshotFile)
	require.NoError(t, err)
	st.Fence()
	require.Error(t, <-pulled)
	_, err = b.Send(ctx, "orders", []SendMessage{{Body: []byte("refused")}})
	require.Error(t, err)
	require.NoError(t, b.ledger.WriteSnapshot())
	offsetsAfter, err := st.ReadMeta(progress.SnapshotFile)
	require.NoError(t, err)
	require.Equal(t, offsetsBefore, offsetsAfter)
	require.NoError(t, b.Close(ctx), "closing snapshots again, after its context is cancelled")
}
