package commitlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// recoveryProgressEvery is how many scanned bytes pass between progress
// log lines during recovery.
const recoveryProgressEvery = 256 << 20

// walkResult is where the recovery scan stopped.
type walkResult struct {
	from    int64  // where frame validation started
	end     int64  // first offset that is not part of the log
	keep    int    // segments[:keep] stay; segments[keep-1] may have a tail to cut at end
	start   int    // index of the segment the scan started in
	clean   bool   // stopped at a zero header or at the end of the last segment
	reason  string // why it stopped
	records int64  // records validated
}

// recover rebuilds the log's state from the files in Dir: it lists and
// maps the segments, scans frames from RecoverFrom, decides torn tail vs
// corruption against HighWater, cuts off (and quarantines) everything after
// the end and makes the recovered range durable. See the package
// documentation for the rules.
func (l *Log) recover() (err error) {
	start := time.Now()
	o := l.opts
	if err := vfs.MkdirAllSync(l.fs, o.Dir, 0o755); err != nil {
		return fmt.Errorf("create log dir %s: %w", o.Dir, err)
	}
	bases, err := l.listSegments()
	if err != nil {
		return err
	}
	segs := make([]*segment, 0, len(bases))
	defer func() {
		if err != nil {
			for _, s := range segs {
				_ = s.release()
			}
		}
	}()
	for _, base := range bases {
		s, err := openSegment(l.fs, o.Dir, base)
		if err != nil {
			return err
		}
		segs = append(segs, s)
	}

	rep := RecoveryReport{}
	var w walkResult
	if len(segs) == 0 {
		w = walkResult{clean: true, reason: "no segments", from: o.StartOffset, end: o.StartOffset}
		if mark := max(o.RecoverFrom, o.HighWater); mark > 0 {
			w.from, w.end, w.clean, w.reason = mark, mark, false, "no segment files although the checkpoint is at "+strconv.FormatInt(mark, 10)
			if !o.AllowCorrupt {
				return fmt.Errorf("%w: %s in %s", ErrCorrupt, w.reason, o.Dir)
			}
			rep.Corrupt = true
		}
	} else {
		w = l.walk(segs, o.RecoverFrom)
		if w.end < o.HighWater {
			if !o.AllowCorrupt {
				return fmt.Errorf("%w: log ends at %d (%s), below the durable high-water mark %d", ErrCorrupt, w.end, w.reason, o.HighWater)
			}
			rep.Corrupt = true
			l.log.Error().Int64("end", w.end).Int64("high_water", o.HighWater).Str("reason", w.reason).
				Msg("corruption below the high-water mark; cutting the log there (AllowCorrupt)")
		}
	}

	kept, err := l.cutAfter(segs, w, &rep)
	if err != nil {
		return err
	}
	for i := w.start; i < len(kept); i++ { // the scanned range becomes durable
		if err := kept[i].file.Sync(); err != nil {
			return fmt.Errorf("sync recovered segment %s: %w", kept[i].path, err)
		}
	}
	if len(kept) == 0 {
		s, err := createSegment(l.fs, o.Dir, w.end, o.SegmentSize, aheadFor(0))
		if err != nil {
			return err
		}
		kept = append(kept, s)
	}
	segs = kept // for the deferred cleanup
	// The sealed segments are durable and only read from now on.
	for _, s := range kept[:len(kept)-1] {
		if err := s.closeFile(); err != nil {
			return err
		}
	}

	l.segments = kept
	l.active = kept[len(kept)-1]
	l.writePos = w.end
	// What was written is allocated; what lies ahead is allocated again
	// by the first growActive (a no-op for blocks that already are).
	l.active.allocated.Store(max(l.active.allocated.Load(), w.end-l.active.base))
	l.written.Store(w.end)
	l.flushed.Store(w.end)
	l.minOffset.Store(kept[0].base)

	rep.ScannedFrom, rep.End, rep.Records, rep.Reason = w.from, w.end, w.records, w.reason
	rep.Torn = rep.TruncatedBytes > 0
	rep.Duration = time.Since(start)
	l.recovery = rep
	ev := l.log.Info()
	if rep.Torn || rep.Corrupt {
		ev = l.log.Warn()
	}
	ev.Int64("scanned_from", rep.ScannedFrom).Int64("end", rep.End).Int64("records", rep.Records).
		Int64("truncated_bytes", rep.TruncatedBytes).Bool("torn", rep.Torn).Bool("corrupt", rep.Corrupt).
		Str("reason", rep.Reason).Strs("quarantined", rep.Quarantined).Int("segments", len(kept)).
		Dur("took", rep.Duration).Msg("recovered")
	return nil
}

