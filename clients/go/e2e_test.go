package mqgate_test

// The generated client against a real server: servertest's server (the
// real broker over a real data dir) on 127.0.0.1, whose HTTP client also
// validates every response against docs/openapi.json. Each step asserts
// what the server did, not only that it answered.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	mqgate "github.com/mqgate/mqgate/clients/go"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestMain fails the binary when a test leaves goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// start opens a server and a client of it that sends through the
// server's spec-validating HTTP client.
func start(t *testing.T) (*servertest.Server, *mqgate.ClientWithResponses) {
	t.Helper()
	srv := servertest.Start(t)
	c, err := mqgate.New(srv.Base, mqgate.WithHTTPClient(srv.Client))
	require.NoError(t, err)
	return srv, c
}

// ok checks the answer of a generated call, ok(c.XWithResponse(…))(t):
// it fails t on a transport error or an answer other than 2xx (its
// problem in the message) and returns the response.
func ok[R mqgate.Response](resp R, err error) func(testing.TB) R {
	return func(t testing.TB) R {
		t.Helper()
		resp, err := mqgate.Check(resp, err)
		require.NoError(t, err)
		return resp
	}
}

// pullN pulls for group from topic until it has n messages (at most 10 s).
func pullN(t *testing.T, c *mqgate.ClientWithResponses, group, topic string, n int) []mqgate.PulledMessage {
	t.Helper()
	var got []mqgate.PulledMessage
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < n && time.Now().Before(deadline) {
		res := ok(c.PullMessagesWithResponse(context.Background(), group, topic, nil, mqgate.PullRequest{
			MaxMessages: mqgate.Ptr(n - len(got)), WaitMs: mqgate.Ptr(int64(1000)), InvisibleMs: mqgate.Ptr(int64(30_000)),
		}))(t)
		got = append(got, res.JSON200.Messages...)
	}
	require.Len(t, got, n, "pulled %d of %d", len(got), n)
	return got
}

// bodies are the bodies of msgs, sorted.
func bodies(msgs []mqgate.PulledMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	sort.Strings(out)
	return out
}

// wantProblem asserts that err is the *Error of status with code.
func wantProblem(t *testing.T, err error, status int, code string) *mqgate.Error {
	t.Helper()
	var perr *mqgate.Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, status, perr.Status, "%v", err)
	require.Equal(t, code, perr.Code, "%v", err)
	require.Equal(t, status, perr.Problem.Status)
	require.True(t, mqgate.IsCode(err, code))
	require.Contains(t, err.Error(), code)
	return perr
}

