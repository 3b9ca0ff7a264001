package server_test

// End-to-end tests of transactional (half) messages over real HTTP
// against the real server (server/broker/txn.go): a half message is
// invisible to every group until its commit, delivered once to each
// group after it (same id, tag, keys, properties), discarded by a
// rollback; commit and rollback are idempotent; unresolved transactions
// are checked back by a long-polling pull of their producer group, and
// rolled back and counted after --transaction-max-checks unanswered
// checks; bad input gets problems; the quotas hold.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// txnServer starts a server whose checks come checkAfterMs apart (a
// 1 ms --transaction-check-interval), with maxChecks checks.
func txnServer(t *testing.T, maxChecks int, opts ...func(*server.Config)) *e2eServer {
	t.Helper()
	return startE2E(t, append([]func(*server.Config){func(c *server.Config) {
		c.TransactionCheckInterval = time.Millisecond
		c.TransactionMaxChecks = maxChecks
	}}, opts...)...)
}

// sendTxn sends one transactional message and returns its result.
func (e *e2eServer) sendTxn(t *testing.T, topic string, msg api.SendMessage) api.SendResult {
	t.Helper()
	msg.Transactional = true
	if msg.ProducerGroup == "" {
		msg.ProducerGroup = "order-service"
	}
	res := e.Send(t, topic, msg)
	require.NotEmpty(t, res.TransactionID, "a transactional send names its transaction")
	require.Equal(t, res.MessageID, res.TransactionID)
	require.EqualValues(t, -1, res.QueueOffset, "the queue offset is known once committed")
	return res
}

// txn reads a transaction.
func (e *e2eServer) txn(t *testing.T, id string) api.Transaction {
	t.Helper()
	var out api.Transaction
	servertest.Decode(t, e.Get(t, "/v1/transactions/"+id), http.StatusOK, &out)
	return out
}

// endTxn commits or rolls back and returns the response.
func (e *e2eServer) endTxn(t *testing.T, id, op string) servertest.Resp {
	t.Helper()
	return e.Do(t, http.MethodPost, "/v1/transactions/"+id+"/"+op, "", nil, nil)
}

// checks pulls the due checks of a producer group.
func (e *e2eServer) checks(t *testing.T, group string, req api.TransactionChecksRequest) []api.TransactionCheck {
	t.Helper()
	var out api.TransactionChecksResponse
	servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/producer-groups/"+group+"/transactions/pull", req), http.StatusOK, &out)
	require.NotNil(t, out.Transactions, "transactions is a list, never null")
	return out.Transactions
}

