package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

func TestTopics(t *testing.T) {
	t.Parallel()

	t.Run("OKCreate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.created = true
		rec := b.doJSON(t, http.MethodPut, "/v1/topics/orders", `{"queues":8,"retentionHours":24,"perm":"r"}`)
		topic := decode[api.Topic](t, rec, http.StatusCreated)
		require.Equal(t, api.Topic{Name: "orders", Queues: 8, RetentionHours: 24, Perm: "r", CreatedAt: "2026-11-29T10:00:00.000Z"}, topic)
		require.Equal(t, "/v1/topics/orders", rec.Header().Get("Location"))
		require.Equal(t, []any{broker.TopicConfig{Name: "orders", Queues: 8, RetentionHours: 24, Perm: "r"}}, b.broker.args)
	})
	t.Run("OKUpdateWithEmptyBody", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := b.do(t, http.MethodPut, "/v1/topics/orders", "")
		require.Equal(t, 4, decode[api.Topic](t, rec, http.StatusOK).Queues)
		require.Empty(t, rec.Header().Get("Location"))
	})
	t.Run("OKConsumeFromRetryPolicy", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.created = true
		rec := b.doJSON(t, http.MethodPut, "/v1/groups/billing", `{"consumeFrom":"last",
			"retryPolicy":{"backoff":"exponential","initialMs":200,"maxMs":5000,"jitter":0.25}}`)
		g := decode[api.Group](t, rec, http.StatusCreated)
		require.Equal(t, "last", g.ConsumeFrom)
		require.Equal(t, api.RetryPolicy{Backoff: "exponential", InitialMs: 200, MaxMs: 5000, Jitter: 0.25}, g.RetryPolicy)
		require.Equal(t, []any{broker.GroupConfig{Name: "billing", ConsumeFrom: "last",
			RetryPolicy: &broker.RetryPolicy{Backoff: "exponential", Initial: 200 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.25}}}, b.broker.args)
		for _, body := range []string{`{"retryPolicy":{"backoff":"fixed","initialMs":-1}}`, `{"retryPolicy":{"backoff":"fixed","initialMs":1,"maxMs":9223372036854775807}}`} {
			requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/groups/billing", body), http.StatusBadRequest, "invalid-argument")
		}
	})
	t.Run("OKListGetDelete", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		list := decode[api.TopicList](t, b.do(t, http.MethodGet, "/v1/topics", ""), http.StatusOK)
		require.Equal(t, []api.Topic{{Name: "orders", Queues: 4, RetentionHours: 72, Perm: "rw"}}, list.Topics)
		require.Equal(t, "orders", decode[api.Topic](t, b.do(t, http.MethodGet, "/v1/topics/orders", ""), http.StatusOK).Name)
		rec := b.do(t, http.MethodDelete, "/v1/topics/orders", "")
		require.Equal(t, http.StatusNoContent, rec.Code)
		require.Empty(t, rec.Body.String())
		require.Equal(t, []any{"orders"}, b.broker.args)
	})
	for _, tc := range []struct{ name, body string }{
		{"NegativeQueues", `{"queues":-1}`},
		{"TooManyQueues", `{"queues":1025}`},
		{"NegativeRetention", `{"retentionHours":-1}`},
		{"BadPerm", `{"perm":"x"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/topics/orders", tc.body), http.StatusBadRequest, "invalid-argument")
			require.Nil(t, b.broker.args)
		})
	}
	t.Run("ReadQueue", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := decode[api.QueueMessages](t, b.do(t, http.MethodGet, "/v1/topics/orders/queues/3/messages?offset=10&max=5", ""), http.StatusOK)
		require.Equal(t, int64(11), resp.NextOffset)
		require.Len(t, resp.Messages, 1)
		require.Equal(t, []any{"orders", int32(3), int64(10), 5}, b.broker.args)

		decode[api.QueueMessages](t, b.do(t, http.MethodGet, "/v1/topics/orders/queues/0/messages", ""), http.StatusOK)
		require.Equal(t, []any{"orders", int32(0), int64(0), api.MaxReadMessages}, b.broker.args)
		for _, target := range []string{
			"/v1/topics/orders/queues/-1/messages", "/v1/topics/orders/queues/x/messages",
			"/v1/topics/orders/queues/99999999999/messages", "/v1/topics/orders/queues/0/messages?offset=-1",
			"/v1/topics/orders/queues/0/messages?max=33", "/v1/topics/orders/queues/0/messages?max=0",
		} {
			requireProblem(t, b.do(t, http.MethodGet, target, ""), http.StatusBadRequest, "invalid-argument")
		}
	})
	t.Run("ReadQueueForGroup", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// Without offset: the group's (or the instance's) committed offset, -1 to the broker.
		decode[api.QueueMessages](t, b.do(t, http.MethodGet, "/v1/topics/orders/queues/2/messages?group=fan", "", "X-Mqgate-Client-Id", "w-1"), http.StatusOK)
		require.Equal(t, []any{"fan", "w-1", "orders", int32(2), int64(-1), api.MaxReadMessages}, b.broker.args)
		resp := decode[api.QueueMessages](t, b.do(t, http.MethodGet, "/v1/topics/orders/queues/2/messages?group=fan&offset=7&max=3", ""), http.StatusOK)
		require.Equal(t, []any{"fan", "", "orders", int32(2), int64(7), 3}, b.broker.args)
		require.Equal(t, int64(8), resp.NextOffset)
		b.broker.args = nil
		requireProblem(t, b.do(t, http.MethodGet, "/v1/topics/orders/queues/2/messages?group=bad%20name", ""), http.StatusBadRequest, "invalid-name")
		requireProblem(t, b.do(t, http.MethodGet, "/v1/topics/orders/queues/2/messages?group=fan", "", "X-Mqgate-Client-Id", "has space"),
			http.StatusBadRequest, "invalid-argument")
		require.Nil(t, b.broker.args)
	})
}

func TestGroups(t *testing.T) {
	t.Parallel()

	t.Run("OKCreate", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.created = true
		rec := b.doJSON(t, http.MethodPut, "/v1/groups/billing", `{"consumeMode":"broadcasting","orderly":true,"retryMaxTimes":3,
			"invisibleMs":60000,"subscriptions":[{"topic":"orders","tagExpression":"a || b"}],"push":null}`)
		g := decode[api.Group](t, rec, http.StatusCreated)
		require.Equal(t, api.Group{Name: "billing", ConsumeMode: "broadcasting", Orderly: true, RetryMaxTimes: 3, InvisibleMs: 60000,
			Subscriptions: []api.Subscription{{Topic: "orders", TagExpression: "a || b"}},
			ConsumeFrom:   "first", RetryPolicy: api.RetryPolicy{Backoff: "levels"}, InstanceIdleMs: 86_400_000}, g)
		require.Equal(t, "/v1/groups/billing", rec.Header().Get("Location"))
		require.Equal(t, []any{broker.GroupConfig{Name: "billing", ConsumeMode: "broadcasting", Orderly: true, RetryMaxTimes: 3,
			Invisible: time.Minute, Subscriptions: []broker.Subscription{{Topic: "orders", TagExpression: "a || b"}}}}, b.broker.args)
	})
	t.Run("OKListGetDelete", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, "billing", decode[api.GroupList](t, b.do(t, http.MethodGet, "/v1/groups", ""), http.StatusOK).Groups[0].Name)
		g := decode[api.Group](t, b.do(t, http.MethodGet, "/v1/groups/billing", ""), http.StatusOK)
		require.Equal(t, int64(30000), g.InvisibleMs)
		require.Equal(t, http.StatusNoContent, b.do(t, http.MethodDelete, "/v1/groups/billing", "").Code)
	})
	for _, tc := range []struct{ name, body, code string }{
		{"BadMode", `{"consumeMode":"fanout"}`, "invalid-argument"},
		{"NegativeRetries", `{"retryMaxTimes":-1}`, "invalid-argument"},
		{"InstanceIdleTooShort", `{"consumeMode":"broadcasting","instanceIdleMs":999}`, "invalid-argument"},
		{"InstanceIdleTooLong", `{"instanceIdleMs":31622400001}`, "invalid-argument"},
		{"BadSubscriptionTopic", `{"subscriptions":[{"topic":"a b"}]}`, "invalid-name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/groups/billing", tc.body), http.StatusBadRequest, tc.code)
			require.Nil(t, b.broker.args)
		})
	}
	t.Run("SQLPassesToTheBroker", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		g := decode[api.Group](t, b.doJSON(t, http.MethodPut, "/v1/groups/billing", `{"subscriptions":[{"topic":"orders","sql":"a > 1"}]}`), http.StatusOK)
		require.Equal(t, []api.Subscription{{Topic: "orders", SQL: "a > 1"}}, g.Subscriptions)
		require.Equal(t, []broker.Subscription{{Topic: "orders", SQL: "a > 1"}}, b.broker.args[0].(broker.GroupConfig).Subscriptions)
	})
	t.Run("InvalidSQLNamesFieldAndPosition", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.err = &broker.SQLError{Field: "subscriptions[0].sql", Position: 5, Msg: "expected a value"}
		p := requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/groups/billing", `{"subscriptions":[{"topic":"orders","sql":"a > "}]}`), http.StatusBadRequest, "invalid-sql")
		require.Equal(t, "subscriptions[0].sql", p.Field)
		require.Equal(t, 5, p.Position)
		require.Contains(t, p.Detail, "at position 5: expected a value")
	})
}

func TestGroupPush(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

	t.Run("OKCreateGeneratesSecretOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.created = true
		rec := b.doJSON(t, http.MethodPut, "/v1/groups/billing", `{"subscriptions":[{"topic":"orders"}],
			"push":{"url":"https://hooks.example.com/mq?x=1","mode":"binary","maxConcurrency":4,"timeoutMs":2500}}`)
		g := decode[api.Group](t, rec, http.StatusCreated)
		require.NotNil(t, g.Push)
		require.True(t, strings.HasPrefix(g.Push.Secret, "whsec_"), g.Push.Secret)
		require.Equal(t, api.Push{URL: "https://hooks.example.com/mq?x=1", Secret: g.Push.Secret, Mode: "binary", MaxConcurrency: 4, TimeoutMs: 2500}, *g.Push)
		stored := b.broker.args[0].(broker.GroupConfig)
		require.Equal(t, &broker.PushConfig{URL: "https://hooks.example.com/mq?x=1", Secret: g.Push.Secret, Mode: "binary",
			MaxConcurrency: 4, Timeout: 2500 * time.Millisecond}, stored.Push)
		key, err := broker.PushSecretKey(g.Push.Secret)
		require.NoError(t, err)
		require.Len(t, key, 32)

		// A second creation gets another secret.
		again := decode[api.Group](t, b.doJSON(t, http.MethodPut, "/v1/groups/other", `{"push":{"url":"http://127.0.0.1:9000/"}}`), http.StatusCreated)
		require.NotEqual(t, g.Push.Secret, again.Push.Secret)
		require.Equal(t, "json", again.Push.Mode, "json is the default mode")
		require.Equal(t, 8, again.Push.MaxConcurrency)
		require.EqualValues(t, 15000, again.Push.TimeoutMs)
	})
	t.Run("OKUpdateKeepsSecret", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.groupPush = &broker.PushConfig{URL: "http://old.example/", Secret: secret, Disabled: true, DisabledReason: "410"}
		g := decode[api.Group](t, b.doJSON(t, http.MethodPut, "/v1/groups/billing", `{"push":{"url":"http://new.example/"}}`), http.StatusOK)
		require.Empty(t, g.Push.Secret, "an existing secret is never shown")
		require.False(t, g.Push.Disabled, "a PUT enables the endpoint again")
		require.Empty(t, g.Push.DisabledReason)
		stored := b.broker.args[0].(broker.GroupConfig)
		require.Equal(t, secret, stored.Push.Secret)
		require.Equal(t, "http://new.example/", stored.Push.URL)
	})
	t.Run("OKGivenSecretIsNotEchoed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.created = true
		g := decode[api.Group](t, b.doJSON(t, http.MethodPut, "/v1/groups/billing",
			`{"push":{"url":"http://127.0.0.1:8081/hook","secret":"`+secret+`","disabled":true}}`), http.StatusCreated)
		require.Empty(t, g.Push.Secret)
		require.True(t, g.Push.Disabled)
		require.Equal(t, "disabled by an administrator", g.Push.DisabledReason)
		require.Equal(t, secret, b.broker.args[0].(broker.GroupConfig).Push.Secret)
	})
	t.Run("OKGetHidesSecret", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broker.groupPush = &broker.PushConfig{URL: "http://r.example/", Secret: secret, Mode: "json", MaxConcurrency: 8,
			Timeout: 15 * time.Second, Disabled: true, DisabledReason: "push: HTTP 410 Gone: endpoint disabled"}
		rec := b.do(t, http.MethodGet, "/v1/groups/billing", "")
		require.NotContains(t, rec.Body.String(), "whsec_")
		g := decode[api.Group](t, rec, http.StatusOK)
		require.Equal(t, &api.Push{URL: "http://r.example/", Mode: "json", MaxConcurrency: 8, TimeoutMs: 15000, Disabled: true,
			DisabledReason: "push: HTTP 410 Gone: endpoint disabled"}, g.Push)
	})
	for _, tc := range []struct{ name, push, code string }{
		{"NoURL", `{"maxConcurrency":2}`, "invalid-argument"},
		{"NotHTTP", `{"url":"ftp://example.com/"}`, "invalid-argument"},
		{"NoHost", `{"url":"http:///path"}`, "invalid-argument"},
		{"UserInfo", `{"url":"http://user:pw@example.com/"}`, "invalid-argument"},
		{"Relative", `{"url":"/hook"}`, "invalid-argument"},
		{"BadSecretPrefix", `{"url":"http://example.com/","secret":"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}`, "invalid-argument"},
		{"ShortSecret", `{"url":"http://example.com/","secret":"whsec_AAAA"}`, "invalid-argument"},
		{"TooConcurrent", `{"url":"http://example.com/","maxConcurrency":257}`, "invalid-argument"},
		{"NegativeConcurrency", `{"url":"http://example.com/","maxConcurrency":-1}`, "invalid-argument"},
		{"LongTimeout", `{"url":"http://example.com/","timeoutMs":60001}`, "invalid-argument"},
		{"BadMode", `{"url":"http://example.com/","mode":"xml"}`, "invalid-argument"},
		{"UnknownField", `{"url":"http://example.com/","retries":3}`, "malformed-request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/groups/billing", `{"push":`+tc.push+`}`), http.StatusBadRequest, tc.code)
			for _, a := range b.broker.args {
				_, put := a.(broker.GroupConfig)
				require.False(t, put, "PutGroup was not called")
			}
		})
	}
	t.Run("BroadcastingRefused", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, setup(t).doJSON(t, http.MethodPut, "/v1/groups/billing",
			`{"consumeMode":"broadcasting","push":{"url":"http://example.com/"}}`), http.StatusBadRequest, "invalid-argument")
	})
}

