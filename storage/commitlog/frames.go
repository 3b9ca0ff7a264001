package commitlog

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// A frame stream is how a copy of the log travels (a replica follows its
// leader with it): the log's frames in order, each record frame whole and
// each Blank frame as its 20-byte header alone (its size says how much of
// the segment it closes; the bytes it covers are zeros and not part of its
// checksum). ReadFrames cuts one from a log; AppendFrames appends one to
// another log, which then holds the same bytes at the same offsets — the
// same segment files, byte for byte, when both logs have the same segment
// size. Nothing in a stream is trusted: every frame's checksum, magic,
// stored offset and placement are checked before any byte is written.

// ReadFrames appends to dst the frame stream of the log from offset (a
// frame start) up to at most maxBytes of stream (at least one frame), and
// no further than Flushed: only durable frames travel. It returns the
// stream and the offset after its last frame (offset when there is
// nothing durable to send yet).
func (l *Log) ReadFrames(offset int64, maxBytes int, dst []byte) ([]byte, int64, error) {
	return l.readFrames(offset, l.Flushed(), false, maxBytes, dst)
}

// ReadFramesTo is ReadFrames that goes no further than to (a frame
// boundary): the stream ends before a frame that would pass it, a Blank
// frame included.
func (l *Log) ReadFramesTo(offset, to int64, maxBytes int, dst []byte) ([]byte, int64, error) {
	return l.readFrames(offset, min(to, l.Flushed()), true, maxBytes, dst)
}

// readFrames is ReadFrames up to limit; bounded: a Blank frame must end
// at or below it too.
func (l *Log) readFrames(offset, limit int64, bounded bool, maxBytes int, dst []byte) ([]byte, int64, error) {
	for offset < limit {
		s, err := l.pin(offset)
		if err != nil {
			return dst, offset, err
		}
		if s.data == nil {
			s.mu.RUnlock()
			return dst, offset, ErrClosed
		}
		b := s.data[offset-s.base:]
		status, size := decodeFrame(b, offset)
		switch {
		case status == frameRecord && offset+int64(size) <= limit:
			if len(dst) > 0 && len(dst)+size > maxBytes {
				s.mu.RUnlock()
				return dst, offset, nil
			}
			dst = append(dst, b[:size]...)
			offset += int64(size)
		case status == frameRecord: // not durable yet
			s.mu.RUnlock()
			return dst, offset, nil
		case bounded && (status == frameBlank || status == frameShort) && s.end() > limit:
			s.mu.RUnlock()
			return dst, offset, nil
		case status == frameBlank:
			dst = append(dst, b[:HeaderSize]...)
			offset = s.end()
		case status == frameShort && firstNonZero(b) < 0:
			offset = s.end() // a segment filled to its last bytes: no Blank
		default:
			s.mu.RUnlock()
			return dst, offset, fmt.Errorf("%w: frame stream at %d: %v", ErrCorrupt, offset, status)
		}
		s.mu.RUnlock()
	}
	return dst, offset, nil
}

// FrameFunc is called, under the append lock, for every record frame
// AppendFrames appends: its offset and payload (valid during the call).
// The store updates what it derives at append time (queue offsets).
type FrameFunc func(offset int64, payload []byte)

// AppendFrames appends the frame stream b, which must start at Written()
// (the end of this log), and waits for its flush in FlushSync. The whole
// stream is checked first — each record's checksum, magic and stored
// offset, that each frame fits where it lands by the placement invariant,
// that each Blank frame closes its segment exactly — and every byte it
// will write is allocated: a stream that fails is refused whole
// (ErrCorrupt, or ErrNoSpace) and the log is left as it was. Unlike an
// append, it never decides a roll itself: the leader's Blank frames say
// where segments end. onRecord, if set, sees every record. It returns the
// log's new end.
func (l *Log) AppendFrames(b []byte, onRecord FrameFunc) (int64, error) {
	end, err := l.placeFrames(b, onRecord)
	if err != nil {
		return 0, err
	}
	return end, l.commit(end)
}