func TestClientSendAndConsume(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()

	// A topic with 4 queues: created (201), then replaced (200).
	put := ok(c.PutTopicWithResponse(ctx, "orders", mqgate.TopicRequest{Queues: mqgate.Ptr(4)}))(t)
	require.Equal(t, http.StatusCreated, put.StatusCode())
	require.Equal(t, mqgate.Topic{Name: "orders", Queues: 4, Perm: "rw", RetentionHours: put.JSON201.RetentionHours, CreatedAt: put.JSON201.CreatedAt}, *put.JSON201)
	got := ok(c.GetTopicWithResponse(ctx, "orders"))(t)
	require.Equal(t, 4, got.JSON200.Queues)
	list := ok(c.ListTopicsWithResponse(ctx))(t)
	require.Equal(t, []string{"orders"}, topicNames(list.JSON200.Topics))

	// One message with tag, keys, properties and an Idempotency-Key;
	// the same key again replays the first result.
	one := mqgate.SendRequest{Body: mqgate.Ptr(`{"id":1001}`), Tag: mqgate.Ptr("created"), Keys: []string{"order-1001"},
		Properties: map[string]string{"source": "web"}, ShardingKey: mqgate.Ptr("customer-42")}
	params := &mqgate.SendMessagesParams{IdempotencyKey: mqgate.Ptr("order-1001-created")}
	sent := ok(c.SendMessagesWithResponse(ctx, "orders", params, one))(t)
	require.Len(t, sent.JSON200.Results, 1)
	first := sent.JSON200.Results[0]
	require.NotEmpty(t, first.MessageId)
	require.Nil(t, sent.JSON200.Results[0].Duplicate)
	require.NotEmpty(t, sent.Headers200.XRequestId)
	again := ok(c.SendMessagesWithResponse(ctx, "orders", params, one))(t)
	require.Equal(t, first.MessageId, again.JSON200.Results[0].MessageId)
	require.True(t, *again.JSON200.Results[0].Duplicate)
	require.True(t, *again.Headers200.IdempotentReplayed)

	// A batch of two, stored in order.
	batch := ok(c.SendMessagesWithResponse(ctx, "orders", nil, mqgate.SendRequest{Messages: []mqgate.SendMessage{
		{Body: "a", Tag: mqgate.Ptr("paid")}, {Body: "b", Tag: mqgate.Ptr("paid")},
	}}))(t)
	require.Len(t, batch.JSON200.Results, 2)

	// Raw sends: binary bytes (octet-stream) with the attributes in
	// headers, and text/plain.
	raw := []byte{0, 1, 2, 0xff, 'r', 'a', 'w'}
	rawSent := ok(c.SendMessagesWithBodyWithResponse(ctx, "orders",
		&mqgate.SendMessagesParams{XMqgateTag: mqgate.Ptr("raw"), XMqgateKeys: mqgate.Ptr("order-1001, raw-1")},
		"application/octet-stream", bytes.NewReader(raw), mqgate.WithProperty("Source", "batch-job")))(t)
	text := ok(c.SendMessagesWithTextBodyWithResponse(ctx, "orders",
		&mqgate.SendMessagesParams{XMqgateTag: mqgate.Ptr("text")}, "plain text, no JSON"))(t)

	// Everything is readable by id, with what was sent.
	m := ok(c.GetMessageWithResponse(ctx, rawSent.JSON200.Results[0].MessageId))(t).JSON200
	require.Equal(t, mqgate.MessageBodyEncodingBase64, m.BodyEncoding)
	decoded, err := base64.StdEncoding.DecodeString(m.Body)
	require.NoError(t, err)
	require.Equal(t, raw, decoded)
	require.Equal(t, "raw", *m.Tag)
	require.Equal(t, []string{"order-1001", "raw-1"}, m.Keys)
	require.Equal(t, map[string]string{"source": "batch-job"}, m.Properties)
	tm := ok(c.GetMessageWithResponse(ctx, text.JSON200.Results[0].MessageId))(t).JSON200
	require.Equal(t, "plain text, no JSON", tm.Body)
	require.Equal(t, mqgate.MessageBodyEncodingUtf8, tm.BodyEncoding)

	// And by business key, newest first: the raw message and the first one.
	byKey := ok(c.FindMessagesByKeyWithResponse(ctx, &mqgate.FindMessagesByKeyParams{Topic: "orders", Key: "order-1001"}))(t)
	require.Len(t, byKey.JSON200.Messages, 2)
	require.Equal(t, rawSent.JSON200.Results[0].MessageId, byKey.JSON200.Messages[0].MessageId)
	require.Equal(t, first.MessageId, byKey.JSON200.Messages[1].MessageId)

	// The topic's queues hold the five, each queue's newest stored last.
	status := ok(c.GetTopicStatusWithResponse(ctx, "orders"))(t).JSON200
	require.Equal(t, "orders", status.Topic)
	require.Len(t, status.Queues, 4)
	require.Equal(t, int64(5), status.Messages)
	var held int64
	for i, q := range status.Queues {
		require.Equal(t, int32(i), q.QueueId)
		held += q.MaxOffset - q.MinOffset
		require.Equal(t, q.MaxOffset > q.MinOffset, q.LastStoredAt != nil, "queue %d", i)
	}
	require.Equal(t, int64(5), held)
	_, err = mqgate.Check(c.GetTopicStatusWithResponse(ctx, "missing"))
	wantProblem(t, err, http.StatusNotFound, "topic-not-found")

	// Group billing gets all five (no filter): lease them.
	msgs := pullN(t, c, "billing", "orders", 5)
	require.Equal(t, []string{"AAEC/3Jhdw==", "a", "b", "plain text, no JSON", `{"id":1001}`}, bodies(msgs))
	byBody := map[string]mqgate.PulledMessage{}
	for _, m := range msgs {
		require.NotEmpty(t, m.Receipt)
		require.WithinDuration(t, time.Now().Add(30*time.Second), m.LeaseUntil, 15*time.Second, "the default lease")
		byBody[m.Body] = m
	}
	require.Equal(t, map[string]string{"source": "web"}, byBody[`{"id":1001}`].Properties)

	// Progress: nothing acked yet, five leases in flight, no lag beyond them.
	prog := ok(c.GetProgressWithResponse(ctx, "billing"))(t).JSON200
	require.Equal(t, "billing", prog.Group)
	require.Equal(t, int64(5), prog.TotalLag)
	require.Equal(t, 5, inFlight(prog.Queues))

	// Ack three; acking again is idempotent, a forged receipt is invalid.
	var receipts []string
	for _, b := range []string{`{"id":1001}`, "a", "b"} {
		receipts = append(receipts, byBody[b].Receipt)
	}
	acked := ok(c.AckMessagesWithResponse(ctx, "billing", nil, mqgate.AckRequest{Receipts: receipts}))(t)
	require.Len(t, acked.JSON200.Results, 3)
	for _, r := range acked.JSON200.Results {
		require.Equal(t, mqgate.ReceiptResultStatusOk, r.Status, "%+v", r)
	}
	twice := ok(c.AckMessagesWithResponse(ctx, "billing", nil, mqgate.AckRequest{Receipts: []string{receipts[0], "forged"}}))(t)
	require.Equal(t, mqgate.ReceiptResultStatusOk, twice.JSON200.Results[0].Status)
	require.Equal(t, mqgate.ReceiptResultStatusInvalid, twice.JSON200.Results[1].Status)
	require.NotNil(t, twice.JSON200.Results[1].Error)

	// Lease change: a longer lease on the raw message; the receipt it
	// answers (new or the same) acks it.
	rawReceipt := byBody["AAEC/3Jhdw=="].Receipt
	lease := ok(c.ChangeInvisibleTimeWithResponse(ctx, "billing", &mqgate.ChangeInvisibleTimeParams{XMqgateClientId: mqgate.Ptr("worker-1")},
		mqgate.LeaseRequest{Items: []mqgate.LeaseItem{{Receipt: rawReceipt, InvisibleMs: mqgate.Ptr(int64(60_000))}}}))(t)
	require.Equal(t, mqgate.ReceiptResultStatusOk, lease.JSON200.Results[0].Status)
	require.NotNil(t, lease.JSON200.Results[0].LeaseUntil)
	require.WithinDuration(t, time.Now().Add(time.Minute), *lease.JSON200.Results[0].LeaseUntil, 5*time.Second, "the changed lease's end")
	if nr := lease.JSON200.Results[0].NewReceipt; nr != nil {
		rawReceipt = *nr
	}
	acked = ok(c.AckMessagesWithResponse(ctx, "billing", nil, mqgate.AckRequest{Receipts: []string{rawReceipt}}))(t)
	require.Equal(t, mqgate.ReceiptResultStatusOk, acked.JSON200.Results[0].Status)

	// Ack the text message too: the group has consumed everything.
	acked = ok(c.AckMessagesWithResponse(ctx, "billing", nil, mqgate.AckRequest{Receipts: []string{byBody["plain text, no JSON"].Receipt}}))(t)
	require.Equal(t, mqgate.ReceiptResultStatusOk, acked.JSON200.Results[0].Status)
	prog = ok(c.GetProgressWithResponse(ctx, "billing"))(t).JSON200
	require.Zero(t, prog.TotalLag)
	require.Zero(t, inFlight(prog.Queues))

	// Long poll: a pull parked on the empty topic gets the message sent
	// while it waits.
	type pulled struct {
		msgs []mqgate.PulledMessage
		err  error
	}
	done := make(chan pulled, 1)
	go func() {
		res, err := mqgate.Check(c.PullMessagesWithResponse(ctx, "billing", "orders", nil, mqgate.PullRequest{WaitMs: mqgate.Ptr(int64(20_000))}))
		if err != nil {
			done <- pulled{err: err}
			return
		}
		done <- pulled{msgs: res.JSON200.Messages}
	}()
	srv.WaitInFlight(t, 1, 10*time.Second)
	late := ok(c.SendMessagesWithResponse(ctx, "orders", nil, mqgate.SendRequest{Body: mqgate.Ptr("late")}))(t)
	select {
	case p := <-done:
		require.NoError(t, p.err)
		require.Len(t, p.msgs, 1)
		require.Equal(t, late.JSON200.Results[0].MessageId, p.msgs[0].MessageId)
		require.Equal(t, "late", p.msgs[0].Body)
		ok(c.AckMessagesWithResponse(ctx, "billing", nil, mqgate.AckRequest{Receipts: []string{p.msgs[0].Receipt}}))(t)
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not return the message sent while it waited")
	}

	// Reset the offsets to before the first message: all six are due again.
	reset := ok(c.ResetOffsetsWithResponse(ctx, "billing", nil, mqgate.ResetOffsetRequest{
		Timestamp: time.Now().Add(-time.Hour), Topic: mqgate.Ptr("orders"),
	}))(t).JSON200
	require.Equal(t, int64(6), reset.TotalLag)
	again6 := pullN(t, c, "billing", "orders", 6)
	require.Equal(t, []string{"AAEC/3Jhdw==", "a", "b", "late", "plain text, no JSON", `{"id":1001}`}, bodies(again6))
}

