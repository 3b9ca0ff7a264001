package server_test

// End-to-end tests of the HTTP API over real HTTP against the real broker:
// every endpoint's success and error paths, names, body limits,
// long polls and state across a restart. The retry, receipt and
// dead-letter semantics are in e2e_retry_test.go.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/servertest"
)

var messageIDPattern = regexp.MustCompile(`^[0-9A-F]{32}$`)

// TestE2EEndpoints walks every route of the API, its success and its error
// answers, against one real server. The last subtest checks from the
// server's own request metrics that every operation of docs/openapi.json
// was called and answered both 2xx and 4xx.
func TestE2EEndpoints(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	startedAt := time.Now().Add(-time.Second)

	t.Run("Topics", func(t *testing.T) {
		var created api.Topic
		r := e.JSON(t, http.MethodPut, "/v1/topics/orders", api.TopicRequest{Queues: 2})
		servertest.Decode(t, r, http.StatusCreated, &created)
		require.Equal(t, "/v1/topics/orders", r.Header.Get("Location"))
		require.Equal(t, "orders", created.Name)
		require.Equal(t, 2, created.Queues)
		require.Equal(t, "rw", created.Perm)
		require.NotEmpty(t, created.CreatedAt)

		var updated api.Topic
		r = e.JSON(t, http.MethodPut, "/v1/topics/orders", api.TopicRequest{Queues: 4})
		servertest.Decode(t, r, http.StatusOK, &updated)
		require.Empty(t, r.Header.Get("Location"))
		require.Equal(t, 4, updated.Queues)

		p := servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", api.TopicRequest{Queues: 2}), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "cannot shrink")

		var defaults api.Topic
		servertest.Decode(t, e.Do(t, http.MethodPut, "/v1/topics/scratch", "", nil, nil), http.StatusCreated, &defaults)
		require.Equal(t, 4, defaults.Queues, "an empty body takes the defaults")

		servertest.WantProblem(t, e.Do(t, http.MethodPut, "/v1/topics/orders", "text/plain", []byte(`{"queues":4}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", `{"queues":`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", `{"queues":4,"color":"red"}`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", api.TopicRequest{Queues: -1}), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", api.TopicRequest{Queues: 2000}), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/orders", api.TopicRequest{Perm: "x"}), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/%25DLQ%25orders", api.TopicRequest{}), http.StatusBadRequest, "invalid-name")
		// PATCH (e2e_patch_test.go has the rest): a no-op patch, an unknown field.
		require.Equal(t, http.StatusOK, e.Do(t, http.MethodPatch, "/v1/topics/orders", "application/merge-patch+json", []byte(`{}`), nil).Status)
		servertest.WantProblem(t, e.Do(t, http.MethodPatch, "/v1/topics/orders", "application/merge-patch+json", []byte(`{"color":"red"}`), nil), http.StatusBadRequest, "malformed-request")

		var got api.Topic
		servertest.Decode(t, e.Get(t, "/v1/topics/orders"), http.StatusOK, &got)
		require.Equal(t, updated, got)
		var list api.TopicList
		servertest.Decode(t, e.Get(t, "/v1/topics"), http.StatusOK, &list)
		names := make([]string, 0, len(list.Topics))
		for _, tp := range list.Topics {
			names = append(names, tp.Name)
		}
		require.Subset(t, names, []string{"orders", "scratch"})
		for _, n := range names {
			require.NotContains(t, n, "%", "system topics are not listed")
			require.False(t, strings.HasPrefix(n, "rmq_sys_"), "system topics are not listed: %s", n)
		}
		servertest.WantProblem(t, e.Get(t, "/v1/topics/nope"), http.StatusNotFound, "topic-not-found")
		servertest.WantProblem(t, e.Get(t, "/v1/topics/a.b"), http.StatusBadRequest, "invalid-name")

		r = e.Do(t, http.MethodDelete, "/v1/topics/scratch", "", nil, nil)
		require.Equal(t, http.StatusNoContent, r.Status)
		require.Empty(t, r.Body)
		servertest.WantProblem(t, e.Get(t, "/v1/topics/scratch"), http.StatusNotFound, "topic-not-found")
		servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/topics/scratch", "", nil, nil), http.StatusNotFound, "topic-not-found")
		servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/topics/rmq_sys_OFFSET", "", nil, nil), http.StatusBadRequest, "invalid-name")
	})

	t.Run("Groups", func(t *testing.T) {
		req := api.GroupRequest{
			ConsumeMode:   "clustering",
			RetryMaxTimes: 5,
			InvisibleMs:   10_000,
			Subscriptions: []api.Subscription{{Topic: "orders", TagExpression: "created || paid"}},
		}
		var created api.Group
		r := e.JSON(t, http.MethodPut, "/v1/groups/billing", req)
		servertest.Decode(t, r, http.StatusCreated, &created)
		require.Equal(t, "/v1/groups/billing", r.Header.Get("Location"))
		require.Equal(t, http.StatusOK, e.Do(t, http.MethodPatch, "/v1/groups/billing", "application/merge-patch+json", []byte(`{}`), nil).Status)
		servertest.WantProblem(t, e.Do(t, http.MethodPatch, "/v1/groups/billing", "application/merge-patch+json", []byte(`{"color":"red"}`), nil), http.StatusBadRequest, "malformed-request")
		require.Equal(t, "billing", created.Name)
		require.Equal(t, "clustering", created.ConsumeMode)
		require.Equal(t, 5, created.RetryMaxTimes)
		require.EqualValues(t, 10_000, created.InvisibleMs)
		require.Equal(t, req.Subscriptions, created.Subscriptions)
		require.NotEmpty(t, created.CreatedAt)

		req.RetryMaxTimes = 6
		var updated api.Group
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", req), http.StatusOK, &updated)
		require.Equal(t, 6, updated.RetryMaxTimes)
		var got api.Group
		servertest.Decode(t, e.Get(t, "/v1/groups/billing"), http.StatusOK, &got)
		require.Equal(t, updated, got)

		servertest.Decode(t, e.Do(t, http.MethodPut, "/v1/groups/scratch", "", nil, nil), http.StatusCreated, &got)
		require.Equal(t, 16, got.RetryMaxTimes, "default retryMaxTimes")
		require.Equal(t, "clustering", got.ConsumeMode)
		var list api.GroupList
		servertest.Decode(t, e.Get(t, "/v1/groups"), http.StatusOK, &list)
		var names []string
		for _, g := range list.Groups {
			names = append(names, g.Name)
		}
		require.Subset(t, names, []string{"billing", "scratch"})

		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", `{"push":{"url":"ftp://example.invalid/hook"}}`), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "orders", SQL: "a > 1"}}}), http.StatusNotImplemented, "not-implemented")
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/ordered", api.GroupRequest{Orderly: true}), http.StatusCreated, nil)
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{RetryMaxTimes: 1001}), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{RetryMaxTimes: 65}), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{InvisibleMs: -1}), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{ConsumeMode: "fanout"}), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "a b"}}}), http.StatusBadRequest, "invalid-name")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "orders", TagExpression: "a b"}}}), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.Do(t, http.MethodPut, "/v1/groups/billing", "text/plain", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", `[`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/%25RETRY%25billing", api.GroupRequest{}), http.StatusBadRequest, "invalid-name")
		servertest.WantProblem(t, e.Get(t, "/v1/groups/nobody"), http.StatusNotFound, "group-not-found")
		servertest.WantProblem(t, e.Get(t, "/v1/groups/"+strings.Repeat("g", 121)), http.StatusBadRequest, "invalid-name")

		r = e.Do(t, http.MethodDelete, "/v1/groups/scratch", "", nil, nil)
		require.Equal(t, http.StatusNoContent, r.Status)
		servertest.WantProblem(t, e.Get(t, "/v1/groups/scratch"), http.StatusNotFound, "group-not-found")
		servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/groups/scratch", "", nil, nil), http.StatusNotFound, "group-not-found")
		servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/groups/%25DLQ%25x", "", nil, nil), http.StatusBadRequest, "invalid-name")
	})

	t.Run("Send", func(t *testing.T) {
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
		require.Empty(t, m.Receipt, "a lookup leases nothing")
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
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
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
	})

	t.Run("PullAckNackLeases", func(t *testing.T) {
		for i := 1; i <= 3; i++ {
			e.Send(t, "work", api.SendMessage{Body: fmt.Sprintf("w%d", i)})
		}
		got := e.PullN(t, "worker", "work", 3, 30_000, 10*time.Second)
		byBody := map[string]api.Message{}
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
	})

	t.Run("QueueReadOffsetsProgressReset", func(t *testing.T) {
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
			require.Empty(t, m.Receipt)
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
	})

	t.Run("Lookups", func(t *testing.T) {
		res := e.Send(t, "orders", api.SendMessage{Body: "findme", Keys: []string{"lookup-1", "lookup-2"}})
		found := e.ByKey(t, "orders", "lookup-2")
		require.Len(t, found, 1)
		require.Equal(t, res.MessageID, found[0].MessageID)
		require.Equal(t, "findme", found[0].Body)
		require.Equal(t, []string{"lookup-1", "lookup-2"}, found[0].Keys)
		require.Empty(t, found[0].Receipt)
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
	})

	t.Run("BrokerStatus", func(t *testing.T) {
		var st api.BrokerStatus
		servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &st)
		require.Equal(t, "sync", st.FlushMode)
		require.Len(t, st.Levels, 18)
		for i, l := range st.Levels {
			require.Equal(t, i+1, l.Level)
			require.Equal(t, e.Cfg.DelayLevels[i].Milliseconds(), l.DelayMs)
			require.GreaterOrEqual(t, l.Backlog, int64(0))
		}
		require.Positive(t, st.CommitLogMaxOffset)
		require.Positive(t, st.StoreBytes)
		require.GreaterOrEqual(t, st.UptimeMs, int64(0))
		require.Positive(t, st.ScheduledTotal, "the nack at level 1 went through the scheduler")
	})

	t.Run("DeadLetters", func(t *testing.T) {
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
	})

	t.Run("Timers", func(t *testing.T) {
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
	})

	t.Run("Operations", func(t *testing.T) {
		for _, path := range []string{"/livez", "/healthz", "/readyz"} {
			r := e.Get(t, path)
			require.Equal(t, http.StatusOK, r.Status, path)
			require.Equal(t, "ok\n", string(r.Body), path)
		}
		r := e.Get(t, "/metrics")
		require.Equal(t, http.StatusOK, r.Status)
		require.Contains(t, string(r.Body), `mqgate_messages_sent_total{topic="orders"}`)
		require.Contains(t, string(r.Body), `mqgate_messages_acked_total{group="worker"}`)
		require.Contains(t, string(r.Body), `mqgate_messages_dlq_total{group="worker"} 2`)

		r = e.Get(t, "/openapi.json")
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var spec struct {
			OpenAPI string `json:"openapi"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &spec))
		require.Equal(t, "3.0.3", spec.OpenAPI)
		r = e.Get(t, "/swagger/index.html")
		require.Equal(t, http.StatusOK, r.Status)
		require.Contains(t, string(r.Body), "swagger-ui")
		r = e.Get(t, "/ui/")
		require.Equal(t, http.StatusOK, r.Status)
		require.Contains(t, r.Header.Get("Content-Type"), "text/html")
		require.Contains(t, string(r.Body), "mqgate console")

		servertest.WantProblem(t, e.Get(t, "/v1/nothing-here"), http.StatusNotFound, "not-found")
		servertest.WantProblem(t, e.Get(t, "/nothing-here"), http.StatusNotFound, "not-found")
		r = e.Do(t, http.MethodPost, "/v1/topics/orders", "application/json", []byte(`{}`), nil)
		servertest.WantProblem(t, r, http.StatusMethodNotAllowed, "method-not-allowed")
		require.Equal(t, "GET, PUT, DELETE, PATCH", r.Header.Get("Allow"))
		servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/topics/orders/messages", "", nil, nil), http.StatusMethodNotAllowed, "method-not-allowed")
	})

	t.Run("EveryOperationCalledWithSuccessAndError", func(t *testing.T) {
		var spec struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		require.NoError(t, json.Unmarshal(e.Get(t, "/openapi.json").Body, &spec))
		metrics := string(e.Get(t, "/metrics").Body)
		// Operations that cannot fail on a healthy server but with 5xx.
		noClientError := map[string]bool{"GET /v1/topics": true, "GET /v1/groups": true, "GET /v1/broker/status": true}
		ops := 0
		for path, methods := range spec.Paths {
			for method := range methods {
				ops++
				route := "/v1" + path
				op := strings.ToUpper(method) + " " + route
				series := regexp.MustCompile(`mqgate_http_requests_total\{code="(\d+)",method="` + strings.ToUpper(method) + `",route="` + regexp.QuoteMeta(route) + `"\} (\d+)`)
				var success, clientError bool
				for _, m := range series.FindAllStringSubmatch(metrics, -1) {
					success = success || m[1][0] == '2'
					clientError = clientError || m[1][0] == '4'
				}
				require.True(t, success, "%s was never answered 2xx", op)
				require.True(t, clientError || noClientError[op], "%s was never answered 4xx", op)
			}
		}
		require.Equal(t, 31, ops, "operations in docs/openapi.json: a new one needs its calls above")
	})
}

// TestE2ETopicPermissions: perm "r" refuses sends; perm "w" is documented
// as "no consumption" (api.TopicRequest) and must refuse pulls and reads.
func TestE2ETopicPermissions(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/readonly", api.TopicRequest{Perm: "r"}), http.StatusCreated, nil)
	p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/readonly/messages", api.SendMessage{Body: "x"}), http.StatusBadRequest, "invalid-argument")
	require.Contains(t, p.Detail, "read-only")
	var tp api.Topic
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/readonly", api.TopicRequest{Perm: "rw"}), http.StatusOK, &tp)
	require.Equal(t, "rw", tp.Perm)
	e.Send(t, "readonly", api.SendMessage{Body: "x"})

	t.Run("WriteOnlyRefusesConsumption", func(t *testing.T) {
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/writeonly", api.TopicRequest{Perm: "w"}), http.StatusCreated, nil)
		e.Send(t, "writeonly", api.SendMessage{Body: "x", ShardingKey: "k"})
		r := e.JSON(t, http.MethodPost, "/v1/groups/g/topics/writeonly/pull", api.PullRequest{WaitMs: 200})
		require.GreaterOrEqual(t, r.Status, 400, "pull of a write-only topic: %s", r)
		require.Less(t, r.Status, 500, "%s", r)
		for q := 0; q < 4; q++ {
			r = e.Get(t, fmt.Sprintf("/v1/topics/writeonly/queues/%d/messages", q))
			require.GreaterOrEqual(t, r.Status, 400, "offset read of a write-only topic: %s", r)
		}
	})
}

// TestE2EKeyLookupReadYourWrites: a message whose send answered 200 is
// found by its key at once, as it is by id, by a queue read and by a pull.
func TestE2EKeyLookupReadYourWrites(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	for i := 0; i < 100; i++ {
		key := fmt.Sprintf("key-%d", i)
		sent := e.Send(t, "keys", api.SendMessage{Body: "x", Keys: []string{key}})
		var found api.MessageList
		servertest.Decode(t, e.Get(t, "/v1/messages?topic=keys&key="+key), http.StatusOK, &found)
		require.Len(t, found.Messages, 1, "lookup %d right after its send", i)
		require.Equal(t, sent.MessageID, found.Messages[0].MessageID)
	}
}

// TestE2ENameValidation over HTTP: topic names (in a send) and
// group names (in a pull) that break RocketMQ's rules or use reserved
// names are refused with 400 invalid-name and the rule in the detail; the
// longest valid names are accepted.
func TestE2ENameValidation(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	e.Send(t, "existing", api.SendMessage{Body: "x"})

	const (
		ruleChars    = "A-Z a-z 0-9 _ -"
		ruleReserved = "reserved"
	)
	cases := []struct {
		name string
		// segment is the name as it goes into the URL path.
		segment string
		// topicRule and groupRule are the expected detail fragments for a
		// topic and a group name; "" means the name is valid.
		topicRule, groupRule string
	}{
		{"Empty", "", ruleChars, ruleChars},
		{"Space", "%20", ruleChars, ruleChars},
		{"InnerSpace", "a%20b", ruleChars, ruleChars},
		{"Tab", "a%09b", ruleChars, ruleChars},
		{"Topic127Group127", strings.Repeat("t", 127), "", "the limit is 120"},
		{"Topic128", strings.Repeat("t", 128), "the limit is 127", "the limit is 120"},
		{"Group120", strings.Repeat("g", 120), "", ""},
		{"Group121", strings.Repeat("g", 121), "", "the limit is 120"},
		{"Over255", strings.Repeat("x", 256), ruleChars, ruleChars},
		{"RetryPrefix", "%25RETRY%25x", ruleReserved, ruleReserved},
		{"DLQPrefix", "%25DLQ%25x", ruleReserved, ruleReserved},
		{"PercentAlone", "%25", ruleReserved, ruleReserved},
		{"SystemPrefix", "rmq_sys_x", ruleReserved, ruleReserved},
		{"ScheduleTopic", "SCHEDULE_TOPIC_XXXX", ruleReserved, ruleReserved},
		{"Pipe", "a%7Cb", ruleChars, ruleChars},
		{"PipeUnescaped", "a|b", ruleChars, ruleChars},
		{"Dot", "a.b", ruleChars, ruleChars},
		{"DotDot", "..", ruleChars, ruleChars},
		{"Unicode", "%C3%BCber", ruleChars, ruleChars},
		{"Emoji", "%F0%9F%93%A6", ruleChars, ruleChars},
		{"ParentEncoded", "..%2Fx", ruleChars, ruleChars},
		{"EncodedSlash", "a%2Fb", ruleChars, ruleChars},
		{"EncodedBackslash", "a%5Cb", ruleChars, ruleChars},
		{"NUL", "a%00b", ruleChars, ruleChars},
		{"ValidCharset", "Az09_-", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("Topic", func(t *testing.T) {
				r := e.Do(t, http.MethodPost, "/v1/topics/"+tc.segment+"/messages", "text/plain", []byte("body"), nil)
				if tc.topicRule == "" {
					require.Equal(t, http.StatusOK, r.Status, "%s", r)
					return
				}
				p := servertest.WantProblem(t, r, http.StatusBadRequest, "invalid-name")
				require.Contains(t, p.Detail, tc.topicRule)
			})
			t.Run("Group", func(t *testing.T) {
				r := e.JSON(t, http.MethodPost, "/v1/groups/"+tc.segment+"/topics/existing/pull", api.PullRequest{})
				if tc.groupRule == "" {
					require.Equal(t, http.StatusOK, r.Status, "%s", r)
					return
				}
				p := servertest.WantProblem(t, r, http.StatusBadRequest, "invalid-name")
				require.Contains(t, p.Detail, tc.groupRule)
			})
		})
	}

	// A literal "../x" is two path segments, not a name: no route.
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/../x/messages", "text/plain", []byte("body"), nil), http.StatusNotFound, "not-found")
	// Nothing was created under an invalid name.
	var list api.TopicList
	servertest.Decode(t, e.Get(t, "/v1/topics"), http.StatusOK, &list)
	var names []string
	for _, tp := range list.Topics {
		names = append(names, tp.Name)
	}
	require.ElementsMatch(t, []string{"existing", strings.Repeat("t", 127), strings.Repeat("g", 120), strings.Repeat("g", 121), "Az09_-"}, names)
	var groups api.GroupList
	servertest.Decode(t, e.Get(t, "/v1/groups"), http.StatusOK, &groups)
	names = names[:0]
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	require.ElementsMatch(t, []string{strings.Repeat("g", 120), "Az09_-"}, names)
}

// TestE2EBodyLimits: a body of exactly --max-message-size is
// stored, one byte more is 413 (raw, chunked, JSON, base64, in a batch);
// empty bodies, wrong media types and invalid JSON are 400/415.
func TestE2EBodyLimits(t *testing.T) {
	t.Parallel()
	const max = 64 << 10
	e := startE2E(t, func(c *server.Config) {
		c.MaxMessageSize = max
		c.MaxRequestSize = 160 << 10
	})
	send := "/v1/topics/limits/messages"
	stored := func(t *testing.T, r servertest.Resp, size int) {
		t.Helper()
		var out api.SendResponse
		servertest.Decode(t, r, http.StatusOK, &out)
		m := e.Message(t, out.Results[0].MessageID)
		body := []byte(m.Body)
		if m.BodyEncoding == "base64" {
			var err error
			body, err = base64.StdEncoding.DecodeString(m.Body)
			require.NoError(t, err)
		}
		require.Len(t, body, size)
	}
	tooLarge := func(t *testing.T, r servertest.Resp) {
		t.Helper()
		servertest.WantProblem(t, r, http.StatusRequestEntityTooLarge, "body-too-large")
	}
	binary := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 7)
		}
		return b
	}

	t.Run("Raw", func(t *testing.T) {
		stored(t, e.Do(t, http.MethodPost, send, "application/octet-stream", binary(max), nil), max)
		tooLarge(t, e.Do(t, http.MethodPost, send, "application/octet-stream", binary(max+1), nil))
		tooLarge(t, e.Do(t, http.MethodPost, send, "text/plain", bytes.Repeat([]byte("x"), 4*max), nil))
	})
	t.Run("RawChunked", func(t *testing.T) {
		// io.MultiReader hides the length: the client sends it chunked.
		stored(t, e.DoReader(t, context.Background(), http.MethodPost, send, "application/octet-stream", io.MultiReader(bytes.NewReader(binary(max))), nil), max)
		tooLarge(t, e.DoReader(t, context.Background(), http.MethodPost, send, "application/octet-stream", io.MultiReader(bytes.NewReader(binary(max+1))), nil))
	})
	t.Run("JSON", func(t *testing.T) {
		stored(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: strings.Repeat("j", max)}), max)
		tooLarge(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: strings.Repeat("j", max+1)}))
		stored(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: base64.StdEncoding.EncodeToString(binary(max)), BodyEncoding: "base64"}), max)
		tooLarge(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: base64.StdEncoding.EncodeToString(binary(max + 1)), BodyEncoding: "base64"}))
	})
	t.Run("Batch", func(t *testing.T) {
		ok := []api.SendMessage{{Body: strings.Repeat("a", max)}, {Body: "small"}}
		var out api.SendResponse
		servertest.Decode(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &ok}), http.StatusOK, &out)
		require.Len(t, out.Results, 2)
		over := []api.SendMessage{{Body: "small"}, {Body: strings.Repeat("a", max+1)}}
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &over}), http.StatusRequestEntityTooLarge, "body-too-large")
		require.Contains(t, p.Detail, "messages[1]")
		// Over the request size (160 KiB) in total, each message within max.
		big := []api.SendMessage{{Body: strings.Repeat("a", max)}, {Body: strings.Repeat("b", max)}, {Body: strings.Repeat("c", max)}}
		tooLarge(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &big}))
		// Over the entry count.
		many := make([]api.SendMessage, api.MaxBatchMessages+1)
		for i := range many {
			many[i].Body = "m"
		}
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &many}), http.StatusBadRequest, "invalid-argument")
		many = many[:api.MaxBatchMessages]
		servertest.Decode(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &many}), http.StatusOK, &out)
		require.Len(t, out.Results, api.MaxBatchMessages)
	})
	t.Run("EmptyBody", func(t *testing.T) {
		servertest.WantProblem(t, e.Do(t, http.MethodPost, send, "application/octet-stream", []byte{}, nil), http.StatusBadRequest, "empty-body")
		servertest.WantProblem(t, e.Do(t, http.MethodPost, send, "text/plain", nil, nil), http.StatusBadRequest, "empty-body")
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: ""}), http.StatusBadRequest, "empty-body")
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, `{"messages":[{"body":"a"},{"body":""}]}`), http.StatusBadRequest, "empty-body")
		servertest.WantProblem(t, e.Do(t, http.MethodPost, send, "application/json", []byte{}, nil), http.StatusBadRequest, "malformed-request")
	})
	t.Run("WrongContentType", func(t *testing.T) {
		for _, path := range []string{"/v1/groups/g/topics/limits/pull", "/v1/groups/g/ack", "/v1/groups/g/nack", "/v1/groups/g/leases",
			"/v1/groups/g/dlq/resend", "/v1/groups/g/reset-offset"} {
			servertest.WantProblem(t, e.Do(t, http.MethodPost, path, "text/plain", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
			servertest.WantProblem(t, e.Do(t, http.MethodPost, path, "", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
			servertest.WantProblem(t, e.Do(t, http.MethodPost, path, "application/json; charset", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
		}
		for _, path := range []string{"/v1/topics/limits", "/v1/groups/g", "/v1/groups/g/offsets"} {
			servertest.WantProblem(t, e.Do(t, http.MethodPut, path, "application/x-www-form-urlencoded", []byte(`queues=4`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
		}
		// application/*+json counts as JSON on JSON-only routes.
		r := e.Do(t, http.MethodPost, "/v1/groups/g/topics/limits/pull", "application/vnd.mqgate+json", []byte(`{}`), nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
	})
	t.Run("InvalidJSON", func(t *testing.T) {
		for _, body := range []string{`{"body":`, `{"body":"a"} trailing`, `{"body":"a","bogus":1}`, `["body"]`, `{"body":1}`, `nul`} {
			p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, body), http.StatusBadRequest, "malformed-request")
			require.NotEmpty(t, p.Detail)
		}
		for _, path := range []string{"/v1/groups/g/topics/limits/pull", "/v1/groups/g/ack"} {
			servertest.WantProblem(t, e.JSON(t, http.MethodPost, path, `{`), http.StatusBadRequest, "malformed-request")
		}
	})
}

// TestE2ELongPoll: waitMs bounds, an answer at once for
// waitMs 0, and a message sent to an idle topic waking a waiting poll
// (wake latency over 50 trials, logged).
func TestE2ELongPoll(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/idle", api.TopicRequest{Queues: 4}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/wake", api.TopicRequest{Queues: 4}), http.StatusCreated, nil)

	t.Run("WaitMsBounds", func(t *testing.T) {
		start := time.Now()
		require.Empty(t, e.Pull(t, "g", "idle", api.PullRequest{WaitMs: 0}))
		require.Less(t, time.Since(start), time.Second, "waitMs 0 answers at once")
		start = time.Now()
		require.Empty(t, e.Pull(t, "g", "idle", api.PullRequest{WaitMs: 300}))
		require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "an empty long poll waits waitMs")
		// The longest wait is accepted (a message is ready, so it answers at once).
		e.Send(t, "idle", api.SendMessage{Body: "ready"})
		got := e.Pull(t, "g", "idle", api.PullRequest{WaitMs: api.MaxWaitMs, MaxMessages: 1})
		require.Len(t, got, 1)
		require.Equal(t, []string{"ok"}, e.Ack(t, "g", got[0].Receipt))
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/g/topics/idle/pull", api.PullRequest{WaitMs: api.MaxWaitMs + 1}), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "waitMs")
	})

	t.Run("SendWakesPoll", func(t *testing.T) {
		const trials = 50
		latencies := make([]time.Duration, 0, trials)
		for i := 0; i < trials; i++ {
			type result struct {
				msgs []api.Message
				at   time.Time
				err  error
			}
			done := make(chan result, 1)
			go func() {
				var out api.PullResponse
				body, _ := json.Marshal(api.PullRequest{WaitMs: 10_000, MaxMessages: 1})
				resp, err := e.Client.Post(e.Base+"/v1/groups/waker/topics/wake/pull", "application/json", bytes.NewReader(body))
				if err == nil {
					err = json.NewDecoder(resp.Body).Decode(&out)
					resp.Body.Close()
				}
				done <- result{out.Messages, time.Now(), err}
			}()
			e.WaitInFlight(t, 1, 5*time.Second)
			sent := time.Now()
			want := fmt.Sprintf("wake-%d", i)
			e.Send(t, "wake", api.SendMessage{Body: want})
			var res result
			select {
			case res = <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("trial %d: the poll did not return", i)
			}
			require.NoError(t, res.err)
			require.Len(t, res.msgs, 1, "trial %d", i)
			require.Equal(t, want, res.msgs[0].Body)
			latency := res.at.Sub(sent)
			require.Less(t, latency, time.Second, "trial %d: wake latency", i)
			latencies = append(latencies, latency)
		}
		t.Logf("long-poll wake latency over %d trials (send start -> poll return, loopback, sync flush): p50 %v, p99 %v, max %v",
			trials, percentile(latencies, 0.50), percentile(latencies, 0.99), percentile(latencies, 1))
	})
}

// TestE2ELongPollClientDisconnect: clients that go away
// while their polls wait end those polls; no goroutine is left behind.
// Not parallel: it counts the process's goroutines.
func TestE2ELongPollClientDisconnect(t *testing.T) {
	e := startE2E(t)
	e.Send(t, "quiet", api.SendMessage{Body: "warm-up"})
	require.Len(t, e.Pull(t, "g", "quiet", api.PullRequest{MaxMessages: 1}), 1)
	polls := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	baseline := servertest.SettledGoroutines(t, e.Client, polls)

	const n = 20
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Base+"/v1/groups/g/topics/quiet/pull",
				strings.NewReader(`{"waitMs":30000}`))
			if err != nil {
				errs <- err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := polls.Do(req)
			if err == nil {
				resp.Body.Close()
				err = fmt.Errorf("the poll answered %d before the client went away", resp.StatusCode)
			}
			errs <- err
		}()
	}
	e.WaitInFlight(t, n, 10*time.Second)
	start := time.Now()
	cancel()
	for i := 0; i < n; i++ {
		require.ErrorIs(t, <-errs, context.Canceled)
	}
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		v, _ := e.MetricValue(t, "mqgate_http_requests_in_flight")
		return v == 1, fmt.Sprintf("%v requests in flight", v)
	})
	e.Client.CloseIdleConnections()
	servertest.WaitGoroutines(t, baseline, 5*time.Second)
	t.Logf("long-poll disconnect: %d abandoned polls ended and goroutines back to baseline %d within %v", n, baseline, time.Since(start))
	// The server still serves polls afterwards.
	e.Send(t, "quiet", api.SendMessage{Body: "after"})
	require.Len(t, e.Pull(t, "g", "quiet", api.PullRequest{WaitMs: 2000}), 1)
}

