package commitlog

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// FlushMode says when an append is durable.
type FlushMode int

const (
	// FlushSync makes Append return only after the fdatasync that covers the
	// record (group commit). This is the default.
	FlushSync FlushMode = iota
	// FlushAsync makes Append return once the record is in the file; a
	// background flush runs every FlushInterval, which is the loss window
	// after a machine crash.
	FlushAsync
)

// String is "sync" or "async".
func (m FlushMode) String() string {
	switch m {
	case FlushSync:
		return "sync"
	case FlushAsync:
		return "async"
	default:
		return fmt.Sprintf("FlushMode(%d)", int(m))
	}
}

// ParseFlushMode parses "sync" or "async" (case-insensitive).
func ParseFlushMode(s string) (FlushMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "sync":
		return FlushSync, nil
	case "async":
		return FlushAsync, nil
	default:
		return 0, fmt.Errorf("%w: flush mode %q (want sync or async)", ErrInvalidArgument, s)
	}
}

// Defaults and limits of Options.
const (
	// DefaultSegmentSize is the size of a new segment file: 1 GiB.
	DefaultSegmentSize int64 = 1 << 30
	// MinSegmentSize is the smallest SegmentSize accepted (tests use tiny
	// segments to force rolls).
	MinSegmentSize int64 = 4 * HeaderSize
	// MaxSegmentSize is the largest SegmentSize accepted: frame sizes
	// (including a Blank frame filling a segment) must fit the uint32 size
	// field and AppendResult's int32.
	MaxSegmentSize int64 = math.MaxInt32
	// DefaultFlushInterval is the FlushAsync flush period.
	DefaultFlushInterval = 500 * time.Millisecond
	// DefaultSlowFlush is the flush duration above which a warning is logged.
	DefaultSlowFlush = time.Second
	// DefaultReserve is how many bytes of room the log keeps allocated for
	// appends that may take the reserve (UseReserve: the broker's own
	// records) beyond what the others (KeepReserve: producers' messages)
	// may use; see "Disk space" in doc.go. At most SegmentSize.
	DefaultReserve int64 = 16 << 20
	// aheadMin and aheadMax bound the window of blocks allocated ahead of
	// the write position in the active segment: it grows with what the
	// segment holds (from 4 MiB for a fresh one to 64 MiB), so a fresh log
	// takes little disk and a busy one allocates in big steps.
	aheadMin int64 = 4 << 20
	aheadMax int64 = 64 << 20
	// DefaultZeroAhead is how far ahead of the last frame FlushSync keeps
	// the active segment's blocks written (with zeros) while flushes are
	// small (see "Writes" in doc.go).
	DefaultZeroAhead int64 = 1 << 20
	// zeroAheadMaxFlush: zeros are written ahead only while flushes cover
	// fewer bytes than this on average (the saving is per flush, the cost
	// per byte).
	zeroAheadMaxFlush = 64 << 10
)

// Range is a range of log offsets [From, To).
type Range struct{ From, To int64 }

