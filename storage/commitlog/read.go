package commitlog

import (
	"fmt"
)

// Read returns the record whose frame starts at offset, its payload copied
// into buf (grown if needed). It checks the frame's size, magic and stored
// offset but not its CRC (Verify does). At a Blank frame it returns
// ErrEndOfSegment and nothing else.
func (l *Log) Read(offset int64, buf []byte) (Record, error) {
	rec, _, err := l.read(offset, buf, false)
	return rec, err
}

// Verify is Read plus the CRC check: a frame that fails it gives
// ErrCorrupt.
func (l *Log) Verify(offset int64, buf []byte) (Record, error) {
	rec, _, err := l.read(offset, buf, true)
	return rec, err
}

// Next reads the first record at or after offset (a frame start), skipping
// a Blank frame to the next segment's base. It returns the record and the
// offset just after it. offset >= Written gives ErrNoData.
func (l *Log) Next(offset int64, buf []byte) (rec Record, next int64, err error) {
	for {
		rec, segEnd, err := l.read(offset, buf, false)
		if err == ErrEndOfSegment {
			offset = segEnd
			continue
		}
		if err != nil {
			return Record{}, offset, err
		}
		return rec, offset + int64(rec.Size), nil
	}
}

// read reads the frame at offset. At the end of a segment (a Blank frame,
// or the zero tail of a truncated segment) it returns ErrEndOfSegment and
// the segment's end.
func (l *Log) read(offset int64, buf []byte, checkCRC bool) (Record, int64, error) {
	if offset < l.minOffset.Load() {
		return Record{}, 0, ErrOffsetTooSmall
	}
	written := l.written.Load()
	if offset >= written {
		if l.isClosed.Load() {
			return Record{}, 0, ErrClosed
		}
		return Record{}, 0, ErrNoData
	}
	s, err := l.pin(offset)
	if err != nil {
		return Record{}, 0, err
	}
	defer s.mu.RUnlock()
	if s.data == nil {
		return Record{}, 0, ErrClosed
	}
	rel := offset - s.base
	status, size := decodeFrame(s.data[rel:], offset, checkCRC)
	switch {
	case status == frameRecord && offset+int64(size) <= written:
		buf = append(buf[:0], s.data[rel+HeaderSize:rel+int64(size)]...)
		return Record{Offset: offset, Size: int32(size), Payload: buf}, 0, nil
	case status == frameBlank:
		return Record{}, s.end(), ErrEndOfSegment
	case status == frameShort && firstNonZero(s.data[rel:]) < 0:
		return Record{}, s.end(), ErrEndOfSegment
	case status == frameRecord:
		return Record{}, 0, fmt.Errorf("%w: frame at %d ends past written data %d (not a frame start?)", ErrCorrupt, offset, written)
	default:
		return Record{}, 0, fmt.Errorf("%w: at %d: %v", ErrCorrupt, offset, status)
	}
}

// pin finds the segment holding offset and returns it read-locked, so it
// cannot be unmapped until the caller's s.mu.RUnlock.
func (l *Log) pin(offset int64) (*segment, error) {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	segs := l.segments
	if len(segs) == 0 {
		return nil, ErrClosed
	}
	if offset < segs[0].base {
		return nil, ErrOffsetTooSmall
	}
	// Most reads are at the tail: try the active segment first.
	i := len(segs) - 1
	if offset < segs[i].base {
		lo, hi := 0, i // segs[lo].base <= offset < segs[hi].base
		for hi-lo > 1 {
			mid := int(uint(lo+hi) >> 1)
			if segs[mid].base <= offset {
				lo = mid
			} else {
				hi = mid
			}
		}
		i = lo
	}
	s := segs[i]
	if offset >= s.end() {
		return nil, ErrNoData
	}
	s.mu.RLock()
	return s, nil
}
