package consumequeue

import (
	"fmt"
	"path/filepath"
	"strings"
)

// validateWindow is how many entries before the last non-empty one Open
// checks for validity and order before trusting the tail.
const validateWindow = 1024

// load maps the data files and recovers MinOffset and MaxOffset (see
// doc.go, "Open and recovery"). Recovery reads through descriptors (pread),
// never through the mappings, and closes them before returning.
func (q *Queue) load() error {
	dirEntries, err := q.fs.ReadDir(q.dir)
	if err != nil {
		return err
	}
	removedTmp := false
	var firsts []int64 // os.ReadDir sorts by name, and names sort by offset
	for _, de := range dirEntries {
		name := de.Name()
		switch byteOffset, isData := parseFileName(name); {
		case strings.HasSuffix(name, tmpSuffix):
			if err := q.fs.Remove(filepath.Join(q.dir, name)); err != nil {
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
		if err := q.fs.SyncDir(q.dir); err != nil {
			return err
		}
	}
	defer func() {
		for _, f := range q.files {
			f.closeFD()
		}
	}()
	for i, first := range firsts {
		if i > 0 && first != firsts[i-1]+q.entriesPerFile {
			return fmt.Errorf("%w: files missing between %s and %s", ErrCorrupt, fileName(firsts[i-1]), fileName(first))
		}
		last := i == len(firsts)-1
		f, err := openDataFile(q.fs, filepath.Join(q.dir, fileName(first)), first, q.fileSize, last)
		if err != nil {
			return err
		}
		f.reserved = int64(q.fileSize) // only the last file is appended to
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
	if err := q.removeOutside(base, maxOffset); err != nil {
		return err
	}
	return q.releaseTail(maxOffset)
}

// recoverMax finds MaxOffset: the last non-empty entry L is found by binary
// search (lastNonEmpty); the queue then ends at the first entry in the
// window of validateWindow entries up to L that is empty, invalid or not
// above its predecessor (L+1 when there is none). Anything non-empty from
// there to the end of the page after L is a garbled or torn tail and is
// zeroed. Entries below base are never consulted.
func (q *Queue) recoverMax(base int64) (int64, error) {
	if len(q.files) == 0 {
		return base, nil
	}
	last, err := q.lastNonEmpty(base)
	if err != nil || last < 0 {
		return base, err
	}
	lo := max(base, last-validateWindow)
	window, err := q.preadRange(lo, last+1)
	if err != nil {
		return 0, err
	}
	prev := Entry{CommitLogOffset: -1}
	if lo > base {
		p, err := q.preadRange(lo-1, lo)
		if err != nil {
			return 0, err
		}
		prev = p[0]
	}
	maxOffset := last + 1
	for i, e := range window {
		if !e.valid() || e.CommitLogOffset <= prev.CommitLogOffset {
			maxOffset = lo + int64(i)
			break
		}
		prev = e
	}
	// Zero what is non-empty from maxOffset to the end of the page that
	// holds entry last+1: the binary search stopped at the first empty
	// entry, but a torn page may hold more.
	f := q.files[len(q.files)-1]
	tailEnd := f.first + roundUp((last+2-f.first)*EntrySize, pageSize)/EntrySize
	tailEnd = max(maxOffset, min(tailEnd, f.first+q.entriesPerFile))
	tail, err := q.preadRange(maxOffset, tailEnd)
	if err != nil {
		return 0, err
	}
	for _, e := range tail {
		if e.IsEmpty() {
			continue
		}
		q.log.Warn().Int64("maxOffset", maxOffset).Int64("lastNonEmpty", last).
			Msg("garbled consume queue tail: zeroing the entries beyond the valid prefix")
		if err := q.pwriteZeros(maxOffset, tailEnd); err != nil {
			return 0, err
		}
		break
	}
	return maxOffset, nil
}

// lastNonEmpty returns the last non-empty entry at or above base, found by
// binary search in the newest file whose first entry (at or above base) is
// not empty, or -1 when there is none. Entries are dense from the start of
// a queue, so the search reads about log2(EntriesPerFile) entries.
func (q *Queue) lastNonEmpty(base int64) (int64, error) {
	for i := len(q.files) - 1; i >= 0; i-- {
		f := q.files[i]
		end := f.first + q.entriesPerFile
		lo := max(base, f.first)
		if lo >= end {
			continue
		}
		first, err := q.preadRange(lo, lo+1)
		if err != nil {
			return 0, err
		}
		if first[0].IsEmpty() {
			continue
		}
		hi := end // entry lo is non-empty; hi is treated as empty
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			e, err := q.preadRange(mid, mid+1)
			if err != nil {
				return 0, err
			}
			if e[0].IsEmpty() {
				hi = mid
			} else {
				lo = mid
			}
		}
		return lo, nil
	}
	return -1, nil
}

// preadRange reads the entries [from, to) through the recovery
// descriptors, across files; an offset no file holds reads as empty.
func (q *Queue) preadRange(from, to int64) ([]Entry, error) {
	out := make([]Entry, to-from)
	for _, f := range q.files {
		lo, hi := max(from, f.first), min(to, f.first+q.entriesPerFile)
		if lo >= hi {
			continue
		}
		if err := f.readEntries(lo, out[lo-from:hi-from]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pwriteZeros zeroes the entries [from, to) through the recovery
// descriptors and syncs them.
func (q *Queue) pwriteZeros(from, to int64) error {
	for _, f := range q.files {
		lo, hi := max(from, f.first), min(to, f.first+q.entriesPerFile)
		if lo >= hi {
			continue
		}
		if _, err := f.fd.WriteAt(make([]byte, (hi-lo)*EntrySize), (lo-f.first)*EntrySize); err != nil {
			return fmt.Errorf("zero %s: %w", f.path, err)
		}
		if err := f.fd.Sync(); err != nil {
			return fmt.Errorf("fdatasync %s: %w", f.path, err)
		}
	}
	return nil
}

// releaseTail releases the blocks of the last file beyond the page that
// holds maxOffset (stray pages of a torn tail, and the unused tail of an
// old, fully preallocated file) and sets its reserved end to maxOffset's
// byte position: the next reservation writes zeros from there. See doc.go,
// "Allocation".
func (q *Queue) releaseTail(maxOffset int64) error {
	if len(q.files) == 0 {
		return nil
	}
	f := q.files[len(q.files)-1]
	pos := max(0, (maxOffset-f.first)*EntrySize)
	keep := min(roundUp(pos+EntrySize, pageSize), int64(q.fileSize))
	f.reserved = pos // from here on the file holds no entry
	if f.fd == nil || keep >= int64(q.fileSize) {
		return nil
	}
	if _, err := f.fd.PunchHole(keep, int64(q.fileSize)-keep); err != nil {
		q.log.Warn().Err(err).Msg("could not release the unused blocks of the last consume queue file")
	}
	return nil
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
		if err := f.m.Sync(a, b); err != nil {
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
	return q.fs.SyncDir(q.dir)
}
