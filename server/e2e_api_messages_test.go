package server_test

// TestE2EEndpoints (e2e_api_test.go), the message routes: sends and
// idempotency keys, pulls, acks, nacks and leases, queue reads, offsets,
// progress and resets, lookups, dead letters and timers.

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/servertest"
)

// endpointsSend is TestE2EEndpoints/Send.
func endpointsSend(t *testing.T, e *e2eServer) {
	single := e.Send(t, "orders", api.SendMessage{
		Body: "hello", Tag: "created", Keys: []string{"order-1"},
		Properties: map[string]string{"region": "eu"}, ShardingKey: "customer-42",
	})
	require.Regexp(t, messageIDPattern, single.MessageID)
	require.False(t, single.Duplicate)
	h := fnv.New32a()
	h.Write([]byte("customer-42"))
	require.EqualValues(t, h.Sum32()%4, single.QueueID, "queue = fnv32(shardingKey) mod queues")
	m := e.Message(t, single.MessageID)
	require.Equal(t, single.MessageID, m.MessageID)
	require.Equal(t, "orders", m.Topic)
	require.Equal(t, single.QueueID, m.QueueID)
	require.Equal(t, single.QueueOffset, m.QueueOffset)
	require.Equal(t, "hello", m.Body)
	require.Equal(t, "utf8", m.BodyEncoding)
	require.Equal(t, "created", m.Tag)
	require.Equal(t, []string{"order-1"}, m.Keys)
	require.Equal(t, map[string]string{"region": "eu"}, m.Properties)
	require.NotContains(t, string(e.Get(t, "/v1/messages/"+single.MessageID).Body), `"receipt"`, "a lookup leases nothing")
	require.NotEmpty(t, m.BornAt)
	require.NotEmpty(t, m.StoredAt)
	lower := e.Message(t, strings.ToLower(single.MessageID))
	require.Equal(t, m, lower, "ids are case-insensitive")

	// A batch is stored in order, one result per message.
	var batch api.SendResponse
	servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages",
		`{"messages":[{"body":"b1"},{"body":"b2","tag":"paid"},{"body":"b3","keys":["batch-3"]}]}`), http.StatusOK, &batch)
	require.Len(t, batch.Results, 3)
	for i, res := range batch.Results {
		m = e.Message(t, res.MessageID)
		require.Equal(t, fmt.Sprintf("b%d", i+1), m.Body)
	}

	// A raw body: any non-JSON type; attributes from X-Mqgate-* headers.
	raw := []byte{0x00, 0x01, 0x02, 0xff, 0xfe}
	var rawRes api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/octet-stream", raw, http.Header{
		"X-Mqgate-Tag":            {"raw"},
		"X-Mqgate-Keys":           {"raw-1, raw-2"},
		"X-Mqgate-Property-Color": {"blue"},
	}), http.StatusOK, &rawRes)
	require.Len(t, rawRes.Results, 1)
	m = e.Message(t, rawRes.Results[0].MessageID)
	require.Equal(t, "base64", m.BodyEncoding, "a body that is not UTF-8 comes back as base64")
	require.Equal(t, base64.StdEncoding.EncodeToString(raw), m.Body)
	require.Equal(t, "raw", m.Tag)
	require.Equal(t, []string{"raw-1", "raw-2"}, m.Keys)
	require.Equal(t, map[string]string{"color": "blue"}, m.Properties)
	// A JSON document sent as text/plain is stored as is.
	var doc api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "text/plain", []byte(`{"id":1}`), nil), http.StatusOK, &doc)
	m = e.Message(t, doc.Results[0].MessageID)
	require.Equal(t, `{"id":1}`, m.Body)

	// A base64 body is decoded before it is stored.
	bin := []byte{0xde, 0xad, 0xbe, 0xef, 0x00}
	b64 := e.Send(t, "orders", api.SendMessage{Body: base64.StdEncoding.EncodeToString(bin), BodyEncoding: "base64"})
	m = e.Message(t, b64.MessageID)
	require.Equal(t, "base64", m.BodyEncoding)
	require.Equal(t, base64.StdEncoding.EncodeToString(bin), m.Body)
	text := e.Send(t, "orders", api.SendMessage{Body: base64.StdEncoding.EncodeToString([]byte("plain text")), BodyEncoding: "base64"})
	m = e.Message(t, text.MessageID)
	require.Equal(t, "utf8", m.BodyEncoding)
	require.Equal(t, "plain text", m.Body)

	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", api.SendMessage{Body: "%%%", BodyEncoding: "base64"}), http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", api.SendMessage{Body: "00", BodyEncoding: "hex"}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", `{"body":"a","messages":[{"body":"b"}]}`), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", `{"messages":[]}`), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", api.SendMessage{Body: "a", DelayLevel: -1}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", api.SendMessage{Body: "a", DelayLevel: 19}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", api.SendMessage{Body: "a", Tag: "a b"}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/orders/messages", api.SendMessage{Body: "a", Keys: []string{""}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "text/plain", []byte("x"), http.Header{"X-Mqgate-Delay-Level": {"soon"}}), http.StatusBadRequest, "malformed-request")

	// Topics are created on first send (auto-create is on).
	e.Send(t, "fresh", api.SendMessage{Body: "first"})
	var fresh api.Topic
	servertest.Decode(t, e.Get(t, "/v1/topics/fresh"), http.StatusOK, &fresh)
	require.Equal(t, 4, fresh.Queues)
}