func TestOffsets(t *testing.T) {
	t.Parallel()

	t.Run("OKGet", func(t *testing.T) {
		t.Parallel()
		got := decode[api.Offsets](t, setup(t).do(t, http.MethodGet, "/v1/groups/billing/offsets", ""), http.StatusOK)
		require.Equal(t, []api.QueueOffset{
			{Topic: "orders", QueueID: 0, Offset: 7, BrokerOffset: 10, Lag: 3},
			{Topic: "orders", QueueID: 1, Offset: 5, BrokerOffset: 5},
		}, got.Offsets)
	})
	t.Run("OKCommit", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rec := b.doJSON(t, http.MethodPut, "/v1/groups/billing/offsets", `{"offsets":[{"topic":"orders","queueId":1,"offset":9,"lag":4}]}`)
		require.Equal(t, http.StatusNoContent, rec.Code)
		require.Equal(t, []broker.OffsetCommit{{Topic: "orders", QueueID: 1, Offset: 9}}, b.broker.commits)
	})
	t.Run("CommitRejects", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/groups/billing/offsets", `{"offsets":[]}`), 400, "invalid-argument")
		requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/groups/billing/offsets", `{"offsets":[{"topic":"orders","queueId":0,"offset":-1}]}`), 400, "invalid-argument")
		requireProblem(t, b.doJSON(t, http.MethodPut, "/v1/groups/billing/offsets", `{"offsets":[{"topic":"","queueId":0,"offset":1}]}`), 400, "invalid-name")
		require.Nil(t, b.broker.commits)
	})
	t.Run("OKProgress", func(t *testing.T) {
		t.Parallel()
		p := decode[api.Progress](t, setup(t).do(t, http.MethodGet, "/v1/groups/billing/progress", ""), http.StatusOK)
		require.Equal(t, "billing", p.Group)
		require.Equal(t, int64(3), p.TotalLag)
		require.Equal(t, api.QueueProgress{Topic: "orders", QueueID: 0, BrokerOffset: 10, ConsumerOffset: 7, Lag: 3, InFlight: 1}, p.Queues[0])
	})
	t.Run("OKResetOffset", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		p := decode[api.Progress](t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/reset-offset", `{"timestamp":"2026-11-29T08:00:00Z","topic":"orders"}`), http.StatusOK)
		require.Len(t, p.Queues, 2)
		require.Equal(t, []any{"billing", "orders", time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)}, b.broker.args)
	})
	t.Run("ResetOffsetRejects", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireProblem(t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/reset-offset", `{"timestamp":"yesterday"}`), 400, "invalid-argument")
		requireProblem(t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/reset-offset", `{"timestamp":"2026-11-29T08:00:00Z","topic":"a/b"}`), 400, "invalid-name")
		require.Nil(t, b.broker.args)
	})
}