// listSegments returns the bases of the segment files in Dir in order and
// removes leftover <segment>.tmp files (interrupted creations).
func (l *Log) listSegments() ([]int64, error) {
	entries, err := l.fs.ReadDir(l.opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", l.opts.Dir, err)
	}
	var bases []int64
	removed := false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if base, ok := parseSegmentName(name); ok {
			bases = append(bases, base) // ReadDir sorts by name, and names sort by base
			continue
		}
		if stem, ok := strings.CutSuffix(name, tmpSuffix); ok {
			if _, ok := parseSegmentName(stem); ok {
				if err := l.fs.Remove(filepath.Join(l.opts.Dir, name)); err != nil {
					return nil, fmt.Errorf("remove leftover %s: %w", name, err)
				}
				l.log.Info().Str("file", name).Msg("removed leftover temporary segment")
				removed = true
			}
		}
	}
	if removed {
		if err := l.fs.SyncDir(l.opts.Dir); err != nil {
			return nil, err
		}
	}
	return bases, nil
}

// walk finds the end of the log: it trusts segments before the one holding
// recoverFrom (checking only that they are contiguous), then validates
// frames until the first one that is not valid. A recoverFrom that does
// not hold a valid frame (or holds the end of data below HighWater, or lies
// past the last segment) is ignored and the whole log is scanned
// (ARCHITECTURE.md, crash-consistency rule 7: a checkpoint is a hint).
func (l *Log) walk(segs []*segment, recoverFrom int64) walkResult {
	last := segs[len(segs)-1]
	from := max(recoverFrom, segs[0].base)
	if from > last.end() {
		l.log.Warn().Int64("recover_from", recoverFrom).Int64("log_end", last.end()).
			Msg("checkpoint is past the last segment; scanning the whole log")
		from = segs[0].base
	}
	w := l.walkFrom(segs, from)
	if w.end == from && from > segs[0].base && w.records == 0 && (!w.clean || w.end < l.opts.HighWater) {
		l.log.Warn().Int64("recover_from", from).Str("reason", w.reason).
			Msg("no valid frame at the checkpoint; scanning the whole log")
		w = l.walkFrom(segs, segs[0].base)
	}
	return w
}

func (l *Log) walkFrom(segs []*segment, from int64) walkResult {
	i := 0
	for ; i+1 < len(segs) && segs[i+1].base <= from; i++ {
		if segs[i].end() != segs[i+1].base {
			return walkResult{from: from, end: segs[i].end(), keep: i + 1, start: i + 1,
				reason: fmt.Sprintf("gap: segment %d ends at %d but the next starts at %d", segs[i].base, segs[i].end(), segs[i+1].base)}
		}
	}
	w := walkResult{from: from, start: i}
	pos, nextReport := from, from+recoveryProgressEvery
	started := time.Now()
	for {
		s := segs[i]
		if pos == s.end() {
			if i+1 == len(segs) {
				w.end, w.keep, w.clean, w.reason = pos, i+1, true, "end of the last segment"
				break
			}
			if segs[i+1].base != pos {
				w.end, w.keep = pos, i+1
				w.reason = fmt.Sprintf("gap: segment %d ends at %d but the next starts at %d", s.base, pos, segs[i+1].base)
				break
			}
			i++
			continue
		}
		rel := pos - s.base
		status, size := decodeFrame(s.data[rel:], pos)
		if status == frameRecord {
			pos += int64(size)
			w.records++
			if pos >= nextReport {
				l.log.Info().Int64("offset", pos).Int64("records", w.records).Dur("elapsed", time.Since(started)).Msg("recovery scan progress")
				nextReport = pos + recoveryProgressEvery
			}
			continue
		}
		if status == frameBlank || (status == frameShort && firstNonZero(s.data[rel:]) < 0) {
			pos = s.end()
			continue
		}
		if to, ok := l.lostAt(pos); ok && to <= s.end() {
			pos = to // given up in place by a repair: its header is intact
			continue
		}
		w.end, w.keep, w.clean = pos, i+1, status == frameEnd
		w.reason = fmt.Sprintf("%v at %d", status, pos)
		break
	}
	// A kept segment must have room: an empty file cannot be the active one.
	for w.keep > 0 && segs[w.keep-1].size == 0 {
		w.keep--
	}
	w.start = min(w.start, w.keep)
	return w
}

