package broker

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"
)

// FuzzDecodeTxnSnapshot: the transaction snapshot is read back from disk
// (damaged, truncated, from another version); decoding arbitrary bytes
// never panics, whatever decodes can be installed, and the installed
// state encodes to a snapshot that decodes to the same.
func FuzzDecodeTxnSnapshot(f *testing.F) {
	x := &txnSet{}
	x.init(15)
	x.pos = txnPosition{Half: 3, HalfMark: txnMark{Seq: 2, Phys: 900}, Op: 2, OpMark: txnMark{Seq: 1, Phys: 950}}
	now := time.UnixMilli(1_700_000_000_000)
	x.add(&txn{id: "7F00000100001F900000000000000100", idOffset: 0x100, seq: 0, phys: 0x100, topic: "orders", queue: 1, group: "pg",
		checkAfter: 6 * time.Second, born: now, next: now.Add(6 * time.Second), hi: -1})
	x.add(&txn{id: "7F00000100001F900000000000000380", idOffset: 0x380, seq: 2, phys: 0x380, topic: "t", group: "pg2",
		checkAfter: time.Second, born: now, checks: 15, next: now, hi: -1})
	f.Add(x.encodeSnapshot())
	f.Add([]byte(`{"version":1,"pos":{"half":0,"halfMark":{"seq":-1,"phys":-1},"op":0,"opMark":{"seq":-1,"phys":-1}},"txns":[]}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeTxnSnapshot(data)
		if err != nil {
			return
		}
		y := &txnSet{}
		y.init(15)
		y.install(s)
		if len(y.pending) != len(s.Txns) {
			t.Fatalf("%d transactions installed of %d", len(y.pending), len(s.Txns))
		}
		again, err := decodeTxnSnapshot(y.encodeSnapshot())
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
			s.Txns = []txnSnapshotRecord{}
		}
		if !reflect.DeepEqual(s, again) {
			t.Fatalf("round trip changed the snapshot:\n%+v\n%+v", s, again)
		}
	})
}

// FuzzDecodeTxnOp: op records are read back from the CommitLog; decoding
// arbitrary bytes never panics, and a decoded record encodes to one that
// decodes to the same.
func FuzzDecodeTxnOp(f *testing.F) {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	for _, rec := range []txnOpRecord{
		{ID: "7F00000100001F900000000000000100", State: txnChecked, At: at, CheckTimes: 3, NextCheckMs: 1_700_000_006_000},
		{ID: "7F00000100001F900000000000000100", State: TxnCommitted, At: at, ProducerGroup: "pg", Topic: "orders", QueueID: 2, BornMs: 1},
		{ID: "7F00000100001F900000000000000100", State: TxnRolledBack, At: at, Reason: TxnReasonMaxChecks, CheckTimes: 15},
	} {
		f.Add(txnOpMessage(rec, at).Body)
	}
	f.Add([]byte(`{"id":"x","state":"checked"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec, err := decodeTxnOp(body)
		if err != nil {
			return
		}
		out, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, err := decodeTxnOp(out)
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
