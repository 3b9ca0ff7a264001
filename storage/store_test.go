package storage_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// permutations runs fn over segment sizes that force frequent rolls and
// over both flush modes (STYLE habit 18).
func permutations(t *testing.T, fn func(t *testing.T, opts storage.Options)) {
	for _, seg := range []int64{8 << 10, 64 << 10} {
		for _, mode := range []commitlog.FlushMode{commitlog.FlushSync, commitlog.FlushAsync} {
			t.Run(fmt.Sprintf("seg=%d/%s", seg, mode), func(t *testing.T) {
				t.Parallel()
				opts := storagetest.SmallOptions(t.TempDir())
				opts.SegmentSize = seg
				opts.MaxMessageSize = 4 << 10
				opts.FlushMode = mode
				opts.FlushInterval = 5 * time.Millisecond
				fn(t, opts)
			})
		}
	}
}

// waitDispatched waits until every appended record is visible in queues.
func waitDispatched(t *testing.T, s *storage.Store, topic string, queueID int32, max int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for s.MaxOffset(topic, queueID) < max {
		sig := s.NewDataSignal(topic)
		if s.MaxOffset(topic, queueID) >= max {
			return
		}
		select {
		case <-sig:
		case <-deadline:
			t.Fatalf("%s/%d never reached offset %d (at %d)", topic, queueID, max, s.MaxOffset(topic, queueID))
		}
	}
}

