package txn

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/mqgate/mqgate/server/broker/quote"
	"github.com/mqgate/mqgate/storage/message"
)

// SnapshotFile is the snapshot of the unresolved transactions under
// <data>/config.
const SnapshotFile = "transactions.snapshot"

// SnapshotVersion is the snapshot's version, the only one read.
const SnapshotVersion = 1

// Mark is the last record applied of a queue.
type Mark struct {
	Seq  int64 `json:"seq"`
	Phys int64 `json:"phys"`
}

// NoMark is the Mark of a queue of which nothing was applied.
var NoMark = Mark{Seq: -1, Phys: -1}

// Position is what a State has applied: the next queue offsets and the
// last records.
type Position struct {
	Half     int64 `json:"half"`
	HalfMark Mark  `json:"halfMark"`
	Op       int64 `json:"op"`
	OpMark   Mark  `json:"opMark"`
}

// Snapshot is the snapshot of the unresolved transactions and the
// position it covers (the file SnapshotFile).
type Snapshot struct {
	Version int              `json:"version"`
	Pos     Position         `json:"pos"`
	Txns    []SnapshotRecord `json:"txns"`
}

// SnapshotRecord is one unresolved transaction of a Snapshot.
type SnapshotRecord struct {
	ID           string `json:"id"`
	Seq          int64  `json:"seq"`
	Phys         int64  `json:"phys"`
	Topic        string `json:"topic"`
	QueueID      int32  `json:"queueId"`
	Group        string `json:"group"`
	CheckAfterMs int64  `json:"checkAfterMs"`
	BornMs       int64  `json:"bornMs"`
	Checks       int    `json:"checks"`
	NextMs       int64  `json:"nextMs"`
}

// EncodeSnapshot encodes the state and its position, the transactions in
// the order of their latest half records.
func (s *State) EncodeSnapshot() []byte {
	snap := Snapshot{Version: SnapshotVersion, Pos: s.pos, Txns: make([]SnapshotRecord, 0, len(s.pending))}
	for _, t := range s.pending {
		snap.Txns = append(snap.Txns, SnapshotRecord{ID: t.id, Seq: t.seq, Phys: t.phys, Topic: t.topic, QueueID: t.queue,
			Group: t.group, CheckAfterMs: t.checkAfter.Milliseconds(), BornMs: t.born.UnixMilli(), Checks: t.checks, NextMs: t.next.UnixMilli()})
	}
	sort.Slice(snap.Txns, func(i, j int) bool { return snap.Txns[i].Seq < snap.Txns[j].Seq })
	out, err := json.Marshal(snap)
	if err != nil {
		panic(err) // plain fields always marshal
	}
	return out
}

// Names checks the names and queue ids a snapshot holds by the rules of
// the broker and the store, which this package does not repeat.
type Names struct {
	// Topic and Group check a topic and a producer group name.
	Topic, Group func(string) error
	// MaxQueueID is the highest queue id.
	MaxQueueID int32
}

// DecodeSnapshot decodes and checks a snapshot: its version, its
// position, and every transaction's id (canonical, once), record (below
// the position), names and bounds.
func DecodeSnapshot(data []byte, names Names) (Snapshot, error) {
	var s Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("transaction snapshot: %w", err)
	}
	bad := func(format string, args ...any) (Snapshot, error) {
		return Snapshot{}, fmt.Errorf("transaction snapshot: "+format, args...)
	}
	if s.Version != SnapshotVersion {
		return bad("version %d", s.Version)
	}
	p := s.Pos
	if p.Half < 0 || p.Op < 0 || p.HalfMark.Seq < -1 || p.OpMark.Seq < -1 || p.HalfMark.Seq >= p.Half || p.OpMark.Seq >= p.Op {
		return bad("position %+v", p)
	}
	seen := make(map[string]struct{}, len(s.Txns))
	for i, r := range s.Txns {
		mid, err := message.ParseID(r.ID)
		if err != nil {
			return bad("txns[%d]: id: %v", i, err)
		}
		if r.ID != mid.String() {
			return bad("txns[%d]: id %s is not in its canonical form", i, quote.Value(r.ID))
		}
		if _, dup := seen[r.ID]; dup {
			return bad("txns[%d]: %s twice", i, r.ID)
		}
		seen[r.ID] = struct{}{}
		switch {
		case r.Seq < 0 || r.Seq >= p.Half || r.Phys < 0:
			return bad("txns[%d]: record %d at %d outside the position", i, r.Seq, r.Phys)
		case names.Topic(r.Topic) != nil || names.Group(r.Group) != nil:
			return bad("txns[%d]: topic %s or group %s", i, quote.Value(r.Topic), quote.Value(r.Group))
		case r.QueueID < 0 || r.QueueID > names.MaxQueueID || r.CheckAfterMs <= 0 || r.CheckAfterMs > MaxCheckAfter.Milliseconds() || r.Checks < 0:
			return bad("txns[%d]: queue %d, checkAfterMs %d, checks %d", i, r.QueueID, r.CheckAfterMs, r.Checks)
		}
	}
	return s, nil
}

// Install adds a decoded snapshot's transactions to an empty state and
// places it at the snapshot's position.
func (s *State) Install(snap Snapshot) {
	s.pos = snap.Pos
	for _, r := range snap.Txns {
		mid, _ := message.ParseID(r.ID) // checked by DecodeSnapshot
		s.add(&Txn{id: r.ID, idOffset: mid.Offset(), seq: r.Seq, phys: r.Phys, topic: r.Topic, queue: r.QueueID,
			group: r.Group, checkAfter: time.Duration(r.CheckAfterMs) * time.Millisecond, born: time.UnixMilli(r.BornMs),
			checks: r.Checks, next: time.UnixMilli(r.NextMs), hi: -1})
	}
}
