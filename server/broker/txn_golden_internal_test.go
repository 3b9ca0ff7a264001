package broker

import (
	"maps"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/message"
)

// The transaction family's formats, pinned byte for byte with the code
// from before the family moved to server/broker/txn: the op record body,
// the snapshot file, the properties of a half message, of its carried copy
// and of the committed message, and what applying a half record makes of
// them.

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

func goldenTxnOps() []txnOpRecord {
	at := goldenTxnAt.UTC()
	return []txnOpRecord{
		{ID: goldenTxnID, State: txnChecked, At: at, CheckTimes: 3, NextCheckMs: 1_700_000_006_123},
		{ID: goldenTxnID, State: TxnCommitted, At: at, CheckTimes: 2, ProducerGroup: "pg", Topic: "orders", QueueID: 2, BornMs: 1_699_999_990_000},
		{ID: goldenTxnID, State: TxnRolledBack, At: at, CheckTimes: 15, Reason: TxnReasonMaxChecks, ProducerGroup: "pg", Topic: "orders", BornMs: 1_699_999_990_000},
		{ID: goldenTxnID, State: TxnRolledBack, At: at},
	}
}

func TestGoldenTxnOpRecords(t *testing.T) {
	for i, rec := range goldenTxnOps() {
		m := txnOpMessage(rec, goldenTxnAt)
		if string(m.Body) != goldenTxnOpBodies[i] {
			t.Errorf("op record %d:\n got %s\nwant %s", i, m.Body, goldenTxnOpBodies[i])
		}
		if m.Topic != "rmq_sys_TRANS_OP" || m.QueueID != 0 || m.BornTimestamp != goldenTxnAt.UnixMilli() ||
			!maps.Equal(m.Properties, map[string]string{"UNIQ_KEY": "txn:" + goldenTxnID}) {
			t.Errorf("op record %d: topic %s queue %d born %d properties %v", i, m.Topic, m.QueueID, m.BornTimestamp, m.Properties)
		}
		got, err := decodeTxnOp([]byte(goldenTxnOpBodies[i]))
		if err != nil || got != rec {
			t.Errorf("op record %d decodes to %+v, %v; want %+v", i, got, err, rec)
		}
	}
	for body, want := range map[string]string{
		`{"id":"7f00000100001f900000000000000100","state":"checked"}`:                 `transaction op record: id "7f00000100001f900000000000000100" is not in its canonical form`,
		`{"id":"7F00000100001F900000000000000100","state":"pending"}`:                 `transaction op record: state "pending"`,
		`{"id":"7F00000100001F900000000000000100","state":"checked","checkTimes":-1}`: `transaction op record: checkTimes -1`,
	} {
		if _, err := decodeTxnOp([]byte(body)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", body, err, want)
		}
	}
}

func goldenTxnSet() *txnSet {
	x := &txnSet{}
	x.init(15)
	x.pos = txnPosition{Half: 3, HalfMark: txnMark{Seq: 2, Phys: 0x380}, Op: 2, OpMark: txnMark{Seq: 1, Phys: 0x400}}
	born := time.UnixMilli(1_700_000_000_000)
	x.add(&txn{id: "7F00000100001F900000000000000380", idOffset: 0x380, seq: 2, phys: 0x380, topic: "t", group: "pg2",
		checkAfter: time.Second, born: born, checks: 15, next: born.Add(time.Minute), hi: -1})
	x.add(&txn{id: goldenTxnID, idOffset: 0x100, seq: 0, phys: 0x100, topic: "orders", queue: 1, group: "pg",
		checkAfter: 6 * time.Second, born: born, next: born.Add(6 * time.Second), hi: -1})
	return x
}

func TestGoldenTxnSnapshot(t *testing.T) {
	if got := string(goldenTxnSet().encodeSnapshot()); got != goldenTxnSnapshot {
		t.Fatalf("snapshot:\n got %s\nwant %s", got, goldenTxnSnapshot)
	}
	s, err := decodeTxnSnapshot([]byte(goldenTxnSnapshot))
	if err != nil {
		t.Fatal(err)
	}
	y := &txnSet{}
	y.init(15)
	y.install(s)
	if got := string(y.encodeSnapshot()); got != goldenTxnSnapshot {
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
		if _, err := decodeTxnSnapshot([]byte(data)); err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", data, err, want)
		}
	}
}