// TestE2ELongPollThousandIdle: 1 000 concurrent idle polls
// all answer 200 with an empty list after their wait, and the goroutines
// return to the baseline. Not parallel: it counts the process's goroutines.
func TestE2ELongPollThousandIdle(t *testing.T) {
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/sleepy", api.TopicRequest{Queues: 4}), http.StatusCreated, nil)
	polls := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, MaxConnsPerHost: 0}}
	baseline := servertest.SettledGoroutines(t, e.Client, polls)

	const n, waitMs = 1000, 2000
	type result struct {
		status int
		body   string
		took   time.Duration
		err    error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			resp, err := polls.Post(e.Base+"/v1/groups/idlers/topics/sleepy/pull", "application/json",
				strings.NewReader(fmt.Sprintf(`{"waitMs":%d}`, waitMs)))
			if err != nil {
				results[i].err = err
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results[i] = result{status: resp.StatusCode, body: strings.TrimSpace(string(b)), took: time.Since(began), err: err}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	var tooks []time.Duration
	for i, r := range results {
		require.NoError(t, r.err, "poll %d", i)
		require.Equal(t, http.StatusOK, r.status, "poll %d: %s", i, r.body)
		require.Equal(t, `{"messages":[]}`, r.body, "poll %d", i)
		require.GreaterOrEqual(t, r.took, time.Duration(waitMs)*time.Millisecond, "poll %d returned before its wait", i)
		tooks = append(tooks, r.took)
	}
	took := servertest.WaitGoroutines(t, baseline, 10*time.Second)
	t.Logf("%d idle polls (waitMs %d): all empty 200 in %v (per poll p50 %v, max %v); goroutines back to baseline %d %v after the last answer",
		n, waitMs, elapsed, percentile(tooks, 0.5), percentile(tooks, 1), baseline, took)
}

// TestE2ERestartKeepsState: after a graceful restart on the same data dir
// acknowledged messages are never delivered again, unacknowledged ones
// are; topics, groups, committed offsets, dead letters, a retry waiting in
// the scheduler and idempotency keys survive.
func TestE2ERestartKeepsState(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	cfg := e.Cfg

	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/durable", api.TopicRequest{Queues: 3, RetentionHours: 24}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/keeper", api.GroupRequest{RetryMaxTimes: 7, InvisibleMs: 60_000,
		Subscriptions: []api.Subscription{{Topic: "durable"}}}), http.StatusCreated, nil)
	const n = 12
	for i := 0; i < n; i++ {
		e.Send(t, "durable", api.SendMessage{Body: fmt.Sprintf("d%02d", i)})
	}
	idem := e.Do(t, http.MethodPost, "/v1/topics/durable/messages", "application/json", []byte(`{"body":"once"}`), http.Header{"Idempotency-Key": {"restart-key"}})
	var idemFirst api.SendResponse
	servertest.Decode(t, idem, http.StatusOK, &idemFirst)

	got := e.PullN(t, "keeper", "durable", n+1, 60_000, 10*time.Second)
	sort.Slice(got, func(i, j int) bool { return got[i].Body < got[j].Body })
	acked := map[string]bool{}
	var receipts []string
	for i, m := range got {
		if i%2 == 0 {
			acked[m.Body] = true
			receipts = append(receipts, m.Receipt)
		}
	}
	for _, st := range e.Ack(t, "keeper", receipts...) {
		require.Equal(t, "ok", st)
	}
	// One dead letter and an offset-mode reader's commit.
	e.Send(t, "other", api.SendMessage{Body: "dead"})
	dead := e.PullN(t, "keeper", "other", 1, 60_000, 10*time.Second)[0]
	e.Nack(t, "keeper", dead.Receipt, -1, "restart test")
	r := e.JSON(t, http.MethodPut, "/v1/groups/reader/offsets", api.Offsets{Offsets: []api.QueueOffset{{Topic: "durable", QueueID: 1, Offset: 2}}})
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r)

	// A retry waiting in the scheduler at the top level (360 ms).
	e.Send(t, "delayed", api.SendMessage{Body: "mid-delay"})
	pending := e.PullN(t, "keeper", "delayed", 1, 60_000, 10*time.Second)[0]
	nackAt := time.Now()
	e.Nack(t, "keeper", pending.Receipt, 18, "retry across the restart")
	var topicBefore api.Topic
	servertest.Decode(t, e.Get(t, "/v1/topics/durable"), http.StatusOK, &topicBefore)
	var groupBefore api.Group
	servertest.Decode(t, e.Get(t, "/v1/groups/keeper"), http.StatusOK, &groupBefore)
	var keeperBefore, readerBefore api.Offsets
	servertest.Decode(t, e.Get(t, "/v1/groups/keeper/offsets"), http.StatusOK, &keeperBefore)
	servertest.Decode(t, e.Get(t, "/v1/groups/reader/offsets"), http.StatusOK, &readerBefore)
	var dlqBefore api.DeadLetterList
	servertest.Decode(t, e.Get(t, "/v1/groups/keeper/dlq"), http.StatusOK, &dlqBefore)
	require.Len(t, dlqBefore.Items, 1)

	e.Close(t)
	e = openE2E(t, cfg)

	var topicAfter api.Topic
	servertest.Decode(t, e.Get(t, "/v1/topics/durable"), http.StatusOK, &topicAfter)
	require.Equal(t, topicBefore, topicAfter)
	var groupAfter api.Group
	servertest.Decode(t, e.Get(t, "/v1/groups/keeper"), http.StatusOK, &groupAfter)
	require.Equal(t, groupBefore, groupAfter)
	var keeperAfter, readerAfter api.Offsets
	servertest.Decode(t, e.Get(t, "/v1/groups/keeper/offsets"), http.StatusOK, &keeperAfter)
	servertest.Decode(t, e.Get(t, "/v1/groups/reader/offsets"), http.StatusOK, &readerAfter)
	require.Equal(t, offsetsOnly(keeperBefore), offsetsOnly(keeperAfter))
	require.Equal(t, offsetsOnly(readerBefore), offsetsOnly(readerAfter))
	require.Contains(t, offsetsOnly(readerAfter), api.QueueOffset{Topic: "durable", QueueID: 1, Offset: 2})
	var dlqAfter api.DeadLetterList
	servertest.Decode(t, e.Get(t, "/v1/groups/keeper/dlq"), http.StatusOK, &dlqAfter)
	require.Equal(t, dlqBefore, dlqAfter)

	// Exactly the unacknowledged messages come back, each once.
	again := e.PullN(t, "keeper", "durable", n+1-len(acked), 60_000, 10*time.Second)
	for _, m := range again {
		require.False(t, acked[m.Body], "%s was acknowledged before the restart and delivered again", m.Body)
		require.Zero(t, m.ReconsumeTimes, "a restart is not a failed attempt")
	}
	require.Empty(t, e.Pull(t, "keeper", "durable", api.PullRequest{WaitMs: 300}), "nothing else is delivered")
	require.Empty(t, e.Pull(t, "keeper", "other", api.PullRequest{WaitMs: 100}), "the dead letter is not delivered")

	// The retry that was waiting in the scheduler is neither lost nor early.
	retry := e.PullN(t, "keeper", "delayed", 1, 60_000, 10*time.Second)[0]
	require.GreaterOrEqual(t, time.Since(nackAt), servertest.LevelDelay(t, cfg, 18))
	require.Equal(t, "mid-delay", retry.Body)
	require.EqualValues(t, 1, retry.ReconsumeTimes)
	require.Equal(t, pending.MessageID, retry.OriginMessageID)
	require.Equal(t, []string{"ok"}, e.Ack(t, "keeper", retry.Receipt))
	t.Logf("restart: the level-18 (%v) retry pending across close+open came %v after its nack", servertest.LevelDelay(t, cfg, 18), time.Since(nackAt))

	// The idempotency key outlives the restart.
	var idemAgain api.SendResponse
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/topics/durable/messages", "application/json", []byte(`{"body":"once"}`), http.Header{"Idempotency-Key": {"restart-key"}}), http.StatusOK, &idemAgain)
	require.True(t, idemAgain.Results[0].Duplicate)
	require.Equal(t, idemFirst.Results[0].MessageID, idemAgain.Results[0].MessageID)
}

// offsetsOnly keeps topic, queue and committed offset of each entry of a
// topic's own queues. The retry views (queue -1) are left out: they are
// listed once the group's retry topic holds a message, which depends on
// the scheduler's progress.
func offsetsOnly(o api.Offsets) []api.QueueOffset {
	out := make([]api.QueueOffset, 0, len(o.Offsets))
	for _, q := range o.Offsets {
		if q.QueueID >= 0 {
			out = append(out, api.QueueOffset{Topic: q.Topic, QueueID: q.QueueID, Offset: q.Offset})
		}
	}
	return out
}
