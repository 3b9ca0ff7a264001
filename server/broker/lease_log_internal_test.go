package broker

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
)

func openLeaseBroker(t *testing.T, dir string) *Broker {
	t.Helper()
	b, err := Open(context.Background(), Options{
		DataDir: dir, AutoCreate: true, SnapshotInterval: time.Hour, MaxMessageSize: 64 << 10,
		Storage: storage.Options{SegmentSize: 1 << 20, RetentionInterval: time.Hour},
	})
	require.NoError(t, err)
	return b
}

// TestLeaseEpochNeverGoesBack: the epoch counter restarts above every
// epoch on record, even when the clock it is seeded from is behind them.
func TestLeaseEpochNeverGoesBack(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openLeaseBroker(t, dir)
	_, err := b.Send(ctx, "ep", []SendMessage{{Body: []byte("a")}, {Body: []byte("b")}})
	require.NoError(t, err)
	ahead := uint64(time.Now().Add(1000 * time.Hour).UnixNano()) // as if the clock had been far ahead
	b.epoch.Store(ahead)
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "ep", MaxMessages: 1, Wait: time.Second, Invisible: time.Hour})
	require.NoError(t, err)
	require.Len(t, got, 1)
	r, err := b.receipts().Decode(got[0].Receipt)
	require.NoError(t, err)
	require.Greater(t, r.Epoch, ahead)
	require.NoError(t, b.Close(ctx))

	for _, snapshot := range []bool{true, false} {
		if !snapshot {
			require.NoError(t, b.store.FS().Remove(b.store.MetaPath(leasesSnapshot)))
		}
		b = openLeaseBroker(t, dir)
		require.GreaterOrEqual(t, b.epoch.Load(), r.Epoch, "snapshot %v", snapshot)
		more, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "ep", MaxMessages: 1, Wait: time.Second, Invisible: time.Hour})
		require.NoError(t, err)
		if len(more) == 1 {
			r2, err := b.receipts().Decode(more[0].Receipt)
			require.NoError(t, err)
			require.Greater(t, r2.Epoch, r.Epoch)
			r = r2
		}
		require.NoError(t, b.Close(ctx))
	}
}

// TestLeaseSnapshotBoundsReplay: the leases snapshot covers the lease
// records before it: a restart after a snapshot replays none of them, and
// retention keeps the lease records no snapshot covers (the Keep floor).
func TestLeaseSnapshotBoundsReplay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openLeaseBroker(t, dir)
	msgs := make([]SendMessage, 40)
	for i := range msgs {
		msgs[i] = SendMessage{Body: []byte("m")}
	}
	_, err := b.Send(ctx, "sb", msgs)
	require.NoError(t, err)
	pull := func(n int) {
		got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "sb", MaxMessages: n, Wait: time.Second, Invisible: time.Hour})
		require.NoError(t, err)
		require.Len(t, got, n)
	}
	for i := 0; i < 10; i++ {
		pull(2) // ten pulls, ten records
	}
	// A pull does not wait for its record's flush, and in sync mode the
	// dispatcher goes no further than the flush.
	require.Eventually(t, func() bool { return b.store.MaxOffset(leaseTopic, 0) >= 10 }, 10*time.Second, time.Millisecond)
	require.Equal(t, int64(10), b.store.MaxOffset(leaseTopic, 0), "one record per pull")
	p := retentionPolicy{b: b}
	first, err := b.store.PhysicalOffset(leaseTopic, 0, 0)
	require.NoError(t, err)
	f, err := p.Floors(time.Now())
	require.NoError(t, err)
	require.LessOrEqual(t, f.Keep, first, "retention keeps the lease records no snapshot covers")

	require.NoError(t, b.snapshot())
	f, err = p.Floors(time.Now())
	require.NoError(t, err)
	require.Equal(t, storage.NoFloor, f.Keep, "covered by the snapshot")
	pull(3)
	require.NoError(t, b.awaitDispatch(ctx))
	eleventh, err := b.store.PhysicalOffset(leaseTopic, 0, 10)
	require.NoError(t, err)
	f, err = p.Floors(time.Now())
	require.NoError(t, err)
	require.Equal(t, eleventh, f.Keep)

	// A crash now (a copy of the live directory; no snapshot at close):
	// one record to replay.
	img := t.TempDir()
	copyLive(t, dir, img)
	require.NoError(t, b.Close(ctx))
	b = openLeaseBroker(t, img)
	require.Equal(t, LeaseRecovery{Records: 1, Leases: 23, FromSnap: 20}, b.LeasesRecovered())
	require.NoError(t, b.Close(ctx))
	b = openLeaseBroker(t, img)
	require.Equal(t, LeaseRecovery{Records: 0, Leases: 23, FromSnap: 23}, b.LeasesRecovered(), "a clean close snapshots")
	require.NoError(t, b.Close(ctx))
}

// copyLive copies an idle broker's live directory as a process crash
// leaves it: config/ first, the CommitLog last.
func copyLive(t *testing.T, src, dst string) {
	t.Helper()
	var rest []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if strings.HasPrefix(rel, "config") {
			copyIfPresent(t, p, filepath.Join(dst, rel))
		} else {
			rest = append(rest, rel)
		}
		return nil
	})
	require.NoError(t, err)
	sort.SliceStable(rest, func(i, j int) bool {
		return !strings.HasPrefix(rest[i], "commitlog") && strings.HasPrefix(rest[j], "commitlog")
	})
	for _, rel := range rest {
		copyIfPresent(t, filepath.Join(src, rel), filepath.Join(dst, rel))
	}
}

// copyIfPresent copies a file of a live directory, unless it is gone: a
// temporary file (scrub.json.tmp, a snapshot's .tmp) renamed away between
// the walk and the copy, as a crash at that moment would not find it either.
func copyIfPresent(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o700))
	require.NoError(t, os.WriteFile(to, data, 0o600))
}