// lostAt returns the end of the range of Options.Lost that starts at pos.
func (l *Log) lostAt(pos int64) (int64, bool) {
	r := l.opts.Lost
	i := sort.Search(len(r), func(i int) bool { return r[i].From >= pos })
	if i < len(r) && r[i].From == pos && r[i].To > pos {
		return r[i].To, true
	}
	return 0, false
}

// cutAfter removes everything after w.end from the log without deleting
// data: the non-zero bytes after the end of the last kept segment are
// copied to <segment>.broken, then zeroed and msync'd; later segments that
// hold any non-zero byte are renamed to <segment>.broken, all-zero ones
// (preallocated, never written) are removed. It returns the kept segments.
func (l *Log) cutAfter(segs []*segment, w walkResult, rep *RecoveryReport) ([]*segment, error) {
	dirty := false
	if w.keep > 0 {
		s := segs[w.keep-1]
		if w.end < s.end() {
			rel := w.end - s.base
			first, stop, found, err := nonZeroSpan(s.file, s.data, rel)
			if err != nil {
				return nil, fmt.Errorf("check tail of %s: %w", s.path, err)
			}
			if found {
				name, err := l.writeBroken(s.path, s.data[rel:stop])
				if err != nil {
					return nil, err
				}
				clear(s.data[first:stop])
				if err := s.mapping.Sync(int(first), int(stop)); err != nil {
					return nil, fmt.Errorf("zero torn tail of %s: %w", s.path, err)
				}
				rep.TruncatedBytes += stop - rel
				rep.Quarantined = append(rep.Quarantined, name)
				dirty = true
				l.log.Warn().Int64("offset", w.end).Int64("bytes", stop-rel).Str("copy", name).Msg("cut torn tail")
			}
		}
	}
	for i := w.keep; i < len(segs); i++ {
		s := segs[i]
		_, _, found, err := nonZeroSpan(s.file, s.data, 0)
		if err != nil {
			return nil, fmt.Errorf("check %s: %w", s.path, err)
		}
		if err := s.release(); err != nil {
			return nil, err
		}
		dirty = true
		if !found {
			if err := l.fs.Remove(s.path); err != nil {
				return nil, fmt.Errorf("remove unused segment %s: %w", s.path, err)
			}
			continue
		}
		name, err := l.uniqueBrokenName(s.path)
		if err != nil {
			return nil, err
		}
		if err := l.fs.Rename(s.path, name); err != nil {
			return nil, fmt.Errorf("quarantine %s: %w", s.path, err)
		}
		rep.TruncatedBytes += s.size
		rep.Quarantined = append(rep.Quarantined, filepath.Base(name))
		l.log.Warn().Str("segment", s.path).Str("renamed", name).Msg("quarantined segment after the end of the log")
	}
	if dirty {
		if err := l.fs.SyncDir(l.opts.Dir); err != nil {
			return nil, err
		}
	}
	return segs[:w.keep], nil
}

// writeBroken durably writes a forensic copy of data next to segPath and
// returns its base name.
func (l *Log) writeBroken(segPath string, data []byte) (string, error) {
	name, err := l.uniqueBrokenName(segPath)
	if err != nil {
		return "", err
	}
	f, err := l.fs.Create(name)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", name, err)
	}
	return filepath.Base(name), nil
}

// uniqueBrokenName is <path>.broken, or <path>.broken.N if that exists.
func (l *Log) uniqueBrokenName(path string) (string, error) {
	name := path + brokenSuffix
	for n := 1; ; n++ {
		_, err := l.fs.Stat(name)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return name, nil
			}
			return "", fmt.Errorf("stat %s: %w", name, err)
		}
		name = path + brokenSuffix + "." + strconv.Itoa(n)
	}
}
