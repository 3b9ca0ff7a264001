package storage

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/internal/vfs"
	"github.com/mqgate/mqgate/storage/message"
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
	// QueueEntriesPerFile is the ConsumeQueue file size in entries. Default
	// 300 000 (6 MB sparse files whose blocks are reserved as they fill: a
	// queue with one message costs 4 KiB).
	QueueEntriesPerFile int
	// IndexSlots and IndexEntries size a full index file (files roll when
	// full). Defaults 1 000 000 and 4 000 000: 84 MB per file, a fifth of
	// RocketMQ's 420 MB. The first file is 1/64 of that (1.3 MB) and each
	// roll grows the next one fourfold, so small deployments stay small.
	IndexSlots, IndexEntries int
	// StoreID is the id a store that has never written takes (see "Store
	// id" in doc.go); zero picks a random one. A store whose log holds
	// records keeps the id they carry.
	StoreID message.Host
	// StartOffset is where the CommitLog of a store that has none yet
	// begins (its first segment's base): a replica that starts from a copy
	// of another's log after retention deleted its beginning (package
	// shard's copies) starts there, as that log does. Ignored once the
	// store holds segments.
	StartOffset int64
	// HoldDispatch makes the dispatcher go no further than a limit its
	// owner sets (SetDispatchLimit; DispatchLimit until then), at Open and
	// Close too: a replica's ConsumeQueues then follow the Raft commit
	// point, and the log above it may still be cut (TruncateFrom).
	HoldDispatch bool
	// DispatchLimit is the first limit of HoldDispatch (a CommitLog
	// offset).
	DispatchLimit int64
	// Replicated makes the store a replica of a Raft group whose writers
	// append only while it leads (replicate.go): it opens fenced, and a
	// write that waits is answered once the commit point (the dispatch
	// limit) passed it. It implies HoldDispatch.
	Replicated bool
	// CheckpointInterval is how often derived files are flushed and the
	// checkpoint rewritten. Default 1 s.
	CheckpointInterval time.Duration
	// FileReservedTime is the retention window for CommitLog segments
	// (RocketMQ fileReservedTime): a segment last written longer ago is
	// deleted, consumed or not (the RetentionPolicy's Keep and Retained
	// floors hold it back). Default 72 h.
	FileReservedTime time.Duration
	// AwaitRetentionPolicy keeps retention from deleting anything until
	// SetRetentionPolicy is called. An owner that carries records past
	// retention (the broker: dead letters, timers, its registry) sets it,
	// so that no pass runs while it is still opening and could not carry
	// them. Without it a pass with no policy deletes by time alone.
	AwaitRetentionPolicy bool
	// DiskMaxUsedRatio is the used fraction of the file system above which
	// retention deletes segments before their time: the oldest one per
	// pass, and only when every consumer has consumed it (the policy's
	// Unconsumed floor) unless DiskPressureDelete. Default 0.75; 1 turns
	// early deletion off.
	DiskMaxUsedRatio float64
	// DiskPressureDelete is RocketMQ's behaviour at diskMaxUsedSpaceRatio:
	// above DiskMaxUsedRatio the oldest segment goes even when consumers
	// have not consumed it (the policy counts what they lose). Default
	// off: disk pressure never deletes an unconsumed message.
	DiskPressureDelete bool
	// DiskSendCeiling is the used fraction above which ClassSend appends
	// (Put, PutBatch: producers' messages) are refused with ErrDiskFull.
	// Default 0.85.
	DiskSendCeiling float64
	// DiskSystemCeiling is the used fraction above which ClassSystem
	// appends (acks, offset commits, retry and dead-letter copies, status
	// records, scheduled deliveries) are refused too; the room between the
	// two ceilings is their reserved headroom. ClassReclaim appends are
	// never refused by a ceiling. The used fraction it is held against
	// counts the CommitLog's room allocated ahead (DiskSystemReserve and
	// the active segment's window) as free. Default 0.95; at least
	// DiskSendCeiling.
	DiskSystemCeiling float64
	// DiskSystemReserve is how many bytes of CommitLog room, allocated on
	// the file system ahead of need, producers' messages may not use: the
	// broker's own records (ClassSystem, ClassReclaim) keep it even when
	// the file system is full (see doc.go, "Disk space"). Default
	// commitlog.DefaultReserve (16 MiB), at most SegmentSize.
	DiskSystemReserve int64
	// DiskCheckInterval is how often the used fraction is sampled (statfs)
	// for the ceilings; each retention pass samples it too, and so does an
	// append once the CommitLog has grown by diskResampleBytes since the
	// last sample. Default 1 s.
	DiskCheckInterval time.Duration
	// DiskUsage reports the used fraction (0..1) of the file system holding
	// dir. Default: statfs, as df computes it. Tests replace it.
	DiskUsage func(dir string) (float64, error)
	// FS is the file system of every file of the store (the CommitLog,
	// ConsumeQueues, the index, the checkpoint, the queue table, the abort
	// marker and config/*) and of its user's files written through the
	// store (WriteMeta, FS). Default the operating system's; tests wrap it
	// to inject errors (vfs.NewErrorFS) or to record crash images
	// (vfs.NewFaultFS, storagetest.CrashRecorder).
	FS vfs.FS
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
	// failing (data after the bad record is quarantined, not kept). No flag
	// exposes it: `mqgate repair` (Repair) is the operator's way, which
	// keeps the intact data after the damage too.
	AllowCorrupt bool
	// Logger receives structured logs. Default zerolog.Nop().
	Logger zerolog.Logger
	// Clock stamps StoreTimestamp (default the wall clock). Durations the
	// store only reports or logs are measured on the wall clock.
	Clock clockwork.Clock
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
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
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
	if o.DiskSendCeiling == 0 {
		o.DiskSendCeiling = DefaultDiskSendCeiling
	}
	if o.DiskSystemCeiling == 0 {
		o.DiskSystemCeiling = max(DefaultDiskSystemCeiling, o.DiskSendCeiling)
	}
	if o.DiskCheckInterval == 0 {
		o.DiskCheckInterval = time.Second
	}
	if o.DiskUsage == nil {
		o.DiskUsage = fileutil.DiskUsage
	}
	if o.FS == nil {
		o.FS = vfs.OS()
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
	case o.DiskSendCeiling <= 0 || o.DiskSendCeiling > 1:
		return fmt.Errorf("storage: disk send ceiling %.2f is not in (0,1]", o.DiskSendCeiling)
	case o.DiskSystemCeiling < o.DiskSendCeiling || o.DiskSystemCeiling > 1:
		return fmt.Errorf("storage: disk system ceiling %.2f is not in [send ceiling %.2f, 1]", o.DiskSystemCeiling, o.DiskSendCeiling)
	case o.DiskSystemReserve < 0:
		return fmt.Errorf("storage: negative disk system reserve %d", o.DiskSystemReserve)
	case o.DiskCheckInterval < 0 || o.RetentionInterval < 0 || o.FileReservedTime < 0:
		return fmt.Errorf("storage: negative disk check interval, retention interval or file reserved time")
	case o.ScrubInterval < 0:
		return fmt.Errorf("storage: negative scrub interval %v", o.ScrubInterval)
	}
	return nil
}

// Default disk ceilings (see Options).
const (
	DefaultDiskSendCeiling   = 0.85
	DefaultDiskSystemCeiling = 0.95
)

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
