package broker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
	"github.com/mqgate/mqgate/storage/message"
)

// txnOptions make every check come checkAfterMs after the last.
func txnOptions(o broker.Options) broker.Options {
	o.TransactionCheckInterval = time.Millisecond
	return o
}

// sendTxns sends n transactional messages to topic (bodies topic-i) and
// returns their transaction ids.
func (bd *bundle) sendTxns(t *testing.T, topic string, n int, checkAfterMs int64) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		res, err := bd.b.Send(bd.ctx, topic, []broker.SendMessage{{Body: []byte(fmt.Sprint(topic, "-", i)), Keys: []string{fmt.Sprint("k", i)},
			Transactional: true, ProducerGroup: "pg", CheckAfterMs: checkAfterMs}})
		require.NoError(t, err)
		require.Equal(t, res[0].MessageID, res[0].TransactionID)
		ids[i] = res[0].TransactionID
	}
	return ids
}

// txnStates describes every transaction of ids.
func (bd *bundle) txnStates(t *testing.T, ids []string) map[string]broker.Transaction {
	t.Helper()
	out := map[string]broker.Transaction{}
	for _, id := range ids {
		tx, err := bd.b.GetTransaction(bd.ctx, id)
		require.NoError(t, err, id)
		out[id] = tx
	}
	return out
}

// pullChecks pulls checks of pg until n transactions have been checked.
// A transaction can be checked more than once meanwhile: its next check
// falls due checkAfter after the last, and on a loaded machine the pulls
// can take longer than that.
func (bd *bundle) pullChecks(t *testing.T, n int) []broker.TransactionCheck {
	t.Helper()
	var got []broker.TransactionCheck
	seen := map[string]bool{}
	for len(seen) < n {
		c, err := bd.b.PullTransactionChecks(bd.ctx, "pg", n-len(seen), 5*time.Second)
		require.NoError(t, err)
		require.NotEmpty(t, c, "only %d of %d transactions were checked", len(seen), n)
		for _, x := range c {
			seen[x.Transaction.ID] = true
		}
		got = append(got, c...)
	}
	return got
}

// checkCounts counts the checks of each transaction.
func checkCounts(checks []broker.TransactionCheck) map[string]int {
	out := map[string]int{}
	for _, c := range checks {
		out[c.Transaction.ID]++
	}
	return out
}

// Unresolved transactions outlive CommitLog retention: their half
// messages are carried (same id, body, check count and next check) before
// the segments holding them are deleted, over several rounds; they are
// the same after a restart (from the snapshot), a crash image and a
// rebuild from the queues without the snapshot, and a commit delivers the
// message as it was sent. Finished ones keep their outcome while their
// records are retained.
func TestTransactionsCarriedPastRetention(t *testing.T) {
	opts := txnOptions(retentionOptions(t))
	optsFor := func(dir string) broker.Options { o := opts; o.DataDir = dir; return o }
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	ids := bd.sendTxns(t, "tc", 30, 100)
	checked := checkCounts(bd.pullChecks(t, 30)) // every one checked (once, unless the machine is slow)
	require.Len(t, checked, 30)
	for _, id := range ids[:10] {
		_, err := bd.b.CommitTransaction(bd.ctx, id)
		require.NoError(t, err)
	}
	for _, id := range ids[10:20] {
		_, err := bd.b.RollbackTransaction(bd.ctx, id)
		require.NoError(t, err)
	}
	open := ids[20:]
	want := bd.txnStates(t, open)
	for id, tx := range want {
		require.Equal(t, broker.TxnPending, tx.State)
		require.Equal(t, checked[id], tx.CheckTimes, id)
	}
	for round := 0; round < 3; round++ {
		bd.rollAndExpire(t, 20*time.Second)
		require.Equal(t, want, bd.txnStates(t, open), "round %d", round)
		require.Equal(t, 10, bd.b.TransactionStatus().Pending)
	}
	st, err := bd.b.Status(bd.ctx)
	require.NoError(t, err)
	for _, id := range open {
		mid, err := message.ParseID(id)
		require.NoError(t, err)
		require.Less(t, mid.Offset(), st.CommitLogMin, "the first half record of %s was deleted", id)
	}
	_, err = bd.b.GetTransaction(bd.ctx, ids[0])
	require.True(t, errors.Is(err, broker.ErrTransactionNotFound), "a finished transaction is forgotten with its records: %v", err)

	require.NoError(t, bd.b.Close(bd.ctx))
	bd.b = brokertest.Open(t, opts)
	rec := bd.b.TxnRecovered()
	require.False(t, rec.Rebuilt, "%+v", rec)
	require.Equal(t, want, bd.txnStates(t, open), "after a restart")
	bd.crashImage(t, optsFor)
	require.Equal(t, want, bd.txnStates(t, open), "after a crash")
	require.NoError(t, bd.b.Close(bd.ctx))
	require.NoError(t, os.Remove(filepath.Join(bd.dir, "config", broker.TxnSnapshotFile)))
	bd.b = brokertest.Open(t, optsFor(bd.dir))
	rec = bd.b.TxnRecovered()
	require.True(t, rec.Rebuilt, "%+v", rec)
	require.Equal(t, want, bd.txnStates(t, open), "rebuilt from the queues")

	// The checks go on from the carried count; a commit delivers the
	// message as it was sent.
	again := bd.pullChecks(t, 10)
	nth := map[string]int{}
	for _, c := range again {
		id := c.Transaction.ID
		require.Contains(t, open, id)
		nth[id]++
		require.Equal(t, want[id].CheckTimes+nth[id], c.Transaction.CheckTimes, id)
	}
	for _, id := range open {
		tx, err := bd.b.CommitTransaction(bd.ctx, id)
		require.NoError(t, err)
		require.Equal(t, broker.TxnCommitted, tx.State)
	}
	got := bd.pull(t, "g", "tc", 32, 2*time.Second, time.Minute)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, string(m.Body))
		require.Contains(t, open, m.MessageID)
	}
	sort.Strings(bodies)
	var wantBodies []string
	for i := 20; i < 30; i++ {
		wantBodies = append(wantBodies, fmt.Sprint("tc-", i))
	}
	sort.Strings(wantBodies)
	require.Equal(t, wantBodies, bodies)
}

