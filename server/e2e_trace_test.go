package server_test

// End-to-end tests of the message trace (GET /v1/messages/{messageId}/trace,
// server/broker/trace.go) over real HTTP against the real server: the
// life of a message across its retry copies in order with the right
// fields, dead letters and resends, transactions, push deliveries,
// expired leases, a restart, the bound, and the problems.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// trace reads the trace of id.
// withTrace turns the message trace's follower on (it is off by default).
func withTrace(c *server.Config) { c.MessageTrace = true }

func (e *e2eServer) trace(t *testing.T, id string) api.MessageTrace {
	t.Helper()
	tr := fresh[api.MessageTrace](t, e.Get(t, "/v1/messages/"+id+"/trace"), http.StatusOK)
	require.NotNil(t, tr.Events, "events is a list, never null")
	return tr
}

// traceUntil reads the trace of id until it lists the event types want,
// in order (a push outcome reaches the trace asynchronously).
func (e *e2eServer) traceUntil(t *testing.T, id string, want ...string) api.MessageTrace {
	t.Helper()
	var tr api.MessageTrace
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		tr = e.trace(t, id)
		return fmt.Sprint(eventTypes(tr)) == fmt.Sprint(want), fmt.Sprintf("trace of %s: %v, want %v", id, eventTypes(tr), want)
	})
	return tr
}

func eventTypes(tr api.MessageTrace) []string {
	out := make([]string, 0, len(tr.Events))
	for _, ev := range tr.Events {
		out = append(out, ev.Type)
	}
	return out
}

// pullAs pulls up to n messages as client (X-Mqgate-Client-Id), waiting up
// to 10 s for the first.
func (e *e2eServer) pullAs(t *testing.T, client, group, topic string, req api.PullRequest) []api.PulledMessage {
	t.Helper()
	body, err := json.Marshal(req)
	require.NoError(t, err)
	var out api.PullResponse
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		r := e.Do(t, http.MethodPost, "/v1/groups/"+group+"/topics/"+topic+"/pull", "application/json", body,
			http.Header{api.ClientIDHeader: {client}})
		servertest.Decode(t, r, http.StatusOK, &out)
		return len(out.Messages) > 0, "nothing to pull"
	})
	return out.Messages
}

// nackAs nacks one receipt as client.
func (e *e2eServer) nackAs(t *testing.T, client, group string, item api.NackItem) {
	t.Helper()
	body, err := json.Marshal(api.NackRequest{Items: []api.NackItem{item}})
	require.NoError(t, err)
	var out api.ReceiptResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/groups/"+group+"/nack", "application/json", body,
		http.Header{api.ClientIDHeader: {client}}), http.StatusOK, &out)
	require.Equal(t, "ok", out.Results[0].Status)
}

// inOrder requires the events' times not to go back.
func inOrder(t *testing.T, tr api.MessageTrace) {
	t.Helper()
	for i := 1; i < len(tr.Events); i++ {
		require.LessOrEqual(t, tr.Events[i-1].At, tr.Events[i].At, "event %d (%s) before %d (%s)", i, tr.Events[i].Type, i-1, tr.Events[i-1].Type)
	}
}

