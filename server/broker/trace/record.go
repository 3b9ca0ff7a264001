package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The body of an rmq_sys_TRACE record (the format is also in
// server/broker/doc.go). Varints are encoding/binary's (uvarint unsigned, varint
// zig-zag signed):
//
//	version u8 (1) | leaseNext varint | offsetNext varint | base uvarint
//	| nStrings uvarint | nStrings × (len uvarint | bytes)
//	| nEvents uvarint | nEvents × event
//	event: kind u8 | fields uvarint | at varint (ms after base)
//	  | copy varint (CommitLog offset of the copy the event is about; -1 none)
//	  | the fields present, in bit order (strings are indexes into the table):
//	    0 group | 1 client | 2 epoch uvarint | 3 until varint (ms after at)
//	    | 4 status uvarint | 5 text | 6 level varint | 7 delayMs uvarint
//	    | 8 topic, queueId uvarint, queueOffset uvarint | 9 messageId
//	    | 10 relatedId | 11 count uvarint | 12 reconsume uvarint
//	    | 13 inPlace (no value: an ordered message's retry in place)
//	    | 14 pos uvarint (CommitLog offset of the record the event was
//	      read from: orders events of one millisecond in log order)
//
// leaseNext and offsetNext are the queue offsets of rmq_sys_LEASE and
// rmq_sys_OFFSET up to which the follower's events are in this record or
// an earlier one (-1: the record does not say).

// Kind is what an event says happened. Part of the on-disk format.
type Kind uint8

const (
	Stored       Kind = 1
	Delivered    Kind = 2
	Released     Kind = 3
	Acked        Kind = 4
	Nacked       Kind = 5
	Expired      Kind = 6
	Retried      Kind = 7
	DeadLettered Kind = 8
	Resent       Kind = 9
	Discarded    Kind = 10
	Committed    Kind = 11
	RolledBack   Kind = 12
	Pushed       Kind = 13
	Dropped      Kind = 14 // the marker of events left out (never stored)
	LastKind          = Pushed
)

// Event types (the broker's TraceEvent.Type), one per kind.
const (
	TypeStored       = "stored"
	TypeDelivered    = "delivered"
	TypeReleased     = "released"
	TypeAcked        = "acked"
	TypeNacked       = "nacked"
	TypeLeaseExpired = "lease-expired"
	TypeRetried      = "retried"
	TypeDeadLettered = "dead-lettered"
	TypeResent       = "resent"
	TypeDiscarded    = "discarded"
	TypeCommitted    = "transaction-committed"
	TypeRolledBack   = "transaction-rolled-back"
	TypePushed       = "pushed"
	TypeDropped      = "events-dropped"
)

var types = [...]string{
	Stored: TypeStored, Delivered: TypeDelivered, Released: TypeReleased, Acked: TypeAcked,
	Nacked: TypeNacked, Expired: TypeLeaseExpired, Retried: TypeRetried,
	DeadLettered: TypeDeadLettered, Resent: TypeResent, Discarded: TypeDiscarded,
	Committed: TypeCommitted, RolledBack: TypeRolledBack, Pushed: TypePushed, Dropped: TypeDropped,
}

func (k Kind) String() string {
	if int(k) < len(types) && types[k] != "" {
		return types[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Item is one event as a trace record holds it. A field is present
// when it is not zero (Level and the position have their own flags).
type Item struct {
	Kind        Kind
	At          int64 // unix ms
	Copy        int64 // CommitLog offset of the message copy it is about; -1 none
	Group       string
	Client      string
	Epoch       uint64
	Until       int64 // unix ms: a lease's end, a retry's due time
	Status      int   // pushed: the HTTP status
	Text        string
	Level       int
	HasLevel    bool
	DelayMs     int64
	Topic       string
	QueueID     int32
	QueueOffset int64
	HasPosition bool
	MessageID   string
	RelatedID   string
	Count       int64
	Reconsume   int32
	InPlace     bool  // an ordered message's retry in place
	Pos         int64 // CommitLog offset of the record that says it happened; 0 not known
}

// Record is the body of one rmq_sys_TRACE message.
type Record struct {
	LeaseNext, OffsetNext int64 // -1: not said
	Items                 []Item
}

const (
	recordVersion = 1
	MaxString     = 2048
	maxStrings    = 1 << 14
	maxFieldBit   = 14
)

var ErrBadRecord = errors.New("trace: malformed trace record")

const (
	tfGroup = 1 << iota
	tfClient
	tfEpoch
	tfUntil
	tfStatus
	tfText
	tfLevel
	tfDelay
	tfPosition
	tfMessageID
	tfRelatedID
	tfCount
	tfReconsume
	tfInPlace
	tfPos
)

func (it *Item) fields() uint64 {
	var f uint64
	set := func(ok bool, bit uint64) {
		if ok {
			f |= bit
		}
	}
	set(it.Group != "", tfGroup)
	set(it.Client != "", tfClient)
	set(it.Epoch != 0, tfEpoch)
	set(it.Until != 0, tfUntil)
	set(it.Status != 0, tfStatus)
	set(it.Text != "", tfText)
	set(it.HasLevel, tfLevel)
	set(it.DelayMs != 0, tfDelay)
	set(it.HasPosition, tfPosition)
	set(it.MessageID != "", tfMessageID)
	set(it.RelatedID != "", tfRelatedID)
	set(it.Count != 0, tfCount)
	set(it.Reconsume != 0, tfReconsume)
	set(it.InPlace, tfInPlace)
	set(it.Pos > 0, tfPos)
	return f
}

// Encode encodes r. Strings longer than MaxString are cut (at a rune
// boundary: what the cut leaves of a rune is dropped).
func Encode(r Record) []byte {
	index := map[string]uint64{}
	var table []string
	ref := func(s string) uint64 {
		if len(s) > MaxString {
			s = strings.ToValidUTF8(s[:MaxString], "")
		}
		if i, ok := index[s]; ok {
			return i
		}
		index[s] = uint64(len(table))
		table = append(table, s)
		return uint64(len(table) - 1)
	}
	base := int64(0)
	for i, it := range r.Items {
		if i == 0 || it.At < base {
			base = it.At
		}
	}
	base = max(base, 0)
	var ev []byte
	for i := range r.Items {
		it := &r.Items[i]
		f := it.fields()
		ev = append(ev, byte(it.Kind))
		ev = binary.AppendUvarint(ev, f)
		ev = binary.AppendVarint(ev, it.At-base)
		ev = binary.AppendVarint(ev, it.Copy)
		if f&tfGroup != 0 {
			ev = binary.AppendUvarint(ev, ref(it.Group))
		}
		if f&tfClient != 0 {
			ev = binary.AppendUvarint(ev, ref(it.Client))
		}
		if f&tfEpoch != 0 {
			ev = binary.AppendUvarint(ev, it.Epoch)
		}
		if f&tfUntil != 0 {
			ev = binary.AppendVarint(ev, it.Until-it.At)
		}
		if f&tfStatus != 0 {
			ev = binary.AppendUvarint(ev, uint64(it.Status))
		}
		if f&tfText != 0 {
			ev = binary.AppendUvarint(ev, ref(it.Text))
		}
		if f&tfLevel != 0 {
			ev = binary.AppendVarint(ev, int64(it.Level))
		}
		if f&tfDelay != 0 {
			ev = binary.AppendUvarint(ev, uint64(it.DelayMs))
		}
		if f&tfPosition != 0 {
			ev = binary.AppendUvarint(ev, ref(it.Topic))
			ev = binary.AppendUvarint(ev, uint64(it.QueueID))
			ev = binary.AppendUvarint(ev, uint64(it.QueueOffset))
		}
		if f&tfMessageID != 0 {
			ev = binary.AppendUvarint(ev, ref(it.MessageID))
		}
		if f&tfRelatedID != 0 {
			ev = binary.AppendUvarint(ev, ref(it.RelatedID))
		}
		if f&tfCount != 0 {
			ev = binary.AppendUvarint(ev, uint64(it.Count))
		}
		if f&tfReconsume != 0 {
			ev = binary.AppendUvarint(ev, uint64(it.Reconsume))
		}
		if f&tfPos != 0 {
			ev = binary.AppendUvarint(ev, uint64(it.Pos))
		}
	}
	out := []byte{recordVersion}
	out = binary.AppendVarint(out, r.LeaseNext)
	out = binary.AppendVarint(out, r.OffsetNext)
	out = binary.AppendUvarint(out, uint64(base))
	out = binary.AppendUvarint(out, uint64(len(table)))
	for _, s := range table {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	out = binary.AppendUvarint(out, uint64(len(r.Items)))
	return append(out, ev...)
}

// reader reads varints, remembering the first failure.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.bad {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte1() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// bounded reads a uvarint that must be at most limit.
func (r *reader) bounded(limit uint64) uint64 {
	v := r.uvarint()
	if v > limit {
		r.bad = true
		return 0
	}
	return v
}

// Decode decodes a record body. It never panics, allocates no
// more than the input justifies, and refuses what Encode would
// not produce: unknown versions, kinds or fields, string references out
// of the table, values out of range, trailing bytes.
func Decode(b []byte) (Record, error) {
	r := &reader{b: b}
	bad := func(what string) (Record, error) {
		return Record{}, fmt.Errorf("%w: %s", ErrBadRecord, what)
	}
	if v := r.byte1(); r.bad || v != recordVersion {
		return bad("version")
	}
	rec := Record{LeaseNext: r.varint(), OffsetNext: r.varint()}
	base := r.bounded(1 << 62)
	if r.bad || rec.LeaseNext < -1 || rec.OffsetNext < -1 {
		return bad("header")
	}
	n := r.bounded(maxStrings)
	if r.bad || n > uint64(len(r.b)) {
		return bad("string count")
	}
	table := make([]string, n)
	for i := range table {
		l := r.bounded(MaxString)
		if r.bad || l > uint64(len(r.b)) {
			return bad("string " + strconv.Itoa(i))
		}
		table[i] = string(r.b[:l])
		r.b = r.b[l:]
	}
	str := func() string {
		i := r.uvarint()
		if i >= uint64(len(table)) {
			r.bad = true
			return ""
		}
		return table[i]
	}
	count := r.uvarint()
	if r.bad || count > uint64(len(r.b)/4) { // an event takes at least 4 bytes
		return bad("event count")
	}
	rec.Items = make([]Item, count)
	for i := range rec.Items {
		it := &rec.Items[i]
		it.Kind = Kind(r.byte1())
		f := r.uvarint()
		it.At = int64(base) + r.varint()
		it.Copy = r.varint()
		if r.bad || it.Kind < Stored || it.Kind > LastKind || f>>(maxFieldBit+1) != 0 || it.Copy < -1 {
			return bad("event " + strconv.Itoa(i))
		}
		if f&tfGroup != 0 {
			it.Group = str()
		}
		if f&tfClient != 0 {
			it.Client = str()
		}
		if f&tfEpoch != 0 {
			it.Epoch = r.uvarint()
		}
		if f&tfUntil != 0 {
			it.Until = it.At + r.varint()
		}
		if f&tfStatus != 0 {
			it.Status = int(r.bounded(999))
		}
		if f&tfText != 0 {
			it.Text = str()
		}
		if f&tfLevel != 0 {
			lv := r.varint()
			if lv < -1 || lv > 1<<16 {
				r.bad = true
			}
			it.Level, it.HasLevel = int(lv), true
		}
		if f&tfDelay != 0 {
			it.DelayMs = int64(r.bounded(1 << 62))
		}
		if f&tfPosition != 0 {
			it.Topic = str()
			it.QueueID = int32(r.bounded(1<<31 - 1))
			it.QueueOffset = int64(r.bounded(1 << 62))
			it.HasPosition = true
		}
		if f&tfMessageID != 0 {
			it.MessageID = str()
		}
		if f&tfRelatedID != 0 {
			it.RelatedID = str()
		}
		if f&tfCount != 0 {
			it.Count = int64(r.bounded(1 << 62))
		}
		if f&tfReconsume != 0 {
			it.Reconsume = int32(r.bounded(1<<31 - 1))
		}
		it.InPlace = f&tfInPlace != 0
		if f&tfPos != 0 {
			if it.Pos = int64(r.bounded(1 << 62)); it.Pos == 0 {
				r.bad = true
			}
		}
		if r.bad {
			return bad("event " + strconv.Itoa(i))
		}
	}
	if len(r.b) != 0 {
		return bad(strconv.Itoa(len(r.b)) + " trailing bytes")
	}
	return rec, nil
}

// CopyKey is the index key (a KEYS entry of a trace record) of the
// events about the message copy at CommitLog offset phys.
func CopyKey(phys int64) string { return "c" + strconv.FormatInt(phys, 16) }

// LifeKey is the index key of the events carried for the life of the
// message whose origin id is id (Carry).
func LifeKey(id string) string { return LifePrefix + strings.ToUpper(id) }

// LifePrefix starts every LifeKey.
const LifePrefix = "l"

// LifeQueue is the queue of rmq_sys_TRACE that holds the records
// carried under a life's key (Carry); the trace
// follower's records are on queue 0.
const LifeQueue int32 = 1
