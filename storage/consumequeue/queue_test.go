package consumequeue

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// entriesPerFileTests are the file sizes every storage test runs over: a
// roll on every entry, every other entry, and so on.
var entriesPerFileTests = []int{1, 2, 3, 7}

// forEachFileSize runs f as a parallel subtest per entries-per-file value.
func forEachFileSize(t *testing.T, f func(t *testing.T, entriesPerFile int)) {
	t.Helper()
	for _, n := range entriesPerFileTests {
		t.Run(fmt.Sprintf("EntriesPerFile%d", n), func(t *testing.T) {
			t.Parallel()
			f(t, n)
		})
	}
}

// entryFor is the entry the tests put at offset i: commit log offsets grow
// by 100 from 1000, tagsCode = -i.
func entryFor(i int64) Entry {
	return Entry{CommitLogOffset: 1000 + 100*i, Size: int32(50 + i%50), TagsCode: -i}
}

// mustOpen opens the queue in dir and closes it at the end of the test.
func mustOpen(t *testing.T, dir string, entriesPerFile int) *Queue {
	t.Helper()
	q, err := Open(Options{Dir: dir, EntriesPerFile: entriesPerFile})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	return q
}

// setup opens a queue in a fresh directory.
func setup(t *testing.T, entriesPerFile int) (*Queue, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "consumequeue", "topic", "0")
	return mustOpen(t, dir, entriesPerFile), dir
}

// reopen closes q and opens its directory again.
func reopen(t *testing.T, q *Queue, entriesPerFile int) *Queue {
	t.Helper()
	require.NoError(t, q.Close())
	return mustOpen(t, q.dir, entriesPerFile)
}

// putRange appends entryFor(i) for i in [from, to).
func putRange(t *testing.T, q *Queue, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		require.NoError(t, q.Put(i, entryFor(i)), "put %d", i)
	}
}

// requireRange checks that exactly [from, to) is readable and holds
// entryFor, through Get and through batched Reads.
func requireRange(t *testing.T, q *Queue, from, to int64) {
	t.Helper()
	require.Equal(t, from, q.MinOffset(), "min offset")
	require.Equal(t, to, q.MaxOffset(), "max offset")
	for i := from; i < to; i++ {
		e, err := q.Get(i)
		require.NoError(t, err, "get %d", i)
		require.Equal(t, entryFor(i), e, "get %d", i)
	}
	for i := from; i < to; i++ {
		buf := make([]Entry, 5)
		n, err := q.Read(i, buf)
		require.NoError(t, err, "read %d", i)
		require.Equal(t, int(min(5, to-i)), n, "read %d", i)
		for j := range n {
			require.Equal(t, entryFor(i+int64(j)), buf[j], "read %d+%d", i, j)
		}
	}
	_, err := q.Get(to)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	if from > 0 {
		_, err = q.Get(from - 1)
		require.ErrorIs(t, err, ErrOffsetTooSmall)
	}
	last, ok := q.LastEntry()
	require.Equal(t, to > from, ok)
	if ok {
		require.Equal(t, entryFor(to-1), last)
	}
}

// dataFiles lists the data file names in dir.
func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		if _, ok := parseFileName(de.Name()); ok {
			names = append(names, de.Name())
		}
	}
	return names
}

// fileNames returns the names of the files starting at the given entries.
func fileNames(firsts ...int64) []string {
	var names []string
	for _, f := range firsts {
		names = append(names, fileName(f))
	}
	return names
}

func TestOpenEmpty(t *testing.T) {
	t.Parallel()
	q, dir := setup(t, 3)
	requireRange(t, q, 0, 0)
	require.Empty(t, dataFiles(t, dir))
	n, err := q.Read(0, make([]Entry, 4))
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	require.Zero(t, n)
}

