package schedule_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/schedule"
	"github.com/mqgate/mqgate/storage/storagetest"
)

func TestParseLevels(t *testing.T) {
	levels, err := schedule.ParseLevels(schedule.DefaultLevels)
	require.NoError(t, err)
	require.Len(t, levels, 18)
	require.Equal(t, time.Second, levels[0])
	require.Equal(t, 10*time.Second, levels[2])
	require.Equal(t, 2*time.Hour, levels[17])
	require.Equal(t, schedule.DefaultLevels, schedule.FormatLevels(levels))
	ms, err := schedule.ParseLevels("10ms 20ms 1s")
	require.NoError(t, err)
	require.Equal(t, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, time.Second}, ms)
	for _, bad := range []string{"", "1x", "0s", "-1s", "s", "10", "1s 2q"} {
		_, err := schedule.ParseLevels(bad)
		require.ErrorIs(t, err, schedule.ErrBadLevels, bad)
	}
}

// schedulePut stores a message due at due on level, destined for topic/queue.
func schedulePut(t *testing.T, s *storage.Store, level int, due time.Time, topic string, body string) {
	t.Helper()
	m := storagetest.NewMessage(message.ScheduleTopic, int32(level-1), body, "tagA", "k-"+body)
	m.SetProperty(message.PropertyRealTopic, topic)
	m.SetProperty(message.PropertyRealQueueID, "2")
	m.SetProperty(message.PropertyDelayLevel, strconv.Itoa(level))
	m.SetProperty(message.PropertyDeliverTimeMs, strconv.FormatInt(due.UnixMilli(), 10))
	m.SetProperty("user", "kept")
	m.ReconsumeTimes = 3
	storagetest.MustPut(t, s, m)
}

func newScheduler(t *testing.T, s *storage.Store, dir string, levels []time.Duration, onDeliver func(int, time.Duration)) *schedule.Scheduler {
	t.Helper()
	sc, err := schedule.New(schedule.Config{
		Levels:       levels,
		ProgressPath: filepath.Join(dir, "delay.progress"),
		SaveInterval: 10 * time.Millisecond,
		OnDeliver:    onDeliver,
	}, s.ScheduleSource(), s.ScheduleSink())
	require.NoError(t, err)
	return sc
}

func drain(t *testing.T, s *storage.Store, topic string, queueID int32, want int, timeout time.Duration) []*message.Message {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		sig := s.NewDataSignal(topic)
		if s.MaxOffset(topic, queueID) >= int64(want) {
			break
		}
		select {
		case <-sig:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%s/%d has %d messages, want %d", topic, queueID, s.MaxOffset(topic, queueID), want)
		}
	}
	var out []*message.Message
	for off := int64(0); off < int64(want); {
		res, err := s.ReadQueue(topic, queueID, off, 256, nil)
		require.NoError(t, err)
		out = append(out, res.Messages...)
		off = res.Next
	}
	return out
}

func TestDeliversWhenDueAndRestoresTheMessage(t *testing.T) {
	dir := t.TempDir()
	s := storagetest.MustOpen(t, storagetest.SmallOptions(dir))
	levels := []time.Duration{50 * time.Millisecond, 200 * time.Millisecond}
	sc := newScheduler(t, s, dir, levels, nil)
	sc.Start(context.Background())
	defer sc.Stop()
	start := time.Now()
	schedulePut(t, s, 2, start.Add(200*time.Millisecond), "real", "slow")
	schedulePut(t, s, 1, start.Add(50*time.Millisecond), "real", "fast")
	got := drain(t, s, "real", 2, 2, 5*time.Second)
	require.Equal(t, "fast", string(got[0].Body), "level 1 fires first")
	require.Equal(t, "slow", string(got[1].Body))
	for _, m := range got {
		require.GreaterOrEqual(t, m.StoreTimestamp, m.BornTimestamp)
		require.Equal(t, "real", m.Topic)
		require.Equal(t, "tagA", m.Tag())
		require.Equal(t, "kept", m.Property("user"))
		require.Equal(t, int32(3), m.ReconsumeTimes)
		require.Empty(t, m.Property(message.PropertyDelayLevel))
		require.Empty(t, m.Property(message.PropertyRealTopic))
		require.Empty(t, m.Property(message.PropertyDeliverTimeMs))
	}
	require.GreaterOrEqual(t, got[1].StoreTimestamp, start.Add(200*time.Millisecond).UnixMilli(), "never delivered early")
	require.NoError(t, sc.Stop()) // waits for the workers: their progress is final
	st := sc.Status()
	require.Equal(t, int64(1), st[0].Offset)
	require.Zero(t, st[1].Backlog)
}

