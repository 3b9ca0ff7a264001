package commitlog

import (
	"errors"
	"fmt"
)

// Sentinel errors. Returned errors wrap them with context; classify with
// errors.Is.
var (
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("commitlog: closed")
	// ErrReadOnly is returned by appends once the write path is dead: a
	// flush failed (fsyncgate: never retried; a failed segment creation is
	// ErrNoSpace instead). Err reports the cause; a restart re-reads the
	// log from disk.
	ErrReadOnly = errors.New("commitlog: read-only after a write failure")
	// ErrNoSpace is returned by an append that needs room the file system
	// cannot give: blocks past the allocated ones in its segment, or a new
	// segment (fallocate failing with ENOSPC, typically; any error
	// creating a segment counts), or, for a KeepReserve append, the
	// reserve that must stay after it (see "Disk space" in doc.go).
	// Nothing of the append was written: the whole append, or batch, is
	// refused before its first byte, and the write path stays alive. The
	// next append that needs the room tries again, so appends resume by
	// themselves once space returns.
	ErrNoSpace = errors.New("commitlog: no space on the file system")
	// ErrRecordTooLarge is returned when a frame (payload + HeaderSize)
	// cannot be placed in an empty segment: it is larger than SegmentSize,
	// or would leave 1..HeaderSize-1 bytes of it.
	ErrRecordTooLarge = errors.New("commitlog: record too large for segment")
	// ErrOffsetTooSmall is returned for an offset below MinOffset (its
	// segment was deleted by retention).
	ErrOffsetTooSmall = errors.New("commitlog: offset below the oldest retained segment")
	// ErrNoData is returned for an offset at or after Written.
	ErrNoData = errors.New("commitlog: no data at offset")
	// ErrEndOfSegment is returned by Read at a Blank frame: the
	// next record starts at the next segment's base.
	ErrEndOfSegment = errors.New("commitlog: end of segment")
	// ErrCorrupt is returned by Open for an invalid frame below HighWater,
	// and by Read and Next for a frame that fails validation (or an offset
	// that is not a frame start).
	ErrCorrupt = errors.New("commitlog: corrupt frame")
	// ErrChecksum (which wraps ErrCorrupt) is returned by Read and Next
	// for a record frame whose header (size, magic, stored offset) is
	// intact but whose CRC-32C does not match: its bytes were damaged
	// after they were written, and its length is known, so readers can
	// pass over it.
	ErrChecksum = fmt.Errorf("%w: CRC-32C mismatch", ErrCorrupt)
	// ErrFault is reported by Scrub when reading a segment's mapping
	// faulted (SIGBUS): the device returned an I/O error for the page, or
	// the file was truncated behind the log's back.
	ErrFault = errors.New("commitlog: fault reading a segment")
	// ErrInvalidArgument is returned for invalid Options or arguments.
	ErrInvalidArgument = errors.New("commitlog: invalid argument")
)
