package server_test

// End-to-end tests of input that used to wedge the store: every limit a
// reader of the CommitLog enforces is refused at the API before anything
// is written; the broker's own additions (the attempt history) stay
// bounded however a message fails; a record that cannot be dispatched
// anyway (planted while the server is stopped) is quarantined, reported
// and passed over; JSON that a lenient decoder would guess at is refused.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/servertest"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// fastLadder gives every delay level 1 ms.
func fastLadder(t *testing.T) func(*server.Config) {
	return func(cfg *server.Config) {
		require.NoError(t, cfg.DelayLevels.UnmarshalText([]byte(strings.TrimSpace(strings.Repeat("1ms ", 18)))))
	}
}

// requireServing sends one message to topic and pulls it back with a
// fresh group: the store is not wedged.
func requireServing(t *testing.T, e *e2eServer, topic string) {
	t.Helper()
	body := fmt.Sprintf("alive-%d", time.Now().UnixNano())
	e.Send(t, topic, api.SendMessage{Body: body})
	group := fmt.Sprintf("probe%d", time.Now().UnixNano())
	var got []api.PulledMessage
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		got = append(got, e.Pull(t, group, topic, api.PullRequest{MaxMessages: 32, WaitMs: 200})...)
		for _, m := range got {
			if m.Body == body {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pulled, not the probe", len(got))
	})
}

// TestE2EOversizedPropertiesRefused: the send that once got a 200 and
// then stalled the dispatcher for good (properties over 32 KiB) is a 413
// naming the limit, and the store keeps serving.
func TestE2EOversizedPropertiesRefused(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	big := map[string]string{"stack": strings.Repeat("x", 40_000)}
	p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/wedge/messages", api.SendMessage{Body: "a", Properties: big}),
		http.StatusRequestEntityTooLarge, "properties-too-large")
	require.Equal(t, "properties", p.Field)
	require.Equal(t, broker.MaxUserPropertiesBytes, p.Limit)
	require.Equal(t, "bytes", p.LimitUnit)
	require.Less(t, len(p.Detail), 300, "the detail does not echo the value")

	// Every other limit, over real HTTP, with the field it names.
	long := func(n int) string { return strings.Repeat("k", n) }
	for _, tc := range []struct {
		msg    any
		status int
		code   string
		field  string
		limit  int
	}{
		{api.SendMessage{Body: "a", Keys: []string{long(2048)}}, 400, "value-too-long", "keys[0]", broker.MaxKeyBytes},
		{api.SendMessage{Body: "a", ShardingKey: long(100_000)}, 400, "value-too-long", "shardingKey", broker.MaxShardingKeyBytes},
		{api.SendMessage{Body: "a", Tag: long(256)}, 400, "value-too-long", "tag", broker.MaxTagBytes},
		{api.SendMessage{Body: "a", DedupID: long(256)}, 400, "value-too-long", "dedupId", broker.MaxDedupIDBytes},
		{map[string]any{"messages": []api.SendMessage{{Body: "a"}, {Body: "b", Tag: long(300)}}}, 400, "value-too-long", "messages[1].tag", broker.MaxTagBytes},
		{api.SendMessage{Body: strings.Repeat("b", 5<<20)}, 413, "body-too-large", "", 0},
	} {
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/wedge/messages", tc.msg), tc.status, tc.code)
		if tc.field != "" {
			require.Equal(t, tc.field, p.Field)
			require.Equal(t, tc.limit, p.Limit)
		}
		require.Less(t, len(p.Detail), 300, "the detail does not echo the value: %s", p.Detail)
	}
	// The raw send: properties from headers count the same.
	header := http.Header{}
	for i := 0; i < 40; i++ {
		header.Set(fmt.Sprintf("X-Mqgate-Property-P%d", i), long(1000))
	}
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/wedge/messages", "text/plain", []byte("raw"), header),
		http.StatusRequestEntityTooLarge, "properties-too-large")

	requireServing(t, e, "wedge")
	var status api.BrokerStatus
	servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &status)
	require.Zero(t, status.Quarantine.Count)
	require.Zero(t, status.Dispatch.LagBytes)
	require.Equal(t, "ok\n", string(e.Get(t, "/readyz").Body))
}

