package offset

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sort"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
)

const (
	snapMagic   = 0x4D514F46 // "MQOF"; part of the on-disk format
	snapVersion = 1
	snapHeader  = 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type snapQueue struct {
	Group      string  `json:"group"`
	Topic      string  `json:"topic"`
	QueueID    int32   `json:"queueId"`
	Committed  int64   `json:"committed"`
	Generation uint32  `json:"generation"`
	Acked      []int64 `json:"acked,omitempty"`
	Failed     []int64 `json:"failed,omitempty"`
}

type snapshot struct {
	SysOffset int64       `json:"sysOffset"`
	Queues    []snapQueue `json:"queues"`
}

// Save writes the table atomically to path. sysOffset is called while the
// table is locked against Apply and must return a system-queue offset such
// that every record below it has been applied (the broker applies a record
// before appending it, so the queue's current maximum qualifies); records
// at or above it are re-applied on load.
func (t *Table) Save(path string, sysOffset func() int64) error {
	b, err := t.encodeSnapshot(sysOffset)
	if err != nil {
		return err
	}
	return fileutil.WriteFileAtomic(path, b, 0o644)
}

// EncodeSnapshot returns the bytes Save would write, for a caller that
// stores them itself (the broker, through the store's WriteMeta).
func (t *Table) EncodeSnapshot(sysOffset func() int64) ([]byte, error) {
	return t.encodeSnapshot(sysOffset)
}

// DecodeSnapshot parses snapshot bytes as Load does (ErrBadSnap when
// damaged).
func DecodeSnapshot(b []byte) (*Table, int64, error) { return decodeSnapshot(b) }

func (t *Table) encodeSnapshot(sysOffset func() int64) ([]byte, error) {
	var snap snapshot
	t.mu.RLock()
	snap.SysOffset = sysOffset()
	for k, s := range t.states {
		q := snapQueue{Group: k.Group, Topic: k.Topic, QueueID: k.QueueID, Committed: s.Committed, Generation: s.Generation}
		for off := range s.acked {
			q.Acked = append(q.Acked, off)
		}
		sort.Slice(q.Acked, func(i, j int) bool { return q.Acked[i] < q.Acked[j] })
		for off := range s.failed {
			q.Failed = append(q.Failed, off)
		}
		sort.Slice(q.Failed, func(i, j int) bool { return q.Failed[i] < q.Failed[j] })
		snap.Queues = append(snap.Queues, q)
	}
	t.mu.RUnlock()
	sort.Slice(snap.Queues, func(i, j int) bool {
		a, b := snap.Queues[i], snap.Queues[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.QueueID < b.QueueID
	})
	body, err := json.Marshal(snap)
	if err != nil {
		return nil, err
	}
	out := make([]byte, snapHeader, snapHeader+len(body))
	binary.BigEndian.PutUint32(out[0:], snapMagic)
	binary.BigEndian.PutUint16(out[4:], snapVersion)
	binary.BigEndian.PutUint32(out[6:], crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

// Load reads a snapshot written by Save. A missing file gives an empty
// table and sysOffset 0; a damaged one gives ErrBadSnap (the caller then
// replays the system topic from its start).
func Load(path string) (*Table, int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return NewTable(), 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	return decodeSnapshot(b)
}

func decodeSnapshot(b []byte) (*Table, int64, error) {
	if len(b) < snapHeader || binary.BigEndian.Uint32(b) != snapMagic ||
		binary.BigEndian.Uint16(b[4:]) != snapVersion ||
		binary.BigEndian.Uint32(b[6:]) != crc32.Checksum(b[snapHeader:], castagnoli) {
		return nil, 0, ErrBadSnap
	}
	var snap snapshot
	if err := json.Unmarshal(b[snapHeader:], &snap); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrBadSnap, err)
	}
	if snap.SysOffset < 0 {
		return nil, 0, ErrBadSnap
	}
	t := NewTable()
	for _, q := range snap.Queues {
		if q.Committed < 0 {
			return nil, 0, ErrBadSnap
		}
		s := t.state(Key{Group: q.Group, Topic: q.Topic, QueueID: q.QueueID})
		s.Committed, s.Generation = q.Committed, q.Generation
		for _, off := range q.Acked {
			if off > s.Committed {
				if s.acked == nil {
					s.acked = make(map[int64]struct{})
				}
				s.acked[off] = struct{}{}
			}
		}
		for _, off := range q.Failed {
			s.addFailed(off)
		}
	}
	return t, snap.SysOffset, nil
}