// TestE2ETransactionCommit: the half message is invisible to groups until
// the commit, then each group gets it once, as sent (same id, tag, keys,
// properties), found by id and key; a repeated commit answers the same;
// a rollback of it is 409 with state committed; a repeated send with the
// same idempotency key answers the first result with its transaction.
func TestE2ETransactionCommit(t *testing.T) {
	t.Parallel()
	e := txnServer(t, 15)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", map[string]int{"queues": 2}), http.StatusCreated, nil)
	e.Send(t, "orders", api.SendMessage{Body: "before"})
	for _, g := range []string{"billing", "audit"} {
		require.Len(t, e.PullN(t, g, "orders", 1, 60_000, 5*time.Second), 1)
	}
	msg := api.SendMessage{Body: "order 1001 paid", Tag: "paid", Keys: []string{"order-1001"}, Properties: map[string]string{"source": "web"},
		ShardingKey: "customer-42", CheckAfterMs: 60_000}
	var first api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json",
		mustJSON(t, withTxn(msg)), http.Header{"Idempotency-Key": {"pay-1001"}}), http.StatusOK, &first)
	res := first.Results[0]
	require.Equal(t, res.MessageID, res.TransactionID)
	again := e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", mustJSON(t, withTxn(msg)), http.Header{"Idempotency-Key": {"pay-1001"}})
	var dup api.SendResponse
	servertest.Decode(t, again, http.StatusOK, &dup)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, res.TransactionID, dup.Results[0].TransactionID, "a replay names the same transaction")

	for _, g := range []string{"billing", "audit"} {
		require.Empty(t, e.Pull(t, g, "orders", api.PullRequest{WaitMs: 300}), "a half message is invisible to %s", g)
	}
	require.Empty(t, e.ByKey(t, "orders", "order-1001"), "nor found by key")
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+res.MessageID), http.StatusNotFound, "message-not-found")
	p := e.txn(t, res.TransactionID)
	require.Equal(t, "pending", p.State)
	require.Equal(t, "order-service", p.ProducerGroup)
	require.Equal(t, "orders", p.Topic)
	require.Equal(t, res.QueueID, p.QueueID)
	require.Zero(t, p.CheckTimes)
	next, err := time.Parse(time.RFC3339Nano, p.NextCheckAt)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Minute), next, 5*time.Second, "the first check falls due checkAfterMs after the send")

	var c api.Transaction
	servertest.Decode(t, e.endTxn(t, res.TransactionID, "commit"), http.StatusOK, &c)
	require.Equal(t, "committed", c.State)
	require.Equal(t, res.MessageID, c.MessageID)
	require.NotNil(t, c.QueueOffset)
	require.Empty(t, c.NextCheckAt)
	var c2 api.Transaction
	servertest.Decode(t, e.endTxn(t, res.TransactionID, "commit"), http.StatusOK, &c2)
	require.Equal(t, "committed", c2.State, "a repeated commit answers as the first")
	require.Equal(t, *c.QueueOffset, *c2.QueueOffset)
	require.Equal(t, c.QueueID, c2.QueueID)
	pr := servertest.WantProblem(t, e.endTxn(t, res.TransactionID, "rollback"), http.StatusConflict, "transaction-finished")
	require.Equal(t, "committed", pr.State)
	require.Equal(t, "committed", e.txn(t, res.TransactionID).State)

	for _, g := range []string{"billing", "audit"} {
		got := e.PullN(t, g, "orders", 1, 60_000, 5*time.Second)
		m := got[0]
		require.Equal(t, res.MessageID, m.MessageID, "the committed message keeps the send's id")
		require.Equal(t, "order 1001 paid", m.Body)
		require.Equal(t, "paid", m.Tag)
		require.Equal(t, []string{"order-1001"}, m.Keys)
		require.Equal(t, map[string]string{"source": "web"}, m.Properties, "no broker property shows")
		require.Equal(t, res.QueueID, m.QueueID, "delivered to the queue the send chose")
		require.Equal(t, *c.QueueOffset, m.QueueOffset)
		require.Equal(t, []string{"ok"}, e.Ack(t, g, m.Receipt))
		require.Empty(t, e.Pull(t, g, "orders", api.PullRequest{WaitMs: 200}), "delivered once to %s", g)
	}
	require.Equal(t, "order 1001 paid", e.Message(t, res.MessageID).Body, "found by the send's id")
	keyed := e.ByKey(t, "orders", "order-1001")
	require.Len(t, keyed, 1)
	require.Equal(t, res.MessageID, keyed[0].MessageID)
	committed, _ := e.MetricValue(t, "mqgate_transactions_committed_total")
	require.EqualValues(t, 1, committed)
}