// endpointsIdempotencyKey is TestE2EEndpoints/IdempotencyKey.
func endpointsIdempotencyKey(t *testing.T, e *e2eServer) {
	key := http.Header{"Idempotency-Key": {"order-1001-created"}}
	body := []byte(`{"body":"{\"id\":1001}","keys":["idem-1001"]}`)
	var first, replay api.SendResponse
	r := e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", body, key)
	servertest.Decode(t, r, http.StatusOK, &first)
	require.Empty(t, r.Header.Get("Idempotent-Replayed"))
	require.False(t, first.Results[0].Duplicate)
	r = e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", body, key)
	servertest.Decode(t, r, http.StatusOK, &replay)
	require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
	require.True(t, replay.Results[0].Duplicate)
	require.Equal(t, first.Results[0].MessageID, replay.Results[0].MessageID)
	require.Equal(t, first.Results[0].QueueOffset, replay.Results[0].QueueOffset)
	// Same key, another body.
	p := servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(`{"body":"{\"id\":1002}"}`), key),
		http.StatusUnprocessableEntity, "idempotency-key-reused")
	require.Contains(t, p.Detail, "order-1001-created")
	// Exactly one copy was stored.
	found := e.ByKey(t, "orders", "idem-1001")
	require.Len(t, found, 1)
	require.Equal(t, first.Results[0].MessageID, found[0].MessageID)

	// A batch under one key: message i is deduplicated as <key>:<i>.
	batchKey := http.Header{"Idempotency-Key": {`"batch-7"`}}
	batch := []byte(`{"messages":[{"body":"x1"},{"body":"x2"}]}`)
	var b1, b2 api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", batch, batchKey), http.StatusOK, &b1)
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", batch, batchKey), http.StatusOK, &b2)
	for i := range b1.Results {
		require.True(t, b2.Results[i].Duplicate)
		require.Equal(t, b1.Results[i].MessageID, b2.Results[i].MessageID)
	}
	// A raw send honours the key too.
	rawKey := http.Header{"Idempotency-Key": {"raw-key"}}
	var r1, r2 api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/octet-stream", []byte("raw body"), rawKey), http.StatusOK, &r1)
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/octet-stream", []byte("raw body"), rawKey), http.StatusOK, &r2)
	require.True(t, r2.Results[0].Duplicate)
	require.Equal(t, r1.Results[0].MessageID, r2.Results[0].MessageID)

	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", body, http.Header{"Idempotency-Key": {"ключ"}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", body, http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/orders/messages", "application/json", []byte(`{"body":"a","dedupId":"other"}`), key), http.StatusBadRequest, "invalid-argument")
}

