package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// TruncateFrom cuts the log back to offset, a frame start at or above
// MinOffset and at or below Written, while the log is open: a replica
// whose log holds a suffix its leader does not have gives it up this way
// (the Raft log's conflicting suffix). Afterwards the log is exactly as it
// was when offset was its end — the next append lands at offset, in the
// segment that holds it, and writes the bytes it would have written then
// (the segment files are the same, byte for byte: the cut bytes are
// zeroed and made durable, the segments wholly above offset are removed,
// and the segments prepared ahead are discarded, so the next roll creates
// them afresh).
//
// The caller serialises it with every append (none may be waiting for its
// flush: ErrInvalidArgument) and makes sure that no reader relies on the
// cut frames (the store does not dispatch them). A crash in the middle
// leaves a prefix of the cut done: the log then ends somewhere between
// offset and its old end, at a frame boundary or at a torn frame that
// recovery cuts off; the caller's own record of where the log should end
// (the Raft index) finishes the cut at the next start.
func (l *Log) TruncateFrom(offset int64, onCut FrameFunc) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if err := l.writeStagedLocked(); err != nil {
		return err
	}
	if offset == l.writePos {
		return nil
	}
	if offset < l.minOffset.Load() || offset > l.writePos {
		return fmt.Errorf("%w: truncate at %d, the log holds [%d,%d)", ErrInvalidArgument, offset, l.minOffset.Load(), l.writePos)
	}
	l.flushMu.Lock()
	waiting := len(l.waiters)
	l.flushMu.Unlock()
	if waiting > 0 {
		return fmt.Errorf("%w: truncate at %d while %d appends wait for their flush", ErrInvalidArgument, offset, waiting)
	}

	// The segment that will hold offset: the last whose base is at or
	// below it.
	l.segMu.RLock()
	segs := l.segments
	i := len(segs) - 1
	for i > 0 && segs[i].base > offset {
		i--
	}
	keep := segs[i]
	l.segMu.RUnlock()
	if err := l.checkFrameStart(keep, offset); err != nil {
		return err
	}
	if onCut != nil {
		if err := l.walkCut(offset, onCut); err != nil {
			return err
		}
	}

	// Nothing above offset is durable any more: the scrubber and frame
	// readers stop below it from now on.
	l.written.Store(offset)
	if l.flushed.Load() > offset {
		l.flushed.Store(offset)
	}

	// Drop what was prepared ahead (its bases follow the old end). The
	// allocator may be creating a segment right now: take its result
	// first, so that no file of it is left behind.
	if l.allocPending {
		r := <-l.alloc.results
		l.alloc.prepared.Store(nil)
		l.allocPending = false
		if r.seg != nil {
			l.reserve = append(l.reserve, r.seg)
		}
	}
	var errs []error
	if err := l.discardReserve(); err != nil {
		errs = append(errs, err)
	}

	// Remove the segments wholly above offset, newest first: a crash in
	// between leaves a contiguous prefix of segments.
	l.segMu.Lock()
	victims := append([]*segment(nil), l.segments[i+1:]...)
	l.segments = l.segments[:i+1]
	l.segMu.Unlock()
	for j := len(victims) - 1; j >= 0; j-- {
		s := victims[j]
		errs = append(errs, s.release(), l.fs.Remove(s.path))
	}
	if len(victims) > 0 {
		errs = append(errs, l.fs.SyncDir(l.opts.Dir))
	}
	if err := errors.Join(errs...); err != nil {
		return l.fail(fmt.Errorf("truncate at %d: removing segments: %w", offset, err))
	}

	// Zero the cut part of keep and make it durable. A sealed segment's
	// file was closed after its flush: open it again, it is active now.
	keep.mu.Lock()
	var err error
	if keep.file == nil {
		keep.file, err = l.fs.OpenReadWrite(keep.path)
	}
	if err == nil {
		end := keep.end()
		if keep.data != nil {
			// Only as far as there are non-zero bytes: the rest of a
			// sparse segment stays a hole.
			if _, last, ok, serr := nonZeroSpan(keep.file, keep.data, offset-keep.base); serr != nil {
				err = serr
			} else if ok {
				end = keep.base + last
			} else {
				end = offset
			}
		}
		if end > offset {
			err = vfs.WriteZeros(keep.file, offset-keep.base, end-offset)
		}
		if err == nil {
			err = keep.file.Sync()
		}
	}
	keep.mu.Unlock()
	if err != nil {
		return l.fail(fmt.Errorf("truncate at %d: zeroing segment %d: %w", offset, keep.base, err))
	}

	l.active = keep
	l.writePos = offset
	l.zeroedTo = offset
	l.zeroFailed = false
	l.stage, l.staged = l.stage[:0], 0
	l.active.allocated.Store(max(l.active.allocated.Load(), offset-keep.base))
	l.alloc.request(keep.end())
	l.allocPending = true
	l.growLocked()
	l.log.Info().Int64("offset", offset).Int("segments_removed", len(victims)).Msg("truncated")
	return nil
}