// TestE2EVerboseFailuresStayBounded: a consumer that nacks with a 4 KB
// stack trace on every delivery (the ninth such delivery once grew the
// copy's history past the record format) walks the whole ladder into the
// DLQ, whose history is bounded and counts every failure, and a restart
// after it opens.
func TestE2EVerboseFailuresStayBounded(t *testing.T) {
	t.Parallel()
	e := startE2E(t, fastLadder(t))
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/verbose", api.GroupRequest{RetryMaxTimes: 20}), http.StatusCreated, nil)
	sent := e.Send(t, "traces", api.SendMessage{Body: "fails", Properties: map[string]string{"origin": "test"}})
	trace := strings.Repeat("at com.example.Worker.handle(Worker.java:42)\n", 100)[:4096]
	header := http.Header{api.ClientIDHeader: {"worker-7"}}
	for attempt := 0; attempt <= 20; attempt++ {
		m := e.PullN(t, "verbose", "traces", 1, 60_000, 10*time.Second)[0]
		require.EqualValues(t, attempt, m.ReconsumeTimes)
		require.Equal(t, map[string]string{"origin": "test"}, m.Properties)
		r := e.Do(t, http.MethodPost, "/v1/groups/verbose/nack", "application/json",
			[]byte(fmt.Sprintf(`{"items":[{"receipt":%q,"reason":%q}]}`, m.Receipt, fmt.Sprintf("attempt %d\n%s", attempt, trace))), header)
		var res api.ReceiptResponse
		servertest.Decode(t, r, http.StatusOK, &res)
		require.Equal(t, "ok", res.Results[0].Status, "attempt %d", attempt)
	}
	var dead api.DeadLetterList
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		dead = api.DeadLetterList{}
		servertest.Decode(t, e.Get(t, "/v1/groups/verbose/dlq"), http.StatusOK, &dead)
		return len(dead.Items) == 1, fmt.Sprintf("%d dead letters", len(dead.Items))
	})
	d := dead.Items[0]
	require.Equal(t, sent.MessageID, d.OriginMessageID)
	require.Contains(t, d.Reason, "attempt 20")
	require.LessOrEqual(t, len(d.Reason), 2048)
	total := 0
	for _, a := range d.Attempts {
		if a.Outcome == "omitted" {
			total += a.Count
			continue
		}
		total++
		require.Equal(t, "worker-7", a.Client)
		require.Contains(t, a.Reason, "[truncated: ")
		require.LessOrEqual(t, len(a.Reason), 512)
	}
	require.Equal(t, 21, total, "the history counts every failure")
	require.Contains(t, d.Attempts[len(d.Attempts)-1].Reason, "attempt 20")

	e.Close(t)
	e = openE2E(t, e.Cfg)
	dead = api.DeadLetterList{}
	servertest.Decode(t, e.Get(t, "/v1/groups/verbose/dlq"), http.StatusOK, &dead)
	require.Len(t, dead.Items, 1)
	requireServing(t, e, "traces")
}

// TestE2EUndispatchableRecordQuarantined plants, while the server is
// stopped, a record with an intact frame that the dispatcher cannot use
// (over-limit properties, written the way the bug once wrote them). The
// server opens, sets it aside, lists it in the broker status, reports
// /readyz degraded (still 200), and every message around it is consumed.
func TestE2EUndispatchableRecordQuarantined(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	e.Send(t, "around", api.SendMessage{Body: "before"})
	e.Close(t)

	poison := &message.Message{Topic: "around", Body: []byte("poison"), Properties: map[string]string{"big": strings.Repeat("x", 40_350)}}
	offset := storagetest.AppendRaw(t, e.Cfg.DataDir, int64(e.Cfg.SegmentSize), storagetest.EncodeUnchecked(poison))

	e = openE2E(t, e.Cfg)
	e.Send(t, "around", api.SendMessage{Body: "after"})
	got := e.PullN(t, "g", "around", 2, 60_000, 10*time.Second)
	require.ElementsMatch(t, []string{"before", "after"}, []string{got[0].Body, got[1].Body})

	var status api.BrokerStatus
	servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &status)
	require.EqualValues(t, 1, status.Quarantine.Count)
	require.Len(t, status.Quarantine.Records, 1)
	q := status.Quarantine.Records[0]
	require.Equal(t, offset, q.Offset)
	require.Equal(t, "dispatch", q.Stage)
	require.Contains(t, q.Reason, "properties length")
	ready := e.Get(t, "/readyz")
	require.Equal(t, http.StatusOK, ready.Status)
	require.Contains(t, string(ready.Body), "1 records quarantined")
	require.Contains(t, string(ready.Body), fmt.Sprintf("offset %d", offset))
	v, ok := e.MetricValue(t, "mqgate_store_quarantined_records")
	require.True(t, ok)
	require.EqualValues(t, 1, v)
}

// TestE2ERefusesAmbiguousJSON: JSON that a lenient decoder would store
// with U+FFFD in place of bytes, or resolve by guessing which duplicate
// member the client meant, is a 400 that says what to do instead.
func TestE2ERefusesAmbiguousJSON(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	send := func(body string) api.Problem {
		t.Helper()
		return servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/strict/messages", "application/json", []byte(body), nil),
			http.StatusBadRequest, "malformed-request")
	}
	for _, body := range []string{"{\"body\":\"caf\xe9\"}", `{"body":"\udc00"}`} {
		p := send(body)
		require.Contains(t, p.Detail, `"bodyEncoding": "base64"`, "the detail points to base64")
	}
	require.Contains(t, send(`{"body":"a","body":"b"}`).Detail, "appears twice")
	require.Contains(t, send(`{"body":"a","BODY":"b"}`).Detail, "case-sensitive")
	require.Contains(t, send(`{"body":"a","properties":{"k":"1","k":"2"}}`).Detail, "appears twice")
	// The same bytes as base64 are stored as they are.
	res := e.Send(t, "strict", api.SendMessage{Body: "Y2Fm6Q==", BodyEncoding: "base64"})
	m := e.Message(t, res.MessageID)
	require.Equal(t, "base64", m.BodyEncoding)
	require.Equal(t, "Y2Fm6Q==", m.Body)
	// Other routes decode the same way.
	servertest.WantProblem(t, e.Do(t, http.MethodPut, "/v1/topics/strict", "application/json", []byte(`{"queues":4,"queues":8}`), nil),
		http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/groups/g/topics/strict/pull", "application/json", []byte(`{"maxMessages":1,"MaxMessages":2}`), nil),
		http.StatusBadRequest, "malformed-request")
}