// endpointsPullAckNackLeases is TestE2EEndpoints/PullAckNackLeases.
func endpointsPullAckNackLeases(t *testing.T, e *e2eServer) {
	for i := 1; i <= 3; i++ {
		e.Send(t, "work", api.SendMessage{Body: fmt.Sprintf("w%d", i)})
	}
	got := e.PullN(t, "worker", "work", 3, 30_000, 10*time.Second)
	byBody := map[string]api.PulledMessage{}
	for _, m := range got {
		require.NotEmpty(t, m.Receipt)
		require.Equal(t, "work", m.Topic)
		require.Zero(t, m.ReconsumeTimes)
		require.Empty(t, m.OriginMessageID)
		require.NotEmpty(t, m.BornAt)
		byBody[m.Body] = m
	}
	require.Len(t, byBody, 3)
	var worker api.Group
	servertest.Decode(t, e.Get(t, "/v1/groups/worker"), http.StatusOK, &worker)
	require.Equal(t, 16, worker.RetryMaxTimes, "a group is created on its first pull")

	require.Equal(t, []string{"ok"}, e.Ack(t, "worker", byBody["w1"].Receipt))
	e.Nack(t, "worker", byBody["w2"].Receipt, 1, "try again soon")
	leases := e.Receipts(t, "worker", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: byBody["w3"].Receipt, InvisibleMs: 60_000}}})
	require.Len(t, leases, 1)
	require.Equal(t, "ok", leases[0].Status)

	// The nacked message comes back (level 1 = 20 ms) as a retry copy.
	retry := e.PullN(t, "worker", "work", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, "w2", retry.Body)
	require.Equal(t, "work", retry.Topic, "the original topic is restored")
	require.EqualValues(t, 1, retry.ReconsumeTimes)
	require.Equal(t, byBody["w2"].MessageID, retry.OriginMessageID)
	require.NotEqual(t, byBody["w2"].MessageID, retry.MessageID)
	require.Equal(t, []string{"ok", "ok"}, e.Ack(t, "worker", retry.Receipt, byBody["w3"].Receipt))
	require.Equal(t, []string{"expired"}, e.Ack(t, "worker", byBody["w2"].Receipt), "the nacked delivery's receipt is spent")
	require.Empty(t, e.Pull(t, "worker", "work", api.PullRequest{WaitMs: 200}), "everything is acknowledged")
	// An empty body without a Content-Type takes the defaults (no wait).
	r := e.Do(t, http.MethodPost, "/v1/groups/worker/topics/work/pull", "", nil, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r)
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.JSONEq(t, `{"messages":[]}`, string(r.Body), "an empty list, not null")

	// A delayed send (level 2 = 40 ms) is delivered after its delay.
	sentAt := time.Now()
	e.Send(t, "later", api.SendMessage{Body: "delayed", DelayLevel: 2})
	delayed := e.PullN(t, "worker", "later", 1, 30_000, 10*time.Second)[0]
	require.GreaterOrEqual(t, time.Since(sentAt), servertest.LevelDelay(t, e.Cfg, 2), "delivered before its delay")
	require.Equal(t, "delayed", delayed.Body)
	require.Equal(t, "later", delayed.Topic)
	require.Zero(t, delayed.ReconsumeTimes)
	require.Equal(t, []string{"ok"}, e.Ack(t, "worker", delayed.Receipt))

	pullPath := "/v1/groups/worker/topics/work/pull"
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, pullPath, api.PullRequest{MaxMessages: 33}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, pullPath, api.PullRequest{MaxMessages: -1}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, pullPath, api.PullRequest{WaitMs: -1}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, pullPath, api.PullRequest{WaitMs: 30_001}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, pullPath, api.PullRequest{InvisibleMs: -1}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, pullPath, api.PullRequest{InvisibleMs: api.MaxInvisibleMs + 1}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, pullPath, api.PullRequest{TagExpression: "a b"}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, pullPath, `{"waitMs":"soon"}`), http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, pullPath, "text/plain", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/worker/topics/no-such-topic/pull", api.PullRequest{}), http.StatusNotFound, "topic-not-found")

	for op, valid := range map[string]string{"ack": `{"receipts":["r"]}`, "nack": `{"items":[{"receipt":"r"}]}`, "leases": `{"items":[{"receipt":"r","invisibleMs":1}]}`} {
		path := "/v1/groups/worker/" + op
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, path, `{}`), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, path, `not json`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.Do(t, http.MethodPost, path, "", nil, nil), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.Do(t, http.MethodPost, path, "application/xml", []byte(`<ack/>`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/%25DLQ%25worker/"+op, valid), http.StatusBadRequest, "invalid-name")
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/"+strings.Repeat("g", 121)+"/"+op, valid), http.StatusBadRequest, "invalid-name")
	}
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/worker/ack", api.AckRequest{Receipts: []string{""}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/worker/nack", api.NackRequest{Items: []api.NackItem{{Receipt: "r", DelayLevel: -2}}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/worker/nack", api.NackRequest{Items: []api.NackItem{{Receipt: "r", Reason: strings.Repeat("x", broker.MaxReasonBytes+1)}}}), http.StatusBadRequest, "value-too-long")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/worker/leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: "r", InvisibleMs: -1}}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/worker/leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: "r", InvisibleMs: api.MaxInvisibleMs + 1}}}), http.StatusBadRequest, "invalid-argument")
	// A receipt that is not one: per-receipt invalid, the request is 200.
	require.Equal(t, []string{"invalid"}, e.Ack(t, "worker", "not-a-receipt"))
	res := e.Receipts(t, "worker", "nack", api.NackRequest{Items: []api.NackItem{{Receipt: "not-a-receipt"}}})
	require.Equal(t, "invalid", res[0].Status)
	require.NotEmpty(t, res[0].Error)
}

// endpointsQueueReadOffsetsProgressReset is TestE2EEndpoints/QueueReadOffsetsProgressReset.
func endpointsQueueReadOffsetsProgressReset(t *testing.T, e *e2eServer, startedAt time.Time) {
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/log", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	for i := 0; i < 5; i++ {
		res := e.Send(t, "log", api.SendMessage{Body: fmt.Sprintf("l%d", i)})
		require.EqualValues(t, i, res.QueueOffset)
	}
	var page api.QueueMessages
	servertest.Decode(t, e.Get(t, "/v1/topics/log/queues/0/messages?offset=1&max=2"), http.StatusOK, &page)
	require.EqualValues(t, 3, page.NextOffset)
	require.Len(t, page.Messages, 2)
	for i, m := range page.Messages {
		require.Equal(t, fmt.Sprintf("l%d", i+1), m.Body)
		require.EqualValues(t, i+1, m.QueueOffset)
	}
	servertest.Decode(t, e.Get(t, "/v1/topics/log/queues/0/messages"), http.StatusOK, &page)
	require.Len(t, page.Messages, 5)
	require.EqualValues(t, 5, page.NextOffset)
	servertest.Decode(t, e.Get(t, "/v1/topics/log/queues/0/messages?offset=5"), http.StatusOK, &page)
	require.Empty(t, page.Messages)
	require.NotNil(t, page.Messages)
	require.EqualValues(t, 5, page.NextOffset)
	servertest.WantProblem(t, e.Get(t, "/v1/topics/log/queues/1/messages"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/log/queues/x/messages"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/log/queues/-1/messages"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/log/queues/0/messages?max=33"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/log/queues/0/messages?max=0"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/log/queues/0/messages?offset=-1"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/nope/queues/0/messages"), http.StatusNotFound, "topic-not-found")

	// Offsets of an offset-mode reader.
	servertest.WantProblem(t, e.Get(t, "/v1/groups/reader/offsets"), http.StatusNotFound, "group-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/groups/reader/progress"), http.StatusNotFound, "group-not-found")
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/reader", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "log"}}}), http.StatusCreated, nil)
	r := e.JSON(t, http.MethodPut, "/v1/groups/reader/offsets", api.Offsets{Offsets: []api.QueueOffset{{Topic: "log", QueueID: 0, Offset: 3}}})
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r)
	var offsets api.Offsets
	servertest.Decode(t, e.Get(t, "/v1/groups/reader/offsets"), http.StatusOK, &offsets)
	require.Contains(t, offsets.Offsets, api.QueueOffset{Topic: "log", QueueID: 0, Offset: 3, BrokerOffset: 5, Lag: 2})
	var progress api.Progress
	servertest.Decode(t, e.Get(t, "/v1/groups/reader/progress"), http.StatusOK, &progress)
	require.Equal(t, "reader", progress.Group)
	require.EqualValues(t, 2, progress.TotalLag)
	require.Len(t, progress.Queues, 1)
	q := progress.Queues[0]
	require.Equal(t, "log", q.Topic)
	require.EqualValues(t, 5, q.BrokerOffset)
	require.EqualValues(t, 3, q.ConsumerOffset)
	require.EqualValues(t, 2, q.Lag)
	require.Zero(t, q.InFlight)
	require.NotEmpty(t, q.LastStoredAt)
	// A pop consumer of the group continues from the committed offset.
	got := e.PullN(t, "reader", "log", 2, 30_000, 10*time.Second)
	require.ElementsMatch(t, []string{"l3", "l4"}, []string{got[0].Body, got[1].Body})
	servertest.Decode(t, e.Get(t, "/v1/groups/reader/progress"), http.StatusOK, &progress)
	require.Equal(t, 2, progress.Queues[0].InFlight)

	offsetsPath := "/v1/groups/reader/offsets"
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, offsetsPath, api.Offsets{Offsets: []api.QueueOffset{{Topic: "log", Offset: 6}}}), http.StatusBadRequest, "offset-out-of-range")
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, offsetsPath, api.Offsets{Offsets: []api.QueueOffset{{Topic: "log", QueueID: 7}}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, offsetsPath, api.Offsets{Offsets: []api.QueueOffset{{Topic: "log", Offset: -1}}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, offsetsPath, api.Offsets{Offsets: []api.QueueOffset{{Topic: "nope"}}}), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, offsetsPath, api.Offsets{Offsets: []api.QueueOffset{{Topic: "a/b"}}}), http.StatusBadRequest, "invalid-name")
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, offsetsPath, api.Offsets{}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Do(t, http.MethodPut, offsetsPath, "text/plain", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")

	// Reset by time: back to the start, then past the end.
	resetPath := "/v1/groups/reader/reset-offset"
	servertest.Decode(t, e.JSON(t, http.MethodPost, resetPath, api.ResetOffsetRequest{Timestamp: startedAt.UTC().Format(time.RFC3339Nano), Topic: "log"}), http.StatusOK, &progress)
	require.Len(t, progress.Queues, 1)
	require.EqualValues(t, 0, progress.Queues[0].ConsumerOffset)
	require.EqualValues(t, 5, progress.TotalLag)
	require.Zero(t, progress.Queues[0].InFlight, "a reset drops the leases")
	got = e.PullN(t, "reader", "log", 5, 30_000, 10*time.Second)
	require.Equal(t, "l0", got[0].Body, "the reset rewound the pop cursor")
	servertest.Decode(t, e.JSON(t, http.MethodPost, resetPath, api.ResetOffsetRequest{Timestamp: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}), http.StatusOK, &progress)
	require.EqualValues(t, 5, progress.Queues[0].ConsumerOffset)
	require.Zero(t, progress.TotalLag)
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, resetPath, api.ResetOffsetRequest{Timestamp: "yesterday"}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, resetPath, api.ResetOffsetRequest{Timestamp: time.Now().UTC().Format(time.RFC3339), Topic: "nope"}), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, resetPath, `{}`), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, resetPath, "", nil, nil), http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, resetPath, "text/plain", []byte("x"), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/nobody/reset-offset", api.ResetOffsetRequest{Timestamp: time.Now().UTC().Format(time.RFC3339)}), http.StatusNotFound, "group-not-found")

	// Skip the backlog: back to the start by time, then to the queues' ends.
	servertest.Decode(t, e.JSON(t, http.MethodPost, resetPath, api.ResetOffsetRequest{Timestamp: startedAt.UTC().Format(time.RFC3339Nano)}), http.StatusOK, &progress)
	require.EqualValues(t, 5, progress.TotalLag)
	skipPath := "/v1/groups/reader/skip-backlog"
	servertest.Decode(t, e.JSON(t, http.MethodPost, skipPath, api.SkipBacklogRequest{Topic: "log"}), http.StatusOK, &progress)
	require.Zero(t, progress.TotalLag)
	require.EqualValues(t, 5, progress.Queues[0].ConsumerOffset)
	servertest.Decode(t, e.Do(t, http.MethodPost, skipPath, "", nil, nil), http.StatusOK, &progress)
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, skipPath, api.SkipBacklogRequest{Topic: "nope"}), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, skipPath, api.SkipBacklogRequest{Topic: "a b"}), http.StatusBadRequest, "invalid-name")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, skipPath, `{"topics":[]}`), http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, skipPath, "text/plain", []byte("x"), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/nobody/skip-backlog", `{}`), http.StatusNotFound, "group-not-found")
}

