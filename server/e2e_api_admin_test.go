package server_test

// TestE2EEndpoints (e2e_api_test.go), the administrative routes: topics,
// groups, the broker status and the operations endpoints.

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// endpointsTopics is TestE2EEndpoints/Topics.
func endpointsTopics(t *testing.T, e *e2eServer) {
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

	// Status: every queue of the (still empty) topic, nothing retained.
	var status api.TopicStatus
	servertest.Decode(t, e.Get(t, "/v1/topics/orders/status"), http.StatusOK, &status)
	require.Equal(t, "orders", status.Topic)
	require.Len(t, status.Queues, 4)
	require.Zero(t, status.Messages)
	for i, q := range status.Queues {
		require.Equal(t, api.QueueStatus{QueueID: int32(i)}, q)
	}
	servertest.WantProblem(t, e.Get(t, "/v1/topics/nope/status"), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/a.b/status"), http.StatusBadRequest, "invalid-name")

	r = e.Do(t, http.MethodDelete, "/v1/topics/scratch", "", nil, nil)
	require.Equal(t, http.StatusNoContent, r.Status)
	require.Empty(t, r.Body)
	servertest.WantProblem(t, e.Get(t, "/v1/topics/scratch"), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/topics/scratch", "", nil, nil), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/topics/rmq_sys_OFFSET", "", nil, nil), http.StatusBadRequest, "invalid-name")
}

// endpointsGroups is TestE2EEndpoints/Groups.
func endpointsGroups(t *testing.T, e *e2eServer) {
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
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/billing", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "orders", SQL: "a > 'x'"}}}), http.StatusBadRequest, "invalid-sql")
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
}

// endpointsBrokerStatus is TestE2EEndpoints/BrokerStatus.
func endpointsBrokerStatus(t *testing.T, e *e2eServer) {
	// A single node's view of its cluster: standalone, no peers.
	var cl api.Cluster
	servertest.Decode(t, e.Get(t, "/v1/cluster"), http.StatusOK, &cl)
	require.Equal(t, "standalone", cl.Role)
	require.Empty(t, cl.Peers)
	require.Zero(t, cl.Leader)
	// Membership changes need a cluster.
	servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/cluster/learners", api.AddLearnerRequest{ID: 4, Address: "127.0.0.1:7104"}),
		http.StatusConflict, "not-a-cluster")
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/cluster/members/4/promote", "", nil, nil), http.StatusConflict, "not-a-cluster")
	servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/cluster/members/4", "", nil, nil), http.StatusConflict, "not-a-cluster")
	servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/cluster/members/x", "", nil, nil), http.StatusBadRequest, "malformed-request")
	var stats api.Stats
	servertest.Decode(t, e.Get(t, "/v1/stats"), http.StatusOK, &stats)
	require.Positive(t, stats.SentTotal)
	require.Len(t, stats.DelayedBacklog, 18)
	// The same as a stream: its first event, then the client goes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Base+"/v1/stats/stream", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req) // the spec-checking client reads whole bodies
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ev, err := readEvent(bufio.NewReader(resp.Body))
	require.NoError(t, err)
	require.Equal(t, "stats", ev.name)
	cancel()
	resp.Body.Close()
	servertest.WantProblem(t, e.Get(t, "/v1/stats/stream?intervalMs=60001"), http.StatusBadRequest, "invalid-argument")

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

	var keys api.ReceiptKeys
	servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/broker/receipt-keys/rotate", "", nil, nil), http.StatusOK, &keys)

	// Without --sqs-listen the SQS catalog is off and empty.
	var sqsQueues api.SQSQueueList
	servertest.Decode(t, e.Get(t, "/v1/sqs/queues"), http.StatusOK, &sqsQueues)
	require.False(t, sqsQueues.Enabled)
	require.Empty(t, sqsQueues.Queues)
	servertest.WantProblem(t, e.Get(t, "/v1/sqs/queues?prefix=no%20spaces"), http.StatusBadRequest, "invalid-argument")
	require.Equal(t, keys.KeyIDs[len(keys.KeyIDs)-1], keys.SigningKeyID)
}

// endpointsOperations is TestE2EEndpoints/Operations.
func endpointsOperations(t *testing.T, e *e2eServer) {
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
}
