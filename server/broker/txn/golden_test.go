package txn

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"
)

// The family's formats, pinned byte for byte with the code from before it
// moved here from server/broker (these tests were written there against
// that code, their expected texts unchanged since): the op record body and
// the snapshot file; server/broker's txn_golden_internal_test.go pins the
// half messages' properties and the broker's names in a snapshot.

// testNames stands for the broker's names (server/broker/txnrecords.go:
// txnNames): what the tests below refuse, the broker refuses too.
var testNames = Names{
	Topic:      func(s string) error { return checkName(s, 127) },
	Group:      func(s string) error { return checkName(s, 120) },
	MaxQueueID: 1<<16 - 1,
}

func checkName(s string, max int) error {
	if s == "" || len(s) > max || strings.HasPrefix(s, "%") || strings.HasPrefix(s, "rmq_sys_") {
		return errors.New("bad name")
	}
	return nil
}

const goldenTxnID = "7F00000100001F900000000000000100"

var goldenTxnAt = time.UnixMilli(1_700_000_000_123)

var goldenTxnOpBodies = []string{
	`{"id":"7F00000100001F900000000000000100","state":"checked","at":"2023-11-14T22:13:20.123Z","checkTimes":3,"nextCheckMs":1700000006123}`,
	`{"id":"7F00000100001F900000000000000100","state":"committed","at":"2023-11-14T22:13:20.123Z","checkTimes":2,"producerGroup":"pg","topic":"orders","queueId":2,"bornMs":1699999990000}`,
	`{"id":"7F00000100001F900000000000000100","state":"rolled-back","at":"2023-11-14T22:13:20.123Z","checkTimes":15,"reason":"max-checks","producerGroup":"pg","topic":"orders","bornMs":1699999990000}`,
	`{"id":"7F00000100001F900000000000000100","state":"rolled-back","at":"2023-11-14T22:13:20.123Z","checkTimes":0}`,
}

const goldenTxnSnapshot = `{"version":1,"pos":{"half":3,"halfMark":{"seq":2,"phys":896},"op":2,"opMark":{"seq":1,"phys":1024}},"txns":[` +
	`{"id":"7F00000100001F900000000000000100","seq":0,"phys":256,"topic":"orders","queueId":1,"group":"pg","checkAfterMs":6000,"bornMs":1700000000000,"checks":0,"nextMs":1700000006000},` +
	`{"id":"7F00000100001F900000000000000380","seq":2,"phys":896,"topic":"t","queueId":0,"group":"pg2","checkAfterMs":1000,"bornMs":1700000000000,"checks":15,"nextMs":1700000060000}]}`

func goldenTxnOps() []OpRecord {
	at := goldenTxnAt.UTC()
	return []OpRecord{
		{ID: goldenTxnID, State: Checked, At: at, CheckTimes: 3, NextCheckMs: 1_700_000_006_123},
		{ID: goldenTxnID, State: Committed, At: at, CheckTimes: 2, ProducerGroup: "pg", Topic: "orders", QueueID: 2, BornMs: 1_699_999_990_000},
		{ID: goldenTxnID, State: RolledBack, At: at, CheckTimes: 15, Reason: ReasonMaxChecks, ProducerGroup: "pg", Topic: "orders", BornMs: 1_699_999_990_000},
		{ID: goldenTxnID, State: RolledBack, At: at},
	}
}

func TestGoldenTxnOpRecords(t *testing.T) {
	for i, rec := range goldenTxnOps() {
		m := OpMessage(rec, goldenTxnAt)
		if string(m.Body) != goldenTxnOpBodies[i] {
			t.Errorf("op record %d:\n got %s\nwant %s", i, m.Body, goldenTxnOpBodies[i])
		}
		if m.Topic != "rmq_sys_TRANS_OP" || m.QueueID != 0 || m.BornTimestamp != goldenTxnAt.UnixMilli() ||
			!maps.Equal(m.Properties, map[string]string{"UNIQ_KEY": "txn:" + goldenTxnID}) {
			t.Errorf("op record %d: topic %s queue %d born %d properties %v", i, m.Topic, m.QueueID, m.BornTimestamp, m.Properties)
		}
		got, err := DecodeOp([]byte(goldenTxnOpBodies[i]))
		if err != nil || got != rec {
			t.Errorf("op record %d decodes to %+v, %v; want %+v", i, got, err, rec)
		}
	}
	for body, want := range map[string]string{
		`{"id":"7f00000100001f900000000000000100","state":"checked"}`:                 `transaction op record: id "7f00000100001f900000000000000100" is not in its canonical form`,
		`{"id":"7F00000100001F900000000000000100","state":"pending"}`:                 `transaction op record: state "pending"`,
		`{"id":"7F00000100001F900000000000000100","state":"checked","checkTimes":-1}`: `transaction op record: checkTimes -1`,
	} {
		if _, err := DecodeOp([]byte(body)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", body, err, want)
		}
	}
}