// endpointsLookups is TestE2EEndpoints/Lookups.
func endpointsLookups(t *testing.T, e *e2eServer) {
	sentAt := time.Now()
	res := e.Send(t, "orders", api.SendMessage{Body: "findme", Keys: []string{"lookup-1", "lookup-2"}})
	found := e.ByKey(t, "orders", "lookup-2")
	require.Len(t, found, 1)
	require.Equal(t, res.MessageID, found[0].MessageID)
	require.Equal(t, "findme", found[0].Body)
	require.Equal(t, []string{"lookup-1", "lookup-2"}, found[0].Keys)
	require.Empty(t, e.ByKey(t, "orders", "unknown-key"))
	// Newest first, at most max.
	second := e.Send(t, "orders", api.SendMessage{Body: "findme too", Keys: []string{"lookup-2"}})
	require.Len(t, e.ByKey(t, "orders", "lookup-2"), 2)
	var limited api.MessageList
	servertest.Decode(t, e.Get(t, "/v1/messages?topic=orders&key=lookup-2&max=1"), http.StatusOK, &limited)
	require.Len(t, limited.Messages, 1)
	require.Equal(t, second.MessageID, limited.Messages[0].MessageID)
	servertest.WantProblem(t, e.Get(t, "/v1/messages?topic=orders"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/messages?key=lookup-1"), http.StatusBadRequest, "invalid-name")
	servertest.WantProblem(t, e.Get(t, "/v1/messages?topic=orders&key=lookup-1&max=0"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/messages?topic=nope&key=lookup-1"), http.StatusNotFound, "topic-not-found")

	// By id: 200 above; an id with nothing stored at its offset is 404,
	// a malformed one 400.
	unknown := res.MessageID[:16] + "00000000FFFFFFFF"
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+unknown), http.StatusNotFound, "message-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+strings.Repeat("Z", 32)), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+res.MessageID[:31]), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+res.MessageID+"0"), http.StatusBadRequest, "invalid-argument")

	// Its trace (e2e_trace_test.go has the rest): 200, 404, 400.
	var tr api.MessageTrace
	servertest.Decode(t, e.Get(t, "/v1/messages/"+res.MessageID+"/trace"), http.StatusOK, &tr)
	require.Equal(t, "stored", tr.Events[0].Type)
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+unknown+"/trace"), http.StatusNotFound, "message-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/messages/"+res.MessageID[:31]+"/trace"), http.StatusBadRequest, "invalid-argument")

	// By store time: both sends of this test, one a page, in [from, to).
	from, to := sentAt.Add(-time.Millisecond).UTC().Format(time.RFC3339Nano), time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	window := "/v1/topics/orders/messages?" + url.Values{"from": {from}, "to": {to}}.Encode()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 20)
		var page api.MessageSearch
		servertest.Decode(t, e.Get(t, window+"&limit=1&cursor="+cursor), http.StatusOK, &page)
		require.LessOrEqual(t, len(page.Messages), 1)
		for _, m := range page.Messages {
			ids = append(ids, m.MessageID)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	require.Contains(t, ids, res.MessageID)
	require.Contains(t, ids, second.MessageID)
	var none api.MessageSearch
	servertest.Decode(t, e.Get(t, "/v1/topics/orders/messages?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z"), http.StatusOK, &none)
	require.Empty(t, none.Messages)
	require.NotNil(t, none.Messages)
	require.Empty(t, none.Next)
	servertest.WantProblem(t, e.Get(t, "/v1/topics/orders/messages?from="+from), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, window+"&limit=101"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, window+"&queueId=99"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, window+"&cursor=bm90LWEtY3Vyc29y"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/nope/messages?from=2000-01-01T00:00:00Z&to=2000-01-02T00:00:00Z"), http.StatusNotFound, "topic-not-found")
}

// endpointsDeadLetters is TestE2EEndpoints/DeadLetters.
func endpointsDeadLetters(t *testing.T, e *e2eServer) {
	var list api.DeadLetterList
	servertest.Decode(t, e.Get(t, "/v1/groups/worker/dlq"), http.StatusOK, &list)
	require.Empty(t, list.Items)
	require.NotNil(t, list.Items)
	require.Empty(t, list.Next)

	e.Send(t, "work", api.SendMessage{Body: "poison-1", Tag: "p"})
	e.Send(t, "work", api.SendMessage{Body: "poison-2", Tag: "p"})
	for _, m := range e.PullN(t, "worker", "work", 2, 30_000, 10*time.Second) {
		e.Nack(t, "worker", m.Receipt, -1, "cannot parse "+m.Body)
	}
	servertest.Decode(t, e.Get(t, "/v1/groups/worker/dlq"), http.StatusOK, &list)
	require.Len(t, list.Items, 2)
	ids := map[string]string{}
	for _, d := range list.Items {
		require.Equal(t, "work", d.OriginalTopic)
		require.Equal(t, "dead", d.Status)
		require.Empty(t, d.Body, "the list has no bodies")
		var one api.DeadLetter
		servertest.Decode(t, e.Get(t, "/v1/groups/worker/dlq/"+d.MessageID), http.StatusOK, &one)
		require.Equal(t, "p", one.Tag)
		ids[one.Body] = d.MessageID
	}
	require.Len(t, ids, 2)

	var resent api.ResendResponse
	servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/worker/dlq/resend", api.ResendRequest{MessageIDs: []string{ids["poison-1"]}}), http.StatusOK, &resent)
	require.Equal(t, []string{ids["poison-1"]}, resent.Resent)
	require.Empty(t, resent.Skipped)
	back := e.PullN(t, "worker", "work", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, "poison-1", back.Body)
	require.Equal(t, []string{"ok"}, e.Ack(t, "worker", back.Receipt))

	r := e.Do(t, http.MethodDelete, "/v1/groups/worker/dlq/"+ids["poison-2"], "", nil, nil)
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r)
	var one api.DeadLetter
	servertest.Decode(t, e.Get(t, "/v1/groups/worker/dlq/"+ids["poison-2"]), http.StatusOK, &one)
	require.Equal(t, "discarded", one.Status)
	require.NotEmpty(t, one.StatusAt)
	servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/groups/worker/dlq/resend", api.ResendRequest{MessageIDs: []string{ids["poison-1"], ids["poison-2"]}}), http.StatusOK, &resent)
	require.Empty(t, resent.Resent)
	require.NotNil(t, resent.Resent)
	require.ElementsMatch(t, []string{ids["poison-1"], ids["poison-2"]}, resent.Skipped)
	servertest.Decode(t, e.Get(t, "/v1/groups/worker/dlq?status=discarded"), http.StatusOK, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, ids["poison-2"], list.Items[0].MessageID)

	dlq := "/v1/groups/worker/dlq"
	servertest.WantProblem(t, e.Get(t, "/v1/groups/nobody/dlq"), http.StatusNotFound, "group-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/groups/%25DLQ%25worker/dlq"), http.StatusBadRequest, "invalid-name")
	servertest.WantProblem(t, e.Get(t, dlq+"?status=lost"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, dlq+"?from=yesterday"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, dlq+"?to=tomorrow"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, dlq+"?limit=0"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, dlq+"?limit=501"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, dlq+"?cursor=abc"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, dlq+"/"+strings.Repeat("Z", 32)), http.StatusBadRequest, "invalid-argument")
	notDead := e.Send(t, "work", api.SendMessage{Body: "alive"}).MessageID
	servertest.WantProblem(t, e.Get(t, dlq+"/"+notDead), http.StatusNotFound, "message-not-found")
	servertest.WantProblem(t, e.Get(t, dlq+"/"+notDead[:16]+"00000000FFFFFFFF"), http.StatusNotFound, "message-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/groups/nobody/dlq/"+ids["poison-1"]), http.StatusNotFound, "group-not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodDelete, dlq+"/"+notDead, "", nil, nil), http.StatusNotFound, "message-not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodDelete, dlq+"/xyz", "", nil, nil), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, dlq+"/resend", `{}`), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, dlq+"/resend", api.ResendRequest{MessageIDs: []string{ids["poison-1"]}, Filter: &api.DLQFilter{}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, dlq+"/resend", api.ResendRequest{Filter: &api.DLQFilter{From: "x"}}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, dlq+"/resend", api.ResendRequest{MessageIDs: []string{notDead}}), http.StatusNotFound, "message-not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, dlq+"/resend", "text/plain", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/nobody/dlq/resend", api.ResendRequest{MessageIDs: []string{ids["poison-1"]}}), http.StatusNotFound, "group-not-found")
}