// TestE2ETransactionRollback: a rolled-back message is never delivered; a
// repeated rollback answers 200, a commit 409 with state rolled-back; an
// unknown id is 404, a malformed one 400.
func TestE2ETransactionRollback(t *testing.T) {
	t.Parallel()
	e := txnServer(t, 15)
	res := e.sendTxn(t, "refunds", api.SendMessage{Body: "refund 7", CheckAfterMs: 60_000})
	var r api.Transaction
	servertest.Decode(t, e.endTxn(t, res.TransactionID, "rollback"), http.StatusOK, &r)
	require.Equal(t, "rolled-back", r.State)
	require.Equal(t, "producer", r.Reason)
	require.NotEmpty(t, r.FinishedAt)
	servertest.Decode(t, e.endTxn(t, res.TransactionID, "rollback"), http.StatusOK, &r)
	require.Equal(t, "rolled-back", r.State, "a repeated rollback answers 200")
	p := servertest.WantProblem(t, e.endTxn(t, res.TransactionID, "commit"), http.StatusConflict, "transaction-finished")
	require.Equal(t, "rolled-back", p.State)
	got := e.txn(t, res.TransactionID)
	require.Equal(t, "rolled-back", got.State)
	require.Equal(t, "order-service", got.ProducerGroup)
	require.Empty(t, e.Pull(t, "g", "refunds", api.PullRequest{WaitMs: 300}), "a rolled-back message is never delivered")
	require.Empty(t, e.checks(t, "order-service", api.TransactionChecksRequest{}), "nor checked")

	// An id that names no transaction: a plain message, or none at all.
	plain := e.Send(t, "refunds", api.SendMessage{Body: "plain"})
	for _, id := range []string{plain.MessageID, "7F00000100001F900000000FFFFFFFFF"} {
		servertest.WantProblem(t, e.endTxn(t, id, "commit"), http.StatusNotFound, "transaction-not-found")
		servertest.WantProblem(t, e.endTxn(t, id, "rollback"), http.StatusNotFound, "transaction-not-found")
		servertest.WantProblem(t, e.Get(t, "/v1/transactions/"+id), http.StatusNotFound, "transaction-not-found")
	}
	for _, id := range []string{"nope", "7F00000100001F90000000000000000Z"} {
		servertest.WantProblem(t, e.endTxn(t, id, "commit"), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.Get(t, "/v1/transactions/"+id), http.StatusBadRequest, "invalid-argument")
	}
}

// TestE2ETransactionCheckBack: a long-polling check pull wakes when the
// check falls due (not before), hands the transaction out once per check
// (checkTimes counts, the next check checkAfterMs later), and a commit
// answers it; the raw send's headers work the same way.
func TestE2ETransactionCheckBack(t *testing.T) {
	t.Parallel()
	e := txnServer(t, 15)
	// 1.5 s: the send and the first pull answer well within it even on a
	// loaded machine under the race detector (400 ms was not always).
	sent := time.Now()
	res := e.sendTxn(t, "orders", api.SendMessage{Body: "maybe", Tag: "t", CheckAfterMs: 1500, ProducerGroup: "pg"})
	require.Empty(t, e.checks(t, "pg", api.TransactionChecksRequest{}), "not due yet")
	got := e.checks(t, "pg", api.TransactionChecksRequest{WaitMs: 10_000})
	woke := time.Since(sent)
	require.Len(t, got, 1)
	require.GreaterOrEqual(t, woke, 1500*time.Millisecond, "a check is never handed out early")
	require.Less(t, woke, 5*time.Second, "the long poll woke when the check fell due")
	c := got[0]
	require.Equal(t, res.TransactionID, c.TransactionID)
	require.Equal(t, 1, c.CheckTimes)
	require.Equal(t, res.MessageID, c.Message.MessageID)
	require.Equal(t, "orders", c.Message.Topic)
	require.Equal(t, "maybe", c.Message.Body)
	require.Equal(t, "t", c.Message.Tag)
	require.EqualValues(t, -1, c.Message.QueueOffset)
	require.Empty(t, e.checks(t, "pg", api.TransactionChecksRequest{}), "handed out once per check")
	require.Empty(t, e.checks(t, "other-group", api.TransactionChecksRequest{WaitMs: 600}), "only to its producer group")
	tx := e.txn(t, res.TransactionID)
	require.Equal(t, 1, tx.CheckTimes)
	require.Equal(t, c.NextCheckAt, tx.NextCheckAt)

	again := e.checks(t, "pg", api.TransactionChecksRequest{WaitMs: 10_000})
	require.Len(t, again, 1, "checked again checkAfterMs later")
	require.Equal(t, 2, again[0].CheckTimes)
	servertest.Decode(t, e.endTxn(t, res.TransactionID, "commit"), http.StatusOK, nil)
	require.Empty(t, e.checks(t, "pg", api.TransactionChecksRequest{WaitMs: 800}), "a committed transaction is not checked")
	require.Len(t, e.PullN(t, "g", "orders", 1, 60_000, 5*time.Second), 1)

	// A raw send with the X-Mqgate-* headers; the pull's long poll wakes
	// for a transaction sent after it started.
	done := make(chan []api.TransactionCheck, 1)
	go func() {
		var out api.TransactionChecksResponse
		r := e.JSON(t, http.MethodPost, "/v1/producer-groups/raw-pg/transactions/pull", api.TransactionChecksRequest{WaitMs: 10_000, MaxMessages: 4})
		if r.Status == http.StatusOK {
			servertest.Decode(t, r, http.StatusOK, &out)
		}
		done <- out.Transactions
	}()
	e.WaitInFlight(t, 1, 5*time.Second)
	var raw api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/octet-stream", []byte("raw body"),
		http.Header{"X-Mqgate-Transactional": {"true"}, "X-Mqgate-Producer-Group": {"raw-pg"}, "X-Mqgate-Check-After-Ms": {"200"}}), http.StatusOK, &raw)
	require.NotEmpty(t, raw.Results[0].TransactionID)
	select {
	case checks := <-done:
		require.Len(t, checks, 1)
		require.Equal(t, raw.Results[0].TransactionID, checks[0].TransactionID)
		require.Equal(t, "raw body", checks[0].Message.Body)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting check pull did not wake")
	}
	handed, _ := e.MetricValue(t, "mqgate_transaction_checks_total")
	require.EqualValues(t, 3, handed)
}

