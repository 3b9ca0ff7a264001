package storage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/internal/vfs"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// acceptedLog is what a test got a nil error for, per topic in order.
type acceptedLog map[string][]string

// requireAllThere checks that every accepted body is in queue 0 of its
// topic, in order, and nothing else is.
func (a acceptedLog) requireAllThere(t *testing.T, s *storage.Store) {
	t.Helper()
	for topic, bodies := range a {
		waitDispatched(t, s, topic, 0, int64(len(bodies)))
		var got []string
		for off := s.MinOffset(topic, 0); off < s.MaxOffset(topic, 0); {
			res, err := s.ReadQueue(topic, 0, off, 256, nil)
			require.NoError(t, err)
			for _, m := range res.Messages {
				got = append(got, string(m.Body))
			}
			off = res.Next
		}
		require.Equal(t, bodies, got, "topic %s", topic)
	}
}

// TestFullFileSystemIsRecoverable fills a real (tmpfs) file system under
// an open store from another process: above the send ceiling sends are
// refused while system records go on; when the file system is full the
// appends that need a new segment are refused (ErrDiskFull, never
// read-only) and the dispatcher stalls on ConsumeQueue files it cannot
// create, reporting it; once the filler is removed, appends and the
// dispatcher resume without a restart and every accepted message is there,
// before and after a reopen.
func TestFullFileSystemIsRecoverable(t *testing.T) {
	mount := storagetest.MountTmpfs(t, 16<<20)
	opts := storagetest.SmallOptions(filepath.Join(mount, "store"))
	opts.SegmentSize = 1 << 20
	opts.DiskCheckInterval = 5 * time.Millisecond
	opts.RetentionInterval = time.Hour
	opts.DiskMaxUsedRatio = 1
	s := storagetest.MustOpen(t, opts)
	filler := filepath.Join(mount, "filler")
	accepted := acceptedLog{}
	body := func(topic string, i int) string {
		return fmt.Sprintf("%s-%05d-%s", topic, i, strings.Repeat("b", 1000))
	}
	put := func(class storage.Class, topic string) error {
		b := body(topic, len(accepted[topic]))
		err := s.PutClass(class, []*message.Message{{Topic: topic, Body: []byte(b), BornTimestamp: 1}}, make([]storage.PutResult, 1))
		if err == nil {
			accepted[topic] = append(accepted[topic], b)
		}
		return err
	}
	for range 50 {
		require.NoError(t, put(storage.ClassSend, "send"))
	}

	// Another process takes the disk above the send ceiling.
	storagetest.FillTo(t, filler, 0.90)
	require.Eventually(t, func() bool { return put(storage.ClassSend, "send") != nil }, 10*time.Second, time.Millisecond)
	require.ErrorIs(t, put(storage.ClassSend, "send"), storage.ErrDiskFull)
	for range 20 {
		require.NoError(t, put(storage.ClassSystem, "sys"), "system records use the reserved headroom")
	}
	t.Logf("sends accepted before the ceiling: %d; disk %.1f%% used", len(accepted["send"]), 100*storagetest.Usage(t, mount))

	// Then it takes everything: system records go on in the room the
	// CommitLog keeps allocated (the system ceiling discounts it), then
	// only reclaim copies, until no allocated room is left.
	storagetest.FillTo(t, filler, 1)
	sysBefore := len(accepted["sys"])
	require.Eventually(t, func() bool { return put(storage.ClassSystem, "sys") != nil }, 10*time.Second, time.Millisecond)
	var err error
	for range 10_000 {
		if err = put(storage.ClassReclaim, "rec"); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, storage.ErrDiskFull)
	require.Contains(t, err.Error(), "no space on the file system")
	require.NoError(t, s.Err(), "a full disk never makes the store read-only")
	require.Positive(t, s.DiskStatus().NoSpace)
	require.True(t, s.DiskStatus().SystemRefused, "the status says system records are refused now")
	onFull := len(accepted["sys"]) - sysBefore + len(accepted["rec"])
	t.Logf("system and reclaim records accepted on the full disk: %d and %d", len(accepted["sys"])-sysBefore, len(accepted["rec"]))
	require.GreaterOrEqual(t, onFull*len(body("rec", 0)), int(opts.SegmentSize)*9/10,
		"the broker's own records had the reserve (a segment's worth here) on the full disk")
	require.Eventually(t, func() bool { return s.DispatchStatus().Err != nil }, 10*time.Second, time.Millisecond,
		"the dispatcher cannot create ConsumeQueue files and says so")

	// Space returns: everything resumes by itself.
	require.NoError(t, os.Remove(filler))
	freed := time.Now()
	require.Eventually(t, func() bool { return put(storage.ClassSend, "send") == nil }, 10*time.Second, time.Millisecond)
	t.Logf("sends resumed %v after the space was freed", time.Since(freed))
	require.Eventually(t, func() bool { return s.DispatchStatus().Err == nil && s.CaughtUp() }, 10*time.Second, time.Millisecond)
	for range 5 {
		require.NoError(t, put(storage.ClassReclaim, "rec"))
		require.NoError(t, put(storage.ClassSend, "send"))
	}
	st := s.DiskStatus()
	require.False(t, st.SendsRefused || st.SystemRefused, "%+v", st)
	accepted.requireAllThere(t, s)

	require.NoError(t, s.Close())
	s = storagetest.MustOpen(t, opts)
	accepted.requireAllThere(t, s)
}

