package index

import (
	"fmt"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Defaults and limits.
const (
	// DefaultSlotCount is the number of hash slots of a new file (RocketMQ's
	// maxHashSlotNum).
	DefaultSlotCount = 5_000_000
	// DefaultEntryCount is the number of entries of a new file (RocketMQ's
	// maxIndexNum). With DefaultSlotCount a file is 420 001 024 bytes.
	DefaultEntryCount = 20_000_000
	// MaxSlotCount is the largest SlotCount accepted (and found in a header).
	MaxSlotCount = 1 << 30
	// MaxEntryCount is the largest EntryCount accepted (and found in a
	// header).
	MaxEntryCount = 1 << 30
	// MaxKeyLength is the longest key Add and Lookup accept, in bytes.
	MaxKeyLength = 1 << 16
	// DefaultLookupMax is the number of candidates Lookup returns when
	// called with max <= 0 (RocketMQ's defaultQueryMaxNum).
	DefaultLookupMax = 32
)

// Options configure an Index. Zero values take the documented defaults.
type Options struct {
	// Dir holds the index files. It is created if missing. The caller (the
	// store) holds the lock on its data directory; two Index values must
	// never use one Dir.
	Dir string
	// SlotCount is the number of hash slots (4 bytes each) of a new file.
	// Default DefaultSlotCount. Existing files keep the geometry in their
	// header.
	SlotCount int
	// EntryCount is the number of entries (EntrySize bytes each) of a new
	// file; a full file rolls to a new one. Default DefaultEntryCount.
	EntryCount int
	// Logger receives recovery, roll and corruption events; it is tagged
	// component=index. The zero Logger discards everything.
	Logger zerolog.Logger
	// FS is the file system; nil means vfs.OS(). Tests inject errors with
	// vfs.NewErrorFS.
	FS vfs.FS
}

func (o Options) withDefaults() Options {
	if o.SlotCount == 0 {
		o.SlotCount = DefaultSlotCount
	}
	if o.EntryCount == 0 {
		o.EntryCount = DefaultEntryCount
	}
	if o.FS == nil {
		o.FS = vfs.OS()
	}
	return o
}

// Validate reports the first invalid field, wrapping ErrInvalidArgument.
// Zero values are valid (they become defaults).
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Dir == "":
		return fmt.Errorf("%w: Dir is empty", ErrInvalidArgument)
	case o.SlotCount < 1 || o.SlotCount > MaxSlotCount:
		return fmt.Errorf("%w: SlotCount %d (want 1..%d)", ErrInvalidArgument, o.SlotCount, MaxSlotCount)
	case o.EntryCount < 1 || o.EntryCount > MaxEntryCount:
		return fmt.Errorf("%w: EntryCount %d (want 1..%d)", ErrInvalidArgument, o.EntryCount, MaxEntryCount)
	}
	return nil
}