// The snapshot is a hint: a damaged one, one that covers records the
// queues do not hold, or none at all, and the state is rebuilt from the
// queues — the same unresolved transactions with the same checks.
func TestTransactionSnapshotIsAHint(t *testing.T) {
	dir := t.TempDir()
	open := func() *broker.Broker {
		return brokertest.MustOpen(t, dir, func(o *broker.Options) { *o = txnOptions(*o) })
	}
	bd := &bundle{dir: dir, ctx: context.Background(), b: open()}
	ids := bd.sendTxns(t, "ts", 12, 100)
	bd.pullChecks(t, 12)
	bd.pullChecks(t, 4) // four checked twice
	for _, id := range ids[:3] {
		_, err := bd.b.CommitTransaction(bd.ctx, id)
		require.NoError(t, err)
	}
	_, err := bd.b.RollbackTransaction(bd.ctx, ids[3])
	require.NoError(t, err)
	want := bd.txnStates(t, ids)
	snap := filepath.Join(dir, "config", broker.TxnSnapshotFile)
	for _, c := range []struct {
		name    string
		corrupt func([]byte) []byte
	}{
		{"clean", nil},
		{"missing", func([]byte) []byte { return nil }},
		{"garbage", func([]byte) []byte { return []byte("{not json") }},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"from the future", func([]byte) []byte {
			return []byte(`{"version":1,"pos":{"half":99999,"halfMark":{"seq":-1,"phys":-1},"op":0,"opMark":{"seq":-1,"phys":-1}},"txns":[]}`)
		}},
		{"wrong mark", func([]byte) []byte {
			return []byte(`{"version":1,"pos":{"half":1,"halfMark":{"seq":0,"phys":12345},"op":0,"opMark":{"seq":-1,"phys":-1}},"txns":[]}`)
		}},
	} {
		require.NoError(t, bd.b.Close(bd.ctx), c.name)
		if c.corrupt != nil {
			data, err := os.ReadFile(snap)
			require.NoError(t, err)
			if b := c.corrupt(data); b == nil {
				require.NoError(t, os.Remove(snap))
			} else {
				require.NoError(t, os.WriteFile(snap, b, 0o600))
			}
		}
		bd.b = open()
		rec := bd.b.TxnRecovered()
		require.Equal(t, c.corrupt != nil, rec.Rebuilt, "%s: %+v", c.name, rec)
		if c.corrupt == nil {
			require.Zero(t, rec.HalfRecords+rec.OpRecords, "a clean start reads no transaction record")
		}
		require.Equal(t, want, bd.txnStates(t, ids), c.name)
	}
}

// A deleted topic's unresolved transactions are rolled back with it
// (reason topic-deleted); a topic created again under the name never gets
// their messages.
func TestTransactionsOfADeletedTopic(t *testing.T) {
	bd := setup(t)
	ids := bd.sendTxns(t, "td", 3, 60_000)
	require.NoError(t, bd.b.DeleteTopic(bd.ctx, "td"))
	for _, id := range ids {
		tx, err := bd.b.GetTransaction(bd.ctx, id)
		require.NoError(t, err)
		require.Equal(t, broker.TxnRolledBack, tx.State)
		require.Equal(t, broker.TxnReasonTopicDeleted, tx.Reason)
		_, err = bd.b.CommitTransaction(bd.ctx, id)
		var fin *broker.TransactionFinishedError
		require.ErrorAs(t, err, &fin)
		require.Equal(t, broker.TxnRolledBack, fin.Transaction.State)
	}
	bd.send(t, "td", "new")
	got := bd.pull(t, "g", "td", 32, 300*time.Millisecond, time.Minute)
	require.Len(t, got, 1)
	require.Equal(t, "new", string(got[0].Body))
}