func TestClientRetriesAndDeadLetters(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	ok(c.PutTopicWithResponse(ctx, "payments", mqgate.TopicRequest{Queues: mqgate.Ptr(2)}))(t)
	ok(c.PutGroupWithResponse(ctx, "billing", mqgate.GroupRequest{
		Subscriptions: []mqgate.Subscription{{Topic: "payments"}}, RetryMaxTimes: mqgate.Ptr(3),
	}))(t)
	g := ok(c.GetGroupWithResponse(ctx, "billing"))(t).JSON200
	require.Equal(t, 3, g.RetryMaxTimes)
	require.Equal(t, "payments", g.Subscriptions[0].Topic)
	for _, b := range []string{"retry-me", "dead-1", "dead-2"} {
		ok(c.SendMessagesWithResponse(ctx, "payments", nil, mqgate.SendRequest{Body: mqgate.Ptr(b), Keys: []string{b}}))(t)
	}
	msgs := pullN(t, c, "billing", "payments", 3)
	byBody := map[string]mqgate.PulledMessage{}
	for _, m := range msgs {
		byBody[m.Body] = m
	}

	// A nack with delay level 1 comes back after the level's delay, one
	// attempt later; nacks with -1 go to the DLQ at once.
	client := &mqgate.NackMessagesParams{XMqgateClientId: mqgate.Ptr("worker-7")}
	nacked := ok(c.NackMessagesWithResponse(ctx, "billing", client, mqgate.NackRequest{Items: []mqgate.NackItem{
		{Receipt: byBody["retry-me"].Receipt, DelayLevel: mqgate.Ptr(1), Reason: mqgate.Ptr("try later")},
		{Receipt: byBody["dead-1"].Receipt, DelayLevel: mqgate.Ptr(-1), Reason: mqgate.Ptr("payment service down")},
		{Receipt: byBody["dead-2"].Receipt, DelayLevel: mqgate.Ptr(-1), Reason: mqgate.Ptr("card declined")},
	}}))(t)
	for _, r := range nacked.JSON200.Results {
		require.Equal(t, mqgate.ReceiptResultStatusOk, r.Status, "%+v", r)
	}
	retried := pullN(t, c, "billing", "payments", 1)[0]
	require.Equal(t, "retry-me", retried.Body)
	require.Equal(t, int32(1), retried.ReconsumeTimes)
	require.Equal(t, byBody["retry-me"].MessageId, *retried.OriginMessageId)
	ok(c.AckMessagesWithResponse(ctx, "billing", nil, mqgate.AckRequest{Receipts: []string{retried.Receipt}}))(t)

	// The DLQ lists both dead letters with their reasons and who failed them.
	var dead *mqgate.DeadLetterList
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		dead = ok(c.ListDeadLettersWithResponse(ctx, "billing", &mqgate.ListDeadLettersParams{OriginalTopic: mqgate.Ptr("payments")}))(t).JSON200
		return len(dead.Items) == 2, "dead letters listed"
	})
	letters := map[string]mqgate.DeadLetter{}
	for _, d := range dead.Items {
		letters[d.Reason] = d
		require.Equal(t, mqgate.DeadLetterStatusDead, d.Status)
		require.Equal(t, "payments", d.OriginalTopic)
		require.Equal(t, "worker-7", *d.Attempts[len(d.Attempts)-1].Client)
	}
	resendMe, discardMe := letters["payment service down"], letters["card declined"]
	require.Equal(t, byBody["dead-1"].MessageId, resendMe.OriginMessageId)
	filtered := ok(c.ListDeadLettersWithResponse(ctx, "billing", &mqgate.ListDeadLettersParams{ReasonContains: mqgate.Ptr("DECLINED")}))(t).JSON200
	require.Len(t, filtered.Items, 1)
	require.Equal(t, discardMe.MessageId, filtered.Items[0].MessageId)
	one := ok(c.GetDeadLetterWithResponse(ctx, "billing", discardMe.MessageId))(t).JSON200
	require.Equal(t, "dead-2", *one.Body)

	// Resend one: billing gets it again with a fresh attempt count.
	resent := ok(c.ResendDeadLettersWithResponse(ctx, "billing", mqgate.ResendRequest{MessageIds: []string{resendMe.MessageId}}))(t).JSON200
	require.Equal(t, []string{resendMe.MessageId}, resent.Resent)
	require.Empty(t, resent.Skipped)
	back := pullN(t, c, "billing", "payments", 1)[0]
	require.Equal(t, "dead-1", back.Body)
	require.Equal(t, int32(0), back.ReconsumeTimes)
	ok(c.AckMessagesWithResponse(ctx, "billing", nil, mqgate.AckRequest{Receipts: []string{back.Receipt}}))(t)
	// A second resend skips it.
	resent = ok(c.ResendDeadLettersWithResponse(ctx, "billing", mqgate.ResendRequest{MessageIds: []string{resendMe.MessageId}}))(t).JSON200
	require.Equal(t, []string{resendMe.MessageId}, resent.Skipped)

	// Discard the other: 204, then listed as discarded.
	disc := ok(c.DiscardDeadLetterWithResponse(ctx, "billing", discardMe.MessageId))(t)
	require.Equal(t, http.StatusNoContent, disc.StatusCode())
	gone := ok(c.ListDeadLettersWithResponse(ctx, "billing", &mqgate.ListDeadLettersParams{Status: mqgate.Ptr(mqgate.ListDeadLettersParamsStatusDiscarded)}))(t).JSON200
	require.Len(t, gone.Items, 1)
	require.Equal(t, discardMe.MessageId, gone.Items[0].MessageId)
	still := ok(c.ListDeadLettersWithResponse(ctx, "billing", &mqgate.ListDeadLettersParams{Status: mqgate.Ptr(mqgate.ListDeadLettersParamsStatusDead)}))(t).JSON200
	require.Empty(t, still.Items)

	_, err := mqgate.Check(c.GetDeadLetterWithResponse(ctx, "billing", "7F00000100001F9000000000FFFFFFFF"))
	wantProblem(t, err, http.StatusNotFound, "message-not-found")
}