// walkCut calls onCut for every record frame in [offset, writePos), in
// order, before they are cut. Called with mu held.
func (l *Log) walkCut(offset int64, onCut FrameFunc) error {
	for pos := offset; pos < l.writePos; {
		s, err := l.pin(pos)
		if err != nil {
			return err
		}
		b := s.data[pos-s.base:]
		status, size := decodeFrame(b, pos)
		switch {
		case status == frameRecord:
			onCut(pos, b[HeaderSize:size])
			pos += int64(size)
		case status == frameBlank || (status == frameShort && firstNonZero(b) < 0):
			pos = s.end()
		default:
			s.mu.RUnlock()
			return fmt.Errorf("%w: truncate at %d: the frame at %d is %v", ErrCorrupt, offset, pos, status)
		}
		s.mu.RUnlock()
	}
	return nil
}

// checkFrameStart reports whether offset is a frame start in s: the
// log's end, the start of a valid frame, or the base of s. Called with mu
// held, so no append moves the end meanwhile.
func (l *Log) checkFrameStart(s *segment, offset int64) error {
	if offset == l.writePos || offset == s.base {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.data == nil {
		return ErrClosed
	}
	status, _ := decodeFrame(s.data[offset-s.base:], offset)
	if !status.valid() {
		return fmt.Errorf("%w: truncate at %d: not a frame start (%v)", ErrInvalidArgument, offset, status)
	}
	return nil
}

// ReadFrameRange appends to dst the frame stream of the log's range
// [from, to): from a frame start to a frame end, both at or below
// Written (unlike ReadFrames it does not wait for the flush: a Raft log
// reads back what it has appended). Each record frame is copied whole
// and checked; a Blank frame is its header alone.
func (l *Log) ReadFrameRange(from, to int64, dst []byte) ([]byte, error) {
	if to > l.Written() {
		return dst, fmt.Errorf("%w: range [%d,%d) past the written end %d", ErrNoData, from, to, l.Written())
	}
	for offset := from; offset < to; {
		s, err := l.pin(offset)
		if err != nil {
			return dst, err
		}
		if s.data == nil {
			s.mu.RUnlock()
			return dst, ErrClosed
		}
		b := s.data[offset-s.base:]
		status, size := decodeFrame(b, offset)
		switch {
		case status == frameRecord && offset+int64(size) <= to:
			dst = append(dst, b[:size]...)
			offset += int64(size)
		case status == frameBlank && s.end() <= to:
			dst = append(dst, b[:HeaderSize]...)
			offset = s.end()
		case status == frameShort && firstNonZero(b) < 0 && s.end() <= to:
			offset = s.end()
		default:
			s.mu.RUnlock()
			return dst, fmt.Errorf("%w: frame range [%d,%d) at %d: %v", ErrCorrupt, from, to, offset, status)
		}
		s.mu.RUnlock()
	}
	return dst, nil
}

// StreamExtent walks the frame headers of a frame stream (ReadFrames)
// without checking checksums and returns the log range it covers: the
// offset its first frame names and the end of its last frame (a Blank
// frame ends where its segment does). A stream that does not walk —
// fewer bytes than a header, a bad magic or size, offsets that do not
// follow one another within a segment — is ErrCorrupt. AppendFrames
// checks the rest (checksums, placement).
func StreamExtent(b []byte) (start, end int64, err error) {
	if len(b) == 0 {
		return 0, 0, fmt.Errorf("%w: empty frame stream", ErrCorrupt)
	}
	start = -1
	for rest := b; len(rest) > 0; {
		if len(rest) < HeaderSize {
			return 0, 0, fmt.Errorf("%w: frame stream: %d bytes left, less than a header", ErrCorrupt, len(rest))
		}
		size := int64(binary.BigEndian.Uint32(rest[sizeFieldOffset:]))
		pos := int64(binary.BigEndian.Uint64(rest[offsetFieldOffset:]))
		if pos < 0 || size < HeaderSize || pos > MaxOffset-size || (start >= 0 && pos != end) {
			return 0, 0, fmt.Errorf("%w: frame stream: a frame of %d bytes at %d after %d", ErrCorrupt, size, pos, end)
		}
		if start < 0 {
			start = pos
		}
		switch binary.BigEndian.Uint32(rest[magicFieldOffset:]) {
		case RecordMagic:
			if size > int64(len(rest)) {
				return 0, 0, fmt.Errorf("%w: frame stream: a record of %d bytes, %d left", ErrCorrupt, size, len(rest))
			}
			rest = rest[size:]
		case BlankMagic:
			rest = rest[HeaderSize:]
		default:
			return 0, 0, fmt.Errorf("%w: frame stream: bad magic at %d", ErrCorrupt, pos)
		}
		end = pos + size
	}
	return start, end, nil
}

// MaxOffset bounds log offsets (they are int64 in every format).
const MaxOffset = int64(1) << 62