func TestRunOnceStopsAtTheFirstEntryNotDue(t *testing.T) {
	dir := t.TempDir()
	s := storagetest.MustOpen(t, storagetest.SmallOptions(dir))
	sc := newScheduler(t, s, dir, []time.Duration{time.Minute}, nil)
	base := time.Now()
	for i := 0; i < 5; i++ {
		schedulePut(t, s, 1, base.Add(time.Duration(i)*time.Second), "r", fmt.Sprint(i))
	}
	require.NoError(t, s.AwaitDispatch(context.Background()))
	res, err := schedule.RunOnceForTest(sc, 1, base.Add(2500*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 3, res.Delivered)
	require.Equal(t, base.Add(3*time.Second).UnixMilli(), res.NextDue.UnixMilli())
	res, err = schedule.RunOnceForTest(sc, 1, base.Add(2500*time.Millisecond))
	require.NoError(t, err)
	require.Zero(t, res.Delivered, "nothing is delivered twice")
	require.Equal(t, int64(3), sc.Status()[0].Offset)
}

// Progress survives a restart: nothing delivered is delivered again (beyond
// what the last save did not cover) and nothing pending is lost.
func TestProgressSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	opts := storagetest.SmallOptions(dir)
	s := storagetest.MustOpen(t, opts)
	sc := newScheduler(t, s, dir, []time.Duration{time.Minute}, nil)
	base := time.Now()
	for i := 0; i < 10; i++ {
		schedulePut(t, s, 1, base.Add(time.Duration(i)*time.Hour), "r", fmt.Sprint(i))
	}
	require.NoError(t, s.AwaitDispatch(context.Background()))
	_, err := schedule.RunOnceForTest(sc, 1, base.Add(4*time.Hour))
	require.NoError(t, err)
	require.NoError(t, sc.Stop())
	require.NoError(t, s.Close())

	s2 := storagetest.MustOpen(t, opts)
	sc2 := newScheduler(t, s2, dir, []time.Duration{time.Minute}, nil)
	require.Equal(t, int64(5), sc2.Status()[0].Offset)
	res, err := schedule.RunOnceForTest(sc2, 1, base.Add(100*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 5, res.Delivered)
	got := drain(t, s2, "r", 2, 10, 5*time.Second)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
	}
	sort.Strings(bodies)
	require.Equal(t, []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}, bodies)
}

// After a crash the saved progress lags what was delivered; the entries in
// between are recognised by their UNIQ_KEY and not delivered twice.
func TestNoDuplicateDeliveryAfterLaggingProgress(t *testing.T) {
	dir := t.TempDir()
	opts := storagetest.SmallOptions(dir)
	s := storagetest.MustOpen(t, opts)
	sc := newScheduler(t, s, dir, []time.Duration{time.Minute}, nil)
	base := time.Now()
	for i := 0; i < 6; i++ {
		schedulePut(t, s, 1, base, "r", fmt.Sprint(i))
	}
	require.NoError(t, s.AwaitDispatch(context.Background()))
	res, err := schedule.RunOnceForTest(sc, 1, base.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 6, res.Delivered)
	// Crash: the progress file never saw the deliveries (the scheduler was
	// not stopped, so nothing was saved).
	require.NoError(t, s.Close())
	_, err = os.Stat(filepath.Join(dir, "delay.progress"))
	require.ErrorIs(t, err, os.ErrNotExist)

	s2 := storagetest.MustOpen(t, opts)
	schedulePut(t, s2, 1, base, "r", "6")
	require.NoError(t, s2.AwaitDispatch(context.Background()))
	sc2 := newScheduler(t, s2, dir, []time.Duration{time.Minute}, nil)
	require.Zero(t, sc2.Status()[0].Offset, "progress was lost")
	_, err = schedule.RunOnceForTest(sc2, 1, base.Add(time.Second))
	require.NoError(t, err)
	require.NoError(t, s2.AwaitDispatch(context.Background()))
	require.Equal(t, int64(7), s2.MaxOffset("r", 2), "the six delivered before are not delivered again; the new one is")
}

func TestDamagedProgressIsAnError(t *testing.T) {
	dir := t.TempDir()
	s := storagetest.MustOpen(t, storagetest.SmallOptions(dir))
	path := filepath.Join(dir, "delay.progress")
	require.NoError(t, os.WriteFile(path, []byte("garbage-garbage"), 0o644))
	_, err := schedule.New(schedule.Config{Levels: []time.Duration{time.Second}, ProgressPath: path}, s.ScheduleSource(), s.ScheduleSink())
	require.ErrorIs(t, err, schedule.ErrBadProgress)
}

// Many messages due in the same moment are all delivered; lateness is
// reported per message.
func TestManyDueAtOnce(t *testing.T) {
	n := 20000
	if os.Getenv("LONG") != "" {
		n = 100000
	}
	dir := t.TempDir()
	opts := storagetest.SmallOptions(dir)
	opts.SegmentSize = 64 << 20
	opts.QueueEntriesPerFile = 300000
	opts.IndexSlots, opts.IndexEntries = 1<<16, 1<<18
	opts.FlushMode = 1 // async: this test is about the scheduler, not fsync
	s := storagetest.MustOpen(t, opts)
	due := time.Now().Add(time.Second)
	batch := make([]*message.Message, 0, 500)
	flush := func() {
		require.NoError(t, s.PutBatch(batch, make([]storage.PutResult, len(batch))))
		batch = batch[:0]
	}
	for i := 0; i < n; i++ {
		m := storagetest.NewMessage(message.ScheduleTopic, 0, fmt.Sprint(i), "")
		m.SetProperty(message.PropertyRealTopic, "burst")
		m.SetProperty(message.PropertyRealQueueID, "0")
		m.SetProperty(message.PropertyDeliverTimeMs, strconv.FormatInt(due.UnixMilli(), 10))
		batch = append(batch, m)
		if len(batch) == cap(batch) {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	var late []time.Duration
	lateCh := make(chan time.Duration, n)
	sc := newScheduler(t, s, dir, []time.Duration{time.Second}, func(_ int, d time.Duration) { lateCh <- d })
	sc.Start(context.Background())
	defer sc.Stop()
	got := drain(t, s, "burst", 0, n, 60*time.Second)
	require.Len(t, got, n)
	require.NoError(t, sc.Stop()) // no more OnDeliver calls after this
	close(lateCh)
	for d := range lateCh {
		late = append(late, d)
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	t.Logf("%d messages due at once: lateness p50=%v p99=%v max=%v", n, late[len(late)/2], late[len(late)*99/100], late[len(late)-1])
	require.GreaterOrEqual(t, late[0], time.Duration(0), "never early")
}
