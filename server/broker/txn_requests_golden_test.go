package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// The transaction family's requests, pinned as the facade answers them:
// every refusal's sentinel and text, the views a commit, a rollback, a
// get and a check pull return, the rendered half message of a check, the
// counters. Written against the code before the requests moved to
// server/broker/txn (server/broker/txn/doc.go).

// TestGoldenTxnRequestErrors: the refusals of a transactional send, of a
// commit, rollback or get, and of a check pull.
func TestGoldenTxnRequestErrors(t *testing.T) {
	t.Parallel()
	b := brokertest.MustOpen(t, "")
	ctx := context.Background()
	send := func(m broker.SendMessage) error {
		m.Body = []byte("x")
		_, err := b.Send(ctx, "orders", []broker.SendMessage{m})
		return err
	}
	for _, c := range []struct {
		name string
		err  error
		is   error
		text string
	}{
		{"group without transactional", send(broker.SendMessage{ProducerGroup: "pg"}), broker.ErrInvalidArgument,
			"invalid argument: producerGroup and checkAfterMs belong to a transactional send (transactional: true)"},
		{"checkAfterMs without transactional", send(broker.SendMessage{CheckAfterMs: 1000}), broker.ErrInvalidArgument,
			"invalid argument: producerGroup and checkAfterMs belong to a transactional send (transactional: true)"},
		{"no group", send(broker.SendMessage{Transactional: true}), broker.ErrInvalidArgument,
			"invalid argument: a transactional send needs a producerGroup (the group asked about it when it is not resolved)"},
		{"bad group", send(broker.SendMessage{Transactional: true, ProducerGroup: "bad name"}), broker.ErrInvalidName, ""},
		{"checkAfterMs too small", send(broker.SendMessage{Transactional: true, ProducerGroup: "pg", CheckAfterMs: 99}), broker.ErrInvalidArgument,
			"invalid argument: checkAfterMs 99 must be between 100 and 86400000"},
		{"checkAfterMs too large", send(broker.SendMessage{Transactional: true, ProducerGroup: "pg", CheckAfterMs: 86_400_001}), broker.ErrInvalidArgument,
			"invalid argument: checkAfterMs 86400001 must be between 100 and 86400000"},
		{"delayed", send(broker.SendMessage{Transactional: true, ProducerGroup: "pg", DelayMs: 1000}), broker.ErrInvalidArgument,
			"invalid argument: a transactional message cannot be delayed (delayLevel, delayMs, deliverAt): commit it when it should be delivered"},
		{"commit of a bad id", func() error { _, err := b.CommitTransaction(ctx, "nope"); return err }(), broker.ErrInvalidArgument,
			"invalid argument: transaction id: "},
		{"get of a bad id", func() error { _, err := b.GetTransaction(ctx, "nope"); return err }(), broker.ErrInvalidArgument,
			"invalid argument: transaction id: "},
		{"get of an unknown id", func() error { _, err := b.GetTransaction(ctx, "7F00000100001F900000000000000100"); return err }(), broker.ErrTransactionNotFound,
			"transaction not found: 7F00000100001F900000000000000100 (never sent, or finished before retention removed its records)"},
		{"rollback of an unknown id", func() error { _, err := b.RollbackTransaction(ctx, "7F00000100001F900000000000000100"); return err }(), broker.ErrTransactionNotFound,
			"transaction not found: 7F00000100001F900000000000000100 (never sent, or finished before retention removed its records)"},
		{"pull of a bad group", func() error { _, err := b.PullTransactionChecks(ctx, "%DLQ%pg", 1, 0); return err }(), broker.ErrReservedName,
			`reserved name: producer group name "%DLQ%pg" uses a reserved prefix (%, rmq_sys_) or name`},
		{"pull of none", func() error { _, err := b.PullTransactionChecks(ctx, "pg", 0, 0); return err }(), broker.ErrInvalidArgument,
			"invalid argument: maxMessages 0 must be between 1 and 32"},
		{"pull of too many", func() error { _, err := b.PullTransactionChecks(ctx, "pg", 33, 0); return err }(), broker.ErrInvalidArgument,
			"invalid argument: maxMessages 33 must be between 1 and 32"},
		{"pull waiting too long", func() error {
			_, err := b.PullTransactionChecks(ctx, "pg", 1, 30*time.Second+time.Millisecond)
			return err
		}(), broker.ErrInvalidArgument,
			"invalid argument: waitMs 30001 must be between 0 and 30000"},
		{"pull waiting less than nothing", func() error { _, err := b.PullTransactionChecks(ctx, "pg", 1, -time.Millisecond); return err }(), broker.ErrInvalidArgument,
			"invalid argument: waitMs -1 must be between 0 and 30000"},
	} {
		require.ErrorIs(t, c.err, c.is, c.name)
		require.True(t, strings.HasPrefix(c.err.Error(), c.text), "%s: %q", c.name, c.err)
	}
	require.Zero(t, b.TransactionStatus().Pending, "nothing was stored")

	require.NoError(t, b.Close(ctx))
	for _, err := range []error{
		func() error { _, err := b.CommitTransaction(ctx, "7F00000100001F900000000000000100"); return err }(),
		func() error { _, err := b.RollbackTransaction(ctx, "nope"); return err }(),
		func() error { _, err := b.PullTransactionChecks(ctx, "pg", 1, 0); return err }(),
	} {
		require.ErrorIs(t, err, broker.ErrShuttingDown)
	}
}

