package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/mqgate/mqgate/storage/internal/mmap"
	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Repair of a damaged log (mqgate repair; see "Repair" in the package
// documentation). SurveyDir reads every segment without changing a byte and
// lists the ranges no frame can be read from; PatchDir makes each such
// range a Blank-covered one, so the log is contiguous again and every
// intact frame before and after the damage keeps its offset.

// Damage is a range of log offsets [From, To) that holds no usable frame:
// To is always a segment boundary (the next segment's base, or the end of
// the last segment the repair leaves), since past a bad frame the next
// frame's position is known only at the next segment's base.
type Damage struct {
	From, To int64
	// Missing counts the bytes of the range that no file holds (a deleted
	// segment, the lost end of a truncated one); the rest is in a segment
	// file and is copied to a .broken file before it is blanked.
	Missing int64
	// Reason says what was found at From.
	Reason string
	// InPlace marks one record frame whose header is intact but whose CRC
	// fails, followed by a valid frame: it is left in place (recovery
	// passes over it when told: Options.Lost), so the frames after it in
	// its segment are kept; PatchDir only copies it to a .broken file.
	InPlace bool
}

// SurveyedSegment is one segment file SurveyDir found.
type SurveyedSegment struct {
	Base, Size int64
	Path       string
}

// SurveyResult is what SurveyDir found.
type SurveyResult struct {
	// Segments are the segment files found, oldest first.
	Segments []SurveyedSegment
	// Damaged lists the unusable ranges, in log order.
	Damaged []Damage
	// Records counts the valid record frames.
	Records int64
	// End is where the log continues after a repair: the end of the data
	// in the last segment, or the end of the last damaged range.
	End int64
	// SegmentSize is the size the repair gives a segment it recreates or
	// extends.
	SegmentSize int64
}

// SurveyDir walks every frame of every segment in dir, read-only, and calls
// fn for each valid record (payload is only valid during the call;
// damagedBefore is how many damaged ranges precede it). It
// reports the ranges that hold no usable frame: a gap between segments, a
// frame that fails its checks (and the rest of its segment), and data that
// ends below highWater (bytes that were durable and are gone). Non-zero
// bytes after the data's end at or above highWater are a torn tail, which
// recovery cuts by itself; they are not reported. segmentSize is the size
// a recreated segment gets (0: the largest segment found).
func SurveyDir(dir string, highWater, segmentSize int64, fn func(offset int64, size int32, payload []byte, damagedBefore int)) (SurveyResult, error) {
	var res SurveyResult
	entries, err := os.ReadDir(dir)
	if err != nil {
		return res, fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		base, ok := parseSegmentName(e.Name())
		if !ok {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return res, err
		}
		res.Segments = append(res.Segments, SurveyedSegment{Base: base, Size: info.Size(), Path: filepath.Join(dir, e.Name())})
	}
	sort.Slice(res.Segments, func(i, j int) bool { return res.Segments[i].Base < res.Segments[j].Base })
	if segmentSize <= 0 {
		for _, s := range res.Segments {
			segmentSize = max(segmentSize, s.Size)
		}
		if segmentSize == 0 {
			segmentSize = DefaultSegmentSize
		}
	}
	res.SegmentSize = max(min(segmentSize, MaxSegmentSize), MinSegmentSize)
	if len(res.Segments) == 0 {
		if highWater > 0 {
			// The log restarts in one empty segment around the mark (where
			// it began is unknown: retention may have moved it).
			from := highWater - highWater%res.SegmentSize
			res.Damaged = append(res.Damaged, Damage{From: from, To: from + res.SegmentSize, Missing: res.SegmentSize,
				Reason: "no segment files although data was durable up to " + fmt.Sprint(highWater)})
			res.End = from + res.SegmentSize
		}
		return res, nil
	}
	add := func(d Damage) {
		if n := len(res.Damaged); n > 0 && res.Damaged[n-1].To == d.From && !d.InPlace && !res.Damaged[n-1].InPlace {
			res.Damaged[n-1].To = d.To
			res.Damaged[n-1].Missing += d.Missing
			return
		}
		res.Damaged = append(res.Damaged, d)
	}
	pos := res.Segments[0].Base
	stopped := false
	for i, si := range res.Segments {
		if si.Base < pos {
			return res, fmt.Errorf("%w: segment %s overlaps the one before it (which ends at %d)", ErrCorrupt, si.Path, pos)
		}
		if si.Base > pos {
			add(Damage{From: pos, To: si.Base, Missing: si.Base - pos,
				Reason: fmt.Sprintf("no segment file holds [%d, %d) (deleted or truncated)", pos, si.Base)})
		}
		// Past the high-water mark an invalid frame with no valid data
		// after it is a torn tail: recovery cuts it by itself.
		tornOK := func(at int64) bool { return at >= highWater && !dataAfter(res.Segments[i+1:]) }
		each := func(offset int64, size int32, payload []byte) { fn(offset, size, payload, len(res.Damaged)) }
		end, stop, err := surveySegment(si, tornOK, highWater, each, add, &res.Records)
		if err != nil {
			return res, err
		}
		pos = end
		if stop {
			stopped = true
			break
		}
	}
	res.End = pos
	if last := res.Segments[len(res.Segments)-1]; !stopped && pos < highWater && pos >= last.Base+last.Size {
		// Segments after the last file are gone below the high-water mark.
		to := pos + roundUpTo(highWater-pos, res.SegmentSize)
		add(Damage{From: pos, To: to, Missing: to - pos,
			Reason: fmt.Sprintf("no segment file holds [%d, %d), below the durable high-water mark %d", pos, highWater, highWater)})
		res.End = to
	}
	return res, nil
}

// dataAfter reports whether any of segs starts with a valid record frame.
func dataAfter(segs []SurveyedSegment) bool {
	for _, s := range segs {
		if s.Size < HeaderSize {
			continue
		}
		f, err := os.Open(s.Path)
		if err != nil {
			continue
		}
		h := make([]byte, HeaderSize)
		if _, err := f.ReadAt(h, 0); err == nil {
			if size := int64(binary.BigEndian.Uint32(h)); size >= HeaderSize && size <= s.Size {
				b := make([]byte, size)
				if _, err := f.ReadAt(b, 0); err == nil {
					if st, _ := decodeFrame(b, s.Base); st == frameRecord {
						_ = f.Close()
						return true
					}
				}
			}
		}
		_ = f.Close()
	}
	return false
}

func roundUpTo(n, m int64) int64 { return (n + m - 1) / m * m }

// surveySegment walks the frames of one segment file, calls damaged for
// each damaged range and returns where the walk ends and whether the log's
// data ends in this segment (stop).
func surveySegment(si SurveyedSegment, tornOK func(int64) bool, highWater int64, fn func(int64, int32, []byte), damaged func(Damage), records *int64) (int64, bool, error) {
	end := si.Base + si.Size
	if si.Size == 0 {
		return end, false, nil
	}
	f, err := os.Open(si.Path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	data, err := mmap.MapReadOnly(f, int(si.Size))
	if err != nil {
		return 0, false, fmt.Errorf("map %s: %w", si.Path, err)
	}
	defer func() { _ = mmap.Unmap(data) }()
	below := func(pos int64) string {
		if pos < highWater {
			return fmt.Sprintf(", below the durable high-water mark %d", highWater)
		}
		return ""
	}
	pos := si.Base
	for pos < end {
		b := data[pos-si.Base:]
		status, size := decodeFrame(b, pos)
		switch {
		case status == frameRecord:
			fn(pos, int32(size), b[HeaderSize:size])
			*records++
			pos += int64(size)
			continue
		case status == frameBlank || (status == frameShort && firstNonZero(b) < 0):
			return end, false, nil
		case tornOK(pos):
			return pos, true, nil // the end of the data, or a torn tail
		case status == frameBadCRC && isRecordHeader(b) && validAfter(data, si.Base, pos+int64(size)):
			damaged(Damage{From: pos, To: pos + int64(size), InPlace: true,
				Reason: fmt.Sprintf("record at %d in segment %d fails its CRC%s (kept in place; the frames after it are intact)", pos, si.Base, below(pos))})
			pos += int64(size)
			continue
		}
		reason := fmt.Sprintf("%v at %d in segment %d", status, pos, si.Base)
		if status == frameEnd {
			reason = fmt.Sprintf("zeros at %d in segment %d", pos, si.Base)
		}
		damaged(Damage{From: pos, To: end, Reason: reason + below(pos)})
		return end, false, nil
	}
	return end, false, nil
}

// validAfter reports whether next, the end of a frame in the segment data
// based at base, is the end of the segment or starts a valid frame (or
// the segment's zero tail): then that frame's size field was right.
func validAfter(data []byte, base, next int64) bool {
	rel := next - base
	if rel == int64(len(data)) {
		return true
	}
	status, _ := decodeFrame(data[rel:], next)
	switch status {
	case frameRecord, frameBlank:
		return true
	case frameShort, frameEnd:
		return firstNonZero(data[rel:]) < 0
	}
	return false
}

// PatchDir repairs the log in dir as res (from SurveyDir on the same,
// unchanged directory) describes: for each damaged range, the non-zero
// bytes a segment file holds there are copied to <segment>.broken (or
// .broken.N) and zeroed, a file cut short is extended, a Blank frame is
// written at the range's start, and the part no file holds is recreated
// as segments that hold one Blank frame each. Every file is written
// durably (fdatasync, rename, directory fsync). It returns the names of
// the .broken copies.
func PatchDir(fs vfs.FS, dir string, res SurveyResult) (broken []string, err error) {
	if fs == nil {
		fs = vfs.OS()
	}
	for _, d := range res.Damaged {
		if d.InPlace {
			si, _ := segmentBefore(res.Segments, d.From)
			name, err := copyBroken(fs, si, d.From, d.To)
			if err != nil {
				return broken, err
			}
			broken = append(broken, name)
			continue
		}
		pos := d.From
		for pos < d.To {
			next := nextBase(res.Segments, pos, d.To)
			si, ok := segmentBefore(res.Segments, pos)
			switch {
			case ok && (pos < si.Base+si.Size || next-pos < HeaderSize || si.Base == pos):
				// In the file (an empty one included), or a gap too short
				// for a segment of its own right after it: the file is
				// patched (and extended).
				name, err := patchInFile(fs, si, pos, next)
				if err != nil {
					return broken, err
				}
				if name != "" {
					broken = append(broken, name)
				}
			default:
				if err := createFiller(fs, dir, pos, next, res.SegmentSize); err != nil {
					return broken, err
				}
			}
			pos = next
		}
	}
	if err := fs.SyncDir(dir); err != nil {
		return broken, err
	}
	return broken, nil
}

// segmentBefore returns the last segment file that starts at or before pos.
func segmentBefore(segs []SurveyedSegment, pos int64) (SurveyedSegment, bool) {
	var out SurveyedSegment
	ok := false
	for _, s := range segs {
		if s.Base > pos {
			break
		}
		out, ok = s, true
	}
	return out, ok
}

// nextBase is the first segment base after pos, at most limit.
func nextBase(segs []SurveyedSegment, pos, limit int64) int64 {
	for _, s := range segs {
		if s.Base > pos {
			return min(s.Base, limit)
		}
	}
	return limit
}

// patchChunk is how much of a damaged range patchInFile reads at a time.
const patchChunk = 4 << 20

// patchInFile blanks [pos, to) of the segment file si, extending the file
// to to when it is shorter: the non-zero bytes are copied to a .broken
// file first, then zeroed, then the Blank frame's header is written at pos.
// It returns the .broken copy's name ("" when the range held only zeros).
func patchInFile(fs vfs.FS, si SurveyedSegment, pos, to int64) (string, error) {
	f, err := fs.OpenReadWrite(si.Path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	rel, fileEnd := pos-si.Base, si.Size
	// The damaged bytes up to the last non-zero one.
	var damaged []byte
	buf := make([]byte, patchChunk)
	for off := rel; off < fileEnd; off += patchChunk {
		n := min(int64(patchChunk), fileEnd-off)
		if _, err := f.ReadAt(buf[:n], off); err != nil {
			return "", fmt.Errorf("read %s: %w", si.Path, err)
		}
		if k := lastNonZero(buf[:n]); k >= 0 {
			damaged = append(damaged, make([]byte, off-rel-int64(len(damaged)))...)
			damaged = append(damaged, buf[:k+1]...)
		}
	}
	var name string
	if len(damaged) > 0 {
		copyPath, err := uniqueBroken(fs, si.Path)
		if err != nil {
			return "", err
		}
		if err := vfs.WriteFileAtomic(fs, copyPath, damaged, 0o644); err != nil {
			return "", err
		}
		name = filepath.Base(copyPath)
		clear(buf)
		for off := int64(0); off < int64(len(damaged)); off += patchChunk {
			n := min(int64(patchChunk), int64(len(damaged))-off)
			if _, err := f.WriteAt(buf[:n], rel+off); err != nil {
				return "", fmt.Errorf("zero %s: %w", si.Path, err)
			}
		}
	}
	if to-si.Base > fileEnd {
		if err := f.Preallocate(to - si.Base); err != nil {
			return "", fmt.Errorf("extend %s: %w", si.Path, err)
		}
	}
	if to-pos >= HeaderSize {
		h := make([]byte, HeaderSize)
		writeBlankHeader(h, int(to-pos), pos)
		if _, err := f.WriteAt(h, rel); err != nil {
			return "", fmt.Errorf("write blank frame in %s: %w", si.Path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("sync %s: %w", si.Path, err)
	}
	return name, nil
}

// copyBroken copies [from, to) of the segment file si to a .broken file.
func copyBroken(fs vfs.FS, si SurveyedSegment, from, to int64) (string, error) {
	f, err := fs.OpenReadWrite(si.Path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b := make([]byte, to-from)
	if _, err := f.ReadAt(b, from-si.Base); err != nil {
		return "", fmt.Errorf("read %s: %w", si.Path, err)
	}
	path, err := uniqueBroken(fs, si.Path)
	if err != nil {
		return "", err
	}
	if err := vfs.WriteFileAtomic(fs, path, b, 0o644); err != nil {
		return "", err
	}
	return filepath.Base(path), nil
}

// createFiller recreates [from, to) as segments of at most segmentSize
// bytes, each one Blank frame.
func createFiller(fs vfs.FS, dir string, from, to, segmentSize int64) error {
	for from < to {
		size := min(to-from, segmentSize)
		if rest := to - from - size; rest > 0 && rest < HeaderSize {
			size = to - from // no segment shorter than a header
		}
		s, err := createSegment(fs, dir, from, size, HeaderSize) // only its one Blank header is written
		if err != nil {
			return err
		}
		writeBlank(s.data, from)
		err = s.mapping.Sync(0, HeaderSize)
		if rerr := s.release(); err == nil {
			err = rerr
		}
		if err != nil {
			return fmt.Errorf("fill %s: %w", s.path, err)
		}
		from += size
	}
	return nil
}

// uniqueBroken is <path>.broken, or <path>.broken.N if that exists.
func uniqueBroken(fs vfs.FS, path string) (string, error) {
	name := path + brokenSuffix
	for n := 1; ; n++ {
		_, err := fs.Stat(name)
		if errors.Is(err, os.ErrNotExist) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
		name = fmt.Sprintf("%s%s.%d", path, brokenSuffix, n)
	}
}