// TestE2ETraceRetries: send → pull → nack with delayMs → redelivery → nack
// at delay level 1 → redelivery → ack lists every step in order, with the
// group, the client, the receipt epoch and attempt, the nack's reason and
// delay, the retry copies' ids and due times; every copy's id finds the
// same life.
func TestE2ETraceRetries(t *testing.T) {
	t.Parallel()
	e := startE2E(t, withTrace)
	sent := e.Send(t, "traced", api.SendMessage{Body: "x"})
	first := e.pullAs(t, "w1", "g", "traced", api.PullRequest{InvisibleMs: 60_000})[0]
	e.nackAs(t, "w1", "g", api.NackItem{Receipt: first.Receipt, DelayMs: 30, Reason: "db busy"})
	second := e.pullAs(t, "w2", "g", "traced", api.PullRequest{InvisibleMs: 60_000, WaitMs: 5000})[0]
	require.Equal(t, sent.MessageID, second.OriginMessageID)
	e.nackAs(t, "w2", "g", api.NackItem{Receipt: second.Receipt, DelayLevel: 1, Reason: "still busy"})
	third := e.pullAs(t, "w3", "g", "traced", api.PullRequest{InvisibleMs: 60_000, WaitMs: 5000})[0]
	require.Equal(t, []string{"ok"}, e.Ack(t, "g", third.Receipt))

	tr := e.trace(t, sent.MessageID)
	require.Equal(t, []string{"stored", "delivered", "nacked", "retried", "delivered", "nacked", "retried", "delivered", "acked"}, eventTypes(tr))
	require.False(t, tr.Partial)
	require.Zero(t, tr.DroppedEvents)
	require.Equal(t, sent.MessageID, tr.OriginMessageID)
	inOrder(t, tr)
	ev := tr.Events
	require.Equal(t, sent.MessageID, ev[0].MessageID)
	require.Equal(t, "traced", ev[0].Topic)
	require.Equal(t, sent.QueueID, *ev[0].QueueID)
	require.Equal(t, sent.QueueOffset, *ev[0].QueueOffset)

	for i, d := range []struct {
		ev     api.TraceEvent
		client string
		msg    api.PulledMessage
	}{{ev[1], "w1", first}, {ev[4], "w2", second}, {ev[7], "w3", third}} {
		require.Equal(t, "g", d.ev.Group)
		require.Equal(t, d.client, d.ev.ClientID)
		require.Equal(t, i+1, d.ev.Attempt)
		require.Equal(t, d.msg.MessageID, d.ev.MessageID, "the copy delivered")
		require.NotEmpty(t, d.ev.Epoch)
		require.NotEmpty(t, d.ev.LeaseUntil)
	}
	require.NotEqual(t, ev[1].Epoch, ev[4].Epoch)

	require.Equal(t, "db busy", ev[2].Reason)
	require.Equal(t, "w1", ev[2].ClientID)
	require.EqualValues(t, 30, ev[2].DelayMs)
	require.Equal(t, first.MessageID, ev[2].MessageID, "the copy that failed")
	require.Equal(t, second.MessageID, ev[3].RetryMessageID, "the retry copy as delivered")
	require.EqualValues(t, 1, ev[3].ReconsumeTimes)
	require.NotEmpty(t, ev[3].DueAt)
	require.GreaterOrEqual(t, ev[3].DueAt, ev[3].At)

	require.Equal(t, "still busy", ev[5].Reason)
	require.Equal(t, 1, *ev[5].DelayLevel)
	require.Equal(t, 1, *ev[6].DelayLevel)
	require.Equal(t, third.MessageID, ev[6].RetryMessageID)
	require.EqualValues(t, 2, ev[6].ReconsumeTimes)
	require.Equal(t, third.MessageID, ev[8].MessageID)
	require.Equal(t, "g", ev[8].Group)

	for _, id := range []string{second.MessageID, third.MessageID, strings.ToLower(sent.MessageID)} {
		other := e.trace(t, id)
		require.Equal(t, eventTypes(tr), eventTypes(other), "the trace of %s", id)
		require.Equal(t, sent.MessageID, other.OriginMessageID)
	}
}

