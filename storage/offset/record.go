package offset

import (
	"encoding/binary"
	"fmt"

	"github.com/mqgate/mqgate/internal/wire"
)

// Kind is the kind of a record entry. Part of the on-disk format.
type Kind uint8

// Entry kinds.
const (
	// KindAck acknowledges offsets.
	KindAck Kind = 1
	// KindCommit sets the committed offset (a client commit or a reset):
	// everything at or above it is to be consumed again, so acknowledged
	// offsets above it are forgotten. It starts a new generation.
	KindCommit Kind = 2
	// KindAdvance raises the committed offset to at least Offset (retention
	// deleted what lay below), keeping the acknowledgements above it.
	KindAdvance Kind = 3
	// KindFailed marks offsets done because their delivery failed and a
	// retry or dead-letter copy took over (an ack for the group, but a late
	// ack of the failed delivery's receipt is refused as expired).
	KindFailed Kind = 4
	// KindForget ends every key of Key.Group (the group was deleted): its
	// committed offsets, acknowledgements and generations are dropped, so
	// a group re-created under the name starts afresh, also when the
	// records are replayed after a restart. A group's forget ends the keys
	// of its consumer instances ("<group>@<client id>") too; an instance's
	// forget (it was idle too long) ends only that instance's (Forgets).
	// Key.Topic is empty, QueueID and Generation zero; the entry has no
	// payload.
	KindForget Kind = 5
)

const (
	recordVersion = 1
	maxEntries    = 1<<16 - 1
	maxName       = 255
)

// Entry is one change to one key.
type Entry struct {
	Kind       Kind
	Key        Key
	Generation uint32
	Offsets    []int64 // KindAck
	Offset     int64   // KindCommit
}

// Record is the body of one system-topic message.
type Record struct{ Entries []Entry }

// EncodeRecord encodes r.
func EncodeRecord(r Record) ([]byte, error) {
	if len(r.Entries) > maxEntries {
		return nil, errTooMany
	}
	size := 3
	for _, e := range r.Entries {
		if len(e.Key.Group) > maxName || len(e.Key.Topic) > maxName {
			return nil, ErrTooLong
		}
		size += 1 + 1 + len(e.Key.Group) + 1 + len(e.Key.Topic) + 4 + 4
		switch e.Kind {
		case KindAck, KindFailed:
			if len(e.Offsets) > maxEntries {
				return nil, errTooMany
			}
			size += 2 + 8*len(e.Offsets)
		case KindCommit, KindAdvance:
			if e.Offset < 0 {
				return nil, errBadOffset
			}
			size += 8
		case KindForget:
			if e.Key.Topic != "" || e.Key.QueueID != 0 || e.Generation != 0 || e.Key.Group == "" {
				return nil, fmt.Errorf("%w: a forget entry names a group only", ErrCorrupt)
			}
		default:
			return nil, fmt.Errorf("%w: kind %d", ErrCorrupt, e.Kind)
		}
	}
	b := make([]byte, 0, size)
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Entries)))
	for _, e := range r.Entries {
		b = append(b, byte(e.Kind), byte(len(e.Key.Group)))
		b = append(b, e.Key.Group...)
		b = append(b, byte(len(e.Key.Topic)))
		b = append(b, e.Key.Topic...)
		b = binary.BigEndian.AppendUint32(b, uint32(e.Key.QueueID))
		b = binary.BigEndian.AppendUint32(b, e.Generation)
		switch e.Kind {
		case KindAck, KindFailed:
			b = binary.BigEndian.AppendUint16(b, uint16(len(e.Offsets)))
			for _, off := range e.Offsets {
				b = binary.BigEndian.AppendUint64(b, uint64(off))
			}
		case KindCommit, KindAdvance:
			b = binary.BigEndian.AppendUint64(b, uint64(e.Offset))
		}
	}
	return b, nil
}

// DecodeRecord decodes a record body. It never panics and returns
// ErrCorrupt for anything EncodeRecord would not produce.
func DecodeRecord(b []byte) (Record, error) {
	r := &wire.Reader{B: b}
	if v := r.U8(); v != recordVersion {
		return Record{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	n := int(r.U16())
	if r.Bad || n > len(r.B)/11 { // the smallest entry (a forget of a one-byte group) is 11 bytes
		return Record{}, fmt.Errorf("%w: entry count %d", ErrCorrupt, n)
	}
	rec := Record{Entries: make([]Entry, 0, n)}
	for i := 0; i < n; i++ {
		var e Entry
		e.Kind = Kind(r.U8())
		e.Key.Group = string(r.Take(int(r.U8())))
		e.Key.Topic = string(r.Take(int(r.U8())))
		e.Key.QueueID = int32(r.U32())
		e.Generation = r.U32()
		switch e.Kind {
		case KindAck, KindFailed:
			m := int(r.U16())
			if r.Bad || m*8 > len(r.B) {
				return Record{}, fmt.Errorf("%w: entry %d", ErrCorrupt, i)
			}
			e.Offsets = make([]int64, m)
			for j := range e.Offsets {
				e.Offsets[j] = int64(r.U64())
			}
		case KindCommit, KindAdvance:
			e.Offset = int64(r.U64())
			if e.Offset < 0 {
				r.Bad = true
			}
		case KindForget:
			if e.Key.Group == "" || e.Key.Topic != "" || e.Key.QueueID != 0 || e.Generation != 0 {
				r.Bad = true
			}
		default:
			r.Bad = true
		}
		if r.Bad {
			return Record{}, fmt.Errorf("%w: entry %d", ErrCorrupt, i)
		}
		rec.Entries = append(rec.Entries, e)
	}
	if len(r.B) != 0 {
		return Record{}, fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(r.B))
	}
	return rec, nil
}
