package broker

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage/message"
)

// The transaction family's formats, pinned byte for byte with the code
// from before the family moved to server/broker/txn: the properties of a
// half message, of its carried copy and of the committed message, what
// applying a half record makes of them, and the broker's names in a
// snapshot (the op record and the snapshot file: txn/golden_test.go).

const goldenTxnID = "7F00000100001F900000000000000100"

// TestGoldenTxnSnapshotNames: the snapshot decoder checks names and
// queue ids by the broker's and the store's rules.
func TestGoldenTxnSnapshotNames(t *testing.T) {
	pos := `"pos":{"half":1,"halfMark":{"seq":-1,"phys":-1},"op":0,"opMark":{"seq":-1,"phys":-1}}`
	rec := func(s string) string {
		return `{"version":1,` + pos + `,"txns":[{"id":"7F00000100001F900000000000000100","seq":0,"phys":1,` + s + `}]}`
	}
	for data, want := range map[string]string{
		rec(`"topic":"t","group":"%g","checkAfterMs":1`):                `transaction snapshot: txns[0]: topic "t" or group "%g"`,
		rec(`"topic":"rmq_sys_X","group":"g","checkAfterMs":1`):         `transaction snapshot: txns[0]: topic "rmq_sys_X" or group "g"`,
		rec(`"topic":"t","group":"g","queueId":65536,"checkAfterMs":1`): `transaction snapshot: txns[0]: queue 65536, checkAfterMs 1, checks 0`,
	} {
		if _, err := txn.DecodeSnapshot([]byte(data), txnNames); err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", data, err, want)
		}
	}
	if _, err := txn.DecodeSnapshot([]byte(rec(`"topic":"t","group":"g","queueId":65535,"checkAfterMs":1`)), txnNames); err != nil {
		t.Error(err)
	}
}

// goldenHalf is a half message as a transactional send stores it.
func goldenHalf() *message.Message {
	m := &message.Message{Topic: "orders", QueueID: 2, Body: []byte("b"), BornTimestamp: 1_699_999_990_000}
	m.SetProperty(message.PropertyTags, "tag")
	m.SetProperty("user", "v")
	txn.AsHalf(m, "pg", 1500)
	return m
}

func TestGoldenTxnHalfMessages(t *testing.T) {
	m := goldenHalf()
	want := map[string]string{"TAGS": "tag", "user": "v", "REAL_TOPIC": "orders", "REAL_QID": "2", "TRAN_PGROUP": "pg", "TRAN_CHECK_AFTER_MS": "1500"}
	if m.Topic != "rmq_sys_TRANS_HALF" || m.QueueID != 0 || !maps.Equal(m.Properties, want) {
		t.Fatalf("half: %s/%d %v", m.Topic, m.QueueID, m.Properties)
	}
	d := &message.Message{Topic: "orders", QueueID: 1}
	txn.AsHalf(d, "pg", 0)
	if d.Property("TRAN_CHECK_AFTER_MS") != "6000" {
		t.Fatalf("default checkAfterMs: %v", d.Properties)
	}

	// A half record as stored, and what applying it makes.
	m.StoreHost = message.Host{127, 0, 0, 1, 0, 0, 0x1f, 0x90}
	m.PhysicalOffset, m.QueueOffset = 0x100, 4
	b := &Broker{txns: txn.New(txn.Config{MaxChecks: 15})}
	if err := b.txns.ApplyHalf(txn.ReadHalf(m)); err != nil {
		t.Fatal(err)
	}
	tx := b.txns.Get(goldenTxnID)
	if tx == nil {
		t.Fatalf("pending: %d", b.txns.Len())
	}
	born := time.UnixMilli(1_699_999_990_000)
	if tx.IDOffset() != 0x100 || txnSeq(t, b.txns, goldenTxnID) != 4 || tx.Phys() != 0x100 || tx.Topic() != "orders" || tx.Queue() != 2 || tx.Group() != "pg" ||
		tx.CheckAfter() != 1500*time.Millisecond || !tx.Born().Equal(born) || tx.Checks() != 0 || !tx.Next().Equal(born.Add(1500*time.Millisecond)) {
		t.Fatalf("applied: %+v", tx)
	}

	// Three checks handed out (before the move, set on the struct).
	b.txns.ApplyOp(txn.OpRecord{ID: goldenTxnID, State: txn.Checked, CheckTimes: 3, NextCheckMs: 1_700_000_006_123})
	c := txn.HalfCopy(m, tx)
	want = map[string]string{"TAGS": "tag", "user": "v", "REAL_TOPIC": "orders", "REAL_QID": "2", "TRAN_PGROUP": "pg", "TRAN_CHECK_AFTER_MS": "1500",
		"TRAN_ID": goldenTxnID, "UNIQ_KEY": "txn:" + goldenTxnID, "TRAN_CHECK_TIMES": "3", "TRAN_NEXT_CHECK_MS": "1700000006123"}
	if c.Topic != "rmq_sys_TRANS_HALF" || c.QueueID != 0 || string(c.Body) != "b" || c.BornTimestamp != m.BornTimestamp || !maps.Equal(c.Properties, want) {
		t.Fatalf("carried copy: %s/%d %v", c.Topic, c.QueueID, c.Properties)
	}
	// The carried copy, applied to a state without the transaction (a
	// rebuild from the queues after retention), restores it.
	c.StoreHost, c.PhysicalOffset, c.QueueOffset = m.StoreHost, 0x900, 9
	b2 := &Broker{txns: txn.New(txn.Config{MaxChecks: 15})}
	if err := b2.txns.ApplyHalf(txn.ReadHalf(c)); err != nil {
		t.Fatal(err)
	}
	if ty := b2.txns.Get(goldenTxnID); ty == nil || ty.IDOffset() != 0x100 || ty.Phys() != 0x900 || ty.Checks() != 3 || !ty.Next().Equal(tx.Next()) {
		t.Fatalf("carried copy applied: %+v", ty)
	}

	out := txn.CommittedCopy(m, tx)
	want = map[string]string{"TAGS": "tag", "user": "v", "TRAN_ID": goldenTxnID, "UNIQ_KEY": "txn:" + goldenTxnID}
	if out.Topic != "orders" || out.QueueID != 2 || string(out.Body) != "b" || !maps.Equal(out.Properties, want) {
		t.Fatalf("committed: %s/%d %v", out.Topic, out.QueueID, out.Properties)
	}
	if got := txn.CommittedCopy(c, tx); !maps.Equal(got.Properties, want) {
		t.Fatalf("committed from a carried copy: %v", got.Properties)
	}
}

// txnSeq is the queue offset of the latest half record of transaction id,
// read from the state's snapshot.
func txnSeq(t *testing.T, x *txn.Service, id string) int64 {
	t.Helper()
	var s txn.Snapshot
	if err := json.Unmarshal(x.EncodeSnapshot(), &s); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Txns {
		if r.ID == id {
			return r.Seq
		}
	}
	t.Fatalf("%s not in the snapshot", id)
	return -1
}