// TestGoldenTxnRequests: what a transaction's requests answer, on a
// virtual clock.
func TestGoldenTxnRequests(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(start)
	b := brokertest.MustOpen(t, "", func(o *broker.Options) {
		o.Clock = fc
		o.TransactionMaxChecks = 2
		o.TransactionCheckInterval = time.Minute
	})
	ctx := context.Background()
	sendTxn := func(body string) broker.SendResult {
		t.Helper()
		res, err := b.Send(ctx, "orders", []broker.SendMessage{{Body: []byte(body), Tag: "tag", Keys: []string{"k"},
			Properties: map[string]string{"user": "v"}, ShardingKey: "s", Transactional: true, ProducerGroup: "pg", CheckAfterMs: 30_000}})
		require.NoError(t, err)
		return res[0]
	}
	a, r, c := sendTxn("a"), sendTxn("r"), sendTxn("c")
	require.Equal(t, a.MessageID, a.TransactionID)
	q := a.QueueID // the sharding key's
	require.Equal(t, int64(-1), a.QueueOffset)

	pending := broker.Transaction{ID: a.TransactionID, State: broker.TxnPending, ProducerGroup: "pg", Topic: "orders", QueueID: q,
		QueueOffset: -1, NextCheckAt: start.Add(30 * time.Second), CreatedAt: start}
	got, err := b.GetTransaction(ctx, a.TransactionID)
	require.NoError(t, err)
	require.Equal(t, pending, got)

	// A check: the transaction with its new count and next check, the
	// half message as a pull renders it, named by the transaction.
	fc.Advance(30 * time.Second)
	checks, err := b.PullTransactionChecks(ctx, "pg", 1, 0)
	require.NoError(t, err)
	require.Len(t, checks, 1)
	check := pending
	check.CheckTimes, check.NextCheckAt = 1, start.Add(90*time.Second)
	require.Equal(t, check, checks[0].Transaction)
	m := checks[0].Message
	require.Equal(t, []any{a.TransactionID, "orders", q, int64(-1), "a", "tag", []string{"k"}, map[string]string{"user": "v"}, start, ""},
		[]any{m.MessageID, m.Topic, m.QueueID, m.QueueOffset, string(m.Body), m.Tag, m.Keys, m.Properties, m.BornAt, m.Receipt})

	// A commit, and its repetition: the same answer.
	committed, err := b.CommitTransaction(ctx, a.TransactionID)
	require.NoError(t, err)
	require.Equal(t, broker.TxnCommitted, committed.State)
	require.Equal(t, []any{q, int64(0), 1, time.Time{}, start.Add(30 * time.Second), ""},
		[]any{committed.QueueID, committed.QueueOffset, committed.CheckTimes, committed.NextCheckAt, committed.FinishedAt, committed.Reason})
	again, err := b.CommitTransaction(ctx, a.TransactionID)
	require.NoError(t, err)
	require.Equal(t, committed, again)
	got, err = b.GetTransaction(ctx, a.TransactionID)
	require.NoError(t, err)
	require.Equal(t, committed, got)
	_, err = b.RollbackTransaction(ctx, a.TransactionID)
	var fin *broker.TransactionFinishedError
	require.ErrorAs(t, err, &fin)
	require.ErrorIs(t, err, broker.ErrTransactionFinished)
	require.Equal(t, committed, fin.Transaction)
	require.Equal(t, "transaction already finished: transaction "+a.TransactionID+" was committed", err.Error())

	// A rollback, its repetition, and a commit after it.
	rolled, err := b.RollbackTransaction(ctx, r.TransactionID)
	require.NoError(t, err)
	want := broker.Transaction{ID: r.TransactionID, State: broker.TxnRolledBack, Reason: broker.TxnReasonProducer, ProducerGroup: "pg",
		Topic: "orders", QueueID: q, QueueOffset: -1, CreatedAt: start, FinishedAt: start.Add(30 * time.Second)}
	require.Equal(t, want, rolled)
	again, err = b.RollbackTransaction(ctx, r.TransactionID)
	require.NoError(t, err)
	require.Equal(t, want, again)
	_, err = b.CommitTransaction(ctx, r.TransactionID)
	require.ErrorAs(t, err, &fin)
	require.Equal(t, want, fin.Transaction)
	require.Equal(t, "transaction already finished: transaction "+r.TransactionID+" was rolled-back (producer)", err.Error())

	// c: its first check, then its second (the last), then the roll-back
	// loop ends it (max-checks).
	checks, err = b.PullTransactionChecks(ctx, "pg", 8, 0)
	require.NoError(t, err)
	require.Len(t, checks, 1)
	require.Equal(t, c.TransactionID, checks[0].Transaction.ID)
	fc.Advance(time.Minute)
	checks, err = b.PullTransactionChecks(ctx, "pg", 8, 0)
	require.NoError(t, err)
	require.Len(t, checks, 1)
	require.Equal(t, 2, checks[0].Transaction.CheckTimes)
	fc.Advance(time.Minute)
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		// The loop's pass writes the record, then counts it: wait for both.
		tx, err := b.GetTransaction(ctx, c.TransactionID)
		require.NoError(t, err)
		return tx.State == broker.TxnRolledBack && b.TransactionStatus().MaxChecksRolledBack == 1, tx.State
	})
	got, err = b.GetTransaction(ctx, c.TransactionID)
	require.NoError(t, err)
	require.Equal(t, broker.Transaction{ID: c.TransactionID, State: broker.TxnRolledBack, Reason: broker.TxnReasonMaxChecks, ProducerGroup: "pg",
		Topic: "orders", QueueID: q, QueueOffset: -1, CheckTimes: 2, CreatedAt: start, FinishedAt: start.Add(150 * time.Second)}, got)

	require.Equal(t, broker.TransactionStats{Pending: 0, Committed: 1, RolledBack: 2, MaxChecksRolledBack: 1, ChecksHandedOut: 3}, b.TransactionStatus())

	// A pull that waits returns nothing when the broker closes.
	sendTxn("w")
	done := make(chan error, 1)
	go func() {
		_, err := b.PullTransactionChecks(ctx, "pg", 1, 30*time.Second)
		done <- err
	}()
	require.NoError(t, b.Close(ctx))
	select {
	case err := <-done:
		if err != nil { // it began after the close
			require.ErrorIs(t, err, broker.ErrShuttingDown)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting check pull outlived Close")
	}
}
