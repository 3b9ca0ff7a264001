package commitlog

import (
	"encoding/binary"
	"hash/crc32"
)

// Frame layout constants: part of the on-disk format; never change.
const (
	// HeaderSize is the length of a frame header in bytes.
	HeaderSize = 20
	// RecordMagic marks a frame that carries a record.
	RecordMagic uint32 = 0xDAA320A7
	// BlankMagic marks the filler frame at the end of a segment.
	BlankMagic uint32 = 0xCBD43194

	sizeFieldOffset   = 0  // totalSize uint32
	magicFieldOffset  = 4  // magic uint32
	crcFieldOffset    = 8  // crc uint32
	offsetFieldOffset = 12 // offset int64
	crcWidth          = 4
)

// crcTable is CRC-32C (Castagnoli); part of the on-disk format.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// frameStatus is what decodeFrame found at a position.
type frameStatus uint8

const (
	frameRecord    frameStatus = iota // valid record frame
	frameBlank                        // valid blank (end-of-segment) frame
	frameEnd                          // totalSize == 0: end of data
	frameShort                        // fewer than HeaderSize bytes left in the segment
	frameBadSize                      // totalSize < HeaderSize or beyond the segment
	frameBadMagic                     // unknown magic
	frameBadOffset                    // stored offset != position
	frameBadBlank                     // blank frame that does not fill the segment
	frameBadCRC                       // checksum mismatch
)

var frameStatusNames = [...]string{
	frameRecord:    "record",
	frameBlank:     "blank",
	frameEnd:       "zero header",
	frameShort:     "short segment tail",
	frameBadSize:   "bad size",
	frameBadMagic:  "bad magic",
	frameBadOffset: "bad stored offset",
	frameBadBlank:  "bad blank size",
	frameBadCRC:    "bad crc",
}

func (s frameStatus) String() string {
	if int(s) < len(frameStatusNames) {
		return frameStatusNames[s]
	}
	return "unknown"
}

// valid reports whether the frame can be used (record or blank).
func (s frameStatus) valid() bool { return s == frameRecord || s == frameBlank }

// decodeFrame examines the frame that starts at b[0], where b is the rest of
// its segment (so len(b) bounds the frame) and pos is the frame's log
// offset. It returns the frame's status and total size (0 unless the size
// field was in bounds). Size, magic and stored offset are checked before
// the checksum, so frameBadCRC means the header is intact: the frame's
// length is known even though its bytes cannot be trusted. It never
// panics and never allocates, whatever b holds.
func decodeFrame(b []byte, pos int64) (frameStatus, int) {
	if len(b) < HeaderSize {
		return frameShort, 0
	}
	size := binary.BigEndian.Uint32(b[sizeFieldOffset:])
	if size == 0 {
		return frameEnd, 0
	}
	if size < HeaderSize || uint64(size) > uint64(len(b)) {
		return frameBadSize, 0
	}
	n := int(size)
	var status frameStatus
	switch binary.BigEndian.Uint32(b[magicFieldOffset:]) {
	case RecordMagic:
		status = frameRecord
	case BlankMagic:
		status = frameBlank
		if n != len(b) {
			return frameBadBlank, n
		}
	default:
		return frameBadMagic, n
	}
	if int64(binary.BigEndian.Uint64(b[offsetFieldOffset:])) != pos {
		return frameBadOffset, n
	}
	end := n
	if status == frameBlank {
		end = HeaderSize
	}
	if frameCRC(b[:end]) != storedCRC(b) {
		return frameBadCRC, n
	}
	return status, n
}

// frameCRC is the checksum of a frame's checksummed bytes: frame[0:8] then
// frame[12:], where frame is the checksummed span (the whole record, or a
// blank frame's header).
func frameCRC(frame []byte) uint32 {
	c := crc32.Update(0, crcTable, frame[:crcFieldOffset])
	return crc32.Update(c, crcTable, frame[crcFieldOffset+crcWidth:])
}

// isRecordHeader reports whether the frame header at b[0] has RecordMagic.
func isRecordHeader(b []byte) bool {
	return binary.BigEndian.Uint32(b[magicFieldOffset:]) == RecordMagic
}

// storedCRC is the crc field of the frame header at b[0].
func storedCRC(b []byte) uint32 { return binary.BigEndian.Uint32(b[crcFieldOffset:]) }

// putHeader writes a frame header without its crc into frame[:HeaderSize].
func putHeader(frame []byte, size int, magic uint32, pos int64) {
	binary.BigEndian.PutUint32(frame[sizeFieldOffset:], uint32(size))
	binary.BigEndian.PutUint32(frame[magicFieldOffset:], magic)
	binary.BigEndian.PutUint64(frame[offsetFieldOffset:], uint64(pos))
}

// sealFrame stores the crc of the checksummed span frame.
func sealFrame(frame []byte) {
	binary.BigEndian.PutUint32(frame[crcFieldOffset:], frameCRC(frame))
}

// writeBlank writes a Blank frame that covers all of b (len(b) >= HeaderSize).
func writeBlank(b []byte, pos int64) { writeBlankHeader(b, len(b), pos) }

// writeBlankHeader writes into h[:HeaderSize] the header of a Blank frame
// of size bytes at pos; the bytes it covers are not part of its checksum.
func writeBlankHeader(h []byte, size int, pos int64) {
	putHeader(h, size, BlankMagic, pos)
	sealFrame(h[:HeaderSize])
}