func TestPutGetReadReopen(t *testing.T) {
	t.Parallel()
	forEachFileSize(t, func(t *testing.T, epf int) {
		q, dir := setup(t, epf)
		putRange(t, q, 0, 26)
		requireRange(t, q, 0, 26)

		want := int64(26+epf-1) / int64(epf)
		require.Len(t, dataFiles(t, dir), int(want))
		require.Equal(t, fileName(0), dataFiles(t, dir)[0])
		require.Equal(t, "00000000000000000000", fileName(0))
		require.Equal(t, "00000000000000000140", fileName(7), "named by byte offset")

		// A batch larger than what is left stops at MaxOffset.
		buf := make([]Entry, 100)
		n, err := q.Read(20, buf)
		require.NoError(t, err)
		require.Equal(t, 6, n)

		require.NoError(t, q.Flush())
		q = reopen(t, q, epf)
		requireRange(t, q, 0, 26)
		putRange(t, q, 26, 31)
		q = reopen(t, q, epf)
		requireRange(t, q, 0, 31)
	})
}

func TestPutErrors(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, 3)
	putRange(t, q, 0, 5)

	t.Run("ErrGap", func(t *testing.T) {
		require.ErrorIs(t, q.Put(6, entryFor(6)), ErrGap)
		require.Equal(t, int64(5), q.MaxOffset())
	})
	t.Run("ErrInvalidEntry", func(t *testing.T) {
		for _, e := range []Entry{
			{CommitLogOffset: 5000, Size: 0},
			{CommitLogOffset: 5000, Size: -1},
			{CommitLogOffset: -1, Size: 10},
			{CommitLogOffset: entryFor(4).CommitLogOffset, Size: 10}, // not above the previous
			{CommitLogOffset: entryFor(2).CommitLogOffset, Size: 10},
		} {
			require.ErrorIs(t, q.Put(5, e), ErrInvalidEntry, "%+v", e)
		}
		require.Equal(t, int64(5), q.MaxOffset())
	})
	t.Run("ErrOffsetTooSmall", func(t *testing.T) {
		newMin, err := q.DeleteBelowPhysical(entryFor(2).CommitLogOffset)
		require.NoError(t, err)
		require.Equal(t, int64(2), newMin)
		require.ErrorIs(t, q.Put(1, entryFor(1)), ErrOffsetTooSmall)
		require.ErrorIs(t, q.Put(-1, entryFor(1)), ErrOffsetTooSmall)
	})
}

func TestOverwrite(t *testing.T) {
	t.Parallel()
	forEachFileSize(t, func(t *testing.T, epf int) {
		q, _ := setup(t, epf)
		putRange(t, q, 0, 10)
		// Re-dispatch after a crash: the same entries again.
		putRange(t, q, 3, 10)
		requireRange(t, q, 0, 10)

		changed := Entry{CommitLogOffset: entryFor(5).CommitLogOffset + 1, Size: 7, TagsCode: 42}
		require.NoError(t, q.Put(5, changed))
		require.Equal(t, int64(10), q.MaxOffset())
		q = reopen(t, q, epf)
		got, err := q.Get(5)
		require.NoError(t, err)
		require.Equal(t, changed, got)
	})
}

func TestClosed(t *testing.T) {
	t.Parallel()
	q, err := Open(Options{Dir: t.TempDir(), EntriesPerFile: 2})
	require.NoError(t, err)
	putRange(t, q, 0, 3)
	require.NoError(t, q.Close())
	require.NoError(t, q.Close(), "Close is idempotent")

	require.ErrorIs(t, q.Put(3, entryFor(3)), ErrClosed)
	_, err = q.Get(0)
	require.ErrorIs(t, err, ErrClosed)
	_, err = q.Read(0, make([]Entry, 1))
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, q.Flush(), ErrClosed)
	require.ErrorIs(t, q.TruncateFrom(1), ErrClosed)
	_, err = q.TruncateByPhysical(0)
	require.ErrorIs(t, err, ErrClosed)
	_, err = q.DeleteBelowPhysical(5000)
	require.ErrorIs(t, err, ErrClosed)
	_, ok := q.LastEntry()
	require.False(t, ok)
}

func TestRemove(t *testing.T) {
	t.Parallel()
	q, dir := setup(t, 2)
	putRange(t, q, 0, 5)
	require.NoError(t, q.Remove())
	_, err := os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorIs(t, q.Put(5, entryFor(5)), ErrClosed)
}

