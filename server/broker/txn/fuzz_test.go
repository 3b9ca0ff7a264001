package txn

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"
)

// FuzzDecodeSnapshot: the snapshot is read back from disk
// (damaged, truncated, from another version); decoding arbitrary bytes
// never panics, whatever decodes can be installed, and the installed
// state encodes to a snapshot that decodes to the same.
func FuzzDecodeSnapshot(f *testing.F) {
	x := NewState(15)
	x.pos = Position{Half: 3, HalfMark: Mark{Seq: 2, Phys: 900}, Op: 2, OpMark: Mark{Seq: 1, Phys: 950}}
	now := time.UnixMilli(1_700_000_000_000)
	x.add(&Txn{id: "7F00000100001F900000000000000100", idOffset: 0x100, seq: 0, phys: 0x100, topic: "orders", queue: 1, group: "pg",
		checkAfter: 6 * time.Second, born: now, next: now.Add(6 * time.Second), hi: -1})
	x.add(&Txn{id: "7F00000100001F900000000000000380", idOffset: 0x380, seq: 2, phys: 0x380, topic: "t", group: "pg2",
		checkAfter: time.Second, born: now, checks: 15, next: now, hi: -1})
	f.Add(x.EncodeSnapshot())
	f.Add([]byte(`{"version":1,"pos":{"half":0,"halfMark":{"seq":-1,"phys":-1},"op":0,"opMark":{"seq":-1,"phys":-1}},"txns":[]}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSnapshot(data, testNames)
		if err != nil {
			return
		}
		y := NewState(15)
		y.Install(s)
		if y.Len() != len(s.Txns) {
			t.Fatalf("%d transactions installed of %d", y.Len(), len(s.Txns))
		}
		again, err := DecodeSnapshot(y.EncodeSnapshot(), testNames)
		if err != nil {
			t.Fatalf("an installed snapshot re-encodes to one that does not decode: %v", err)
		}
		sort.Slice(s.Txns, func(i, j int) bool {
			return s.Txns[i].Seq < s.Txns[j].Seq || s.Txns[i].Seq == s.Txns[j].Seq && s.Txns[i].ID < s.Txns[j].ID
		})
		sort.Slice(again.Txns, func(i, j int) bool {
			return again.Txns[i].Seq < again.Txns[j].Seq || again.Txns[i].Seq == again.Txns[j].Seq && again.Txns[i].ID < again.Txns[j].ID
		})
		if s.Txns == nil {
			s.Txns = []SnapshotRecord{}
		}
		if !reflect.DeepEqual(s, again) {
			t.Fatalf("round trip changed the snapshot:\n%+v\n%+v", s, again)
		}
	})
}

// FuzzDecodeOp: op records are read back from the CommitLog; decoding
// arbitrary bytes never panics, and a decoded record encodes to one that
// decodes to the same.
func FuzzDecodeOp(f *testing.F) {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	for _, rec := range []OpRecord{
		{ID: "7F00000100001F900000000000000100", State: Checked, At: at, CheckTimes: 3, NextCheckMs: 1_700_000_006_000},
		{ID: "7F00000100001F900000000000000100", State: Committed, At: at, ProducerGroup: "pg", Topic: "orders", QueueID: 2, BornMs: 1},
		{ID: "7F00000100001F900000000000000100", State: RolledBack, At: at, Reason: ReasonMaxChecks, CheckTimes: 15},
	} {
		f.Add(OpMessage(rec, at).Body)
	}
	f.Add([]byte(`{"id":"x","state":"checked"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, err := DecodeOp(body)
		if err != nil {
			return
		}
		out, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, err := DecodeOp(out)
		if err != nil {
			t.Fatalf("a decoded record re-encodes to one that does not decode: %v", err)
		}
		if !again.At.Equal(rec.At) {
			t.Fatalf("at %v became %v", rec.At, again.At)
		}
		again.At = rec.At
		if again != rec {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", rec, again)
		}
	})
}