// TestE2ETransactionMaxChecks: after --transaction-max-checks unanswered
// checks the transaction is rolled back (reason max-checks) when the next
// would fall due, counted in the metrics and the broker status, and never
// delivered; a later commit is 409.
func TestE2ETransactionMaxChecks(t *testing.T) {
	t.Parallel()
	e := txnServer(t, 3)
	res := e.sendTxn(t, "orders", api.SendMessage{Body: "abandoned", CheckAfterMs: 150, ProducerGroup: "flaky"})
	for i := 1; i <= 3; i++ {
		got := e.checks(t, "flaky", api.TransactionChecksRequest{WaitMs: 10_000})
		require.Len(t, got, 1, "check %d", i)
		require.Equal(t, i, got[0].CheckTimes)
	}
	require.Empty(t, e.checks(t, "flaky", api.TransactionChecksRequest{WaitMs: 1000}), "no fourth check")
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		tx := e.txn(t, res.TransactionID)
		return tx.State == "rolled-back", fmt.Sprintf("%+v", tx)
	})
	tx := e.txn(t, res.TransactionID)
	require.Equal(t, "max-checks", tx.Reason)
	require.Equal(t, 3, tx.CheckTimes)
	p := servertest.WantProblem(t, e.endTxn(t, res.TransactionID, "commit"), http.StatusConflict, "transaction-finished")
	require.Equal(t, "rolled-back", p.State)
	n, ok := e.MetricValue(t, "mqgate_transactions_max_checks_rolled_back_total")
	require.True(t, ok)
	require.EqualValues(t, 1, n)
	var st api.BrokerStatus
	servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &st)
	require.EqualValues(t, 1, st.Transactions.MaxChecksRolledBackTotal)
	require.EqualValues(t, 1, st.Transactions.RolledBackTotal)
	require.Zero(t, st.Transactions.Pending)
	require.Empty(t, e.Pull(t, "g", "orders", api.PullRequest{WaitMs: 300}), "never delivered")
}

