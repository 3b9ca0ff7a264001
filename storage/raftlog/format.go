package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The on-disk formats of doc.go. Integers are big-endian; every checksum
// is CRC-32C.

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errFormat is what every decoder returns for bytes that are not what
// they should be; callers wrap it with ErrCorrupt where it is damage.
var errFormat = errors.New("raftlog: bad format")

const (
	indexMagic    uint32 = 0x4D515249 // "MQRI"
	hardMagic     uint32 = 0x4D515248 // "MQRH"
	metaMagic     uint32 = 0x4D515253 // "MQRS"
	confsMagic    uint32 = 0x4D515243 // "MQRC"
	snapDataMagic uint32 = 0x4D515244 // "MQRD"
	formatVersion uint16 = 1

	// IndexEntrySize is the size of one Raft index entry.
	IndexEntrySize = 40
	hardSlotSize   = 64
	snapDataSize   = 16
)

// entry is one Raft index entry: where a Raft entry's bytes are in the
// CommitLog, and its term and type.
type entry struct {
	index  uint64
	term   uint64
	offset int64  // CommitLog offset of its first frame (the log's end then, for size 0)
	size   uint32 // CommitLog bytes it covers (0: it has no frames)
	typ    pb.EntryType
}

func (e entry) end() int64 { return e.offset + int64(e.size) }

func putIndexEntry(b []byte, e entry) {
	binary.BigEndian.PutUint32(b[0:], indexMagic)
	binary.BigEndian.PutUint32(b[4:], e.size)
	binary.BigEndian.PutUint64(b[8:], uint64(e.offset))
	binary.BigEndian.PutUint64(b[16:], e.index)
	binary.BigEndian.PutUint64(b[24:], e.term)
	b[32] = byte(e.typ)
	b[33], b[34], b[35] = 0, 0, 0
	binary.BigEndian.PutUint32(b[36:], crc32.Checksum(b[:36], crcTable))
}

// decodeIndexEntry decodes the index entry in b[:IndexEntrySize]; a
// slot of zeros is errFormat too (never written).
func decodeIndexEntry(b []byte) (entry, error) {
	if len(b) < IndexEntrySize {
		return entry{}, fmt.Errorf("%w: index entry of %d bytes", errFormat, len(b))
	}
	if binary.BigEndian.Uint32(b[0:]) != indexMagic {
		return entry{}, fmt.Errorf("%w: index entry magic", errFormat)
	}
	if crc32.Checksum(b[:36], crcTable) != binary.BigEndian.Uint32(b[36:]) {
		return entry{}, fmt.Errorf("%w: index entry checksum", errFormat)
	}
	e := entry{
		size:   binary.BigEndian.Uint32(b[4:]),
		offset: int64(binary.BigEndian.Uint64(b[8:])),
		index:  binary.BigEndian.Uint64(b[16:]),
		term:   binary.BigEndian.Uint64(b[24:]),
		typ:    pb.EntryType(b[32]),
	}
	if e.offset < 0 || e.index == 0 || e.typ > pb.EntryConfChangeV2 || b[33]|b[34]|b[35] != 0 ||
		(e.typ != pb.EntryNormal && e.size != 0) {
		return entry{}, fmt.Errorf("%w: index entry fields", errFormat)
	}
	return e, nil
}

// hardState is one slot of the hard-state file.
type hardState struct {
	seq                uint64
	term, vote, commit uint64
}

func encodeHardSlot(h hardState) []byte {
	b := make([]byte, hardSlotSize)
	binary.BigEndian.PutUint32(b[0:], hardMagic)
	binary.BigEndian.PutUint16(b[4:], formatVersion)
	binary.BigEndian.PutUint64(b[8:], h.seq)
	binary.BigEndian.PutUint64(b[16:], h.term)
	binary.BigEndian.PutUint64(b[24:], h.vote)
	binary.BigEndian.PutUint64(b[32:], h.commit)
	binary.BigEndian.PutUint32(b[60:], crc32.Checksum(b[:60], crcTable))
	return b
}

func decodeHardSlot(b []byte) (hardState, error) {
	if len(b) < hardSlotSize || binary.BigEndian.Uint32(b[0:]) != hardMagic ||
		binary.BigEndian.Uint16(b[4:]) != formatVersion || !allZero(b[6:8]) || !allZero(b[40:60]) ||
		crc32.Checksum(b[:60], crcTable) != binary.BigEndian.Uint32(b[60:]) {
		return hardState{}, fmt.Errorf("%w: hard-state slot", errFormat)
	}
	return hardState{
		seq:    binary.BigEndian.Uint64(b[8:]),
		term:   binary.BigEndian.Uint64(b[16:]),
		vote:   binary.BigEndian.Uint64(b[24:]),
		commit: binary.BigEndian.Uint64(b[32:]),
	}, nil
}

// decodeHardState picks the newer valid slot of a hard-state file (and
// says which); ok is false when neither is valid.
func decodeHardState(b []byte) (h hardState, which int, ok bool) {
	for slot := 0; slot < 2; slot++ {
		if len(b) < (slot+1)*hardSlotSize {
			break
		}
		s, err := decodeHardSlot(b[slot*hardSlotSize:])
		if err == nil && (!ok || s.seq > h.seq) {
			h, which, ok = s, slot, true
		}
	}
	return h, which, ok
}

// mark is a point of the log: a Raft index, its term and the CommitLog
// offset where the entries after it begin.
type mark struct {
	index, term uint64
	offset      int64
}

// meta is the meta file: the compaction point (the log's first entry is
// the one after it), the snapshot point and its configuration.
type meta struct {
	compact mark
	snap    mark
	conf    *pb.ConfState
	perFile uint32 // index entries per index file, fixed at creation
}