func TestClientTimers(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	ok(c.PutTopicWithResponse(ctx, "reminders", mqgate.TopicRequest{Queues: mqgate.Ptr(1)}))(t)
	hour := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	var ids []string
	for _, b := range []string{"cancel-me", "move-me"} {
		res := ok(c.SendMessagesWithResponse(ctx, "reminders", nil, mqgate.SendRequest{Body: mqgate.Ptr(b), DeliverAt: &hour, Tag: mqgate.Ptr("t")}))(t)
		ids = append(ids, res.JSON200.Results[0].MessageId)
	}

	// Both are listed (paged one at a time), due in an hour.
	page := ok(c.ListTimersWithResponse(ctx, &mqgate.ListTimersParams{Topic: mqgate.Ptr("reminders"), Limit: mqgate.Ptr(1)}))(t).JSON200
	require.Len(t, page.Items, 1)
	require.NotNil(t, page.Next)
	rest := ok(c.ListTimersWithResponse(ctx, &mqgate.ListTimersParams{Topic: mqgate.Ptr("reminders"), Cursor: page.Next}))(t).JSON200
	require.Len(t, rest.Items, 1)
	listed := []string{page.Items[0].Id, rest.Items[0].Id}
	sort.Strings(listed)
	want := append([]string(nil), ids...)
	sort.Strings(want)
	require.Equal(t, want, listed)
	timer := ok(c.GetTimerWithResponse(ctx, ids[0]))(t).JSON200
	require.True(t, timer.DeliverAt.Equal(hour), "%v != %v", timer.DeliverAt, hour)
	require.Equal(t, "reminders", timer.Topic)

	// Cancel the first: 204, then gone (404 message-not-found).
	cancelled := ok(c.CancelTimerWithResponse(ctx, ids[0]))(t)
	require.Equal(t, http.StatusNoContent, cancelled.StatusCode())
	_, err := mqgate.Check(c.GetTimerWithResponse(ctx, ids[0]))
	wantProblem(t, err, http.StatusNotFound, "message-not-found")

	// Reschedule the second to 50 ms from now: it is delivered.
	moved := ok(c.RescheduleTimerWithResponse(ctx, ids[1], mqgate.RescheduleRequest{DelayMs: mqgate.Ptr(int64(50))}))(t).JSON200
	require.True(t, moved.DeliverAt.Before(hour))
	got := pullN(t, c, "reader", "reminders", 1)[0]
	require.Equal(t, "move-me", got.Body)
	left := ok(c.ListTimersWithResponse(ctx, &mqgate.ListTimersParams{Topic: mqgate.Ptr("reminders")}))(t).JSON200
	require.Empty(t, left.Items)
}

