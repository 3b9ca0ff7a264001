package commitlog

import (
	"errors"
	"fmt"
	"syscall"
)

// Segments describes the retained segment files, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.segMu.RLock()
	infos := make([]SegmentInfo, len(l.segments))
	paths := make([]string, len(l.segments))
	for i, s := range l.segments {
		infos[i] = SegmentInfo{Base: s.base, Size: s.size, Allocated: s.size}
		paths[i] = s.path
	}
	l.segMu.RUnlock()
	for i, p := range paths {
		if st, err := l.fs.Stat(p); err == nil {
			infos[i].ModTime = st.ModTime()
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				infos[i].Allocated = sys.Blocks * 512
			}
		}
	}
	return infos
}

// DeleteSegmentsBelow removes the oldest segments whose end is at or below
// offset, never the active segment and never data that is not yet durable
// (offset is capped at Flushed). It returns how many it removed and moves
// MinOffset up. Readers inside a removed segment finish first: its mapping
// is released only when the last one leaves (no SIGBUS); later reads below
// the new MinOffset get ErrOffsetTooSmall.
func (l *Log) DeleteSegmentsBelow(offset int64) (deleted int, err error) {
	if l.isClosed.Load() {
		return 0, ErrClosed
	}
	limit := min(offset, l.flushed.Load())
	l.segMu.Lock()
	n := 0
	for n < len(l.segments)-1 && l.segments[n].end() <= limit {
		n++
	}
	victims := make([]*segment, n)
	copy(victims, l.segments[:n])
	if n > 0 {
		l.segments = append([]*segment(nil), l.segments[n:]...)
		l.minOffset.Store(l.segments[0].base)
	}
	l.segMu.Unlock()
	if n == 0 {
		return 0, nil
	}

	var errs []error
	for _, s := range victims {
		if err := s.release(); err != nil {
			errs = append(errs, err)
		}
		if err := l.fs.Remove(s.path); err != nil {
			errs = append(errs, fmt.Errorf("remove segment %s: %w", s.path, err))
		}
	}
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		errs = append(errs, fmt.Errorf("sync dir after deleting segments: %w", err))
	}
	l.log.Info().Int("segments", n).Int64("min_offset", l.minOffset.Load()).Msg("deleted segments")
	return n, errors.Join(errs...)
}