// TestSearchByTimeAndSkipBacklog: the query of a search by store time
// reaches the broker as asked, its next position comes back as a cursor
// that the next call hands back; bad input is a 400 that reaches no
// broker. A skip of a group's backlog answers its progress.
func TestSearchByTimeAndSkipBacklog(t *testing.T) {
	t.Parallel()
	from, to := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	b := setup(t)
	page := decode[api.MessageSearch](t, b.do(t, http.MethodGet, "/v1/topics/orders/messages?from=2026-11-29T08:00:00Z&to=2026-11-29T09:00:00Z&limit=5&queueId=2", ""), http.StatusOK)
	require.Len(t, page.Messages, 1)
	require.NotEmpty(t, page.Next)
	require.Equal(t, []any{broker.TimeSearch{Topic: "orders", From: from, To: to, QueueID: 2, Limit: 5}}, b.broker.args)
	page = decode[api.MessageSearch](t, b.do(t, http.MethodGet, "/v1/topics/orders/messages?from=2026-11-29T08:00:00Z&to=2026-11-29T09:00:00Z&cursor="+page.Next, ""), http.StatusOK)
	require.Empty(t, page.Next)
	require.Equal(t, []any{broker.TimeSearch{Topic: "orders", From: from, To: to, QueueID: -1, Limit: api.MaxReadMessages,
		After: &broker.SearchPosition{QueueID: 1, Offset: 12}}}, b.broker.args)

	bad := setup(t)
	for _, q := range []string{
		"", "from=2026-11-29T08:00:00Z", "to=2026-11-29T08:00:00Z", "from=yesterday&to=2026-11-29T08:00:00Z",
		"from=2026-11-29T08:00:00Z&to=2026-11-29T08:00:00Z", "from=2026-11-29T09:00:00Z&to=2026-11-29T08:00:00Z",
		"from=2026-11-29T08:00:00Z&to=2026-11-29T09:00:00Z&limit=0", "from=2026-11-29T08:00:00Z&to=2026-11-29T09:00:00Z&limit=101",
		"from=2026-11-29T08:00:00Z&to=2026-11-29T09:00:00Z&queueId=-1", "from=2026-11-29T08:00:00Z&to=2026-11-29T09:00:00Z&cursor=zz",
		"from=2026-11-29T08:00:00Z&to=2026-11-29T09:00:00Z&cursor=" + strings.Repeat("A", 100),
	} {
		requireProblem(t, bad.do(t, http.MethodGet, "/v1/topics/orders/messages?"+q, ""), 400, "invalid-argument")
	}
	requireProblem(t, bad.do(t, http.MethodGet, "/v1/topics/a%20b/messages?from=2026-11-29T08:00:00Z&to=2026-11-29T09:00:00Z", ""), 400, "invalid-name")
	require.Nil(t, bad.broker.args)

	p := decode[api.Progress](t, b.doJSON(t, http.MethodPost, "/v1/groups/billing/skip-backlog", `{"topic":"orders"}`), http.StatusOK)
	require.Equal(t, "billing", p.Group)
	require.Equal(t, []any{"billing", "orders"}, b.broker.args)
	decode[api.Progress](t, b.do(t, http.MethodPost, "/v1/groups/billing/skip-backlog", ""), http.StatusOK)
	require.Equal(t, []any{"billing", ""}, b.broker.args)
	requireProblem(t, bad.doJSON(t, http.MethodPost, "/v1/groups/billing/skip-backlog", `{"topic":"a/b"}`), 400, "invalid-name")
	requireProblem(t, bad.doJSON(t, http.MethodPost, "/v1/groups/billing/skip-backlog", `{"topics":"x"}`), 400, "malformed-request")
	require.Nil(t, bad.broker.args)
}