// TestE2ETransactionBadInput: every bad field of a transactional send and
// of a check pull is a problem with its code, and nothing is stored.
func TestE2ETransactionBadInput(t *testing.T) {
	t.Parallel()
	e := txnServer(t, 15)
	send := func(body string, header http.Header) servertest.Resp {
		return e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(body), header)
	}
	for _, c := range []struct{ body, code string }{
		{`{"messages":[{"body":"a","transactional":true,"producerGroup":"pg"},{"body":"b"}]}`, "invalid-argument"},
		{`{"messages":[{"body":"a"},{"body":"b","transactional":true,"producerGroup":"pg"}]}`, "invalid-argument"},
		{`{"body":"a","transactional":true}`, "invalid-argument"},
		{`{"body":"a","transactional":true,"producerGroup":"bad name"}`, "invalid-name"},
		{`{"body":"a","transactional":true,"producerGroup":"%RETRY%pg"}`, "invalid-name"},
		{`{"body":"a","transactional":true,"producerGroup":"pg","checkAfterMs":99}`, "invalid-argument"},
		{`{"body":"a","transactional":true,"producerGroup":"pg","checkAfterMs":86400001}`, "invalid-argument"},
		{`{"body":"a","transactional":true,"producerGroup":"pg","checkAfterMs":-1}`, "invalid-argument"},
		{`{"body":"a","transactional":true,"producerGroup":"pg","delayLevel":3}`, "invalid-argument"},
		{`{"body":"a","transactional":true,"producerGroup":"pg","delayMs":1000}`, "invalid-argument"},
		{`{"body":"a","transactional":true,"producerGroup":"pg","deliverAt":"2099-01-01T00:00:00Z"}`, "invalid-argument"},
		{`{"body":"a","producerGroup":"pg"}`, "invalid-argument"},
		{`{"body":"a","checkAfterMs":1000}`, "invalid-argument"},
		{`{"body":"a","transactional":"yes","producerGroup":"pg"}`, "malformed-request"},
		{`{"body":"a","transactional":true,"producerGroup":"pg","properties":{"TRAN_PGROUP":"x"}}`, "invalid-argument"},
	} {
		p := servertest.WantProblem(t, send(c.body, nil), http.StatusBadRequest, c.code)
		require.NotEmpty(t, p.Detail, c.body)
	}
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/octet-stream", []byte("x"),
		http.Header{"X-Mqgate-Transactional": {"maybe"}, "X-Mqgate-Producer-Group": {"pg"}}), http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/octet-stream", []byte("x"),
		http.Header{"X-Mqgate-Transactional": {"true"}, "X-Mqgate-Producer-Group": {"pg"}, "X-Mqgate-Check-After-Ms": {"soon"}}), http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/vnd.mqgate.batch", api.AppendBatch(nil, []byte("a"), []byte("b")),
		http.Header{"X-Mqgate-Transactional": {"true"}, "X-Mqgate-Producer-Group": {"pg"}}), http.StatusBadRequest, "invalid-argument")
	var st api.BrokerStatus
	servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &st)
	require.Zero(t, st.Transactions.Pending, "nothing was stored")

	pull := func(group, body string) servertest.Resp {
		return e.Do(t, http.MethodPost, "/v1/producer-groups/"+group+"/transactions/pull", "application/json", []byte(body), nil)
	}
	servertest.WantProblem(t, pull("pg", `{"maxMessages":33}`), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, pull("pg", `{"maxMessages":-1}`), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, pull("pg", `{"waitMs":30001}`), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, pull("pg", `{"waitMs":-5}`), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, pull("pg", `{"wait":5}`), http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, pull("%25DLQ%25pg", `{}`), http.StatusBadRequest, "invalid-name")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/producer-groups/pg/transactions/pull", "text/plain", []byte("{}"), nil),
		http.StatusUnsupportedMediaType, "unsupported-media-type")
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/producer-groups/pg/transactions/pull", "", nil, nil), http.StatusOK, nil)
}

// TestE2ETransactionQuotas: the unresolved transactions of a producer
// group, and of all of them, are bounded before the write; an ended one
// makes room.
func TestE2ETransactionQuotas(t *testing.T) {
	t.Parallel()
	e := txnServer(t, 15, func(c *server.Config) { c.MaxTransactionsPerProducerGroup, c.MaxPendingTransactions = 2, 3 })
	a := e.sendTxn(t, "orders", api.SendMessage{Body: "1", ProducerGroup: "a"})
	e.sendTxn(t, "orders", api.SendMessage{Body: "2", ProducerGroup: "a"})
	r := e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", withTxn(api.SendMessage{Body: "3", ProducerGroup: "a"}))
	quotaProblem(t, r, "transactionsPerProducerGroup", 2)
	e.sendTxn(t, "orders", api.SendMessage{Body: "4", ProducerGroup: "b"})
	r = e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", withTxn(api.SendMessage{Body: "5", ProducerGroup: "c"}))
	quotaProblem(t, r, "pendingTransactions", 3)
	servertest.Decode(t, e.endTxn(t, a.TransactionID, "commit"), http.StatusOK, nil)
	e.sendTxn(t, "orders", api.SendMessage{Body: "3", ProducerGroup: "a"})
	e.Send(t, "orders", api.SendMessage{Body: "plain sends are not counted"})
}

