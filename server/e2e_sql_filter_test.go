package server_test

// End-to-end tests of SQL92 property filters over real HTTP: a group's
// subscription with `sql` delivers the matching messages only and moves
// its progress past the others, a pull may carry its own filter, a
// filter that does not compile is a 400 naming the field and the
// position, the filter survives a restart, and push groups apply it too.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// drainBodies pulls until a pull comes back empty, acks everything, and
// returns the bodies sorted.
func (e *e2eServer) drainBodies(t *testing.T, group, topic string, req api.PullRequest) []string {
	t.Helper()
	var out []string
	for {
		req.MaxMessages = api.MaxPullMessages
		got := e.Pull(t, group, topic, req)
		if len(got) == 0 {
			break
		}
		var rs []string
		for _, m := range got {
			out = append(out, m.Body)
			rs = append(rs, m.Receipt)
		}
		e.Ack(t, group, rs...)
	}
	sort.Strings(out)
	return out
}

// requireConsumedAll checks that the group's progress in topic is at the
// end of every queue: the messages its filter refused count as consumed.
func (e *e2eServer) requireConsumedAll(t *testing.T, group, topic string, sent int64) {
	t.Helper()
	p := e.progress(t, group)
	var end int64
	for _, q := range p.Queues {
		if q.Topic != topic || q.QueueID < 0 {
			continue
		}
		require.Equal(t, q.BrokerOffset, q.ConsumerOffset, "queue %d: %+v", q.QueueID, q)
		require.Zero(t, q.Lag, "queue %d", q.QueueID)
		require.Zero(t, q.InFlight, "queue %d", q.QueueID)
		end += q.BrokerOffset
	}
	require.Equal(t, sent, end, "every message sent was passed")
	require.Zero(t, p.TotalLag)
}

// shopMessage is message i of the test: region eu for even i, us for odd,
// amount i*10 except for every 7th, which has none.
func shopMessage(i int) api.SendMessage {
	m := api.SendMessage{Body: fmt.Sprintf("m%02d", i), Tag: []string{"new", "paid"}[i%3%2],
		Properties: map[string]string{"region": []string{"eu", "us"}[i%2]}}
	if i%7 != 0 {
		m.Properties["amount"] = fmt.Sprint(i * 10)
	}
	return m
}

func TestE2ESQLFilter(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/shop", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	const sql = "region = 'eu' AND amount > 100"
	g := fresh[api.Group](t, e.JSON(t, http.MethodPut, "/v1/groups/eu", api.GroupRequest{
		Subscriptions: []api.Subscription{{Topic: "shop", SQL: sql}}}), http.StatusCreated)
	require.Equal(t, []api.Subscription{{Topic: "shop", SQL: sql}}, g.Subscriptions)

	const n = 40
	var want, wantUS []string
	for i := 0; i < n; i++ {
		e.Send(t, "shop", shopMessage(i))
		if i%2 == 0 && i%7 != 0 && i*10 > 100 {
			want = append(want, fmt.Sprintf("m%02d", i))
		}
		if i%2 == 1 {
			wantUS = append(wantUS, fmt.Sprintf("m%02d", i))
		}
	}

	t.Run("OnlyMatchingAndProgressPassesTheRest", func(t *testing.T) {
		require.Equal(t, want, e.drainBodies(t, "eu", "shop", api.PullRequest{}))
		e.requireConsumedAll(t, "eu", "shop", n)
	})

	t.Run("TagExpressionAndSQLBothApply", func(t *testing.T) {
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/paid-eu", api.GroupRequest{
			Subscriptions: []api.Subscription{{Topic: "shop", TagExpression: "paid", SQL: "region = 'eu' AND TAGS = 'paid'"}}}), http.StatusCreated, nil)
		var both []string
		for i := 0; i < n; i++ {
			if i%3%2 == 1 && i%2 == 0 {
				both = append(both, fmt.Sprintf("m%02d", i))
			}
		}
		require.Equal(t, both, e.drainBodies(t, "paid-eu", "shop", api.PullRequest{}))
		e.requireConsumedAll(t, "paid-eu", "shop", n)
	})

	t.Run("APullsOwnFilter", func(t *testing.T) {
		require.Equal(t, wantUS, e.drainBodies(t, "adhoc", "shop", api.PullRequest{SQL: "region = 'us'"}))
		e.requireConsumedAll(t, "adhoc", "shop", n)
	})

	t.Run("InvalidIs400WithPosition", func(t *testing.T) {
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/bad", api.GroupRequest{
			Subscriptions: []api.Subscription{{Topic: "shop"}, {Topic: "other", SQL: "amount >> 1"}}}), http.StatusBadRequest, "invalid-sql")
		require.Equal(t, "subscriptions[1].sql", p.Field)
		require.Equal(t, 9, p.Position)
		require.Contains(t, p.Detail, "at position 9: expected a property")
		servertest.WantProblem(t, e.Get(t, "/v1/groups/bad"), http.StatusNotFound, "group-not-found")

		p = servertest.WantProblem(t, e.patch(t, "/v1/groups/eu", "application/merge-patch+json",
			`{"subscriptions":[{"topic":"shop","sql":"NOT region = 'eu'"}]}`), http.StatusBadRequest, "invalid-sql")
		require.Equal(t, "subscriptions[0].sql", p.Field)
		require.Equal(t, 5, p.Position)
		require.Contains(t, p.Detail, "NOT needs a condition")
		p = servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/bad", api.GroupRequest{
			Subscriptions: []api.Subscription{{Topic: "shop", SQL: "KEYS = 'k'"}}}), http.StatusBadRequest, "invalid-sql")
		require.Equal(t, 1, p.Position)
		p = servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/bad", api.GroupRequest{
			Subscriptions: []api.Subscription{{Topic: "shop", SQL: "a = '" + strings.Repeat("x", 4096) + "'"}}}), http.StatusBadRequest, "value-too-long")
		require.Equal(t, "subscriptions[0].sql", p.Field)
		require.Equal(t, 4096, p.Limit)

		p = servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/eu/topics/shop/pull", api.PullRequest{SQL: "amount = "}), http.StatusBadRequest, "invalid-sql")
		require.Equal(t, "sql", p.Field)
		require.Equal(t, 10, p.Position)

		got := fresh[api.Group](t, e.Get(t, "/v1/groups/eu"), http.StatusOK)
		require.Equal(t, []api.Subscription{{Topic: "shop", SQL: sql}}, got.Subscriptions, "refused changes change nothing")
	})

	t.Run("PatchKeepsTheFilter", func(t *testing.T) {
		got := fresh[api.Group](t, e.patch(t, "/v1/groups/eu", "application/merge-patch+json", `{"retryMaxTimes":3}`), http.StatusOK)
		require.Equal(t, []api.Subscription{{Topic: "shop", SQL: sql}}, got.Subscriptions)
	})

	t.Run("SurvivesRestart", func(t *testing.T) {
		e = &e2eServer{e.Reopen(t)}
		got := fresh[api.Group](t, e.Get(t, "/v1/groups/eu"), http.StatusOK)
		require.Equal(t, []api.Subscription{{Topic: "shop", SQL: sql}}, got.Subscriptions)
		var more []string
		for i := n; i < n+20; i++ {
			e.Send(t, "shop", shopMessage(i))
			if i%2 == 0 && i%7 != 0 {
				more = append(more, fmt.Sprintf("m%02d", i))
			}
		}
		require.Equal(t, more, e.drainBodies(t, "eu", "shop", api.PullRequest{}))
		e.requireConsumedAll(t, "eu", "shop", n+20)
	})
}