func TestMessagesAndStatus(t *testing.T) {
	t.Parallel()

	t.Run("OKByID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		m := decode[api.Message](t, b.do(t, http.MethodGet, "/v1/messages/7f00000100001f9000000000000004d2", ""), http.StatusOK)
		require.Equal(t, "7F00000100001F9000000000000004D2", m.MessageID)
		require.Equal(t, "found", m.Body)
		require.Equal(t, []any{"7F00000100001F9000000000000004D2"}, b.broker.args)
	})
	t.Run("BadID", func(t *testing.T) {
		t.Parallel()
		requireProblem(t, setup(t).do(t, http.MethodGet, "/v1/messages/xyz", ""), 400, "invalid-argument")
	})
	t.Run("OKByKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		list := decode[api.MessageList](t, b.do(t, http.MethodGet, "/v1/messages?topic=orders&key=order%201&max=3", ""), http.StatusOK)
		require.NotNil(t, list.Messages)
		require.Equal(t, []any{"orders", "order 1", 3}, b.broker.args)
	})
	t.Run("ByKeyRejects", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireProblem(t, b.do(t, http.MethodGet, "/v1/messages?key=k", ""), 400, "invalid-name")
		requireProblem(t, b.do(t, http.MethodGet, "/v1/messages?topic=orders", ""), 400, "invalid-argument")
		requireProblem(t, b.do(t, http.MethodGet, "/v1/messages?topic=orders&key=k&max=100", ""), 400, "invalid-argument")
	})
	t.Run("OKBrokerStatus", func(t *testing.T) {
		t.Parallel()
		s := decode[api.BrokerStatus](t, setup(t).do(t, http.MethodGet, "/v1/broker/status", ""), http.StatusOK)
		require.Equal(t, api.BrokerStatus{FlushMode: "sync", StoreBytes: 1 << 20, UptimeMs: 90_000, CommitLogMaxOffset: 4096, Levels: []api.DelayLevel{}, Quarantine: api.Quarantine{Records: []api.QuarantinedRecord{}}}, s)
	})
}