// TestE2ETraceDeadLetterAndResend: a nack with delayLevel -1 dead-letters
// the message, a resend brings it back, an ack ends it; the dead letter's
// id finds the life.
func TestE2ETraceDeadLetterAndResend(t *testing.T) {
	t.Parallel()
	e := startE2E(t, withTrace)
	sent := e.Send(t, "poison", api.SendMessage{Body: "x"})
	m := e.PullN(t, "g", "poison", 1, 60_000, 10*time.Second)[0]
	e.Nack(t, "g", m.Receipt, -1, "cannot parse")
	letter := e.deadLetters(t, "g", 1)[0]
	e.resend(t, "g", letter.MessageID)
	back := e.PullN(t, "g", "poison", 1, 60_000, 10*time.Second)[0]
	require.Equal(t, []string{"ok"}, e.Ack(t, "g", back.Receipt))

	tr := e.trace(t, letter.MessageID)
	require.Equal(t, []string{"stored", "delivered", "nacked", "dead-lettered", "resent", "delivered", "acked"}, eventTypes(tr))
	inOrder(t, tr)
	require.Equal(t, sent.MessageID, tr.OriginMessageID)
	require.Equal(t, -1, *tr.Events[2].DelayLevel)
	dead := tr.Events[3]
	require.Equal(t, letter.MessageID, dead.DeadLetterID)
	require.Equal(t, "cannot parse", dead.Reason)
	require.Equal(t, "g", dead.Group)
	require.Equal(t, m.MessageID, dead.MessageID)
	require.Equal(t, letter.MessageID, tr.Events[4].DeadLetterID)
	require.Equal(t, back.MessageID, tr.Events[4].MessageID, "the resent copy")
	require.Equal(t, back.MessageID, tr.Events[5].MessageID)
	require.Equal(t, 2, tr.Events[5].Attempt)
	require.Equal(t, eventTypes(tr), eventTypes(e.trace(t, sent.MessageID)))

	// A discarded letter says so.
	other := e.Send(t, "poison", api.SendMessage{Body: "y"})
	m = e.PullN(t, "g", "poison", 1, 60_000, 10*time.Second)[0]
	e.Nack(t, "g", m.Receipt, -1, "no")
	letters := e.deadLetters(t, "g", 2)
	for _, l := range letters {
		if l.OriginMessageID == other.MessageID {
			require.Equal(t, http.StatusNoContent, e.Do(t, http.MethodDelete, "/v1/groups/g/dlq/"+l.MessageID, "", nil, nil).Status)
		}
	}
	require.Equal(t, []string{"stored", "delivered", "nacked", "dead-lettered", "discarded"}, eventTypes(e.trace(t, other.MessageID)))
}

// TestE2ETraceTransactions: a committed transaction's message is stored
// (as a half message), committed where it went, delivered and acked; a
// rolled-back one is stored and rolled back with the reason. The
// transaction id finds both.
func TestE2ETraceTransactions(t *testing.T) {
	t.Parallel()
	e := txnServer(t, 15, withTrace)
	committed := e.sendTxn(t, "txt", api.SendMessage{Body: "yes", CheckAfterMs: 60_000})
	rolled := e.sendTxn(t, "txt", api.SendMessage{Body: "no", CheckAfterMs: 60_000})
	require.Equal(t, http.StatusOK, e.endTxn(t, committed.TransactionID, "commit").Status)
	require.Equal(t, http.StatusOK, e.endTxn(t, rolled.TransactionID, "rollback").Status)
	m := e.PullN(t, "g", "txt", 1, 60_000, 10*time.Second)[0]
	require.Equal(t, committed.MessageID, m.MessageID)
	require.Equal(t, []string{"ok"}, e.Ack(t, "g", m.Receipt))

	tr := e.trace(t, committed.TransactionID)
	require.Equal(t, []string{"stored", "transaction-committed", "delivered", "acked"}, eventTypes(tr))
	inOrder(t, tr)
	require.Equal(t, committed.TransactionID, tr.Events[0].TransactionID)
	require.Equal(t, "txt", tr.Events[0].Topic)
	require.Nil(t, tr.Events[0].QueueOffset, "not known before the commit")
	c := tr.Events[1]
	require.Equal(t, committed.TransactionID, c.TransactionID)
	require.Equal(t, "txt", c.Topic)
	require.Equal(t, m.QueueID, *c.QueueID)
	require.Equal(t, m.QueueOffset, *c.QueueOffset)
	require.Equal(t, committed.MessageID, tr.Events[2].MessageID)

	tr = e.trace(t, rolled.TransactionID)
	require.Equal(t, []string{"stored", "transaction-rolled-back"}, eventTypes(tr))
	require.Equal(t, "producer", tr.Events[1].Reason)
}

