package storage

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage/commitlog"
)

// Options configures a Store. Zero values take the defaults documented on
// each field; Validate reports what cannot work.
type Options struct {
	// Dir is the data directory. Required.
	Dir string
	// SegmentSize is the CommitLog segment size in bytes. Default 1 GiB.
	SegmentSize int64
	// FlushMode is commitlog.FlushSync (default) or commitlog.FlushAsync.
	FlushMode commitlog.FlushMode
	// FlushInterval is the async flush period. Default 500 ms.
	FlushInterval time.Duration
	// MaxMessageSize caps one message's encoded payload in bytes. Default 4 MiB.
	MaxMessageSize int
	// QueueEntriesPerFile is the ConsumeQueue file size in entries. Default 300 000.
	QueueEntriesPerFile int
	// IndexSlots and IndexEntries size each index file (files roll when
	// full). Defaults 1 000 000 and 4 000 000: 84 MB per file, a fifth of
	// RocketMQ's 420 MB, so small deployments and tests stay small.
	IndexSlots, IndexEntries int
	// StoreHost goes into every message id. Default 127.0.0.1:8080.
	StoreHost netip.AddrPort
	// CheckpointInterval is how often derived files are flushed and the
	// checkpoint rewritten. Default 1 s.
	CheckpointInterval time.Duration
	// FileReservedTime is the retention window for CommitLog segments
	// (RocketMQ fileReservedTime). Default 72 h.
	FileReservedTime time.Duration
	// DiskMaxUsedRatio is the disk-usage fraction above which the oldest
	// segments are deleted early, and above which (plus 10 points, capped at
	// 0.95) sends are refused with ErrDiskFull. Default 0.75.
	DiskMaxUsedRatio float64
	// RetentionInterval is how often the cleaner runs. Default 10 s.
	RetentionInterval time.Duration
	// ScrubRate is how many bytes per second the background scrubber
	// verifies: it re-reads the sealed CommitLog segments and checks every
	// frame's CRC, quarantining what is damaged (stage "scrub"). Default
	// DefaultScrubRate (16 MiB/s); negative disables the scrubber.
	ScrubRate int64
	// ScrubInterval is the least time between the starts of two full
	// scrub passes; a pass that takes longer is followed by the next at
	// once. Default DefaultScrubInterval (24 h).
	ScrubInterval time.Duration
	// AllowCorrupt lets Open truncate at mid-log corruption instead of
	// failing (operator override; data after the bad record is quarantined).
	AllowCorrupt bool
	// Logger receives structured logs. Default zerolog.Nop().
	Logger zerolog.Logger
}

func (o Options) withDefaults() Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = 1 << 30
	}
	if o.FlushInterval == 0 {
		o.FlushInterval = 500 * time.Millisecond
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 4 << 20
	}
	if o.QueueEntriesPerFile == 0 {
		o.QueueEntriesPerFile = 300_000
	}
	if o.IndexSlots == 0 {
		o.IndexSlots = 1_000_000
	}
	if o.IndexEntries == 0 {
		o.IndexEntries = 4_000_000
	}
	if !o.StoreHost.IsValid() {
		o.StoreHost = netip.MustParseAddrPort("127.0.0.1:8080")
	}
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = time.Second
	}
	if o.FileReservedTime == 0 {
		o.FileReservedTime = 72 * time.Hour
	}
	if o.DiskMaxUsedRatio == 0 {
		o.DiskMaxUsedRatio = 0.75
	}
	if o.RetentionInterval == 0 {
		o.RetentionInterval = 10 * time.Second
	}
	if o.ScrubRate == 0 {
		o.ScrubRate = DefaultScrubRate
	}
	if o.ScrubInterval == 0 {
		o.ScrubInterval = DefaultScrubInterval
	}
	return o
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Dir == "":
		return fmt.Errorf("storage: Options.Dir is required")
	case o.SegmentSize < 4096:
		return fmt.Errorf("storage: segment size %d is below 4 KiB", o.SegmentSize)
	case int64(o.MaxMessageSize)+commitlog.HeaderSize > o.SegmentSize:
		return fmt.Errorf("storage: max message size %d does not fit a %d-byte segment", o.MaxMessageSize, o.SegmentSize)
	case o.DiskMaxUsedRatio <= 0 || o.DiskMaxUsedRatio > 1:
		return fmt.Errorf("storage: disk max used ratio %.2f is not in (0,1]", o.DiskMaxUsedRatio)
	case o.ScrubInterval < 0:
		return fmt.Errorf("storage: negative scrub interval %v", o.ScrubInterval)
	case !o.StoreHost.Addr().Is4():
		return fmt.Errorf("storage: store host %s is not IPv4", o.StoreHost)
	}
	return nil
}

// FlushMode is the CommitLog flush policy (commitlog.FlushSync or FlushAsync).
type FlushMode = commitlog.FlushMode

// Flush modes.
const (
	FlushSync  = commitlog.FlushSync
	FlushAsync = commitlog.FlushAsync
)

// ParseFlushMode parses "sync" or "async".
func ParseFlushMode(s string) (FlushMode, error) { return commitlog.ParseFlushMode(s) }

// MaxSegmentSize is the largest CommitLog segment size.
const MaxSegmentSize = commitlog.MaxSegmentSize
