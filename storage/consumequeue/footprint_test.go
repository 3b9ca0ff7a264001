package consumequeue

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
)

// allocated is the number of bytes of disk the file at path occupies.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	sys, ok := st.Sys().(*syscall.Stat_t)
	require.True(t, ok)
	return sys.Blocks * 512
}

// A queue with one entry costs one block of disk, not a whole file; the
// file keeps its full logical size and reopens with the right bounds.
func TestSparseFileReservesAheadOnly(t *testing.T) {
	t.Parallel()
	dir := closedQueue(t, DefaultEntriesPerFile, 1)
	path := filepath.Join(dir, fileName(0))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.EqualValues(t, DefaultEntriesPerFile*EntrySize, st.Size())
	require.LessOrEqual(t, allocated(t, path), int64(8<<10))

	q := mustOpen(t, dir, DefaultEntriesPerFile)
	requireRange(t, q, 0, 1)
	putRange(t, q, 1, 5000) // 100 KB of entries: reservations double
	q = reopen(t, q, DefaultEntriesPerFile)
	requireRange(t, q, 0, 5000)
	require.Less(t, allocated(t, path), int64(512<<10))
}

// A data dir of the old layout (every file fallocate'd to its full size)
// opens unchanged, and the unused tail of its last file is given back.
func TestOldFullyPreallocatedFileOpens(t *testing.T) {
	t.Parallel()
	const epf = 300_000
	dir := closedQueue(t, epf, 1000)
	path := filepath.Join(dir, fileName(0))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, fileutil.Preallocate(f, epf*EntrySize)) // as the old code created it
	require.NoError(t, f.Close())
	require.GreaterOrEqual(t, allocated(t, path), int64(epf*EntrySize))

	q := mustOpen(t, dir, epf)
	requireRange(t, q, 0, 1000)
	require.Less(t, allocated(t, path), int64(64<<10), "the blocks beyond the tail are released")
	putRange(t, q, 1000, 1100)
	q = reopen(t, q, epf)
	requireRange(t, q, 0, 1100)
}

// A stray entry beyond a hole in the tail page (pages written back out of
// order before a crash) is zeroed at Open, so it can never be taken for
// the tail later.
func TestRecoverStrayEntryInTailPage(t *testing.T) {
	t.Parallel()
	const epf = 1000
	dir := closedQueue(t, epf, 10)
	writeRaw(t, dir, epf, 12, encoded(Entry{CommitLogOffset: 1 << 20, Size: 10}))
	q := mustOpen(t, dir, epf)
	requireRange(t, q, 0, 10)
	require.NoError(t, q.Close())
	raw, err := os.ReadFile(filepath.Join(dir, fileName(0)))
	require.NoError(t, err)
	require.Equal(t, make([]byte, EntrySize), raw[12*EntrySize:13*EntrySize])
}
