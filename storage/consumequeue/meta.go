package consumequeue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// MINOFFSET file layout. Part of the on-disk format; never change (see
// doc.go).
const (
	metaFileName = "MINOFFSET"
	metaMagic    = 0x4D514D4F // "MQMO"
	metaSize     = 16

	metaOffsetMagic     = 0
	metaOffsetMinOffset = 4
	metaOffsetCRC       = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeMeta returns the MINOFFSET bytes for minOffset.
func encodeMeta(minOffset int64) []byte {
	b := make([]byte, metaSize)
	binary.BigEndian.PutUint32(b[metaOffsetMagic:], metaMagic)
	binary.BigEndian.PutUint64(b[metaOffsetMinOffset:], uint64(minOffset))
	binary.BigEndian.PutUint32(b[metaOffsetCRC:], crc32.Checksum(b[:metaOffsetCRC], castagnoli))
	return b
}

// decodeMeta parses MINOFFSET bytes; ErrCorrupt if they fail any check.
func decodeMeta(b []byte) (int64, error) {
	if len(b) != metaSize {
		return 0, fmt.Errorf("%w: %s is %d bytes, want %d", ErrCorrupt, metaFileName, len(b), metaSize)
	}
	if magic := binary.BigEndian.Uint32(b[metaOffsetMagic:]); magic != metaMagic {
		return 0, fmt.Errorf("%w: %s magic %#x", ErrCorrupt, metaFileName, magic)
	}
	if crc := binary.BigEndian.Uint32(b[metaOffsetCRC:]); crc != crc32.Checksum(b[:metaOffsetCRC], castagnoli) {
		return 0, fmt.Errorf("%w: %s checksum mismatch", ErrCorrupt, metaFileName)
	}
	minOffset := int64(binary.BigEndian.Uint64(b[metaOffsetMinOffset:]))
	if minOffset < 0 {
		return 0, fmt.Errorf("%w: %s holds negative offset %d", ErrCorrupt, metaFileName, minOffset)
	}
	return minOffset, nil
}

// readMeta returns the persisted min offset, or false when there is none
// or it is unreadable (logged; the caller derives the minimum instead).
func (q *Queue) readMeta() (int64, bool, error) {
	b, err := q.fs.ReadFile(filepath.Join(q.dir, metaFileName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", metaFileName, err)
	}
	minOffset, err := decodeMeta(b)
	if err != nil {
		q.log.Warn().Err(err).Msg("ignoring unreadable min offset; deriving it from the data files")
		return 0, false, nil
	}
	q.storedMin.Store(true)
	return minOffset, true, nil
}

// writeMeta persists minOffset atomically.
func (q *Queue) writeMeta(minOffset int64) error {
	if err := vfs.WriteFileAtomic(q.fs, filepath.Join(q.dir, metaFileName), encodeMeta(minOffset), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", metaFileName, err)
	}
	q.storedMin.Store(true)
	return nil
}