// TestE2ETracePush: a push delivery answered 503 and then 200 lists each
// request's status with its delivery, the nack and retry between them.
func TestE2ETracePush(t *testing.T) {
	t.Parallel()
	e := startE2E(t, withTrace)
	wh := newWebhook(t)
	wh.answer = func(n int, w http.ResponseWriter) {
		if n == 0 {
			w.Header().Set("X-Mqgate-Delay-Level", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/hook", api.GroupRequest{
		Subscriptions: []api.Subscription{{Topic: "pushed"}}, Push: &api.PushRequest{URL: wh.url},
	}), http.StatusCreated, nil)
	sent := e.Send(t, "pushed", api.SendMessage{Body: "hooked"})
	tr := e.traceUntil(t, sent.MessageID, "stored", "delivered", "pushed", "nacked", "retried", "delivered", "pushed", "acked")
	inOrder(t, tr)
	ev := tr.Events
	require.Equal(t, http.StatusServiceUnavailable, ev[2].HTTPStatus)
	require.Equal(t, "5xx", ev[2].Result)
	require.Equal(t, ev[1].MessageID, ev[2].MessageID)
	require.Equal(t, ev[1].Epoch, ev[2].Epoch, "the push of that delivery")
	require.Contains(t, ev[3].Reason, "503")
	require.Equal(t, http.StatusOK, ev[6].HTTPStatus)
	require.Equal(t, "ok", ev[6].Result)
	require.Equal(t, ev[5].Epoch, ev[6].Epoch)
	require.Equal(t, "hook", ev[7].Group)
}

// TestE2ETraceLeaseExpired: a lease that runs out is a lease-expired
// event naming the client that held it, then the retry.
func TestE2ETraceLeaseExpired(t *testing.T) {
	t.Parallel()
	e := startE2E(t, withTrace)
	sent := e.Send(t, "slow", api.SendMessage{Body: "x"})
	e.pullAs(t, "sleepy", "g", "slow", api.PullRequest{InvisibleMs: 50})
	again := e.pullAs(t, "w", "g", "slow", api.PullRequest{InvisibleMs: 60_000, WaitMs: 5000})[0]
	require.Equal(t, []string{"ok"}, e.Ack(t, "g", again.Receipt))
	tr := e.trace(t, sent.MessageID)
	require.Equal(t, []string{"stored", "delivered", "lease-expired", "retried", "delivered", "acked"}, eventTypes(tr))
	require.Equal(t, "sleepy", tr.Events[2].ClientID)
	require.Equal(t, "g", tr.Events[2].Group)
	expired, err := time.Parse(time.RFC3339Nano, tr.Events[2].At)
	require.NoError(t, err)
	until, err := time.Parse(time.RFC3339Nano, tr.Events[1].LeaseUntil)
	require.NoError(t, err)
	// The lease's end is rounded up to the millisecond, the expiry's time down.
	require.False(t, expired.Before(until.Add(-time.Millisecond)), "expired at %v, before the lease ended at %v", expired, until)
}

// TestE2ETraceAfterRestart: what was traced before a restart is listed
// after it (deliveries, a lease given back, acks), also for the pull and
// ack made just before the close.
func TestE2ETraceAfterRestart(t *testing.T) {
	t.Parallel()
	e := startE2E(t, withTrace)
	sent := e.Send(t, "durable", api.SendMessage{Body: "x"})
	m := e.PullN(t, "g", "durable", 1, 60_000, 10*time.Second)[0]
	res := e.Receipts(t, "g", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: m.Receipt, InvisibleMs: 0}}})
	require.Equal(t, "ok", res[0].Status)
	m = e.PullN(t, "g", "durable", 1, 60_000, 10*time.Second)[0]
	require.Equal(t, []string{"ok"}, e.Ack(t, "g", m.Receipt))
	want := []string{"stored", "delivered", "released", "delivered", "acked"}
	before := e.trace(t, sent.MessageID)
	require.Equal(t, want, eventTypes(before))

	e2 := &e2eServer{e.Reopen(t)}
	after := e2.trace(t, sent.MessageID)
	require.Equal(t, before.Events, after.Events, "the same events after the restart")

	// Records the follower has not traced before a close are traced after it.
	other := e2.Send(t, "durable", api.SendMessage{Body: "y"})
	m = e2.PullN(t, "g", "durable", 1, 60_000, 10*time.Second)[0]
	require.Equal(t, []string{"ok"}, e2.Ack(t, "g", m.Receipt))
	e3 := &e2eServer{e2.Reopen(t)}
	require.Equal(t, []string{"stored", "delivered", "acked"}, eventTypes(e3.trace(t, other.MessageID)))
}