// TestE2ETransactionsSurviveRestart: unresolved transactions, their check
// counts and how finished ones ended survive a restart.
func TestE2ETransactionsSurviveRestart(t *testing.T) {
	t.Parallel()
	e := txnServer(t, 15)
	open := e.sendTxn(t, "orders", api.SendMessage{Body: "open", CheckAfterMs: 100})
	done := e.sendTxn(t, "orders", api.SendMessage{Body: "done", CheckAfterMs: 60_000})
	require.Len(t, e.checks(t, "order-service", api.TransactionChecksRequest{WaitMs: 5000}), 1)
	servertest.Decode(t, e.endTxn(t, done.TransactionID, "commit"), http.StatusOK, nil)
	before := e.txn(t, open.TransactionID)
	e = &e2eServer{e.Reopen(t)}
	after := e.txn(t, open.TransactionID)
	require.Equal(t, before, after, "the same state after the restart")
	require.Equal(t, "committed", e.txn(t, done.TransactionID).State)
	servertest.Decode(t, e.endTxn(t, done.TransactionID, "commit"), http.StatusOK, nil)
	got := e.checks(t, "order-service", api.TransactionChecksRequest{WaitMs: 5000})
	require.Len(t, got, 1)
	require.Equal(t, open.TransactionID, got[0].TransactionID)
	require.Equal(t, 2, got[0].CheckTimes, "the count went on from before the restart")
	servertest.Decode(t, e.endTxn(t, open.TransactionID, "commit"), http.StatusOK, nil)
	msgs := e.PullN(t, "g", "orders", 2, 60_000, 5*time.Second)
	require.ElementsMatch(t, []string{"open", "done"}, []string{msgs[0].Body, msgs[1].Body})
}

func withTxn(m api.SendMessage) api.SendMessage {
	m.Transactional = true
	if m.ProducerGroup == "" {
		m.ProducerGroup = "order-service"
	}
	return m
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// endpointsTransactions calls every transaction route with a success and
// an error (a subtest of TestE2EEndpoints).
func endpointsTransactions(t *testing.T, e *e2eServer) {
	res := e.sendTxn(t, "endpoints-txn", api.SendMessage{Body: "half", CheckAfterMs: 100, ProducerGroup: "endpoints-pg"})
	require.Equal(t, "pending", e.txn(t, res.TransactionID).State)
	servertest.WantProblem(t, e.Get(t, "/v1/transactions/not-an-id"), http.StatusBadRequest, "invalid-argument")
	require.Len(t, e.checks(t, "endpoints-pg", api.TransactionChecksRequest{WaitMs: 5000}), 1)
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/producer-groups/endpoints-pg/transactions/pull", `{"maxMessages":0.5}`),
		http.StatusBadRequest, "malformed-request")
	servertest.Decode(t, e.endTxn(t, res.TransactionID, "commit"), http.StatusOK, nil)
	servertest.WantProblem(t, e.endTxn(t, res.TransactionID, "rollback"), http.StatusConflict, "transaction-finished")
	other := e.sendTxn(t, "endpoints-txn", api.SendMessage{Body: "discarded", CheckAfterMs: 60_000, ProducerGroup: "endpoints-pg"})
	servertest.Decode(t, e.endTxn(t, other.TransactionID, "rollback"), http.StatusOK, nil)
	servertest.WantProblem(t, e.endTxn(t, other.TransactionID, "commit"), http.StatusConflict, "transaction-finished")
}