func TestPutReadRoundTrip(t *testing.T) {
	permutations(t, func(t *testing.T, opts storage.Options) {
		s := storagetest.MustOpen(t, opts)
		var results []storage.PutResult
		for i := 0; i < 200; i++ {
			body := fmt.Sprintf("msg-%d-%s", i, strings.Repeat("b", i*13%3000))
			m := storagetest.NewMessage("orders", int32(i%3), body, fmt.Sprintf("tag%d", i%2), fmt.Sprintf("order-%d", i))
			m.SetProperty("color", "blue")
			r := storagetest.MustPut(t, s, m)
			require.Equal(t, int64(i/3), r.QueueOffset, "queue offsets are dense per queue")
			results = append(results, r)
		}
		for q := int32(0); q < 3; q++ {
			waitDispatched(t, s, "orders", q, int64(len(results)/3))
		}
		for i, r := range results {
			m, err := s.LookupID(r.ID)
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("msg-%d-%s", i, strings.Repeat("b", i*13%3000)), string(m.Body))
			require.Equal(t, fmt.Sprintf("tag%d", i%2), m.Tag())
			require.Equal(t, []string{fmt.Sprintf("order-%d", i)}, m.Keys())
			require.Equal(t, "blue", m.Property("color"))
			require.Equal(t, r.StoreTimestamp, m.StoreTimestamp)
			require.Equal(t, r.PhysicalOffset, m.PhysicalOffset)
		}
		// Tag filter over the queue.
		tag1 := message.TagsCode("tag1")
		res, err := s.ReadQueue("orders", 0, 0, 1000, func(code int64) bool { return code == tag1 })
		require.NoError(t, err)
		for _, m := range res.Messages {
			require.Equal(t, "tag1", m.Tag())
		}
		require.Equal(t, s.MaxOffset("orders", 0), res.Next)
		// Out of range and unknown queues.
		_, err = s.ReadQueue("orders", 0, s.MaxOffset("orders", 0)+1, 1, nil)
		require.ErrorIs(t, err, storage.ErrOffsetOutOfRange)
		res, err = s.ReadQueue("nothing", 0, 0, 10, nil)
		require.NoError(t, err)
		require.Empty(t, res.Messages)

		// Clean restart: nothing to recover, everything still there.
		require.NoError(t, s.Close())
		s2 := storagetest.MustOpen(t, opts)
		rec := s2.Recovery()
		require.False(t, rec.Abnormal)
		require.Zero(t, rec.Redispatched)
		require.Zero(t, rec.CommitLog.TruncatedBytes)
		for q := int32(0); q < 3; q++ {
			require.Equal(t, int64(len(results)/3)+btoi(int(q) < len(results)%3), s2.MaxOffset("orders", q))
		}
		m, err := s2.LookupID(results[len(results)-1].ID)
		require.NoError(t, err)
		require.Equal(t, results[len(results)-1].PhysicalOffset, m.PhysicalOffset)
		r := storagetest.MustPut(t, s2, storagetest.NewMessage("orders", 0, "after restart", ""))
		require.Equal(t, int64(67), r.QueueOffset)
	})
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func TestPutRejectsBadMessages(t *testing.T) {
	s := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	_, err := s.Put(storagetest.NewMessage("", 0, "x", ""))
	require.ErrorIs(t, err, storage.ErrInvalidMessage)
	_, err = s.Put(storagetest.NewMessage("t", -1, "x", ""))
	require.ErrorIs(t, err, storage.ErrInvalidMessage)
	_, err = s.Put(storagetest.NewMessage("t", 0, strings.Repeat("x", 17<<10), ""))
	require.ErrorIs(t, err, storage.ErrMessageTooLarge)
	_, err = s.Put(storagetest.NewMessage(message.ScheduleTopic, 0, "x", ""))
	require.ErrorIs(t, err, storage.ErrInvalidMessage, "a schedule message needs its due time")
	_, err = s.LookupID(message.NewID(message.Host{}, 12345))
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func TestScheduleTopicTagsCodeIsDueTime(t *testing.T) {
	s := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	m := storagetest.NewMessage(message.ScheduleTopic, 2, "later", "")
	m.SetProperty(message.PropertyDeliverTimeMs, "1700000000123")
	storagetest.MustPut(t, s, m)
	waitDispatched(t, s, message.ScheduleTopic, 2, 1)
	var seen int64
	_, err := s.ReadQueue(message.ScheduleTopic, 2, 0, 1, func(code int64) bool { seen = code; return true })
	require.NoError(t, err)
	require.Equal(t, int64(1700000000123), seen)
}

func TestLongPollSignal(t *testing.T) {
	s := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	sig := s.NewDataSignal("wake")
	select {
	case <-sig:
		t.Fatal("signal closed before any data")
	default:
	}
	other := s.NewDataSignal("other")
	storagetest.MustPut(t, s, storagetest.NewMessage("wake", 1, "hello", ""))
	select {
	case <-sig:
	case <-time.After(5 * time.Second):
		t.Fatal("dispatcher did not wake the waiter")
	}
	require.Equal(t, int64(1), s.MaxOffset("wake", 1), "signal fires after the entry is visible")
	select {
	case <-other:
		t.Fatal("a topic without new data was woken")
	default:
	}
	require.NoError(t, s.Close())
	select {
	case <-other:
	default:
		t.Fatal("Close must release waiters")
	}
}

func TestConcurrentPutsAreDenseAndDistinct(t *testing.T) {
	permutations(t, func(t *testing.T, opts storage.Options) {
		s := storagetest.MustOpen(t, opts)
		const writers, each = 8, 100
		var mu sync.Mutex
		seen := map[int64]bool{}
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < each; i++ {
					r, err := s.Put(storagetest.NewMessage("conc", 0, fmt.Sprintf("%d-%d", w, i), ""))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					require.False(t, seen[r.QueueOffset], "queue offset %d handed out twice", r.QueueOffset)
					seen[r.QueueOffset] = true
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
		require.Len(t, seen, writers*each)
		waitDispatched(t, s, "conc", 0, writers*each)
		verifyQueuesMatchLog(t, s)
	})
}

// Delete or corrupt the derived files; the rebuilt queues are
// byte-equal to the originals and key lookups still work.
func TestRebuildDerivedFiles(t *testing.T) {
	for _, damage := range []string{"delete", "garble"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			opts := storagetest.SmallOptions(dir)
			s := storagetest.MustOpen(t, opts)
			for i := 0; i < 300; i++ {
				storagetest.MustPut(t, s, storagetest.NewMessage(fmt.Sprintf("t%d", i%2), int32(i%4), fmt.Sprintf("body-%d", i), "", fmt.Sprintf("key-%d", i)))
			}
			require.NoError(t, s.Close())
			before := snapshotFiles(t, filepath.Join(dir, "consumequeue"))
			switch damage {
			case "delete":
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue")))
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "index")))
			case "garble":
				for path := range before {
					storagetest.ZeroFrom(t, path, 0)
				}
				idx, _ := filepath.Glob(filepath.Join(dir, "index", "*"))
				for _, p := range idx {
					storagetest.ZeroFrom(t, p, 0)
				}
			}
			// The checkpoint says everything was dispatched; only a missing or
			// invalid checkpoint forces a rebuild, so drop it as an operator would.
			require.NoError(t, os.Remove(filepath.Join(dir, "checkpoint")))
			start := time.Now()
			s2 := storagetest.MustOpen(t, opts)
			t.Logf("rebuilt 300 records in %v", time.Since(start))
			require.Equal(t, int64(300), s2.Recovery().Redispatched)
			require.NoError(t, s2.Close())
			after := snapshotFiles(t, filepath.Join(dir, "consumequeue"))
			require.Equal(t, before, after, "rebuilt consume queues must be byte-equal")
			s3 := storagetest.MustOpen(t, opts)
			ms, err := s3.QueryByKey("t1", "key-123", 0, 0, 10)
			require.NoError(t, err)
			require.Len(t, ms, 1)
			require.Equal(t, "body-123", string(ms[0].Body))
		})
	}
}

func snapshotFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	}))
	return out
}

// For every crash image "bytes up to k reached the disk" the store
// holds exactly the records fully inside k, the next append lands at the
// recovered end, and no queue entry points past it.
func TestTornTailEveryPrefix(t *testing.T) {
	dir := t.TempDir()
	opts := storagetest.SmallOptions(dir)
	opts.SegmentSize = 64 << 10
	s := storagetest.MustOpen(t, opts)
	var ends []int64
	for i := 0; i < 12; i++ {
		m := storagetest.NewMessage("torn", 0, strings.Repeat("z", 1+i*37), "")
		if i%3 == 0 {
			m.Properties = nil
		}
		r := storagetest.MustPut(t, s, m)
		ends = append(ends, r.PhysicalOffset+int64(r.Size))
	}
	require.NoError(t, s.Close())
	seg := storagetest.Segments(t, dir)[0]
	image, err := os.ReadFile(seg)
	require.NoError(t, err)
	total := ends[len(ends)-1]
	cases := 0
	for k := int64(0); k <= total; k += 1 + k%7 {
		cases++
		require.NoError(t, os.WriteFile(seg, image, 0o644))
		storagetest.ZeroFrom(t, seg, k)
		require.NoError(t, os.Remove(filepath.Join(dir, "checkpoint")))
		storagetest.SimulateCrash(t, dir)
		s, err := storage.Open(opts)
		require.NoError(t, err, "k=%d", k)
		// A record survives when its bytes beyond k were zero anyway (a
		// zero properties length at its end, say): then the image is the same.
		want := int64(0)
		for _, e := range ends {
			if e > k && strings.Trim(string(image[k:e]), "\x00") != "" {
				break
			}
			want++
		}
		require.Equal(t, want, s.MaxOffset("torn", 0), "k=%d", k)
		verifyQueuesMatchLog(t, s)
		r, err := s.Put(storagetest.NewMessage("torn", 0, "next", ""))
		require.NoError(t, err)
		require.Equal(t, want, r.QueueOffset)
		if want > 0 {
			require.Equal(t, ends[want-1], r.PhysicalOffset, "next append lands at the recovered end")
		}
		require.NoError(t, s.Close())
	}
	t.Logf("%d crash images recovered", cases)
}

// A bit flipped below the durable high-water mark must stop start-up
// with the exact offset, never silently truncate acknowledged data.
func TestBitFlipBelowHighWaterRefusesStart(t *testing.T) {
	dir := t.TempDir()
	opts := storagetest.SmallOptions(dir)
	opts.SegmentSize = 1 << 20
	s := storagetest.MustOpen(t, opts)
	var rs []storage.PutResult
	for i := 0; i < 10; i++ {
		rs = append(rs, storagetest.MustPut(t, s, storagetest.NewMessage("flip", 0, strings.Repeat("f", 100), "")))
	}
	require.NoError(t, s.Close())
	storagetest.FlipBit(t, storagetest.Segments(t, dir)[0], rs[4].PhysicalOffset+60, 3)
	storagetest.SimulateCrash(t, dir)
	_, err := storage.Open(opts)
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.Contains(t, err.Error(), fmt.Sprint(rs[4].PhysicalOffset))

	opts.AllowCorrupt = true
	s2, err := storage.Open(opts)
	require.NoError(t, err)
	defer s2.Close()
	require.Equal(t, int64(4), s2.MaxOffset("flip", 0), "operator override keeps the records before the damage")
}

func TestQueryByKeyAndSearchByTime(t *testing.T) {
	s := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	var stamps []int64
	for i := 0; i < 50; i++ {
		r := storagetest.MustPut(t, s, storagetest.NewMessage("q", 0, fmt.Sprintf("b%d", i), "", fmt.Sprintf("k%d", i%10), "all"))
		stamps = append(stamps, r.StoreTimestamp)
		if i == 24 {
			time.Sleep(3 * time.Millisecond) // a measurable gap in store time for the search below
		}
	}
	waitDispatched(t, s, "q", 0, 50)
	ms, err := s.QueryByKey("q", "k3", 0, 0, 100)
	require.NoError(t, err)
	require.Len(t, ms, 5)
	for _, m := range ms {
		require.Contains(t, m.Keys(), "k3")
	}
	ms, err = s.QueryByKey("q", "all", 0, 0, 7)
	require.NoError(t, err)
	require.Len(t, ms, 7)
	ms, err = s.QueryByKey("other", "k3", 0, 0, 10)
	require.NoError(t, err)
	require.Empty(t, ms)

	off, err := s.SearchOffsetByTime("q", 0, stamps[25])
	require.NoError(t, err)
	require.Equal(t, int64(25), off)
	off, err = s.SearchOffsetByTime("q", 0, 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), off)
	off, err = s.SearchOffsetByTime("q", 0, stamps[49]+1)
	require.NoError(t, err)
	require.Equal(t, int64(50), off)
}

