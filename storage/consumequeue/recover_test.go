package consumequeue

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// writeRaw overwrites the 20 bytes of entry off on disk (the queue must be
// closed).
func writeRaw(t *testing.T, dir string, epf int, off int64, b []byte) {
	t.Helper()
	require.Len(t, b, EntrySize)
	first := off - off%int64(epf)
	f, err := os.OpenFile(filepath.Join(dir, fileName(first)), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, (off-first)*EntrySize)
	require.NoError(t, err)
}

// encoded returns e's 20 bytes.
func encoded(e Entry) []byte {
	b := make([]byte, EntrySize)
	e.Encode(b)
	return b
}

// closedQueue writes entries [0, n) into a fresh directory and closes it.
func closedQueue(t *testing.T, epf int, n int64) string {
	t.Helper()
	dir := t.TempDir()
	q, err := Open(Options{Dir: dir, EntriesPerFile: epf})
	require.NoError(t, err)
	putRange(t, q, 0, n)
	require.NoError(t, q.Close())
	return dir
}

func TestRecoverZeroedTail(t *testing.T) {
	t.Parallel()
	forEachFileSize(t, func(t *testing.T, epf int) {
		dir := closedQueue(t, epf, 20)
		// A crash lost the last pages: entries 15.. read back as zeros.
		for off := int64(15); off < 20; off++ {
			writeRaw(t, dir, epf, off, make([]byte, EntrySize))
		}
		q := mustOpen(t, dir, epf)
		requireRange(t, q, 0, 15)
		putRange(t, q, 15, 22)
		q = reopen(t, q, epf)
		requireRange(t, q, 0, 22)
	})
}

func TestRecoverEmptyLastFile(t *testing.T) {
	t.Parallel()
	// A crash right after rolling: the new file exists, all zeros.
	dir := closedQueue(t, 5, 10)
	require.NoError(t, os.WriteFile(filepath.Join(dir, fileName(10)), make([]byte, 5*EntrySize), 0o644))
	q := mustOpen(t, dir, 5)
	requireRange(t, q, 0, 10)
	putRange(t, q, 10, 12)
	q = reopen(t, q, 5)
	requireRange(t, q, 0, 12)
}

func TestRecoverGarbledTail(t *testing.T) {
	t.Parallel()
	garbage := [][]byte{
		encoded(Entry{CommitLogOffset: 5, Size: 10}),       // goes backwards
		encoded(Entry{CommitLogOffset: 1 << 50, Size: -3}), // negative size
		encoded(Entry{CommitLogOffset: -1, Size: 9}),       // negative offset
		{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
	}
	for i, g := range garbage {
		t.Run("OK_MidFile", func(t *testing.T) {
			t.Parallel()
			// Entries 10..14 are good; 17 is garbage and 18 looks fine.
			dir := closedQueue(t, 10, 15)
			writeRaw(t, dir, 10, 17, g)
			writeRaw(t, dir, 10, 18, encoded(entryFor(18)))
			q := mustOpen(t, dir, 10)
			requireRange(t, q, 0, 15)
			raw, err := os.ReadFile(filepath.Join(dir, fileName(10)))
			require.NoError(t, err)
			require.Equal(t, make([]byte, 5*EntrySize), raw[5*EntrySize:], "the tail beyond max is zeroed")
			q = reopen(t, q, 10)
			requireRange(t, q, 0, 15)
			putRange(t, q, 15, 20)
			q = reopen(t, q, 10)
			requireRange(t, q, 0, 20)
		})
		t.Run("OK_InsideValidWindow", func(t *testing.T) {
			t.Parallel()
			// Garbage replaces a real entry: the valid prefix ends before it.
			dir := closedQueue(t, 10, 16)
			writeRaw(t, dir, 10, 13, g)
			q := mustOpen(t, dir, 10)
			requireRange(t, q, 0, 13)
		})
		t.Run("OK_WholeLastFile", func(t *testing.T) {
			t.Parallel()
			dir := closedQueue(t, 5, 12)
			writeRaw(t, dir, 5, 10, g)
			q := mustOpen(t, dir, 5)
			requireRange(t, q, 0, 10)
		})
		t.Run("OK_FileBeyondGarbage", func(t *testing.T) {
			t.Parallel()
			// Garbage starts file [10,15); file [15,20) holds stray entries.
			dir := closedQueue(t, 5, 17)
			writeRaw(t, dir, 5, 10, g)
			q := mustOpen(t, dir, 5)
			requireRange(t, q, 0, 10)
			require.Equal(t, fileNames(0, 5, 10), dataFiles(t, dir), "file %d beyond max is removed", i)
		})
	}
}

func TestRecoverLogsGarbledTail(t *testing.T) {
	t.Parallel()
	dir := closedQueue(t, 10, 15)
	writeRaw(t, dir, 10, 17, encoded(Entry{CommitLogOffset: 5, Size: 10}))
	var logs bytes.Buffer
	q, err := Open(Options{Dir: dir, EntriesPerFile: 10, Logger: zerolog.New(&logs)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, q.Close()) })
	require.Equal(t, int64(15), q.MaxOffset())
	require.Contains(t, logs.String(), "garbled consume queue tail")
	require.Contains(t, logs.String(), `"component":"consumequeue"`)
}

func TestRecoverShortLastFile(t *testing.T) {
	t.Parallel()
	dir := closedQueue(t, 10, 16)
	path := filepath.Join(dir, fileName(10))
	require.NoError(t, os.Truncate(path, 3*EntrySize+7))
	q := mustOpen(t, dir, 10)
	requireRange(t, q, 0, 13)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, int64(10*EntrySize), st.Size(), "extended back to full size")
	putRange(t, q, 13, 25)
	q = reopen(t, q, 10)
	requireRange(t, q, 0, 25)
}

