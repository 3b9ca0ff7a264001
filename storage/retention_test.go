package storage_test

import (
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// fakeDisk is a DiskUsage whose answer the test sets.
type fakeDisk struct{ bits atomic.Uint64 }

func (d *fakeDisk) set(u float64) { d.bits.Store(math.Float64bits(u)) }
func (d *fakeDisk) usage(string) (float64, error) {
	return math.Float64frombits(d.bits.Load()), nil
}

// recordingPolicy is a RetentionPolicy with fixed floors that records the
// deletions it is told about.
type recordingPolicy struct {
	floors  storage.RetentionFloors
	cuts    []int64
	reasons []storage.DeleteReason
}

func (p *recordingPolicy) Floors(time.Time) (storage.RetentionFloors, error) { return p.floors, nil }
func (p *recordingPolicy) BeforeDelete(cut int64, reason storage.DeleteReason) error {
	p.cuts, p.reasons = append(p.cuts, cut), append(p.reasons, reason)
	return nil
}

// retentionStore is a store with eight-KiB segments, a fake disk and no
// background retention, holding n messages of 500 bytes in ret/0.
func retentionStore(t *testing.T, n int, tune func(*storage.Options)) (*storage.Store, *fakeDisk, storage.Options) {
	t.Helper()
	disk := &fakeDisk{}
	disk.set(0.10)
	opts := storagetest.SmallOptions(t.TempDir())
	opts.SegmentSize = 8 << 10
	opts.MaxMessageSize = 4 << 10
	opts.RetentionInterval = time.Hour
	opts.DiskUsage = disk.usage
	if tune != nil {
		tune(&opts)
	}
	s := storagetest.MustOpen(t, opts)
	for i := 0; i < n; i++ {
		storagetest.MustPut(t, s, storagetest.NewMessage("ret", 0, strings.Repeat("r", 500), "", fmt.Sprintf("k%d", i)))
	}
	waitDispatched(t, s, "ret", 0, int64(n))
	if n > 0 {
		require.Greater(t, s.Stats().Segments, 3)
	}
	return s, disk, opts
}

// TestDiskCeilingsByClass: above the send ceiling producers' messages are
// refused while system records go on; above the system ceiling only the
// copies retention needs go on; below them everything is accepted again
// at the next sample, without a restart.
func TestDiskCeilingsByClass(t *testing.T) {
	t.Parallel()
	s, disk, _ := retentionStore(t, 0, nil)
	put := func(class storage.Class) error {
		return s.PutClass(class, []*message.Message{storagetest.NewMessage("ceil", 0, "x", "")}, make([]storage.PutResult, 1))
	}
	for _, tc := range []struct {
		usage                 float64
		send, system, reclaim bool
	}{
		{0.50, true, true, true},
		{0.86, false, true, true},
		{0.96, false, false, true},
		{0.50, true, true, true},
	} {
		disk.set(tc.usage)
		_, err := storage.SampleDiskForTest(s)
		require.NoError(t, err)
		for class, ok := range map[storage.Class]bool{storage.ClassSend: tc.send, storage.ClassSystem: tc.system, storage.ClassReclaim: tc.reclaim} {
			err := put(class)
			if ok {
				require.NoError(t, err, "%s at %.2f", class, tc.usage)
			} else {
				require.ErrorIs(t, err, storage.ErrDiskFull, "%s at %.2f", class, tc.usage)
			}
		}
		_, err = s.Put(storagetest.NewMessage("ceil", 0, "y", ""))
		require.Equal(t, tc.send, err == nil, "Put is a send (%v)", err)
		st := s.DiskStatus()
		require.Equal(t, !tc.send, st.SendsRefused)
		require.Equal(t, !tc.system, st.SystemRefused)
		require.InDelta(t, tc.usage, st.Usage, 1e-9)
	}
	require.NoError(t, s.Err(), "refusals never make the store read-only")
}

// TestRetentionUnderPressure: above DiskMaxUsedRatio a pass deletes one
// segment before its time only when every consumer has consumed it, or
// with DiskPressureDelete; the Keep floor holds every deletion back, the
// Retained floor holds back deletion by age.
func TestRetentionUnderPressure(t *testing.T) {
	t.Parallel()
	now := time.Now()
	later := now.Add(200 * time.Hour) // past the default 72 h: every sealed segment expired
	t.Run("UnconsumedStays", func(t *testing.T) {
		t.Parallel()
		s, disk, _ := retentionStore(t, 100, nil)
		p := &recordingPolicy{floors: storage.RetentionFloors{Keep: storage.NoFloor, Unconsumed: 0, Retained: storage.NoFloor}}
		s.SetRetentionPolicy(p)
		disk.set(0.99)
		res, err := storage.RunRetentionForTest(s, now)
		require.NoError(t, err)
		require.True(t, res.Pressure)
		require.Zero(t, res.DeletedSegments)
		require.Equal(t, "unconsumed messages", res.HeldBy)
		require.Empty(t, p.cuts)
		require.Equal(t, int64(0), s.MinOffset("ret", 0))
	})
	t.Run("ConsumedGoesOnePerPass", func(t *testing.T) {
		t.Parallel()
		s, disk, _ := retentionStore(t, 100, nil)
		segs := s.Stats().Segments
		p := &recordingPolicy{floors: storage.RetentionFloors{Keep: storage.NoFloor, Unconsumed: storage.NoFloor, Retained: storage.NoFloor}}
		s.SetRetentionPolicy(p)
		disk.set(0.99)
		for pass := 1; pass <= 2; pass++ {
			res, err := storage.RunRetentionForTest(s, now)
			require.NoError(t, err)
			require.Equal(t, 1, res.DeletedSegments, "pass %d", pass)
			require.Equal(t, storage.DeleteConsumed, res.Reason)
		}
		require.Equal(t, []storage.DeleteReason{storage.DeleteConsumed, storage.DeleteConsumed}, p.reasons)
		require.Equal(t, segs-2, s.Stats().Segments)
		require.Equal(t, p.cuts[1], s.Stats().CommitLogMin)
		disk.set(0.50) // no pressure, nothing expired: nothing more goes
		res, err := storage.RunRetentionForTest(s, now)
		require.NoError(t, err)
		require.Zero(t, res.DeletedSegments)
	})
	t.Run("PressureDeleteIsOptIn", func(t *testing.T) {
		t.Parallel()
		s, disk, _ := retentionStore(t, 100, func(o *storage.Options) { o.DiskPressureDelete = true })
		p := &recordingPolicy{floors: storage.RetentionFloors{Keep: storage.NoFloor, Unconsumed: 0, Retained: storage.NoFloor}}
		s.SetRetentionPolicy(p)
		disk.set(0.99)
		res, err := storage.RunRetentionForTest(s, now)
		require.NoError(t, err)
		require.Equal(t, 1, res.DeletedSegments)
		require.Equal(t, storage.DeletePressure, res.Reason)
		require.Equal(t, []storage.DeleteReason{storage.DeletePressure}, p.reasons)
		require.Positive(t, s.MinOffset("ret", 0), "the queue lost the messages of the segment")
	})
	t.Run("KeepHoldsEverything", func(t *testing.T) {
		t.Parallel()
		s, disk, _ := retentionStore(t, 100, func(o *storage.Options) { o.DiskPressureDelete = true })
		segs := s.Stats().Segments
		// Keep: the first message of the third segment.
		third := int64(2 * 8 << 10)
		off, err := s.QueueOffsetAt("ret", 0, third)
		require.NoError(t, err)
		keep, err := s.PhysicalOffset("ret", 0, off)
		require.NoError(t, err)
		require.GreaterOrEqual(t, keep, third)
		p := &recordingPolicy{floors: storage.RetentionFloors{Keep: keep, Unconsumed: storage.NoFloor, Retained: storage.NoFloor}}
		s.SetRetentionPolicy(p)
		disk.set(0.99)
		res, err := storage.RunRetentionForTest(s, later)
		require.NoError(t, err)
		require.Equal(t, 2, res.DeletedSegments, "expired segments go up to the Keep floor")
		require.Equal(t, storage.DeleteExpired, res.Reason)
		res, err = storage.RunRetentionForTest(s, later)
		require.NoError(t, err)
		require.Zero(t, res.DeletedSegments, "not even pressure deletion passes the Keep floor")
		require.Equal(t, "undelivered delayed messages or progress records", res.HeldBy)
		require.Equal(t, segs-2, s.Stats().Segments)
		require.Equal(t, off, s.MinOffset("ret", 0))
	})
	t.Run("RetainedHoldsExpiry", func(t *testing.T) {
		t.Parallel()
		s, _, _ := retentionStore(t, 100, nil)
		retained, err := s.PhysicalOffset("ret", 0, 0)
		require.NoError(t, err)
		p := &recordingPolicy{floors: storage.RetentionFloors{Keep: storage.NoFloor, Unconsumed: 0, Retained: retained}}
		s.SetRetentionPolicy(p)
		res, err := storage.RunRetentionForTest(s, later)
		require.NoError(t, err)
		require.Zero(t, res.DeletedSegments, "a longer topic retention keeps expired segments")
		p.floors.Retained = storage.NoFloor
		res, err = storage.RunRetentionForTest(s, later)
		require.NoError(t, err)
		require.Equal(t, s.Stats().Segments, 1, "all but the active segment expire")
		require.Positive(t, res.DeletedSegments)
	})
}

// TestQueuePositions: the lookups a RetentionPolicy uses, and TrimQueue,
// which expires a queue's oldest messages for good without touching the
// CommitLog.
func TestQueuePositions(t *testing.T) {
	t.Parallel()
	s, _, opts := retentionStore(t, 100, nil)
	p0, err := s.PhysicalOffset("ret", 0, 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), p0)
	p50, err := s.PhysicalOffset("ret", 0, 50)
	require.NoError(t, err)
	off, err := s.QueueOffsetAt("ret", 0, p50)
	require.NoError(t, err)
	require.Equal(t, int64(50), off)
	off, err = s.QueueOffsetAt("ret", 0, p50+1)
	require.NoError(t, err)
	require.Equal(t, int64(51), off)
	none, err := s.PhysicalOffset("ret", 0, 100)
	require.NoError(t, err)
	require.Equal(t, storage.NoFloor, none)
	none, err = s.PhysicalOffset("absent", 0, 0)
	require.NoError(t, err)
	require.Equal(t, storage.NoFloor, none)

	min, err := s.TrimQueue("ret", 0, 40)
	require.NoError(t, err)
	require.Equal(t, int64(40), min)
	min, err = s.TrimQueue("ret", 0, 10)
	require.NoError(t, err)
	require.Equal(t, int64(40), min, "never lowered")
	_, err = s.ReadQueue("ret", 0, 39, 1, nil)
	require.ErrorIs(t, err, storage.ErrOffsetTooSmall)
	p, err := s.PhysicalOffset("ret", 0, 0)
	require.NoError(t, err)
	p40, err := s.PhysicalOffset("ret", 0, 40)
	require.NoError(t, err)
	require.Equal(t, p40, p, "below the minimum means the oldest retained")
	require.Equal(t, int64(0), s.Stats().CommitLogMin, "the CommitLog is untouched")

	min, err = s.TrimQueue("ret", 0, 1000)
	require.NoError(t, err)
	require.Equal(t, int64(100), min, "capped at MaxOffset")
	storagetest.MustPut(t, s, storagetest.NewMessage("ret", 0, "after", ""))
	waitDispatched(t, s, "ret", 0, 101)
	got, err := s.ReadQueue("ret", 0, 100, 10, nil)
	require.NoError(t, err)
	require.Len(t, got.Messages, 1, "offsets continue after a trim")

	// The trim survives a restart, even one that re-dispatches the whole
	// CommitLog: the trimmed messages do not come back.
	require.NoError(t, s.Close())
	storagetest.RemoveCheckpoint(t, opts.Dir)
	s = storagetest.MustOpen(t, opts)
	require.Equal(t, int64(100), s.MinOffset("ret", 0))
	require.Equal(t, int64(101), s.MaxOffset("ret", 0))
}

