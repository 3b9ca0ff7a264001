package lease

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// SnapshotFile is the snapshot file of the live leases (under config/).
const SnapshotFile = "leases.snapshot"

const (
	snapMagic   = 0x4D514C53 // "MQLS"
	snapVersion = 1
	snapHeader  = 4 + 2 + 4 + 8 + 8
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// EncodeSnapshot is the snapshot file: magic, version, the CRC-32C of
// what follows it, the rmq_sys_LEASE queue offset covered (sysOffset),
// the epoch counter, and the live leases as one record body.
func EncodeSnapshot(sysOffset int64, epoch uint64, r Record) ([]byte, error) {
	body, err := EncodeRecord(r)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 10, snapHeader+len(body))
	binary.BigEndian.PutUint32(out[0:], snapMagic)
	binary.BigEndian.PutUint16(out[4:], snapVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(sysOffset))
	out = binary.BigEndian.AppendUint64(out, epoch)
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[6:], crc32.Checksum(out[10:], crcTable))
	return out, nil
}

// DecodeSnapshot parses a snapshot file (ErrBadRecord when damaged).
func DecodeSnapshot(b []byte) (sysOffset int64, epoch uint64, r Record, err error) {
	if len(b) < snapHeader || binary.BigEndian.Uint32(b) != snapMagic ||
		binary.BigEndian.Uint16(b[4:]) != snapVersion ||
		binary.BigEndian.Uint32(b[6:]) != crc32.Checksum(b[10:], crcTable) {
		return 0, 0, Record{}, fmt.Errorf("%w: snapshot header or checksum", ErrBadRecord)
	}
	sysOffset, epoch = int64(binary.BigEndian.Uint64(b[10:])), binary.BigEndian.Uint64(b[18:])
	if sysOffset < 0 {
		return 0, 0, Record{}, fmt.Errorf("%w: snapshot offset %d", ErrBadRecord, sysOffset)
	}
	r, err = DecodeRecord(b[snapHeader:])
	return sysOffset, epoch, r, err
}