// TestNoSpaceForSegmentIsRetryable: fallocate failing with ENOSPC for the
// next CommitLog segment (injected) refuses appends of every class with
// ErrDiskFull, batches whole, without making the store read-only; once
// it succeeds again appends resume and nothing accepted is lost.
func TestNoSpaceForSegmentIsRetryable(t *testing.T) {
	t.Parallel()
	var full atomic.Bool
	opts := storagetest.SmallOptions(t.TempDir())
	opts.SegmentSize = 8 << 10
	opts.MaxMessageSize = 4 << 10
	opts.RetentionInterval = time.Hour
	opts.FS = vfs.NewErrorFS(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
		if op == vfs.OpPreallocate && full.Load() && strings.Contains(path, string(filepath.Separator)+"commitlog"+string(filepath.Separator)) {
			return fmt.Errorf("fallocate %s: %w", path, syscall.ENOSPC)
		}
		return nil
	}))
	s := storagetest.MustOpen(t, opts)
	accepted := acceptedLog{}
	put := func(class storage.Class, n int) error {
		ms := make([]*message.Message, n)
		for i := range ms {
			ms[i] = &message.Message{Topic: "nospace", Body: []byte(fmt.Sprintf("%05d-%s", len(accepted["nospace"])+i, strings.Repeat("n", 1500))), BornTimestamp: 1}
		}
		err := s.PutClass(class, ms, make([]storage.PutResult, n))
		if err == nil {
			for _, m := range ms {
				accepted["nospace"] = append(accepted["nospace"], string(m.Body))
			}
		}
		return err
	}
	require.NoError(t, put(storage.ClassSend, 3))
	full.Store(true)
	var err error
	for range 100 {
		if err = put(storage.ClassReclaim, 1); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, storage.ErrDiskFull)
	require.ErrorIs(t, err, syscall.ENOSPC)
	before := s.WriteOffset()
	require.ErrorIs(t, put(storage.ClassSend, 10), storage.ErrDiskFull, "a batch is refused whole")
	require.ErrorIs(t, put(storage.ClassSystem, 1), storage.ErrDiskFull)
	require.Equal(t, before, s.WriteOffset(), "nothing of a refused append is written")
	require.NoError(t, s.Err())
	require.Positive(t, s.DiskStatus().NoSpace)

	full.Store(false)
	require.NoError(t, put(storage.ClassSend, 10), "the first append after space returns succeeds")
	accepted.requireAllThere(t, s)
	require.NoError(t, s.Close())
	opts.FS = nil
	accepted.requireAllThere(t, storagetest.MustOpen(t, opts))
}

// TestSendCeilingCheckedOnTheWritePath: with the disk sampled only once an
// hour, a producer that writes fast still meets the send ceiling within
// the first MiB the CommitLog grows after the file system went above it,
// while system records go on.
func TestSendCeilingCheckedOnTheWritePath(t *testing.T) {
	t.Parallel()
	disk := &fakeDisk{}
	disk.set(0.10)
	opts := storagetest.SmallOptions(t.TempDir())
	opts.SegmentSize = 4 << 20
	opts.DiskCheckInterval = time.Hour
	opts.RetentionInterval = time.Hour
	opts.DiskUsage = disk.usage
	s := storagetest.MustOpen(t, opts)
	ms := make([]*message.Message, 16)
	put := func(class storage.Class) error {
		for i := range ms {
			ms[i] = &message.Message{Topic: "fast", Body: []byte(strings.Repeat("f", 8<<10)), BornTimestamp: 1}
		}
		return s.PutClass(class, ms, make([]storage.PutResult, len(ms)))
	}
	require.NoError(t, put(storage.ClassSend))
	disk.set(0.90) // another process, or these sends, took the disk
	from := s.WriteOffset()
	var err error
	for range 1000 {
		if err = put(storage.ClassSend); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, storage.ErrDiskFull)
	grew := s.WriteOffset() - from
	require.LessOrEqual(t, grew, int64(1<<20)+int64(16*(9<<10)), "sends were refused within a MiB of growth")
	require.True(t, s.DiskStatus().SendsRefused)
	require.NoError(t, put(storage.ClassSystem), "system records go on below their ceiling")
	t.Logf("the log grew %d KiB after the disk passed the ceiling before sends were refused", grew>>10)
}