// TestRetentionAwaitsItsPolicy: with AwaitRetentionPolicy the background
// passes delete nothing, however old the segments, until a policy is
// installed (an owner still opening cannot carry what must outlive them);
// PauseRetention stops them again until the next SetRetentionPolicy.
func TestRetentionAwaitsItsPolicy(t *testing.T) {
	t.Parallel()
	s, _, _ := retentionStore(t, 60, func(o *storage.Options) {
		o.AwaitRetentionPolicy = true
		o.RetentionInterval = 5 * time.Millisecond
		o.FileReservedTime = time.Millisecond
	})
	segments := s.Stats().Segments
	time.Sleep(100 * time.Millisecond) // twenty passes' worth
	require.Equal(t, segments, s.Stats().Segments, "no pass ran before the policy")
	require.Zero(t, s.Stats().CommitLogMin)

	p := &recordingPolicy{floors: storage.RetentionFloors{Keep: storage.NoFloor, Retained: storage.NoFloor}}
	s.SetRetentionPolicy(p)
	require.Eventually(t, func() bool { return s.Stats().Segments < segments }, 5*time.Second, 5*time.Millisecond,
		"the policy was installed and still nothing was deleted")
	s.PauseRetention()
	paused := s.Stats().Segments
	for i := 0; i < 60; i++ {
		storagetest.MustPut(t, s, storagetest.NewMessage("ret", 0, strings.Repeat("r", 500), ""))
	}
	waitDispatched(t, s, "ret", 0, 120)
	grown := s.Stats().Segments
	require.Greater(t, grown, paused)
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, grown, s.Stats().Segments, "a pass ran while paused")
	s.SetRetentionPolicy(p)
	require.Eventually(t, func() bool { return s.Stats().Segments < grown }, 5*time.Second, 5*time.Millisecond,
		"retention did not resume")
}