// goldenHalf is a half message as a transactional send stores it.
func goldenHalf() *message.Message {
	m := &message.Message{Topic: "orders", QueueID: 2, Body: []byte("b"), BornTimestamp: 1_699_999_990_000}
	m.SetProperty(message.PropertyTags, "tag")
	m.SetProperty("user", "v")
	asHalf(m, &SendMessage{Transactional: true, ProducerGroup: "pg", CheckAfterMs: 1500})
	return m
}

func TestGoldenTxnHalfMessages(t *testing.T) {
	m := goldenHalf()
	want := map[string]string{"TAGS": "tag", "user": "v", "REAL_TOPIC": "orders", "REAL_QID": "2", "TRAN_PGROUP": "pg", "TRAN_CHECK_AFTER_MS": "1500"}
	if m.Topic != "rmq_sys_TRANS_HALF" || m.QueueID != 0 || !maps.Equal(m.Properties, want) {
		t.Fatalf("half: %s/%d %v", m.Topic, m.QueueID, m.Properties)
	}
	d := &message.Message{Topic: "orders", QueueID: 1}
	asHalf(d, &SendMessage{Transactional: true, ProducerGroup: "pg"})
	if d.Property("TRAN_CHECK_AFTER_MS") != "6000" {
		t.Fatalf("default checkAfterMs: %v", d.Properties)
	}

	// A half record as stored, and what applying it makes.
	m.StoreHost = message.Host{127, 0, 0, 1, 0, 0, 0x1f, 0x90}
	m.PhysicalOffset, m.QueueOffset = 0x100, 4
	b := &Broker{}
	b.txns.init(15)
	b.applyHalf(m)
	tx := b.txns.pending[goldenTxnID]
	if tx == nil {
		t.Fatalf("pending: %v", b.txns.pending)
	}
	born := time.UnixMilli(1_699_999_990_000)
	if tx.idOffset != 0x100 || tx.seq != 4 || tx.phys != 0x100 || tx.topic != "orders" || tx.queue != 2 || tx.group != "pg" ||
		tx.checkAfter != 1500*time.Millisecond || !tx.born.Equal(born) || tx.checks != 0 || !tx.next.Equal(born.Add(1500*time.Millisecond)) {
		t.Fatalf("applied: %+v", tx)
	}

	tx.checks, tx.next = 3, time.UnixMilli(1_700_000_006_123)
	c := halfCopy(m, tx)
	want = map[string]string{"TAGS": "tag", "user": "v", "REAL_TOPIC": "orders", "REAL_QID": "2", "TRAN_PGROUP": "pg", "TRAN_CHECK_AFTER_MS": "1500",
		"TRAN_ID": goldenTxnID, "UNIQ_KEY": "txn:" + goldenTxnID, "TRAN_CHECK_TIMES": "3", "TRAN_NEXT_CHECK_MS": "1700000006123"}
	if c.Topic != "rmq_sys_TRANS_HALF" || c.QueueID != 0 || string(c.Body) != "b" || c.BornTimestamp != m.BornTimestamp || !maps.Equal(c.Properties, want) {
		t.Fatalf("carried copy: %s/%d %v", c.Topic, c.QueueID, c.Properties)
	}
	// The carried copy, applied to a state without the transaction (a
	// rebuild from the queues after retention), restores it.
	c.StoreHost, c.PhysicalOffset, c.QueueOffset = m.StoreHost, 0x900, 9
	b2 := &Broker{}
	b2.txns.init(15)
	b2.applyHalf(c)
	if ty := b2.txns.pending[goldenTxnID]; ty == nil || ty.idOffset != 0x100 || ty.phys != 0x900 || ty.checks != 3 || !ty.next.Equal(tx.next) {
		t.Fatalf("carried copy applied: %+v", ty)
	}

	out := committedCopy(m, tx)
	want = map[string]string{"TAGS": "tag", "user": "v", "TRAN_ID": goldenTxnID, "UNIQ_KEY": "txn:" + goldenTxnID}
	if out.Topic != "orders" || out.QueueID != 2 || string(out.Body) != "b" || !maps.Equal(out.Properties, want) {
		t.Fatalf("committed: %s/%d %v", out.Topic, out.QueueID, out.Properties)
	}
	if got := committedCopy(c, tx); !maps.Equal(got.Properties, want) {
		t.Fatalf("committed from a carried copy: %v", got.Properties)
	}
}