// TestE2ESQLFilterPush: a push group's subscription filter decides what is
// posted to its endpoint; the refused messages count as consumed.
func TestE2ESQLFilterPush(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	wh := newWebhook(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/alerts", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/pager", api.GroupRequest{
		Subscriptions: []api.Subscription{{Topic: "alerts", SQL: "severity IN ('critical', 'error') AND NOT (team = 'noise')"}},
		Push:          &api.PushRequest{URL: wh.url, TimeoutMs: 3000},
	}), http.StatusCreated, nil)
	const n = 30
	var want []string
	for i := 0; i < n; i++ {
		sev := []string{"debug", "error", "critical", "info", "error"}[i%5]
		team := []string{"core", "noise", "web"}[i%3]
		body := fmt.Sprintf("a%02d", i)
		e.Send(t, "alerts", api.SendMessage{Body: body, Properties: map[string]string{"severity": sev, "team": team}})
		if (sev == "critical" || sev == "error") && team != "noise" {
			want = append(want, body)
		}
	}
	servertest.Eventually(t, 20*time.Second, func() (bool, string) {
		p := e.progress(t, "pager")
		return wh.count() >= len(want) && p.TotalLag == 0, fmt.Sprintf("%d of %d posted, lag %d", wh.count(), len(want), p.TotalLag)
	})
	e.requireConsumedAll(t, "pager", "alerts", n)
	wh.mu.Lock()
	defer wh.mu.Unlock()
	var got []string
	for _, h := range wh.hits {
		var m api.PulledMessage
		require.NoError(t, json.Unmarshal(h.body, &m))
		got = append(got, m.Body)
	}
	sort.Strings(got)
	require.Equal(t, want, got, "only the matching messages were posted, each once")
}

// TestE2ESQLFilterHeaderPropertyNames: a property sent as an
// X-Mqgate-Property-<Name> header is stored under the lower-cased name
// (header names are case-insensitive), and SQL property names are
// case-sensitive: the lower-case name matches it, the name as the header
// spelled it does not (README "Property filters").
func TestE2ESQLFilterHeaderPropertyNames(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	require.Equal(t, http.StatusCreated, e.JSON(t, http.MethodPut, "/v1/topics/hp", api.TopicRequest{Queues: 1}).Status)
	r := e.Do(t, http.MethodPost, "/v1/topics/hp/messages", "text/plain", []byte("from a header"),
		http.Header{"X-Mqgate-Property-Region": {"eu"}})
	require.Equal(t, http.StatusOK, r.Status, r.String())
	e.Send(t, "hp", api.SendMessage{Body: "from JSON", Properties: map[string]string{"Region": "eu"}})

	bodies := func(group, sql string) []string {
		t.Helper()
		var out []string
		for _, m := range e.Pull(t, group, "hp", api.PullRequest{MaxMessages: 32, SQL: sql}) {
			out = append(out, m.Body)
		}
		return out
	}
	require.Equal(t, []string{"from a header"}, bodies("lower", "region = 'eu'"), "the header's property is named region")
	require.Equal(t, []string{"from JSON"}, bodies("upper", "Region = 'eu'"), "JSON properties keep their case; names are case-sensitive")
	pulled := e.Pull(t, "all", "hp", api.PullRequest{MaxMessages: 32})
	require.Len(t, pulled, 2)
	require.Equal(t, map[string]string{"region": "eu"}, pulled[0].Properties)
	require.Equal(t, map[string]string{"Region": "eu"}, pulled[1].Properties)
}