func TestRecoverCorrupt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		epf    int
		damage func(t *testing.T, dir string)
	}{
		{"ErrCorrupt_MissingMiddleFile", 3, func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, fileName(3))))
		}},
		{"ErrCorrupt_ShortMiddleFile", 3, func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, fileName(3)), EntrySize))
		}},
		{"ErrCorrupt_LongFile", 3, func(t *testing.T, dir string) {
			require.NoError(t, os.Truncate(filepath.Join(dir, fileName(6)), 4*EntrySize))
		}},
		{"ErrCorrupt_ChangedEntriesPerFile", 4, func(*testing.T, string) {}},
		{"ErrCorrupt_MisalignedName", 3, func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000020"), make([]byte, 3*EntrySize), 0o644))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := closedQueue(t, 3, 8)
			tt.damage(t, dir)
			_, err := Open(Options{Dir: dir, EntriesPerFile: tt.epf})
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func TestRecoverHole(t *testing.T) {
	t.Parallel()
	t.Run("OK_InsideWindow", func(t *testing.T) {
		t.Parallel()
		// Pages written back out of order: entry 6 never reached the disk
		// but later ones did. Nothing after the hole is trusted.
		dir := closedQueue(t, 5, 12)
		writeRaw(t, dir, 5, 6, make([]byte, EntrySize))
		q := mustOpen(t, dir, 5)
		requireRange(t, q, 0, 6)
		q = reopen(t, q, 5)
		requireRange(t, q, 0, 6)
	})
	t.Run("ErrCorrupt_BelowWindow", func(t *testing.T) {
		t.Parallel()
		// A hole deeper than the recovery window is found by readers.
		const n = validateWindow + 100
		dir := closedQueue(t, 500, n)
		writeRaw(t, dir, 500, 6, make([]byte, EntrySize))
		q := mustOpen(t, dir, 500)
		require.Equal(t, int64(n), q.MaxOffset())
		_, err := q.Get(6)
		require.ErrorIs(t, err, ErrCorrupt)
		buf := make([]Entry, 8)
		got, err := q.Read(3, buf)
		require.ErrorIs(t, err, ErrCorrupt)
		require.Equal(t, 3, got)
		require.Equal(t, []Entry{entryFor(3), entryFor(4), entryFor(5)}, buf[:got])
		e, err := q.Get(7)
		require.NoError(t, err)
		require.Equal(t, entryFor(7), e)
	})
}

func TestRecoverLeftovers(t *testing.T) {
	t.Parallel()
	t.Run("OK_TmpFilesRemoved", func(t *testing.T) {
		dir := closedQueue(t, 3, 4)
		tmp := filepath.Join(dir, fileName(6)+tmpSuffix)
		require.NoError(t, os.WriteFile(tmp, []byte("half"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, metaFileName+tmpSuffix), []byte("x"), 0o644))
		q := mustOpen(t, dir, 3)
		requireRange(t, q, 0, 4)
		_, err := os.Stat(tmp)
		require.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("OK_CrashAfterMinOffsetBeforeDeletes", func(t *testing.T) {
		dir := closedQueue(t, 3, 20)
		require.NoError(t, os.WriteFile(filepath.Join(dir, metaFileName), encodeMeta(10), 0o644))
		q := mustOpen(t, dir, 3)
		requireRange(t, q, 10, 20)
		require.Equal(t, fileNames(9, 12, 15, 18), dataFiles(t, dir))
	})
	t.Run("OK_MinOffsetBeyondAllFiles", func(t *testing.T) {
		// Retention raised the minimum, then a crash lost the unflushed
		// entries above it: nothing survives at or beyond the minimum.
		dir := closedQueue(t, 3, 8)
		require.NoError(t, os.WriteFile(filepath.Join(dir, metaFileName), encodeMeta(11), 0o644))
		q := mustOpen(t, dir, 3)
		requireRange(t, q, 11, 11)
		require.Empty(t, dataFiles(t, dir))
		putRange(t, q, 11, 14)
		q = reopen(t, q, 3)
		requireRange(t, q, 11, 14)
	})
	t.Run("OK_CorruptMinOffsetIgnored", func(t *testing.T) {
		dir := closedQueue(t, 3, 8)
		b := encodeMeta(4)
		b[5] ^= 1
		require.NoError(t, os.WriteFile(filepath.Join(dir, metaFileName), b, 0o644))
		q := mustOpen(t, dir, 3)
		requireRange(t, q, 0, 8)
	})
	t.Run("OK_UnknownFilesIgnored", func(t *testing.T) {
		dir := closedQueue(t, 3, 4)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "README"), []byte("x"), 0o644))
		q := mustOpen(t, dir, 3)
		requireRange(t, q, 0, 4)
	})
}

func TestMetaEncoding(t *testing.T) {
	t.Parallel()
	b := encodeMeta(0x0102030405060708)
	require.Len(t, b, metaSize)
	require.Equal(t, []byte("MQMO"), b[:4])
	got, err := decodeMeta(b)
	require.NoError(t, err)
	require.Equal(t, int64(0x0102030405060708), got)
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x40
		_, err := decodeMeta(bad)
		require.ErrorIs(t, err, ErrCorrupt, "flipped byte %d", i)
	}
	_, err = decodeMeta(b[:15])
	require.ErrorIs(t, err, ErrCorrupt)
}
