package server_test

// End-to-end tests of the broker's quotas (server/broker/quota.go): each
// is answered 409 quota-exceeded naming the quota and its limit, changes
// nothing, and applies to auto-creation as to explicit creation.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// quotaProblem asserts a 409 quota-exceeded of quota with limit.
func quotaProblem(t *testing.T, r servertest.Resp, quota string, limit int) api.Problem {
	t.Helper()
	p := servertest.WantProblem(t, r, http.StatusConflict, "quota-exceeded")
	require.Equal(t, quota, p.Field, "%s", r)
	require.Equal(t, limit, p.Limit, "%s", r)
	require.NotEmpty(t, p.LimitUnit)
	return p
}

// TestE2EQuotas: topics, queues per topic and in total, groups, push
// endpoints and pending timers, each at a small quota.
func TestE2EQuotas(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) {
		c.MaxTopics, c.MaxQueues, c.MaxQueuesPerTopic = 2, 6, 4
		c.MaxGroups, c.MaxPushEndpoints, c.MaxPendingTimers = 2, 1, 2
	})

	t.Run("TopicsAndQueues", func(t *testing.T) {
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/a", map[string]int{"queues": 4}), http.StatusCreated, nil)
		quotaProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/b", map[string]int{"queues": 5}), "queuesPerTopic", 4)
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/b", map[string]int{"queues": 2}), http.StatusCreated, nil)
		p := quotaProblem(t, e.Do(t, http.MethodPatch, "/v1/topics/b", "application/merge-patch+json", []byte(`{"queues":3}`), nil), "queues", 6)
		require.Contains(t, p.Detail, "would make 7 queues where the limit is 6 (--max-queues; 6 exist)")
		// Auto-creation by a send counts too, and creates nothing.
		p = quotaProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/c/messages", api.SendMessage{Body: "x"}), "topics", 2)
		require.Contains(t, p.Detail, "--max-topics")
		servertest.WantProblem(t, e.Get(t, "/v1/topics/c"), http.StatusNotFound, "topic-not-found")
		// Room for a topic again once one is gone, but an auto-created
		// one's default queues (4) would pass the total.
		require.Equal(t, http.StatusNoContent, e.Do(t, http.MethodDelete, "/v1/topics/b", "", nil, nil).Status)
		quotaProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/c/messages", api.SendMessage{Body: "x"}), "queues", 6)
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/c", map[string]int{"queues": 2}), http.StatusCreated, nil)
		e.Send(t, "c", api.SendMessage{Body: "x"})
	})

	t.Run("GroupsAndPushEndpoints", func(t *testing.T) {
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/g1", map[string]any{"push": map[string]any{"url": "http://hooks.invalid/", "disabled": true}}), http.StatusCreated, nil)
		e.Pull(t, "g2", "a", api.PullRequest{}) // auto-created
		quotaProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/g3/topics/a/pull", api.PullRequest{}), "groups", 2)
		quotaProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/g3", map[string]any{}), "groups", 2)
		quotaProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/g2", map[string]any{"push": map[string]any{"url": "http://hooks.invalid/"}}), "pushEndpoints", 1)
		quotaProblem(t, e.Do(t, http.MethodPatch, "/v1/groups/g2", "application/merge-patch+json", []byte(`{"push":{"url":"http://hooks.invalid/"}}`), nil), "pushEndpoints", 1)
		// The endpoint that exists may change.
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/g1", map[string]any{"push": map[string]any{"url": "http://hooks2.invalid/", "disabled": true}}), http.StatusOK, nil)
	})

	t.Run("PendingTimers", func(t *testing.T) {
		later := api.SendMessage{Body: "later", DelayMs: 3_600_000}
		quotaProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/a/messages", map[string]any{"messages": []api.SendMessage{later, later, later}}), "pendingTimers", 2)
		servertest.Decode(t, e.JSON(t, http.MethodPost, "/v1/topics/a/messages", map[string]any{"messages": []api.SendMessage{later, later}}), http.StatusOK, nil)
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			var list api.TimerList
			servertest.Decode(t, e.Get(t, "/v1/timers"), http.StatusOK, &list)
			return len(list.Items) == 2, fmt.Sprintf("%d timers", len(list.Items))
		})
		quotaProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/a/messages", later), "pendingTimers", 2)
		// Messages that are no timers go on.
		e.Send(t, "a", api.SendMessage{Body: "now"})
	})
}