// TestFindByOrigin: the copies of a message in every topic are found by
// their ORIGIN_MESSAGE_ID, in CommitLog order, across a restart that
// re-adds the index; other origins and messages without one are not.
func TestFindByOrigin(t *testing.T) {
	opts := storagetest.SmallOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	origin := storagetest.MustPut(t, s, storagetest.NewMessage("o", 0, "first", "", "k"))
	id := origin.ID.String()
	var want []int64
	for i, topic := range []string{"%RETRY%g", "%DLQ%g", "%RETRY%h", "other"} {
		m := storagetest.NewMessage(topic, 0, fmt.Sprintf("copy%d", i), "")
		m.SetProperty(message.PropertyRetryTopic, "o")
		if topic == "other" {
			m.SetProperty(message.PropertyOriginMessageID, strings.Repeat("0", 32)) // another message's copy
		} else {
			m.SetProperty(message.PropertyOriginMessageID, id)
			want = append(want, 0)
		}
		r := storagetest.MustPut(t, s, m)
		if topic != "other" {
			want[len(want)-1] = r.PhysicalOffset
		}
	}
	check := func(s *storage.Store) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.AwaitDispatch(ctx), "the dispatcher indexes records")
		got, more, err := s.FindByOrigin(id, 10)
		require.NoError(t, err)
		require.False(t, more)
		var offs []int64
		for _, m := range got {
			offs = append(offs, m.PhysicalOffset)
			require.Equal(t, id, m.Property(message.PropertyOriginMessageID))
		}
		require.Equal(t, want, offs, "in CommitLog order")
		got, more, err = s.FindByOrigin(id, 2)
		require.NoError(t, err)
		require.Len(t, got, 2)
		require.True(t, more, "a cut says so")
		got, _, err = s.FindByOrigin(origin.ID.String()[:31]+"F", 10)
		require.NoError(t, err)
		require.Empty(t, got)
	}
	check(s)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(opts.Dir, "index")))
	check(storagetest.MustOpen(t, opts))
}

func TestRetentionDeletesExpiredSegments(t *testing.T) {
	dir := t.TempDir()
	opts := storagetest.SmallOptions(dir)
	opts.SegmentSize = 8 << 10
	opts.MaxMessageSize = 4 << 10
	opts.FileReservedTime = time.Hour
	opts.DiskMaxUsedRatio = 1
	s := storagetest.MustOpen(t, opts)
	for i := 0; i < 100; i++ {
		storagetest.MustPut(t, s, storagetest.NewMessage("ret", 0, strings.Repeat("r", 500), "", fmt.Sprintf("k%d", i)))
	}
	waitDispatched(t, s, "ret", 0, 100)
	segs := s.Stats().Segments
	require.Greater(t, segs, 3)
	res, err := storage.RunRetentionForTest(s, time.Now().Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, segs-1, res.DeletedSegments, "all but the active segment expire")
	min := s.MinOffset("ret", 0)
	require.Greater(t, min, int64(0))
	_, err = s.ReadQueue("ret", 0, 0, 10, nil)
	require.ErrorIs(t, err, storage.ErrOffsetTooSmall)
	got, err := s.ReadQueue("ret", 0, min, 1000, nil)
	require.NoError(t, err)
	require.Equal(t, int(100-min), len(got.Messages))
	// Restart keeps the new minimum.
	require.NoError(t, s.Close())
	s2 := storagetest.MustOpen(t, opts)
	require.Equal(t, min, s2.MinOffset("ret", 0))
	require.Equal(t, int64(100), s2.MaxOffset("ret", 0))

	// Lose the queue files after retention: the rebuilt queue starts at the
	// oldest surviving record's queue offset.
	require.NoError(t, s2.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue")))
	require.NoError(t, os.Remove(filepath.Join(dir, "checkpoint")))
	s3 := storagetest.MustOpen(t, opts)
	require.Equal(t, min, s3.MinOffset("ret", 0))
	require.Equal(t, int64(100), s3.MaxOffset("ret", 0))
	got, err = s3.ReadQueue("ret", 0, min, 1000, nil)
	require.NoError(t, err)
	require.Equal(t, int(100-min), len(got.Messages))
	require.Equal(t, min, got.Messages[0].QueueOffset)
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	storagetest.MustOpen(t, storagetest.SmallOptions(dir))
	_, err := storage.Open(storagetest.SmallOptions(dir))
	require.True(t, errors.Is(err, storage.ErrLocked), "got %v", err)
}