// AppendFramesNoWait is AppendFrames without the wait for the flush: the
// caller waits later (WaitDurable of the end it returns), so that what
// it holds meanwhile is not held for the flush.
func (l *Log) AppendFramesNoWait(b []byte, onRecord FrameFunc) (int64, error) {
	end, err := l.placeFrames(b, onRecord)
	if err != nil {
		return 0, err
	}
	if l.opts.FlushMode == FlushAsync {
		l.nudge()
	}
	return end, nil
}

// placeFrames checks, plans and stages the frame stream b (AppendFrames).
func (l *Log) placeFrames(b []byte, onRecord FrameFunc) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	if len(b) == 0 {
		return l.writePos, nil
	}
	// Plan: check every frame and allocate every byte before writing any.
	type step struct {
		frame []byte // a record frame; nil for a roll
		left  int64  // for a roll: the bytes the Blank frame closes
	}
	var steps []step
	seg, k, pos := l.active, 0, l.writePos
	next := func() error { // the segment after seg, prepared
		k++
		if err := l.reserveLocked(k); err != nil {
			return err
		}
		seg, pos = l.reserve[k-1], l.reserve[k-1].base
		return nil
	}
	for rest := b; len(rest) > 0; {
		if pos == seg.end() { // the last frame filled its segment exactly
			steps = append(steps, step{left: 0})
			if err := next(); err != nil {
				return 0, err
			}
		}
		if len(rest) < HeaderSize {
			return 0, fmt.Errorf("%w: frame stream: %d bytes left at %d, less than a header", ErrCorrupt, len(rest), pos)
		}
		size := int64(binary.BigEndian.Uint32(rest[sizeFieldOffset:]))
		if stored := int64(binary.BigEndian.Uint64(rest[offsetFieldOffset:])); stored != pos {
			return 0, fmt.Errorf("%w: frame stream: the frame for %d says %d", ErrCorrupt, pos, stored)
		}
		left := seg.end() - pos
		switch binary.BigEndian.Uint32(rest[magicFieldOffset:]) {
		case BlankMagic:
			if size != left || frameCRC(rest[:HeaderSize]) != storedCRC(rest) {
				return 0, fmt.Errorf("%w: frame stream: a Blank frame at %d of %d bytes does not close its segment (%d left) or fails its checksum", ErrCorrupt, pos, size, left)
			}
			if err := seg.allocate(pos + HeaderSize - seg.base); err != nil {
				return 0, l.noSpaceErr(seg, err)
			}
			steps = append(steps, step{left: left})
			rest = rest[HeaderSize:]
			if err := next(); err != nil {
				return 0, err
			}
		case RecordMagic:
			if size < HeaderSize || size > int64(len(rest)) || !fits(left, int(size)) {
				return 0, fmt.Errorf("%w: frame stream: a record at %d of %d bytes (%d in the stream, %d left in its segment)", ErrCorrupt, pos, size, len(rest), left)
			}
			frame := rest[:size]
			if frameCRC(frame) != storedCRC(frame) {
				return 0, fmt.Errorf("%w: frame stream: the record at %d fails its checksum", ErrCorrupt, pos)
			}
			if err := seg.allocate(pos + size + HeaderSize - seg.base); err != nil {
				return 0, l.noSpaceErr(seg, err)
			}
			steps = append(steps, step{frame: frame})
			rest, pos = rest[size:], pos+size
		default:
			return 0, fmt.Errorf("%w: frame stream: no frame at %d (bad magic)", ErrCorrupt, pos)
		}
	}
	// Write: the same staging as an append; rollLocked writes the Blank
	// header the leader wrote (the same bytes: size, magic, offset, crc).
	defer l.unstageLocked()
	records := 0
	for _, st := range steps {
		if st.frame == nil {
			if err := l.rollLocked(st.left); err != nil {
				return 0, err
			}
			continue
		}
		if len(l.stage) == 0 {
			l.stageAt = l.writePos
		}
		l.stage = append(slices.Grow(l.stage, len(st.frame)), st.frame...)
		if onRecord != nil {
			onRecord(l.writePos, st.frame[HeaderSize:])
		}
		l.writePos += int64(len(st.frame))
		records++
	}
	l.stats.appends.Add(int64(records))
	l.growLocked()
	end := l.writePos
	if err := l.endAppendLocked(true); err != nil {
		return 0, err
	}
	return end, nil
}