func TestOptions(t *testing.T) {
	t.Parallel()
	_, err := Open(Options{})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = Open(Options{Dir: t.TempDir(), EntriesPerFile: -1})
	require.ErrorIs(t, err, ErrInvalidOptions)

	q, dir := setup(t, 0)
	putRange(t, q, 0, 1)
	st, err := os.Stat(filepath.Join(dir, fileName(0)))
	require.NoError(t, err)
	require.Equal(t, int64(DefaultEntriesPerFile*EntrySize), st.Size())
	require.Equal(t, int64(6_000_000), st.Size())
}

func TestEntryEncoding(t *testing.T) {
	t.Parallel()
	e := Entry{CommitLogOffset: 0x0102030405060708, Size: 0x11121314, TagsCode: -2}
	b := make([]byte, EntrySize)
	e.Encode(b)
	require.Equal(t, []byte{
		1, 2, 3, 4, 5, 6, 7, 8,
		0x11, 0x12, 0x13, 0x14,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
	}, b)
	got, err := DecodeEntry(b)
	require.NoError(t, err)
	require.Equal(t, e, got)

	got, err = DecodeEntry(make([]byte, EntrySize))
	require.NoError(t, err)
	require.True(t, got.IsEmpty())
	_, err = DecodeEntry(b[:EntrySize-1])
	require.ErrorIs(t, err, ErrCorrupt)
	Entry{CommitLogOffset: 1, Size: -5}.Encode(b)
	_, err = DecodeEntry(b)
	require.ErrorIs(t, err, ErrCorrupt)
}

func TestLastEntry(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, 2)
	_, ok := q.LastEntry()
	require.False(t, ok)
	putRange(t, q, 0, 3)
	e, ok := q.LastEntry()
	require.True(t, ok)
	require.Equal(t, entryFor(2), e)
	_, err := q.DeleteBelowPhysical(1 << 40)
	require.NoError(t, err)
	_, ok = q.LastEntry()
	require.False(t, ok, "no readable entry once retention passed them all")
}

func TestFileNamesSortByOffset(t *testing.T) {
	t.Parallel()
	names := fileNames(0, 9, 10, 100, 5_000_000_000)
	require.True(t, slices.IsSorted(names))
	for _, first := range []int64{0, 9, 300_000, 5_000_000_000} {
		off, ok := parseFileName(fileName(first))
		require.True(t, ok)
		require.Equal(t, first*EntrySize, off)
	}
	for _, bad := range []string{"", "0", "0000000000000000000a", "000000000000000000000", "-0000000000000000001"} {
		_, ok := parseFileName(bad)
		require.False(t, ok, bad)
	}
}

func TestResetRestartsAnEmptyQueue(t *testing.T) {
	dir := t.TempDir()
	q, err := Open(Options{Dir: dir, EntriesPerFile: 4})
	require.NoError(t, err)
	require.NoError(t, q.Put(0, Entry{CommitLogOffset: 10, Size: 5}))
	require.NoError(t, q.Reset(1000))
	require.Equal(t, int64(1000), q.MinOffset())
	require.Equal(t, int64(1000), q.MaxOffset())
	require.ErrorIs(t, q.Put(999, Entry{CommitLogOffset: 20, Size: 5}), ErrOffsetTooSmall)
	require.NoError(t, q.Put(1000, Entry{CommitLogOffset: 20, Size: 5}))
	require.NoError(t, q.Put(1001, Entry{CommitLogOffset: 30, Size: 5}))
	require.NoError(t, q.Close())
	q, err = Open(Options{Dir: dir, EntriesPerFile: 4})
	require.NoError(t, err)
	defer q.Close()
	require.Equal(t, int64(1000), q.MinOffset())
	require.Equal(t, int64(1002), q.MaxOffset())
	e, err := q.Get(1001)
	require.NoError(t, err)
	require.Equal(t, int64(30), e.CommitLogOffset)
}