func TestClientProblems(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()

	// Unknown topic: 404 topic-not-found with a detail naming it.
	resp, err := mqgate.Check(c.GetTopicWithResponse(ctx, "nope"))
	perr := wantProblem(t, err, http.StatusNotFound, "topic-not-found")
	require.Contains(t, perr.Detail, "nope")
	require.NotEmpty(t, perr.RequestID)
	require.Equal(t, perr.Code, resp.ApplicationproblemJSON404.Code, "the generated field carries the same problem")

	// Invalid arguments: 400 invalid-argument, invalid-name, invalid-sql.
	_, err = mqgate.Check(c.PullMessagesWithResponse(ctx, "g", "orders", nil, mqgate.PullRequest{MaxMessages: mqgate.Ptr(100)}))
	perr = wantProblem(t, err, http.StatusBadRequest, "invalid-argument")
	require.Contains(t, perr.Detail, "maxMessages")
	_, err = mqgate.Check(c.PutTopicWithResponse(ctx, "bad name!", mqgate.TopicRequest{}))
	wantProblem(t, err, http.StatusBadRequest, "invalid-name")
	_, err = mqgate.Check(c.PutGroupWithResponse(ctx, "g", mqgate.GroupRequest{Subscriptions: []mqgate.Subscription{{Topic: "orders", Sql: mqgate.Ptr("a = ")}}}))
	perr = wantProblem(t, err, http.StatusBadRequest, "invalid-sql")
	require.Equal(t, "subscriptions[0].sql", *perr.Problem.Field)
	require.NotNil(t, perr.Problem.Position)

	// An empty body (400 empty-body) and a limit (400 value-too-long with field and limit).
	_, err = mqgate.Check(c.SendMessagesWithBodyWithResponse(ctx, "orders", nil, "application/octet-stream", bytes.NewReader(nil)))
	wantProblem(t, err, http.StatusBadRequest, "empty-body")
	_, err = mqgate.Check(c.SendMessagesWithResponse(ctx, "orders", nil, mqgate.SendRequest{Body: mqgate.Ptr("x"), Tag: mqgate.Ptr(strings.Repeat("t", 300))}))
	perr = wantProblem(t, err, http.StatusBadRequest, "value-too-long")
	require.Equal(t, "tag", *perr.Problem.Field)
	require.Equal(t, 255, *perr.Problem.Limit)

	// The same idempotency key with another body: 422.
	key := &mqgate.SendMessagesParams{IdempotencyKey: mqgate.Ptr("k-1")}
	ok(c.SendMessagesWithResponse(ctx, "orders", key, mqgate.SendRequest{Body: mqgate.Ptr("one")}))(t)
	_, err = mqgate.Check(c.SendMessagesWithResponse(ctx, "orders", key, mqgate.SendRequest{Body: mqgate.Ptr("two")}))
	wantProblem(t, err, http.StatusUnprocessableEntity, "idempotency-key-reused")

	// Unknown group, unknown message.
	_, err = mqgate.Check(c.GetGroupWithResponse(ctx, "nobody"))
	wantProblem(t, err, http.StatusNotFound, "group-not-found")
	_, err = mqgate.Check(c.GetMessageWithResponse(ctx, "not-an-id"))
	wantProblem(t, err, http.StatusBadRequest, "invalid-argument")

	// A transport error is not an *Error.
	srv.Close(t)
	_, err = mqgate.Check(c.ListTopicsWithResponse(ctx))
	require.Error(t, err)
	var e *mqgate.Error
	require.False(t, errors.As(err, &e))
	require.Empty(t, mqgate.ProblemCode(err))
}

