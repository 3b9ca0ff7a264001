package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sort"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Queue table format constants: part of the on-disk format; never change
// (see doc.go, "Queue table").
const (
	queueTableFile    = "queues"
	queueTableMagic   = 0x4D515154 // "MQQT"
	queueTableVersion = 1
	queueTableHeader  = 20
	queueTableCRC     = 4
)

var errBadQueueTable = errors.New("storage: invalid queue table")

// queueBounds is one queue's record in the queue table.
type queueBounds struct {
	min, max int64
	lastPhy  int64 // CommitLog offset of the entry at max-1; -1 when min == max
}

// queueTable is the decoded queue table.
type queueTable struct {
	indexedPhy int64
	queues     map[queueKey]queueBounds
}

func (t queueTable) encode() []byte {
	keys := make([]queueKey, 0, len(t.queues))
	for k := range t.queues {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].id < keys[j].id
	})
	b := make([]byte, queueTableHeader, queueTableHeader+len(keys)*32+queueTableCRC)
	binary.BigEndian.PutUint32(b[0:], queueTableMagic)
	binary.BigEndian.PutUint16(b[4:], queueTableVersion)
	binary.BigEndian.PutUint64(b[8:], uint64(t.indexedPhy))
	binary.BigEndian.PutUint32(b[16:], uint32(len(keys)))
	for _, k := range keys {
		qb := t.queues[k]
		b = append(b, byte(len(k.topic)))
		b = append(b, k.topic...)
		b = binary.BigEndian.AppendUint32(b, uint32(k.id))
		b = binary.BigEndian.AppendUint64(b, uint64(qb.min))
		b = binary.BigEndian.AppendUint64(b, uint64(qb.max))
		b = binary.BigEndian.AppendUint64(b, uint64(qb.lastPhy))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeQueueTable(b []byte) (queueTable, error) {
	if len(b) < queueTableHeader+queueTableCRC ||
		binary.BigEndian.Uint32(b[0:]) != queueTableMagic ||
		binary.BigEndian.Uint16(b[4:]) != queueTableVersion ||
		binary.BigEndian.Uint16(b[6:]) != 0 {
		return queueTable{}, errBadQueueTable
	}
	body, sum := b[:len(b)-queueTableCRC], binary.BigEndian.Uint32(b[len(b)-queueTableCRC:])
	if crc32.Checksum(body, castagnoli) != sum {
		return queueTable{}, fmt.Errorf("%w: checksum mismatch", errBadQueueTable)
	}
	t := queueTable{indexedPhy: int64(binary.BigEndian.Uint64(b[8:])), queues: make(map[queueKey]queueBounds)}
	n := binary.BigEndian.Uint32(b[16:])
	rest := body[queueTableHeader:]
	var prev queueKey
	for i := uint32(0); i < n; i++ {
		if len(rest) < 1 || len(rest) < 1+int(rest[0])+28 || rest[0] == 0 {
			return queueTable{}, fmt.Errorf("%w: record %d truncated", errBadQueueTable, i)
		}
		tl := int(rest[0])
		key := queueKey{topic: string(rest[1 : 1+tl]), id: int32(binary.BigEndian.Uint32(rest[1+tl:]))}
		qb := queueBounds{min: int64(binary.BigEndian.Uint64(rest[5+tl:])), max: int64(binary.BigEndian.Uint64(rest[13+tl:])),
			lastPhy: int64(binary.BigEndian.Uint64(rest[21+tl:]))}
		if checkTopic(key.topic) != nil || key.id < 0 || key.id > MaxQueueID || qb.min < 0 || qb.max < qb.min || qb.lastPhy < -1 {
			return queueTable{}, fmt.Errorf("%w: record %d is not a queue", errBadQueueTable, i)
		}
		if i > 0 && (key.topic < prev.topic || (key.topic == prev.topic && key.id <= prev.id)) {
			return queueTable{}, fmt.Errorf("%w: record %d out of order", errBadQueueTable, i)
		}
		prev = key
		t.queues[key] = qb
		rest = rest[29+tl:]
	}
	if len(rest) != 0 {
		return queueTable{}, fmt.Errorf("%w: %d bytes after the records", errBadQueueTable, len(rest))
	}
	return t, nil
}

func readQueueTable(fs vfs.FS, dir string) (queueTable, error) {
	b, err := fs.ReadFile(filepath.Join(dir, queueTableFile))
	if err != nil {
		return queueTable{}, err
	}
	return decodeQueueTable(b)
}

// snapshotQueues takes the queue table now: call it after reading the
// dispatched offset the checkpoint will record, and write it only after
// the derived files were flushed.
func (s *Store) snapshotQueues() queueTable {
	t := queueTable{indexedPhy: s.index.MaxPhysicalOffset(), queues: make(map[queueKey]queueBounds)}
	if s.index.Files() == 0 {
		t.indexedPhy = -1 // no key indexed yet: no file to lose
	}
	s.queuesMu.RLock()
	for k, q := range s.queues {
		qb := queueBounds{min: q.MinOffset(), max: q.MaxOffset(), lastPhy: -1}
		if e, ok := q.LastEntry(); ok {
			qb.lastPhy = e.CommitLogOffset
		}
		t.queues[k] = qb
	}
	s.queuesMu.RUnlock()
	return t
}

// writeQueueTable replaces the queue table durably when it changed since
// the last write.
func (s *Store) writeQueueTable(t queueTable) error {
	b := t.encode()
	s.tableMu.Lock()
	defer s.tableMu.Unlock()
	if string(b) == string(s.lastTable) {
		return nil
	}
	if err := vfs.WriteFileAtomic(s.opts.FS, filepath.Join(s.opts.Dir, queueTableFile), b, 0o644); err != nil {
		return fmt.Errorf("write queue table: %w", err)
	}
	s.lastTable = b
	return nil
}