// endpointsTimers is TestE2EEndpoints/Timers.
func endpointsTimers(t *testing.T, e *e2eServer) {
	res := e.Send(t, "orders", api.SendMessage{Body: "later", DelayMs: 3_600_000})
	require.Equal(t, int64(-1), res.QueueOffset, "a timer is in no queue until it fires")
	var list api.TimerList
	servertest.Decode(t, e.Get(t, "/v1/timers?topic=orders"), http.StatusOK, &list)
	require.Len(t, list.Items, 1)
	require.Equal(t, res.MessageID, list.Items[0].ID)
	var one api.Timer
	servertest.Decode(t, e.Get(t, "/v1/timers/"+res.MessageID), http.StatusOK, &one)
	require.Equal(t, "later", one.Body)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/timers/"+res.MessageID, api.RescheduleRequest{DelayMs: 7_200_000}), http.StatusOK, &one)
	r := e.Do(t, http.MethodDelete, "/v1/timers/"+res.MessageID, "", nil, nil)
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r)
	servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/timers/"+res.MessageID, "", nil, nil), http.StatusNotFound, "message-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/timers/"+res.MessageID), http.StatusNotFound, "message-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/timers?limit=501"), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/timers/"+res.MessageID, api.RescheduleRequest{}), http.StatusBadRequest, "invalid-argument")
	servertest.WantProblem(t, e.Get(t, "/v1/timers/not-an-id"), http.StatusBadRequest, "invalid-argument")
}
