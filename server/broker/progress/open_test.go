package progress

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestOpenAndFollowApplyTheLog: on a real store, a ledger's records
// rebuild the same table in a follower (Follow) and at a reopen (Open:
// the snapshot, then the records after it), with the same code; a
// deleted group's progress is forgotten at Open; a follower's snapshot
// covers what it applied, a deposed leader writes none, and an
// unreadable snapshot is left aside for the records.
func TestOpenAndFollowApplyTheLog(t *testing.T) {
	ctx := context.Background()
	st := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	const topic = "rmq_sys_OFFSET"
	type opts struct {
		gone      map[string]bool
		following bool
		deposed   *bool
	}
	open := func(o opts) *Ledger {
		t.Helper()
		l, err := Open(ctx, Config{
			Store: st, Topic: topic, MaxBatch: 100, InvalidArgument: errInvalid, Log: zerolog.Nop(),
			Now:       func() time.Time { return time.UnixMilli(1_700_000_000_123) },
			StoreErr:  func(err error) error { return err },
			Gone:      func(g string) bool { return o.gone[g] },
			Following: func() bool { return o.following },
			Deposed:   func() bool { return o.deposed != nil && *o.deposed },
		})
		require.NoError(t, err)
		return l
	}
	// state renders what a table says of the keys, for comparison.
	state := func(l *Ledger) string {
		s := ""
		for _, k := range l.Table().Keys() {
			c, gen, _ := l.Table().Get(k)
			s += fmt.Sprintf("%v committed %d gen %d acked %v\n", k, c, gen, l.Table().AckedAbove(k))
		}
		return s
	}
	dispatched := func() { require.NoError(t, st.AwaitDispatch(ctx)) }

	deposed := false
	leader := open(opts{deposed: &deposed})
	follower := open(opts{following: true})
	require.Empty(t, state(leader))
	g, gone := offset.Key{Group: "g", Topic: "orders", QueueID: 1}, offset.Key{Group: "old", Topic: "orders", QueueID: 0}
	require.NoError(t, leader.Commit(g, 5))
	require.NoError(t, leader.Persist(offset.Record{Entries: []offset.Entry{leader.AckEntry(g, 7)}}, nil))
	require.NoError(t, leader.Commit(gone, 3))
	dispatched()
	require.NoError(t, follower.Follow(ctx))
	require.Equal(t, state(leader), state(follower))
	require.Contains(t, state(follower), "committed 5")
	require.Contains(t, state(follower), "acked [7]")

	// The leader's snapshot covers the queue; the follower's what it
	// applied, which lags until it follows again.
	require.NoError(t, leader.WriteSnapshot())
	at := leader.SnapshotAt()
	require.Equal(t, st.MaxOffset(topic, 0), at)
	require.NoError(t, leader.Advance(g, 8))
	dispatched()
	require.NoError(t, follower.WriteSnapshot())
	require.Equal(t, at, follower.SnapshotAt(), "a follower's snapshot covers only what it applied")
	require.NoError(t, follower.Follow(ctx))
	require.Equal(t, state(leader), state(follower))

	// A deposed leader writes no snapshot.
	deposed = true
	require.NoError(t, leader.Commit(g, 9))
	require.NoError(t, leader.WriteSnapshot())
	require.Equal(t, at, leader.SnapshotAt())
	dispatched()

	// A reopen: the snapshot, then the records after it; the deleted
	// group's progress is forgotten.
	reopened := open(opts{gone: map[string]bool{"old": true}})
	require.Equal(t, at, reopened.SnapshotAt())
	c, _, _ := reopened.Table().Get(g)
	require.Equal(t, int64(9), c)
	_, _, ok := reopened.Table().Get(gone)
	require.False(t, ok, "a deleted group's progress is forgotten at open")

	// An unreadable snapshot: every retained record, the same table.
	require.NoError(t, st.WriteMeta(SnapshotFile, []byte("not a snapshot")))
	rebuilt := open(opts{gone: map[string]bool{"old": true}})
	require.Equal(t, int64(0), rebuilt.SnapshotAt())
	require.Equal(t, state(reopened), state(rebuilt))
}

// TestPersistNoWaitAppliesAfterTheAppend: a pull's records — its grants
// (extra) and its skips — are one batch, the grants first; the skips are
// applied once appended (not before: a write refused leaves the table as
// it was), without waiting for the flush.
func TestPersistNoWaitAppliesAfterTheAppend(t *testing.T) {
	ctx := context.Background()
	st := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	const topic = "rmq_sys_OFFSET"
	l, err := Open(ctx, Config{
		Store: st, Topic: topic, MaxBatch: 100, InvalidArgument: errInvalid, Log: zerolog.Nop(),
		Now:      func() time.Time { return time.UnixMilli(1_700_000_000_123) },
		StoreErr: func(err error) error { return fmt.Errorf("mapped: %w", err) },
	})
	require.NoError(t, err)
	k := offset.Key{Group: "g", Topic: "orders", QueueID: 2}
	skips := offset.Record{Entries: []offset.Entry{{Kind: offset.KindAck, Key: k, Offsets: []int64{0, 1, 2}}}}
	grants := &message.Message{Topic: "rmq_sys_LEASE", Body: []byte("grants")}
	require.NoError(t, l.PersistNoWait(skips, []*message.Message{grants}))
	c, _, _ := l.Table().Get(k)
	require.Equal(t, int64(3), c, "applied once appended")
	require.Eventually(t, func() bool { return st.MaxOffset(topic, 0) == 1 }, 10*time.Second, time.Millisecond, "not waited for: the next flush lands it")
	gp, err := st.PhysicalOffset("rmq_sys_LEASE", 0, 0)
	require.NoError(t, err)
	sp, err := st.PhysicalOffset(topic, 0, 0)
	require.NoError(t, err)
	require.Less(t, gp, sp, "the grants before the skips, in one batch")

	require.NoError(t, st.Close())
	more := offset.Record{Entries: []offset.Entry{{Kind: offset.KindAck, Key: k, Offsets: []int64{3}}}}
	require.ErrorContains(t, l.PersistNoWait(more, nil), "mapped:", "the store's error, mapped")
	c, _, _ = l.Table().Get(k)
	require.Equal(t, int64(3), c, "a refused write applies nothing")
}
