package commitlog

import (
	"errors"
	"fmt"
)

// Read returns the record whose frame starts at offset, its payload copied
// into buf (grown if needed). The frame is fully validated first — size,
// magic, stored offset and CRC-32C — so a damaged record is never returned
// (see "Reads" in the package documentation). A record frame whose header
// is intact but whose checksum fails gives an error wrapping ErrChecksum
// (and so ErrCorrupt) along with the record's Offset and Size, without a
// payload; any other invalid frame, or an offset that is not a frame
// start, gives ErrCorrupt. At a Blank frame it returns ErrEndOfSegment and
// nothing else.
func (l *Log) Read(offset int64, buf []byte) (Record, error) {
	rec, _, err := l.read(offset, buf)
	return rec, err
}

// Next reads the first record at or after offset (a frame start), skipping
// a Blank frame to the next segment's base. It returns the record and the
// offset just after it. offset >= Written gives ErrNoData. A record whose
// checksum fails gives an error wrapping ErrChecksum, the record's Offset
// and Size (no payload) and the offset after it: its header is intact, so
// the caller may pass over it. With ErrNoData, next is where the data
// ends: offset, or past the Blank frames followed (a log whose last frame
// is a Blank, as a crash can leave it: the record that went to the next
// segment was lost), the next segment's base. Any other error returns
// offset unchanged: past a damaged header the next frame's position is
// unknown.
func (l *Log) Next(offset int64, buf []byte) (rec Record, next int64, err error) {
	for {
		rec, segEnd, err := l.read(offset, buf)
		switch {
		case err == nil || errors.Is(err, ErrChecksum):
			return rec, offset + int64(rec.Size), err
		case err == ErrEndOfSegment:
			offset = segEnd
		default:
			return Record{}, offset, err
		}
	}
}

// read reads the frame at offset. At the end of a segment (a Blank frame,
// or the zero tail of a truncated segment) it returns ErrEndOfSegment and
// the segment's end.
func (l *Log) read(offset int64, buf []byte) (Record, int64, error) {
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
	b := s.data[rel:]
	status, size := decodeFrame(b, offset)
	inWritten := offset+int64(size) <= written
	switch {
	case status == frameRecord && inWritten:
		buf = append(buf[:0], b[HeaderSize:size]...)
		return Record{Offset: offset, Size: int32(size), Payload: buf}, 0, nil
	case status == frameBlank:
		return Record{}, s.end(), ErrEndOfSegment
	case status == frameShort && firstNonZero(b) < 0:
		return Record{}, s.end(), ErrEndOfSegment
	case status == frameBadCRC && inWritten && isRecordHeader(b):
		return Record{Offset: offset, Size: int32(size)}, 0, checksumError(b[:size], offset)
	case status == frameRecord || status == frameBadCRC:
		return Record{}, 0, fmt.Errorf("%w: frame at %d ends past written data %d (not a frame start?)", ErrCorrupt, offset, written)
	default:
		return Record{}, 0, fmt.Errorf("%w: at %d: %v", ErrCorrupt, offset, status)
	}
}

// checksumError describes the record frame at offset whose CRC fails.
func checksumError(frame []byte, offset int64) error {
	return fmt.Errorf("%w: record at %d (%d bytes): stored crc %08x, computed %08x",
		ErrChecksum, offset, len(frame), storedCRC(frame), frameCRC(frame))
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