func TestClientAuth(t *testing.T) {
	_, err := mqgate.New("")
	require.Error(t, err)
	secret := "0123456789abcdef0123456789abcdef-hmac"
	acl := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(acl, []byte("accounts:\n"+
		"  - accessKey: ops\n    secretKey: ops-secret\n    admin: true\n"+
		"  - accessKey: token-user\n    topicPerms: [\"orders=PUB\"]\n"), 0o600))
	srv := servertest.Start(t, func(c *server.Config) { c.ACLFile, c.JWTSecret, c.AuthFailuresPerMinute = acl, secret, 100_000 })
	ctx := context.Background()
	client := func(base string, opts ...mqgate.ClientOption) *mqgate.ClientWithResponses {
		c, err := mqgate.New(base, append([]mqgate.ClientOption{mqgate.WithHTTPClient(srv.Client)}, opts...)...)
		require.NoError(t, err)
		return c
	}

	// Basic: the admin account, with the base URL as it comes (with or
	// without /v1); no or wrong credentials are 401 unauthenticated.
	for _, base := range []string{srv.Base, srv.Base + "/", srv.Base + "/v1"} {
		ok(client(base, mqgate.WithBasicAuth("ops", "ops-secret")).PutTopicWithResponse(ctx, "orders", mqgate.TopicRequest{}))(t)
	}
	_, err = mqgate.Check(client(srv.Base).ListTopicsWithResponse(ctx))
	wantProblem(t, err, http.StatusUnauthorized, "unauthenticated")
	_, err = mqgate.Check(client(srv.Base, mqgate.WithBasicAuth("ops", "wrong")).ListTopicsWithResponse(ctx))
	wantProblem(t, err, http.StatusUnauthorized, "unauthenticated")

	// Bearer: a JWT naming token-user, who may send to orders only.
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "token-user", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	require.NoError(t, err)
	bearer := client(srv.Base, mqgate.WithBearerToken(tok))
	ok(bearer.SendMessagesWithResponse(ctx, "orders", nil, mqgate.SendRequest{Body: mqgate.Ptr("hi")}))(t)
	_, err = mqgate.Check(bearer.ListTopicsWithResponse(ctx))
	perr := wantProblem(t, err, http.StatusForbidden, "forbidden")
	require.Contains(t, perr.Detail, "token-user")
}

// topicNames lists the names of ts.
func topicNames(ts []mqgate.Topic) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// inFlight adds up the leases in flight of qs.
func inFlight(qs []mqgate.QueueProgress) int {
	n := 0
	for _, q := range qs {
		n += q.InFlight
	}
	return n
}
