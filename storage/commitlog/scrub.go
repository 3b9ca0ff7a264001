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
	// Done is set when Next reached the durable end of the log (the
	// flushed offset): every frame from From up to it has been verified.
	// A new pass starts at MinOffset.
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

// Scrub verifies the frames of the log from from, a frame boundary (a
// segment base, or the Next of an earlier call), for about budget bytes:
// whole frames, at least one. It covers the sealed segments and the
// durable part of the active one (below Flushed). It is the background
// scrubber's step (see "Scrubbing" in the package documentation); it
// never modifies the log. A damaged header makes it report the frame and
// continue at the next segment's base; a fault while reading the mapping
// (SIGBUS: an I/O error of the device, or a file truncated behind the
// log's back) is reported the same way instead of crashing the process.
// Only ErrClosed is returned as an error.
func (l *Log) Scrub(from, budget int64) (ScrubResult, error) {
	// A fault reading a mapped page panics in this goroutine instead of
	// killing the process; scrubSegment recovers it.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	res := ScrubResult{From: max(from, l.minOffset.Load())}
	pos := res.From
	for {
		s, limit, active, err := l.scrubTarget(pos)
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
		if pos < limit {
			pos = l.scrubSegment(s, pos, limit, budget-res.Bytes, &res)
		}
		if pos >= limit && !active && res.Bytes < budget {
			continue
		}
		res.Next = pos
		if active && pos >= limit {
			res.Done = true
		}
		return res, nil
	}
}

// scrubTarget returns the segment holding pos (or the first one after pos,
// when retention deleted pos's), unpinned, with the offset to verify it up
// to: its end when it is sealed, the flushed offset when it is the active
// segment (active set). nil when pos is past the durable data.
func (l *Log) scrubTarget(pos int64) (s *segment, limit int64, active bool, err error) {
	flushed := l.flushed.Load() // before the segments: a roll after this only adds sealed data
	l.segMu.RLock()
	defer l.segMu.RUnlock()
	segs := l.segments
	if len(segs) == 0 {
		return nil, 0, false, ErrClosed
	}
	for i, s := range segs {
		if pos >= s.end() {
			continue
		}
		if i == len(segs)-1 {
			if pos >= flushed {
				return nil, 0, true, nil
			}
			return s, min(flushed, s.end()), true, nil
		}
		if s.end() > flushed { // sealed, but its end is not flushed yet
			if pos >= flushed {
				return nil, 0, true, nil
			}
			return s, flushed, true, nil
		}
		return s, s.end(), false, nil
	}
	return nil, 0, true, nil
}

// scrubSegment verifies frames of s from pos until budget bytes are
// examined or limit (the segment's end, or the durable end of the active
// segment) is reached, appending what is wrong to res, and returns where
// it stopped. A segment released meanwhile (retention) is passed over.
func (l *Log) scrubSegment(s *segment, pos, limit, budget int64, res *ScrubResult) (next int64) {
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
			res.Bad = append(res.Bad, BadFrame{Offset: pos, Unverified: limit - pos,
				Err: fmt.Errorf("%w: reading segment %d at %d faulted (address %#x): %v", ErrFault, s.base, pos, fault.Addr(), r)})
			next = limit
			res.Bytes += next - start
		}
	}()
scan:
	for pos < limit && pos-start < max(budget, 1) {
		b := s.data[pos-s.base:]
		status, size := decodeFrame(b, pos)
		switch {
		case (status == frameRecord || status == frameBadCRC) && pos+int64(size) > limit:
			break scan // not durable yet (limit is always a frame boundary; never expected)
		case status == frameRecord && pos+int64(size) <= limit:
			pos += int64(size)
			res.Records++
		case status == frameBlank || (status == frameShort && firstNonZero(b) < 0):
			pos = limit
		case status == frameBadCRC && isRecordHeader(b) && pos+int64(size) <= limit:
			res.Bad = append(res.Bad, BadFrame{Offset: pos, Size: int32(size), Err: checksumError(b[:size], pos)})
			pos += int64(size)
		default:
			res.Bad = append(res.Bad, BadFrame{Offset: pos, Unverified: limit - pos,
				Err: fmt.Errorf("%w: segment %d at %d: %v; the rest of the segment cannot be checked", ErrCorrupt, s.base, pos, status)})
			pos = limit
		}
	}
	res.Bytes += pos - start
	return pos
}