func goldenTxnSet() *State {
	x := NewState(15)
	x.pos = Position{Half: 3, HalfMark: Mark{Seq: 2, Phys: 0x380}, Op: 2, OpMark: Mark{Seq: 1, Phys: 0x400}}
	born := time.UnixMilli(1_700_000_000_000)
	x.add(&Txn{id: "7F00000100001F900000000000000380", idOffset: 0x380, seq: 2, phys: 0x380, topic: "t", group: "pg2",
		checkAfter: time.Second, born: born, checks: 15, next: born.Add(time.Minute), hi: -1})
	x.add(&Txn{id: goldenTxnID, idOffset: 0x100, seq: 0, phys: 0x100, topic: "orders", queue: 1, group: "pg",
		checkAfter: 6 * time.Second, born: born, next: born.Add(6 * time.Second), hi: -1})
	return x
}

func TestGoldenTxnSnapshot(t *testing.T) {
	if got := string(goldenTxnSet().EncodeSnapshot()); got != goldenTxnSnapshot {
		t.Fatalf("snapshot:\n got %s\nwant %s", got, goldenTxnSnapshot)
	}
	s, err := DecodeSnapshot([]byte(goldenTxnSnapshot), testNames)
	if err != nil {
		t.Fatal(err)
	}
	y := NewState(15)
	y.Install(s)
	if got := string(y.EncodeSnapshot()); got != goldenTxnSnapshot {
		t.Fatalf("installed snapshot encodes to\n%s", got)
	}
	if y.exhausted.Len() != 1 || y.groups["pg"].heap.Len() != 1 || y.pending[goldenTxnID].idOffset != 0x100 {
		t.Fatalf("installed: exhausted %d, pg's heap %d", y.exhausted.Len(), y.groups["pg"].heap.Len())
	}
	pos := `"pos":{"half":1,"halfMark":{"seq":-1,"phys":-1},"op":0,"opMark":{"seq":-1,"phys":-1}}`
	rec := func(s string) string {
		return `{"version":1,` + pos + `,"txns":[{"id":"7F00000100001F900000000000000100","seq":0,"phys":1,` + s + `}]}`
	}
	for data, want := range map[string]string{
		`{"version":2}`: `transaction snapshot: version 2`,
		`{"version":1,"pos":{"half":0,"halfMark":{"seq":0,"phys":1}}}`:                         `transaction snapshot: position {Half:0 HalfMark:{Seq:0 Phys:1} Op:0 OpMark:{Seq:0 Phys:0}}`,
		rec(`"topic":"t","group":"%g","checkAfterMs":1`):                                       `transaction snapshot: txns[0]: topic "t" or group "%g"`,
		rec(`"topic":"t","group":"g","queueId":65536,"checkAfterMs":1`):                        `transaction snapshot: txns[0]: queue 65536, checkAfterMs 1, checks 0`,
		rec(`"topic":"t","group":"g","checkAfterMs":86400001`):                                 `transaction snapshot: txns[0]: queue 0, checkAfterMs 86400001, checks 0`,
		`{"version":1,` + pos + `,"txns":[{"id":"x","seq":0}]}`:                                `transaction snapshot: txns[0]: id: message: bad message id: length 1, want 32`,
		`{"version":1,` + pos + `,"txns":[{"id":"7F00000100001F900000000000000100","seq":1}]}`: `transaction snapshot: txns[0]: record 1 at 0 outside the position`,
	} {
		if _, err := DecodeSnapshot([]byte(data), testNames); err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", data, err, want)
		}
	}
}