// TestE2ETraceBound: a message nacked 64 times with 16 KiB reasons (the
// most retries a group allows, the longest reason) has a bounded trace:
// 128 events, the oldest and the newest, an events-dropped event standing
// for the rest, each reason cut to 256 bytes.
func TestE2ETraceBound(t *testing.T) {
	t.Parallel()
	e := startE2E(t, withTrace)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/stubborn", api.GroupRequest{RetryMaxTimes: 64}), http.StatusCreated, nil)
	sent := e.Send(t, "bound", api.SendMessage{Body: "x"})
	reason := strings.Repeat("r", 16<<10)
	for i := 0; i <= 64; i++ {
		m := e.PullN(t, "stubborn", "bound", 1, 60_000, 10*time.Second)[0]
		e.nackAs(t, "w", "stubborn", api.NackItem{Receipt: m.Receipt, DelayMs: 1, Reason: reason})
	}
	e.deadLetters(t, "stubborn", 1)
	r := e.Get(t, "/v1/messages/"+sent.MessageID+"/trace")
	require.Less(t, len(r.Body), 128<<10, "the trace's size is bounded")
	var tr api.MessageTrace
	servertest.Decode(t, r, http.StatusOK, &tr)
	require.Len(t, tr.Events, 128)
	// stored, then 65 × (delivered, nacked) and 64 × retried, then dead-lettered.
	require.Equal(t, 1+65*2+64+1-127, tr.DroppedEvents)
	require.Equal(t, "stored", tr.Events[0].Type)
	require.Equal(t, "dead-lettered", tr.Events[127].Type)
	marker := tr.Events[64]
	require.Equal(t, "events-dropped", marker.Type)
	require.Equal(t, tr.DroppedEvents, marker.Count)
	inOrder(t, tr)
	for _, ev := range tr.Events {
		require.LessOrEqual(t, len(ev.Reason), 256, "%s reason", ev.Type)
		if ev.Type == "nacked" {
			require.Contains(t, ev.Reason, "[truncated: 16384 bytes]", "the marker says how long the reason was")
		}
	}
	require.Equal(t, "delivered", tr.Events[125].Type)
	require.Equal(t, 65, tr.Events[125].Attempt, "the last delivery is the 65th")
}

// TestE2ETraceProblems: a malformed id is 400, an id that names no
// message (nothing there, a system record) 404; with tracing off a trace
// lists what the message's copies hold and says it is partial.
func TestE2ETraceProblems(t *testing.T) {
	t.Parallel()
	e := startE2E(t, withTrace)
	servertest.WantProblem(t, e.Get(t, "/v1/messages/xyz/trace"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+strings.Repeat("G", 32)+"/trace"), http.StatusBadRequest, "invalid-argument")
	sent := e.Send(t, "p", api.SendMessage{Body: "x"})
	far := sent.MessageID[:16] + "00000000FFFFFFFF"
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+far+"/trace"), http.StatusNotFound, "message-not-found")
	inside := sent.MessageID[:16] + fmt.Sprintf("%016X", 3)
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+inside+"/trace"), http.StatusNotFound, "message-not-found")
	m := e.PullN(t, "g", "p", 1, 60_000, 10*time.Second)[0]
	require.Equal(t, []string{"ok"}, e.Ack(t, "g", m.Receipt))
	tr := e.trace(t, sent.MessageID)
	require.Equal(t, []string{"stored", "delivered", "acked"}, eventTypes(tr))

	off := startE2E(t, func(c *server.Config) { c.MessageTrace = false })
	sent = off.Send(t, "p", api.SendMessage{Body: "x"})
	m = off.PullN(t, "g", "p", 1, 60_000, 10*time.Second)[0]
	off.Nack(t, "g", m.Receipt, -1, "bad")
	tr = off.trace(t, sent.MessageID)
	require.True(t, tr.Partial)
	require.Equal(t, []string{"stored", "nacked", "dead-lettered"}, eventTypes(tr), "what the copies hold")
	_, ok := off.MetricValue(t, "mqgate_trace_events_total")
	require.False(t, ok, "no trace metrics with tracing off")
	v, ok := e.MetricValue(t, "mqgate_trace_events_total")
	require.True(t, ok)
	require.GreaterOrEqual(t, v, float64(2))
}