// Options configures a Log. Zero values take the documented defaults.
type Options struct {
	// Dir is the segment directory; it is created if missing.
	Dir string
	// SegmentSize is the size of each new segment file in bytes. Default
	// DefaultSegmentSize; range [MinSegmentSize, MaxSegmentSize].
	SegmentSize int64
	// FlushMode is FlushSync (default) or FlushAsync.
	FlushMode FlushMode
	// FlushInterval is the FlushAsync flush period. Default 500 ms.
	FlushInterval time.Duration
	// SlowFlush is the flush duration above which a warning is logged.
	// Default 1 s.
	SlowFlush time.Duration
	// Reserve is how many bytes the log keeps allocated for appends that
	// may take the reserve (UseReserve) and that appends which keep it
	// (KeepReserve) may not use: the first Reserve bytes of the segment
	// after the active one exist, fallocate'd, before a KeepReserve append
	// is accepted. Default DefaultReserve; at most SegmentSize (a larger
	// value is lowered to it); negative is refused.
	Reserve int64
	// ZeroAhead is how many bytes past the last frame FlushSync keeps
	// written with zeros while flushes are small, so that the fdatasync of
	// a small flush does not also commit the conversion of fallocate'd
	// blocks. Default DefaultZeroAhead; negative turns it off.
	ZeroAhead int64
	// RecoverFrom is the log offset of a frame boundary known to be good (a
	// checkpoint), at or below the end of the data: the recovery scan starts
	// there and trusts everything before it without reading it. 0 scans
	// from the first segment. A RecoverFrom that does not hold a valid frame
	// (or lies past the last segment) falls back to a full scan.
	RecoverFrom int64
	// StartOffset is where a log that has no segment yet begins (the
	// base of its first segment). A replica that starts
	// from a copy of another's log after retention deleted its beginning
	// starts there. Ignored once segments exist.
	StartOffset int64
	// HighWater is the log offset below which data was durable (the
	// checkpointed flushed offset). An invalid frame below it is
	// corruption, not a torn tail.
	HighWater int64
	// AllowCorrupt cuts corruption below HighWater off like a torn tail
	// (and quarantined) instead of failing Open. The store's operators
	// repair instead (SurveyDir, PatchDir), which keeps what follows.
	AllowCorrupt bool
	// Lost lists, sorted, frames a repair gave up in place (a record frame
	// whose header is intact but whose CRC fails, followed by a valid
	// frame): recovery's scan passes over an invalid frame that starts a
	// range of Lost, to the range's end, instead of ending the log there.
	// Ranges that start elsewhere are ignored.
	Lost []Range
	// Logger receives the log's messages with component=commitlog. Default
	// zerolog.Nop().
	Logger zerolog.Logger
	// FS is the file system. Default vfs.OS(); tests wrap it to inject
	// errors.
	FS vfs.FS
}

// aheadFor is the window allocated ahead of the relative write position
// rel in the active segment.
func aheadFor(rel int64) int64 { return min(max(rel, aheadMin), aheadMax) }

// withDefaults returns o with zero values replaced by defaults.
func (o Options) withDefaults() Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.SlowFlush == 0 {
		o.SlowFlush = DefaultSlowFlush
	}
	if o.ZeroAhead == 0 {
		o.ZeroAhead = DefaultZeroAhead
	}
	if o.Reserve == 0 {
		o.Reserve = DefaultReserve
	}
	if o.SegmentSize > 0 && o.Reserve > o.SegmentSize {
		o.Reserve = o.SegmentSize
	}
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	// The zero zerolog.Logger is disabled, which is the documented Nop default.
	return o
}

// Validate reports the first invalid field of o (after defaults).
func (o Options) Validate() error { return o.withDefaults().validate() }

func (o Options) validate() error {
	switch {
	case o.Dir == "":
		return fmt.Errorf("%w: Dir is empty", ErrInvalidArgument)
	case o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize:
		return fmt.Errorf("%w: SegmentSize %d outside [%d, %d]", ErrInvalidArgument, o.SegmentSize, MinSegmentSize, MaxSegmentSize)
	case o.FlushMode != FlushSync && o.FlushMode != FlushAsync:
		return fmt.Errorf("%w: %v", ErrInvalidArgument, o.FlushMode)
	case o.Reserve < 0:
		return fmt.Errorf("%w: negative Reserve %d", ErrInvalidArgument, o.Reserve)
	case o.FlushInterval < 0:
		return fmt.Errorf("%w: negative FlushInterval %v", ErrInvalidArgument, o.FlushInterval)
	case o.StartOffset < 0:
		return fmt.Errorf("%w: negative StartOffset %d", ErrInvalidArgument, o.StartOffset)
	case o.RecoverFrom < 0 || o.HighWater < 0:
		return fmt.Errorf("%w: negative RecoverFrom %d or HighWater %d", ErrInvalidArgument, o.RecoverFrom, o.HighWater)
	}
	return nil
}
