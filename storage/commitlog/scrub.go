package commitlog

import (
	"fmt"
	"runtime/debug"
)

// ScrubResult is what one Scrub call verified.
type ScrubResult struct {
	// From and Next bound the range examined, [From, Next): pass Next to
	// the following call. From is the requested offset raised to
	// MinOffset when retention deleted it meanwhile.
	From, Next int64
	// Bytes is how many bytes of frames were examined (blank frames and
	// the unverifiable rest of a segment after a bad header included).
	Bytes int64
	// Records counts the valid record frames.
	Records int64
	// Bad lists the invalid frames found, in log order.
	Bad []BadFrame
	// Done is set when Next reached the active segment: every sealed
	// segment from From on has been verified. A new pass starts at
	// MinOffset.
	Done bool
}

// BadFrame is an invalid frame found by Scrub.
type BadFrame struct {
	// Offset is where the frame starts.
	Offset int64
	// Size is the frame's length when its header is intact (a CRC
	// mismatch: Err wraps ErrChecksum), else 0.
	Size int32
	// Unverified counts the bytes from Offset to the end of its segment
	// that could not be checked: 0 when Size is known (only the frame
	// itself is bad), else the rest of the segment (past a damaged header
	// the next frame's position is unknown).
	Unverified int64
	// Err says what is wrong; it wraps ErrCorrupt, or ErrFault when
	// reading the mapping faulted.
	Err error
}

// Scrub verifies the frames of sealed segments (every segment but the
// active one) from from, a frame boundary (a segment base, or the Next of
// an earlier call), for about budget bytes: whole frames, at least one.
// It is the background scrubber's step (see "Scrubbing" in the package
// documentation); it never modifies the log. A damaged header makes it
// report the frame and continue at the next segment's base; a fault while
// reading the mapping (SIGBUS: an I/O error of the device, or a file
// truncated behind the log's back) is reported the same way instead of
// crashing the process. Only ErrClosed is returned as an error.
func (l *Log) Scrub(from, budget int64) (ScrubResult, error) {
	// A fault reading a mapped page panics in this goroutine instead of
	// killing the process; scrubSegment recovers it.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	res := ScrubResult{From: max(from, l.minOffset.Load())}
	pos := res.From
	for {
		s, sealedEnd, err := l.sealedSegment(pos)
		if err != nil {
			res.Next = pos
			return res, err
		}
		if s == nil {
			res.Next, res.Done = pos, true
			return res, nil
		}
		if pos < s.base { // retention removed segments meanwhile
			pos = s.base
		}
		pos = l.scrubSegment(s, pos, budget-res.Bytes, &res)
		if pos == s.end() && pos < sealedEnd && res.Bytes < budget {
			continue
		}
		res.Next = pos
		if pos >= sealedEnd {
			res.Done = true
		}
		return res, nil
	}
}

// sealedSegment returns the sealed segment holding pos (or the first one
// after pos, when retention deleted pos's), unpinned, and the base of the
// active segment; nil when pos is in the active segment.
func (l *Log) sealedSegment(pos int64) (*segment, int64, error) {
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	segs := l.segments
	if len(segs) == 0 {
		return nil, 0, ErrClosed
	}
	active := segs[len(segs)-1].base
	for _, s := range segs[:len(segs)-1] {
		if pos < s.end() {
			return s, active, nil
		}
	}
	return nil, active, nil
}

// scrubSegment verifies frames of s from pos until budget bytes are
// examined or the segment ends, appending what is wrong to res, and
// returns where it stopped. A segment released meanwhile (retention) is
// passed over.
func (l *Log) scrubSegment(s *segment, pos, budget int64, res *ScrubResult) (next int64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.data == nil {
		return s.end()
	}
	start := pos
	defer func() {
		if r := recover(); r != nil {
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			res.Bad = append(res.Bad, BadFrame{Offset: pos, Unverified: s.end() - pos,
				Err: fmt.Errorf("%w: reading segment %d at %d faulted (address %#x): %v", ErrFault, s.base, pos, fault.Addr(), r)})
			next = s.end()
			res.Bytes += next - start
		}
	}()
	for pos < s.end() && pos-start < max(budget, 1) {
		b := s.data[pos-s.base:]
		status, size := decodeFrame(b, pos)
		switch {
		case status == frameRecord:
			pos += int64(size)
			res.Records++
		case status == frameBlank || (status == frameShort && firstNonZero(b) < 0):
			pos = s.end()
		case status == frameBadCRC && isRecordHeader(b):
			res.Bad = append(res.Bad, BadFrame{Offset: pos, Size: int32(size), Err: checksumError(b[:size], pos)})
			pos += int64(size)
		default:
			res.Bad = append(res.Bad, BadFrame{Offset: pos, Unverified: s.end() - pos,
				Err: fmt.Errorf("%w: sealed segment %d at %d: %v; the rest of the segment cannot be checked", ErrCorrupt, s.base, pos, status)})
			pos = s.end()
		}
	}
	res.Bytes += pos - start
	return pos
}
