package consumequeue

import (
	"encoding/binary"
	"fmt"
)

// Entry layout. Part of the on-disk format; never change (see doc.go).
const (
	// EntrySize is the width of one entry in bytes.
	EntrySize = 20

	entryCommitLogOffset = 0  // int64
	entrySize            = 8  // int32
	entryTagsCode        = 12 // int64
)

// Entry is one ConsumeQueue entry: where the message with this queue offset
// sits in the CommitLog, how big its record is and its tag hash (or due time
// for SCHEDULE_TOPIC_XXXX).
type Entry struct {
	// CommitLogOffset is the physical offset of the record.
	CommitLogOffset int64
	// Size is the size of the record in bytes; 0 marks an empty entry.
	Size int32
	// TagsCode is the tag hash, or the due time in unix milliseconds for
	// the schedule topic.
	TagsCode int64
}

// IsEmpty reports whether e is an empty (never written or zeroed) entry.
func (e Entry) IsEmpty() bool { return e.Size == 0 }

// valid reports whether e could describe a record.
func (e Entry) valid() bool { return e.Size > 0 && e.CommitLogOffset >= 0 }

// Encode writes e's 20 bytes into dst[:EntrySize].
func (e Entry) Encode(dst []byte) {
	_ = dst[EntrySize-1]
	binary.BigEndian.PutUint64(dst[entryCommitLogOffset:], uint64(e.CommitLogOffset))
	binary.BigEndian.PutUint32(dst[entrySize:], uint32(e.Size))
	binary.BigEndian.PutUint64(dst[entryTagsCode:], uint64(e.TagsCode))
}

// decodeEntry reads an entry from b, which holds at least EntrySize bytes.
func decodeEntry(b []byte) Entry {
	_ = b[EntrySize-1]
	return Entry{
		CommitLogOffset: int64(binary.BigEndian.Uint64(b[entryCommitLogOffset:])),
		Size:            int32(binary.BigEndian.Uint32(b[entrySize:])),
		TagsCode:        int64(binary.BigEndian.Uint64(b[entryTagsCode:])),
	}
}

// DecodeEntry decodes the first EntrySize bytes of b. It returns
// ErrCorrupt when b is shorter than EntrySize or holds an invalid entry
// (negative size or commit log offset); an empty entry (size 0) decodes
// without error, and IsEmpty reports it.
func DecodeEntry(b []byte) (Entry, error) {
	if len(b) < EntrySize {
		return Entry{}, fmt.Errorf("%w: entry of %d bytes, want %d", ErrCorrupt, len(b), EntrySize)
	}
	e := decodeEntry(b)
	if !e.IsEmpty() && !e.valid() {
		return Entry{}, fmt.Errorf("%w: entry %+v", ErrCorrupt, e)
	}
	return e, nil
}
