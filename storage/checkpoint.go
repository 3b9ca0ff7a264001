package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Checkpoint format constants: part of the on-disk format; never change.
const (
	checkpointMagic   = 0x4D51434B // "MQCK"
	checkpointVersion = 1
	checkpointSize    = 64
	checkpointFile    = "checkpoint"
	abortFile         = "abort"
	flagClean         = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpoint records how far each structure is known good.
type checkpoint struct {
	Clean      bool
	Flushed    int64 // CommitLog bytes known durable
	Dispatched int64 // CommitLog offset below which derived files are flushed
	WrittenAt  int64 // unix ms
}

var errBadCheckpoint = errors.New("storage: invalid checkpoint")

func (c checkpoint) encode() []byte {
	b := make([]byte, checkpointSize)
	binary.BigEndian.PutUint32(b[0:], checkpointMagic)
	binary.BigEndian.PutUint16(b[4:], checkpointVersion)
	var flags uint16
	if c.Clean {
		flags |= flagClean
	}
	binary.BigEndian.PutUint16(b[6:], flags)
	binary.BigEndian.PutUint64(b[8:], uint64(c.Flushed))
	binary.BigEndian.PutUint64(b[16:], uint64(c.Dispatched))
	binary.BigEndian.PutUint64(b[24:], uint64(c.WrittenAt))
	binary.BigEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	return b
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	if len(b) != checkpointSize ||
		binary.BigEndian.Uint32(b[0:]) != checkpointMagic ||
		binary.BigEndian.Uint16(b[4:]) != checkpointVersion ||
		binary.BigEndian.Uint16(b[6:])&^flagClean != 0 ||
		!allZero(b[32:60]) ||
		binary.BigEndian.Uint32(b[60:]) != crc32.Checksum(b[:60], castagnoli) {
		return checkpoint{}, errBadCheckpoint
	}
	c := checkpoint{
		Clean:      binary.BigEndian.Uint16(b[6:])&flagClean != 0,
		Flushed:    int64(binary.BigEndian.Uint64(b[8:])),
		Dispatched: int64(binary.BigEndian.Uint64(b[16:])),
		WrittenAt:  int64(binary.BigEndian.Uint64(b[24:])),
	}
	if c.Flushed < 0 || c.Dispatched < 0 {
		return checkpoint{}, errBadCheckpoint
	}
	return c, nil
}

func readCheckpoint(fs vfs.FS, dir string) (checkpoint, error) {
	b, err := fs.ReadFile(filepath.Join(dir, checkpointFile))
	if err != nil {
		return checkpoint{}, err
	}
	return decodeCheckpoint(b)
}

func writeCheckpoint(fs vfs.FS, dir string, c checkpoint) error {
	return vfs.WriteFileAtomic(fs, filepath.Join(dir, checkpointFile), c.encode(), 0o644)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