// TestHoldRetention: while a copy holds retention no pass runs and a cut
// applied waits; the last release applies the highest cut held. A store
// whose CommitLog was never written, opened with StartOffset, starts its
// log there.
func TestHoldRetention(t *testing.T) {
	t.Parallel()
	s, _, _ := retentionStore(t, 60, func(o *storage.Options) {
		o.RetentionInterval = 5 * time.Millisecond
		o.FileReservedTime = time.Hour
	})
	segments := s.Stats().Segments
	require.Greater(t, segments, 3)
	first, second := s.HoldRetention(), s.HoldRetention()
	cut := s.Dispatched()
	n, err := s.ApplyRetentionCut(cut / 2)
	require.NoError(t, err)
	require.Zero(t, n, "a cut waits while held")
	_, err = s.ApplyRetentionCut(cut)
	require.NoError(t, err)
	first()
	first() // idempotent
	require.Equal(t, segments, s.Stats().Segments, "still held once")
	require.Zero(t, s.MinPhysicalOffset())
	second()
	require.Greater(t, s.MinPhysicalOffset(), cut/2, "the highest held cut was applied by the last release")
	require.Less(t, s.Stats().Segments, segments)

	passes, _, _ := retentionStore(t, 60, func(o *storage.Options) {
		o.RetentionInterval = 5 * time.Millisecond
		o.FileReservedTime = time.Millisecond
		o.AwaitRetentionPolicy = true
	})
	segments = passes.Stats().Segments
	release := passes.HoldRetention()
	passes.SetRetentionPolicy(&recordingPolicy{floors: storage.RetentionFloors{Keep: storage.NoFloor, Retained: storage.NoFloor}})
	time.Sleep(100 * time.Millisecond) // twenty passes' worth
	require.Equal(t, segments, passes.Stats().Segments, "no pass runs while held")
	release()
	require.Eventually(t, func() bool { return passes.Stats().Segments < segments }, 5*time.Second, 5*time.Millisecond)

	opts := storagetest.SmallOptions(t.TempDir())
	opts.StartOffset = 5 * opts.SegmentSize
	fresh := storagetest.MustOpen(t, opts)
	require.Equal(t, opts.StartOffset, fresh.WriteOffset())
	require.Equal(t, opts.StartOffset, fresh.MinPhysicalOffset())
}
