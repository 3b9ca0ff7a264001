package consumequeue

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/internal/mmap"
)

// validateWindow is how many entries before the last non-empty one Open
// checks for validity and order before trusting the tail.
const validateWindow = 1024

// load maps the data files and recovers MinOffset and MaxOffset (see
// doc.go, "Open and recovery").
func (q *Queue) load() error {
	dirEntries, err := os.ReadDir(q.dir)
	if err != nil {
		return err
	}
	removedTmp := false
	var firsts []int64 // os.ReadDir sorts by name, and names sort by offset
	for _, de := range dirEntries {
		name := de.Name()
		switch byteOffset, isData := parseFileName(name); {
		case strings.HasSuffix(name, tmpSuffix):
			if err := os.Remove(filepath.Join(q.dir, name)); err != nil {
				return fmt.Errorf("remove unfinished %s: %w", name, err)
			}
			removedTmp = true
		case name == metaFileName:
		case !isData || de.IsDir():
			q.log.Warn().Str("name", name).Msg("ignoring unexpected file in consume queue directory")
		case byteOffset%int64(q.fileSize) != 0:
			return fmt.Errorf("%w: file %s is not aligned to the file size %d", ErrCorrupt, name, q.fileSize)
		default:
			firsts = append(firsts, byteOffset/EntrySize)
		}
	}
	if removedTmp {
		if err := fileutil.SyncDir(q.dir); err != nil {
			return err
		}
	}
	for i, first := range firsts {
		if i > 0 && first != firsts[i-1]+q.entriesPerFile {
			return fmt.Errorf("%w: files missing between %s and %s", ErrCorrupt, fileName(firsts[i-1]), fileName(first))
		}
		last := i == len(firsts)-1
		f, err := openDataFile(filepath.Join(q.dir, fileName(first)), first, q.fileSize, last)
		if err != nil {
			return err
		}
		q.files = append(q.files, f)
	}

	storedMin, hasStoredMin, err := q.readMeta()
	if err != nil {
		return err
	}
	base := int64(0) // the smallest offset that can hold a live entry
	if hasStoredMin {
		base = storedMin
	}
	if len(q.files) > 0 {
		base = max(base, q.files[0].first)
	}
	maxOffset, err := q.recoverMax(base)
	if err != nil {
		return err
	}
	q.minOffset.Store(base)
	q.maxOffset.Store(maxOffset)
	return q.removeOutside(base, maxOffset)
}

// recoverMax finds MaxOffset: the last non-empty entry L is found by
// scanning backwards from the end of the last file; the queue then ends at
// the first entry in the window of validateWindow entries up to L that is
// empty, invalid or not above its predecessor (L+1 when there is none).
// Anything non-empty beyond that point is a garbled or torn tail and is
// zeroed. Entries below base are never consulted.
func (q *Queue) recoverMax(base int64) (int64, error) {
	if len(q.files) == 0 {
		return base, nil
	}
	end := q.files[len(q.files)-1].first + q.entriesPerFile
	last := q.lastNonEmpty(base, end)
	if last < 0 {
		return base, nil
	}
	maxOffset := q.firstInvalid(max(base, last-validateWindow), last+1, base)
	if maxOffset <= last {
		q.log.Warn().Int64("maxOffset", maxOffset).Int64("lastNonEmpty", last).
			Msg("garbled consume queue tail: zeroing the entries beyond the valid prefix")
		if err := q.zeroRange(maxOffset, last+1); err != nil {
			return 0, err
		}
	}
	return maxOffset, nil
}

// lastNonEmpty returns the largest offset in [lo, hi) whose entry is not
// empty, or -1.
func (q *Queue) lastNonEmpty(lo, hi int64) int64 {
	for off := hi - 1; off >= lo; off-- {
		if !q.entryAt(off).IsEmpty() {
			return off
		}
	}
	return -1
}

// firstInvalid returns the first offset in [lo, hi) whose entry is empty,
// invalid or not above its predecessor in commit log offset, or hi. The
// predecessor of lo is consulted when it is at or above base.
func (q *Queue) firstInvalid(lo, hi, base int64) int64 {
	prev := Entry{CommitLogOffset: -1}
	if lo > base {
		prev = q.entryAt(lo - 1)
	}
	for off := lo; off < hi; off++ {
		e := q.entryAt(off)
		if !e.valid() || e.CommitLogOffset <= prev.CommitLogOffset {
			return off
		}
		prev = e
	}
	return hi
}

// zeroRange zeroes the entries [from, to) and msyncs them. The caller holds
// writeMu and, once the queue is shared, mu.
func (q *Queue) zeroRange(from, to int64) error {
	for _, f := range q.files {
		lo, hi := max(from, f.first), min(to, f.first+q.entriesPerFile)
		if lo >= hi {
			continue
		}
		a, b := int((lo-f.first)*EntrySize), int((hi-f.first)*EntrySize)
		clear(f.data[a:b])
		if err := mmap.Sync(f.data, a, b); err != nil {
			return fmt.Errorf("msync %s: %w", f.path, err)
		}
	}
	return nil
}

// removeOutside deletes, at Open, the files wholly below minOffset (left
// by a crash between writing MINOFFSET and deleting them) and the files
// wholly beyond maxOffset (a garbled tail). The last file is kept when it
// ends at or after maxOffset, so that appends continue in order. Files go
// from the outside in, so that a crash midway leaves a contiguous run.
func (q *Queue) removeOutside(minOffset, maxOffset int64) error {
	var below, beyond []*dataFile
	lo, hi := 0, len(q.files)
	for hi > lo && q.files[hi-1].first > maxOffset {
		hi--
		beyond = append(beyond, q.files[hi]) // descending
	}
	for lo < hi {
		f := q.files[lo]
		end := f.first + q.entriesPerFile
		if end > minOffset || (lo == hi-1 && end >= maxOffset) {
			break
		}
		below = append(below, f)
		lo++
	}
	if len(below)+len(beyond) == 0 {
		return nil
	}
	q.files = q.files[lo:hi]
	for _, f := range append(beyond, below...) {
		q.log.Info().Str("file", f.path).Msg("removing consume queue file outside [min, max]")
		if err := f.remove(); err != nil {
			return err
		}
	}
	return fileutil.SyncDir(q.dir)
}
