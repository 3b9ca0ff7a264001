package index

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
)

// On-disk format constants (see the package documentation).
const (
	// Magic starts every header copy: "MQIX". Part of the on-disk format;
	// never change.
	Magic uint32 = 0x4D514958
	// Version is the header version this package writes and reads. Part of
	// the on-disk format; never change (add a new version instead).
	Version uint16 = 1
	// HeaderSize is the length of one header copy, CRC included. Part of the
	// on-disk format; never change.
	HeaderSize = 84
	// HeaderCopyOffset is where header copy B starts (copy A is at 0). Part
	// of the on-disk format; never change.
	HeaderCopyOffset = 512
	// HeaderRegionSize is the length of the header region that precedes the
	// slot table. Part of the on-disk format; never change.
	HeaderRegionSize = 1024
	// SlotSize is the width of one slot (a uint32 entry number). Part of the
	// on-disk format; never change.
	SlotSize = 4
	// EntrySize is the width of one entry. Part of the on-disk format; never
	// change.
	EntrySize = 20

	// FlagClean marks a header whose slot table matches its entries exactly.
	// Part of the on-disk format; never change.
	FlagClean uint16 = 1 << 0
	// FlagSealed marks a finished file that is never written again. Part of
	// the on-disk format; never change.
	FlagSealed uint16 = 1 << 1

	knownFlags = FlagClean | FlagSealed
)

// Header field offsets within one copy. Part of the on-disk format; never
// change.
const (
	offMagic      = 0
	offVersion    = 4
	offFlags      = 6
	offSlotCount  = 8
	offCapacity   = 12
	offGeneration = 16
	offBaseTS     = 24
	offBeginTS    = 32
	offEndTS      = 40
	offBeginPhy   = 48
	offEndPhy     = 56
	offIndexedPhy = 64
	offSlotsUsed  = 72
	offEntryCount = 76
	offHeaderCRC  = 80
)

// Entry field offsets. Part of the on-disk format; never change.
const (
	entOffHash = 0
	entOffPhy  = 4
	entOffDiff = 12
	entOffPrev = 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// keyHash is the hash stored in entries: CRC-32C of the key, never 0.
func keyHash(key []byte) uint32 {
	h := crc32.Checksum(key, castagnoli)
	if h == 0 {
		h = 1
	}
	return h
}

// header is the decoded form of one header copy.
type header struct {
	flags      uint16
	slotCount  uint32
	capacity   uint32
	generation uint64
	baseTS     int64
	beginTS    int64
	endTS      int64
	beginPhy   int64
	endPhy     int64
	indexedPhy int64
	slotsUsed  uint32
	entryCount uint32
}

func (h *header) clean() bool  { return h.flags&FlagClean != 0 }
func (h *header) sealed() bool { return h.flags&FlagSealed != 0 }

// encode writes h as one header copy into b[:HeaderSize].
func (h *header) encode(b []byte) {
	_ = b[HeaderSize-1]
	binary.BigEndian.PutUint32(b[offMagic:], Magic)
	binary.BigEndian.PutUint16(b[offVersion:], Version)
	binary.BigEndian.PutUint16(b[offFlags:], h.flags)
	binary.BigEndian.PutUint32(b[offSlotCount:], h.slotCount)
	binary.BigEndian.PutUint32(b[offCapacity:], h.capacity)
	binary.BigEndian.PutUint64(b[offGeneration:], h.generation)
	binary.BigEndian.PutUint64(b[offBaseTS:], uint64(h.baseTS))
	binary.BigEndian.PutUint64(b[offBeginTS:], uint64(h.beginTS))
	binary.BigEndian.PutUint64(b[offEndTS:], uint64(h.endTS))
	binary.BigEndian.PutUint64(b[offBeginPhy:], uint64(h.beginPhy))
	binary.BigEndian.PutUint64(b[offEndPhy:], uint64(h.endPhy))
	binary.BigEndian.PutUint64(b[offIndexedPhy:], uint64(h.indexedPhy))
	binary.BigEndian.PutUint32(b[offSlotsUsed:], h.slotsUsed)
	binary.BigEndian.PutUint32(b[offEntryCount:], h.entryCount)
	binary.BigEndian.PutUint32(b[offHeaderCRC:], crc32.Checksum(b[:offHeaderCRC], castagnoli))
}

// decodeHeader decodes and checks one header copy. It never panics: short
// input, a bad magic, version or CRC, unknown flags and inconsistent fields
// all return an error wrapping ErrCorrupt.
func decodeHeader(b []byte) (header, error) {
	var h header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: header copy is %d bytes, want %d", ErrCorrupt, len(b), HeaderSize)
	}
	if m := binary.BigEndian.Uint32(b[offMagic:]); m != Magic {
		return h, fmt.Errorf("%w: bad magic %#x", ErrCorrupt, m)
	}
	if want, got := crc32.Checksum(b[:offHeaderCRC], castagnoli), binary.BigEndian.Uint32(b[offHeaderCRC:]); want != got {
		return h, fmt.Errorf("%w: header crc %#x, computed %#x", ErrCorrupt, got, want)
	}
	if v := binary.BigEndian.Uint16(b[offVersion:]); v != Version {
		return h, fmt.Errorf("%w: unsupported version %d", ErrCorrupt, v)
	}
	h = header{
		flags:      binary.BigEndian.Uint16(b[offFlags:]),
		slotCount:  binary.BigEndian.Uint32(b[offSlotCount:]),
		capacity:   binary.BigEndian.Uint32(b[offCapacity:]),
		generation: binary.BigEndian.Uint64(b[offGeneration:]),
		baseTS:     int64(binary.BigEndian.Uint64(b[offBaseTS:])),
		beginTS:    int64(binary.BigEndian.Uint64(b[offBeginTS:])),
		endTS:      int64(binary.BigEndian.Uint64(b[offEndTS:])),
		beginPhy:   int64(binary.BigEndian.Uint64(b[offBeginPhy:])),
		endPhy:     int64(binary.BigEndian.Uint64(b[offEndPhy:])),
		indexedPhy: int64(binary.BigEndian.Uint64(b[offIndexedPhy:])),
		slotsUsed:  binary.BigEndian.Uint32(b[offSlotsUsed:]),
		entryCount: binary.BigEndian.Uint32(b[offEntryCount:]),
	}
	if err := h.check(); err != nil {
		return header{}, err
	}
	return h, nil
}