func encodeMeta(m meta) ([]byte, error) {
	cs, err := proto.MarshalOptions{Deterministic: true}.Marshal(pb.EnsureConfState(m.conf))
	if err != nil {
		return nil, err
	}
	b := make([]byte, 64, 64+len(cs)+4)
	binary.BigEndian.PutUint32(b[0:], metaMagic)
	binary.BigEndian.PutUint16(b[4:], formatVersion)
	putMark(b[8:], m.compact)
	putMark(b[32:], m.snap)
	binary.BigEndian.PutUint32(b[56:], m.perFile)
	binary.BigEndian.PutUint32(b[60:], uint32(len(cs)))
	b = append(b, cs...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable)), nil
}

func putMark(b []byte, m mark) {
	binary.BigEndian.PutUint64(b[0:], m.index)
	binary.BigEndian.PutUint64(b[8:], m.term)
	binary.BigEndian.PutUint64(b[16:], uint64(m.offset))
}

func getMark(b []byte) mark {
	return mark{index: binary.BigEndian.Uint64(b[0:]), term: binary.BigEndian.Uint64(b[8:]), offset: int64(binary.BigEndian.Uint64(b[16:]))}
}

func decodeMeta(b []byte) (meta, error) {
	if len(b) < 68 || binary.BigEndian.Uint32(b[0:]) != metaMagic || binary.BigEndian.Uint16(b[4:]) != formatVersion || !allZero(b[6:8]) {
		return meta{}, fmt.Errorf("%w: meta header", errFormat)
	}
	n := uint64(binary.BigEndian.Uint32(b[60:]))
	if uint64(len(b)) != 68+n {
		return meta{}, fmt.Errorf("%w: meta of %d bytes with a conf state of %d", errFormat, len(b), n)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return meta{}, fmt.Errorf("%w: meta checksum", errFormat)
	}
	m := meta{compact: getMark(b[8:]), snap: getMark(b[32:]), conf: &pb.ConfState{}, perFile: binary.BigEndian.Uint32(b[56:])}
	if m.compact.offset < 0 || m.snap.offset < 0 || m.perFile == 0 {
		return meta{}, fmt.Errorf("%w: meta marks", errFormat)
	}
	if err := proto.Unmarshal(body[64:], m.conf); err != nil {
		return meta{}, fmt.Errorf("%w: meta conf state: %v", errFormat, err)
	}
	return m, nil
}

// confEntry is the data of a configuration-change entry (confs file).
type confEntry struct {
	term uint64
	typ  pb.EntryType
	data []byte
}

func encodeConfs(confs map[uint64]confEntry, order []uint64) []byte {
	b := binary.BigEndian.AppendUint32(nil, confsMagic)
	b = binary.BigEndian.AppendUint32(b, uint32(len(order)))
	for _, i := range order {
		c := confs[i]
		b = binary.BigEndian.AppendUint64(b, i)
		b = binary.BigEndian.AppendUint64(b, c.term)
		b = append(b, byte(c.typ))
		b = binary.BigEndian.AppendUint32(b, uint32(len(c.data)))
		b = append(b, c.data...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func decodeConfs(b []byte) (map[uint64]confEntry, error) {
	if len(b) < 12 || binary.BigEndian.Uint32(b) != confsMagic {
		return nil, fmt.Errorf("%w: confs header", errFormat)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, crcTable) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("%w: confs checksum", errFormat)
	}
	n := binary.BigEndian.Uint32(body[4:])
	rest := body[8:]
	confs := make(map[uint64]confEntry, min(n, 1024))
	for k := uint32(0); k < n; k++ {
		if len(rest) < 21 {
			return nil, fmt.Errorf("%w: confs record %d", errFormat, k)
		}
		i, term, typ := binary.BigEndian.Uint64(rest), binary.BigEndian.Uint64(rest[8:]), pb.EntryType(rest[16])
		size := uint64(binary.BigEndian.Uint32(rest[17:]))
		rest = rest[21:]
		if uint64(len(rest)) < size || (typ != pb.EntryConfChange && typ != pb.EntryConfChangeV2) {
			return nil, fmt.Errorf("%w: confs record %d", errFormat, k)
		}
		// Never nil: raft's configuration entries always carry data
		// (possibly empty), and an entry's size counts a present field.
		confs[i] = confEntry{term: term, typ: typ, data: append([]byte{}, rest[:size]...)}
		rest = rest[size:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the confs records", errFormat, len(rest))
	}
	return confs, nil
}

// encodeSnapData is a snapshot's Data: where the CommitLog continues
// after the snapshot's index (doc.go, "Snapshots").
func encodeSnapData(offset int64) []byte {
	b := make([]byte, snapDataSize)
	binary.BigEndian.PutUint32(b[0:], snapDataMagic)
	binary.BigEndian.PutUint16(b[4:], formatVersion)
	binary.BigEndian.PutUint64(b[8:], uint64(offset))
	return b
}

// DecodeSnapshotData returns the CommitLog offset a snapshot's Data names
// (the first byte after the snapshot's last entry).
func DecodeSnapshotData(b []byte) (int64, error) {
	if len(b) != snapDataSize || binary.BigEndian.Uint32(b) != snapDataMagic || binary.BigEndian.Uint16(b[4:]) != formatVersion || !allZero(b[6:8]) {
		return 0, fmt.Errorf("%w: snapshot data", errFormat)
	}
	off := int64(binary.BigEndian.Uint64(b[8:]))
	if off < 0 {
		return 0, fmt.Errorf("%w: snapshot offset %d", errFormat, off)
	}
	return off, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
