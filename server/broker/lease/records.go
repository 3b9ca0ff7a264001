package lease

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/internal/wire"
)

// Topic carries the lease records (queue 0).
const Topic = "rmq_sys_LEASE"

// RetryQueueID is the queue id of a (group, topic)'s view of the group's
// retry topic (server/broker's retryQueueID): the lowest a record names.
const RetryQueueID = -1

// State is what a lease item says of its offset. Part of the on-disk
// format.
type State uint8

const (
	// Held: leased until the deadline.
	Held State = 1
	// Waiting: an ordered message failed in place, offered again at the
	// deadline.
	Waiting State = 2
	// Released: made visible again (a lease changed to 0); no lease.
	Released State = 3
)

// Key is the progress key a lease entry names: storage/offset's Key,
// field for field (the broker converts one into the other).
type Key struct {
	Group   string
	Topic   string
	QueueID int32 // RetryQueueID for the retry view
}

// Item is the state of one leased offset.
type Item struct {
	Offset   int64
	Epoch    uint64
	Deadline int64 // Unix ms, rounded up (MilliCeil)
	Failures uint16
	State    State
}

// Entry is the lease items of one queue of one group, held by one client.
type Entry struct {
	Key        Key
	Generation uint32 // the key's progress generation when written
	At         int64  // Unix ms when written
	Client     string
	Items      []Item
}

// Record is the body of one rmq_sys_LEASE message.
type Record struct{ Entries []Entry }

const (
	recordVersion = 1
	itemSize      = 8 + 8 + 8 + 2 + 1
	entryMin      = 1 + 1 + 4 + 4 + 8 + 1 + 4
)

// ErrBadRecord: a record body or a snapshot that does not decode, or a
// record that cannot be encoded.
var ErrBadRecord = errors.New("broker: malformed lease record")

// EncodeRecord encodes r (format in server/broker/doc.go); a name longer
// than 255 bytes is refused.
func EncodeRecord(r Record) ([]byte, error) {
	size := 1 + 4
	for _, e := range r.Entries {
		if len(e.Key.Group) > 255 || len(e.Key.Topic) > 255 || len(e.Client) > 255 {
			return nil, fmt.Errorf("%w: name too long", ErrBadRecord)
		}
		size += entryMin + len(e.Key.Group) + len(e.Key.Topic) + len(e.Client) + itemSize*len(e.Items)
	}
	return appendRecord(make([]byte, 0, size), r), nil
}

func appendRecord(b []byte, r Record) []byte {
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Entries)))
	for _, e := range r.Entries {
		b = append(b, byte(len(e.Key.Group)))
		b = append(b, e.Key.Group...)
		b = append(b, byte(len(e.Key.Topic)))
		b = append(b, e.Key.Topic...)
		b = binary.BigEndian.AppendUint32(b, uint32(e.Key.QueueID))
		b = binary.BigEndian.AppendUint32(b, e.Generation)
		b = binary.BigEndian.AppendUint64(b, uint64(e.At))
		b = append(b, byte(len(e.Client)))
		b = append(b, e.Client...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.Items)))
		for _, it := range e.Items {
			b = binary.BigEndian.AppendUint64(b, uint64(it.Offset))
			b = binary.BigEndian.AppendUint64(b, it.Epoch)
			b = binary.BigEndian.AppendUint64(b, uint64(it.Deadline))
			b = binary.BigEndian.AppendUint16(b, it.Failures)
			b = append(b, byte(it.State))
		}
	}
	return b
}

// reader reads big-endian fields, remembering the first overrun.
// DecodeRecord decodes a record body. It never panics, allocates no more
// than the input justifies, and refuses anything EncodeRecord would not
// produce (ErrBadRecord).
func DecodeRecord(b []byte) (Record, error) {
	r := &wire.Reader{B: b}
	if v := r.U8(); r.Bad || v != recordVersion {
		return Record{}, fmt.Errorf("%w: version", ErrBadRecord)
	}
	n := r.U32()
	if r.Bad || uint64(n) > uint64(len(r.B)/entryMin) {
		return Record{}, fmt.Errorf("%w: entry count %d", ErrBadRecord, n)
	}
	rec := Record{Entries: make([]Entry, 0, n)}
	for i := uint32(0); i < n; i++ {
		var e Entry
		e.Key.Group = string(r.Take(int(r.U8())))
		e.Key.Topic = string(r.Take(int(r.U8())))
		e.Key.QueueID = int32(r.U32())
		e.Generation = r.U32()
		e.At = int64(r.U64())
		e.Client = string(r.Take(int(r.U8())))
		m := r.U32()
		if r.Bad || e.Key.QueueID < RetryQueueID || e.Key.Group == "" || e.Key.Topic == "" ||
			uint64(m) > uint64(len(r.B)/itemSize) {
			return Record{}, fmt.Errorf("%w: entry %d", ErrBadRecord, i)
		}
		e.Items = make([]Item, m)
		for j := range e.Items {
			it := &e.Items[j]
			it.Offset = int64(r.U64())
			it.Epoch = r.U64()
			it.Deadline = int64(r.U64())
			it.Failures = r.U16()
			it.State = State(r.U8())
			if r.Bad || it.Offset < 0 || it.State < Held || it.State > Released {
				return Record{}, fmt.Errorf("%w: entry %d item %d", ErrBadRecord, i, j)
			}
		}
		rec.Entries = append(rec.Entries, e)
	}
	if len(r.B) != 0 {
		return Record{}, fmt.Errorf("%w: %d trailing bytes", ErrBadRecord, len(r.B))
	}
	return rec, nil
}

// MilliCeil is t in Unix milliseconds, rounded up: a restored lease never
// ends earlier than the one granted.
func MilliCeil(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / int64(time.Millisecond)
	if ns%int64(time.Millisecond) > 0 {
		ms++
	}
	return ms
}
