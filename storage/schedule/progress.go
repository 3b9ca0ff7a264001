package schedule

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

const (
	progressMagic   = 0x4D514453 // "MQDS"; part of the on-disk format
	progressVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func encodeProgress(offsets []int64) []byte {
	b := make([]byte, 0, 8+8*len(offsets)+4)
	b = binary.BigEndian.AppendUint32(b, progressMagic)
	b = binary.BigEndian.AppendUint16(b, progressVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(offsets)))
	for _, off := range offsets {
		b = binary.BigEndian.AppendUint64(b, uint64(off))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeProgress(b []byte) ([]int64, error) {
	if len(b) < 12 || binary.BigEndian.Uint32(b) != progressMagic || binary.BigEndian.Uint16(b[4:]) != progressVersion {
		return nil, ErrBadProgress
	}
	n := int(binary.BigEndian.Uint16(b[6:]))
	if len(b) != 8+8*n+4 || binary.BigEndian.Uint32(b[len(b)-4:]) != crc32.Checksum(b[:len(b)-4], castagnoli) {
		return nil, ErrBadProgress
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.BigEndian.Uint64(b[8+8*i:]))
		if out[i] < 0 {
			return nil, ErrBadProgress
		}
	}
	return out, nil
}

// loadProgress reads the per-level offsets; a missing file means all zero.
func loadProgress(fs vfs.FS, path string, levels int) ([]int64, error) {
	offsets := make([]int64, levels)
	b, err := fs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return offsets, nil
	}
	if err != nil {
		return nil, err
	}
	saved, err := decodeProgress(b)
	if err != nil {
		return nil, err
	}
	copy(offsets, saved) // levels added since: start at 0; levels removed: dropped
	return offsets, nil
}

func saveProgress(fs vfs.FS, path string, offsets []int64) error {
	return vfs.WriteFileAtomic(fs, path, encodeProgress(offsets), 0o644)
}