// check validates the relations between header fields.
func (h *header) check() error {
	switch {
	case h.flags&^knownFlags != 0:
		return fmt.Errorf("%w: unknown header flags %#x", ErrCorrupt, h.flags)
	case h.slotCount < 1 || h.slotCount > MaxSlotCount:
		return fmt.Errorf("%w: slot count %d", ErrCorrupt, h.slotCount)
	case h.capacity < 1 || h.capacity > MaxEntryCount:
		return fmt.Errorf("%w: entry capacity %d", ErrCorrupt, h.capacity)
	case h.entryCount > h.capacity:
		return fmt.Errorf("%w: entry count %d above capacity %d", ErrCorrupt, h.entryCount, h.capacity)
	case h.slotsUsed > h.slotCount || h.slotsUsed > h.entryCount:
		return fmt.Errorf("%w: %d slots used of %d with %d entries", ErrCorrupt, h.slotsUsed, h.slotCount, h.entryCount)
	case h.baseTS < 0:
		return fmt.Errorf("%w: base timestamp %d", ErrCorrupt, h.baseTS)
	case h.indexedPhy < -1:
		return fmt.Errorf("%w: indexed offset %d", ErrCorrupt, h.indexedPhy)
	}
	if h.entryCount == 0 {
		if h.beginPhy != -1 || h.endPhy != -1 {
			return fmt.Errorf("%w: empty file with offsets [%d,%d]", ErrCorrupt, h.beginPhy, h.endPhy)
		}
		return nil
	}
	if h.beginPhy < 0 || h.endPhy < h.beginPhy || h.endTS < h.beginTS {
		return fmt.Errorf("%w: offsets [%d,%d], timestamps [%d,%d]", ErrCorrupt, h.beginPhy, h.endPhy, h.beginTS, h.endTS)
	}
	return nil
}

// fileSize is the length of a file with this geometry.
func fileSize(slotCount, capacity uint32) int64 {
	return HeaderRegionSize + SlotSize*int64(slotCount) + EntrySize*int64(capacity)
}

// entry is the decoded form of one entry.
type entry struct {
	hash uint32
	phy  int64
	diff int32
	prev uint32
}

func encodeEntry(b []byte, e entry) {
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint32(b[entOffHash:], e.hash)
	binary.BigEndian.PutUint64(b[entOffPhy:], uint64(e.phy))
	binary.BigEndian.PutUint32(b[entOffDiff:], uint32(e.diff))
	binary.BigEndian.PutUint32(b[entOffPrev:], e.prev)
}

func decodeEntry(b []byte) entry {
	_ = b[EntrySize-1]
	return entry{
		hash: binary.BigEndian.Uint32(b[entOffHash:]),
		phy:  int64(binary.BigEndian.Uint64(b[entOffPhy:])),
		diff: int32(binary.BigEndian.Uint32(b[entOffDiff:])),
		prev: binary.BigEndian.Uint32(b[entOffPrev:]),
	}
}

// timeDiff returns ts-base when it fits an int32.
func timeDiff(ts, base int64) (int32, bool) {
	d := ts - base
	if d < math.MinInt32 || d > math.MaxInt32 {
		return 0, false
	}
	return int32(d), true
}

// fileName is the name of the file with this base timestamp.
func fileName(base int64) string { return fileutil.NumberedName(base) }

// parseFileName returns the base timestamp of an index file name.
func parseFileName(name string) (int64, bool) { return fileutil.ParseNumberedName(name) }
