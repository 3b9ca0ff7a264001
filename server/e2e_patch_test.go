package server_test

// End-to-end tests of PATCH (JSON merge patch, RFC 7396) on topics and
// groups, and of PUT's full-replace errors, over real HTTP.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/push"
	"github.com/mqgate/mqgate/server/servertest"
)

// patch sends a merge patch (a string body, as is) with contentType.
func (e *e2eServer) patch(t *testing.T, path, contentType, body string) servertest.Resp {
	t.Helper()
	return e.Do(t, http.MethodPatch, path, contentType, []byte(body), nil)
}

func TestE2EPatchTopic(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	const mp = "application/merge-patch+json"
	var topic api.Topic
	topic = fresh[api.Topic](t, e.JSON(t, http.MethodPut, "/v1/topics/wide", api.TopicRequest{Queues: 8, RetentionHours: 24}), http.StatusCreated)

	t.Run("PutIsAFullReplace", func(t *testing.T) {
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/wide", `{"perm":"r"}`), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "PUT replaces the whole topic: queues defaults to 4 when omitted and a topic's queue count cannot shrink (8 -> 4)")
		require.Contains(t, p.Detail, "use PATCH to change only perm")
		p = servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/topics/wide", `{"queues":2,"perm":"r"}`), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "cannot shrink (8 -> 2)")
		require.NotContains(t, p.Detail, "defaults to", "queues was given: no word about defaults")
		topic = fresh[api.Topic](t, e.Get(t, "/v1/topics/wide"), http.StatusOK)
		require.Equal(t, api.Topic{Name: "wide", Queues: 8, RetentionHours: 24, Perm: "rw", CreatedAt: topic.CreatedAt}, topic, "a refused PUT changes nothing")
	})

	t.Run("OnlyTheFieldsGiven", func(t *testing.T) {
		r := e.patch(t, "/v1/topics/wide", mp, `{"perm":"r"}`)
		topic = fresh[api.Topic](t, r, http.StatusOK)
		require.Equal(t, mp, r.Header.Get("Accept-Patch"))
		require.Equal(t, 8, topic.Queues)
		require.Equal(t, 24, topic.RetentionHours)
		require.Equal(t, "r", topic.Perm)
		created := topic.CreatedAt

		topic = fresh[api.Topic](t, e.patch(t, "/v1/topics/wide", "application/json", `{"retentionHours":48}`), http.StatusOK)
		require.Equal(t, api.Topic{Name: "wide", Queues: 8, RetentionHours: 48, Perm: "r", CreatedAt: created}, topic, "application/json is a merge patch too")
		topic = fresh[api.Topic](t, e.patch(t, "/v1/topics/wide", mp, `{}`), http.StatusOK)
		require.Equal(t, "r", topic.Perm, "an empty patch changes nothing")

		// null removes a field: it takes its default.
		topic = fresh[api.Topic](t, e.patch(t, "/v1/topics/wide", mp, `{"perm":null,"retentionHours":null}`), http.StatusOK)
		require.Equal(t, api.Topic{Name: "wide", Queues: 8, RetentionHours: 0, Perm: "rw", CreatedAt: created}, topic)
		topic = fresh[api.Topic](t, e.patch(t, "/v1/topics/wide", mp+"; charset=utf-8", `{"queues":12}`), http.StatusOK)
		require.Equal(t, 12, topic.Queues)
		topic = fresh[api.Topic](t, e.Get(t, "/v1/topics/wide"), http.StatusOK)
		require.Equal(t, api.Topic{Name: "wide", Queues: 12, RetentionHours: 0, Perm: "rw", CreatedAt: created}, topic)
	})

	t.Run("ValidatedLikeAPut", func(t *testing.T) {
		p := servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `{"queues":3}`), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "cannot shrink (12 -> 3)")
		p = servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `{"queues":null}`), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "cannot shrink (12 -> 4)", "null resets queues to the default")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `{"perm":"x"}`), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `{"queues":5000}`), http.StatusBadRequest, "invalid-argument")
		p = servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `{"perms":"r"}`), http.StatusBadRequest, "malformed-request")
		require.Contains(t, p.Detail, "perms")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `{"queues":"8"}`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `[{"op":"replace","path":"/perm","value":"r"}]`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `"r"`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `{"perm":"r"} {}`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, ``), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", mp, `{"perm":`), http.StatusBadRequest, "malformed-request")
		r := e.patch(t, "/v1/topics/wide", "application/json-patch+json", `[]`)
		servertest.WantProblem(t, r, http.StatusUnsupportedMediaType, "unsupported-media-type")
		require.Equal(t, mp, r.Header.Get("Accept-Patch"), "a 415 names the patch format it takes")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", "text/plain", `{}`), http.StatusUnsupportedMediaType, "unsupported-media-type")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/wide", "", `{}`), http.StatusUnsupportedMediaType, "unsupported-media-type")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/nowhere", mp, `{"perm":"r"}`), http.StatusNotFound, "topic-not-found")
		servertest.WantProblem(t, e.patch(t, "/v1/topics/%25RETRY%25x", mp, `{"perm":"r"}`), http.StatusBadRequest, "invalid-name")
		servertest.WantProblem(t, e.Get(t, "/v1/topics/nowhere"), http.StatusNotFound, "topic-not-found")
		topic = fresh[api.Topic](t, e.Get(t, "/v1/topics/wide"), http.StatusOK)
		require.Equal(t, 12, topic.Queues, "refused patches change nothing")
		require.Equal(t, "rw", topic.Perm)
	})

	t.Run("TheTopicObeysThePatch", func(t *testing.T) {
		topic = fresh[api.Topic](t, e.patch(t, "/v1/topics/wide", mp, `{"perm":"r"}`), http.StatusOK)
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/topics/wide/messages", api.SendMessage{Body: "x"}), http.StatusBadRequest, "invalid-argument")
		topic = fresh[api.Topic](t, e.patch(t, "/v1/topics/wide", mp, `{"perm":null}`), http.StatusOK)
		e.Send(t, "wide", api.SendMessage{Body: "x"})
	})
}

// fresh decodes r's JSON body into a new value (decoding into a used one
// would keep members the body leaves out).
func fresh[T any](t *testing.T, r servertest.Resp, status int) T {
	t.Helper()
	var v T
	servertest.Decode(t, r, status, &v)
	return v
}

// webhook is a push endpoint that records the requests it gets and
// answers 200, or what its answer function (set before use) writes.
type webhook struct {
	url    string
	mu     sync.Mutex
	hits   []webhookHit
	answer func(n int, w http.ResponseWriter)
}

type webhookHit struct {
	header http.Header
	body   []byte
}

func newWebhook(t *testing.T) *webhook {
	t.Helper()
	wh := &webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		wh.mu.Lock()
		n := len(wh.hits)
		wh.hits = append(wh.hits, webhookHit{header: r.Header.Clone(), body: body})
		answer := wh.answer
		wh.mu.Unlock()
		if answer != nil {
			answer(n, w)
		}
	}))
	t.Cleanup(srv.Close)
	wh.url = srv.URL
	return wh
}

// count is how many requests the endpoint got.
func (wh *webhook) count() int {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	return len(wh.hits)
}

// wait waits for the n-th request and returns it.
func (wh *webhook) wait(t *testing.T, n int) webhookHit {
	t.Helper()
	var got webhookHit
	servertest.Eventually(t, 20*time.Second, func() (bool, string) {
		wh.mu.Lock()
		defer wh.mu.Unlock()
		if len(wh.hits) >= n {
			got = wh.hits[n-1]
			return true, ""
		}
		return false, "waiting for a push request"
	})
	return got
}

func TestE2EPatchGroup(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	const mp = "application/merge-patch+json"
	wh := newWebhook(t)
	var g api.Group
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/hooked", api.GroupRequest{
		RetryMaxTimes: 5, InvisibleMs: 20_000,
		Subscriptions: []api.Subscription{{Topic: "hook-a", TagExpression: "x || y"}, {Topic: "hook-b"}},
		Push:          &api.PushRequest{URL: wh.url, TimeoutMs: 3000},
	}), http.StatusCreated, &g)
	secret := g.Push.Secret
	require.True(t, strings.HasPrefix(secret, "whsec_"))

	t.Run("PushAtTheGatewayItselfIsRefused", func(t *testing.T) {
		// The same check as a PUT: a push into this gateway's own listener
		// would store every message again.
		self := fmt.Sprintf(`{"push":{"url":"http://%s/v1/topics/hook-a/messages"}}`, e.Srv.Addr())
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, self), http.StatusBadRequest, "invalid-argument")
		got := fresh[api.Group](t, e.Get(t, "/v1/groups/hooked"), http.StatusOK)
		require.Equal(t, wh.url, got.Push.URL, "a refused patch changes nothing")
	})

	t.Run("OnlyTheFieldsGiven", func(t *testing.T) {
		r := e.patch(t, "/v1/groups/hooked", mp, `{"retryMaxTimes":7,"push":{"maxConcurrency":2}}`)
		g = fresh[api.Group](t, r, http.StatusOK)
		require.Equal(t, mp, r.Header.Get("Accept-Patch"))
		require.Equal(t, 7, g.RetryMaxTimes)
		require.EqualValues(t, 20_000, g.InvisibleMs)
		require.Equal(t, []api.Subscription{{Topic: "hook-a", TagExpression: "x || y"}, {Topic: "hook-b"}}, g.Subscriptions)
		require.Equal(t, &api.Push{URL: wh.url, Mode: "json", MaxConcurrency: 2, TimeoutMs: 3000}, g.Push,
			"push merges member by member; the secret is not shown again")
		got := fresh[api.Group](t, e.Get(t, "/v1/groups/hooked"), http.StatusOK)
		require.Equal(t, g, got)

		// The secret is write-only: the patch did not name it, so the
		// endpoint still signs with the one the PUT generated.
		e.Send(t, "hook-a", api.SendMessage{Body: "signed", Tag: "x"})
		hit := wh.wait(t, 1)
		require.NoError(t, push.Verify(secret, hit.header, hit.body, time.Now(), push.DefaultTolerance))
	})

	t.Run("ArraysAreReplacedAndNullRemoves", func(t *testing.T) {
		g = fresh[api.Group](t, e.patch(t, "/v1/groups/hooked", mp, `{"subscriptions":[{"topic":"hook-c"}],"invisibleMs":null}`), http.StatusOK)
		require.Equal(t, []api.Subscription{{Topic: "hook-c"}}, g.Subscriptions, "an array in a merge patch replaces the whole list")
		require.Zero(t, g.InvisibleMs, "null resets invisibleMs to its default")
		require.NotNil(t, g.Push)
		g = fresh[api.Group](t, e.patch(t, "/v1/groups/hooked", mp, `{"push":{"disabled":true}}`), http.StatusOK)
		require.True(t, g.Push.Disabled)
		require.Equal(t, "disabled by an administrator", g.Push.DisabledReason)
		g = fresh[api.Group](t, e.patch(t, "/v1/groups/hooked", mp, `{"retryMaxTimes":3}`), http.StatusOK)
		require.True(t, g.Push.Disabled, "a patch that does not name push.disabled keeps the endpoint disabled")
		g = fresh[api.Group](t, e.patch(t, "/v1/groups/hooked", mp, `{"push":null}`), http.StatusOK)
		require.Nil(t, g.Push, "push: null removes the endpoint")
		require.Equal(t, 3, g.RetryMaxTimes)
		got := fresh[api.Group](t, e.Get(t, "/v1/groups/hooked"), http.StatusOK)
		require.Nil(t, got.Push)

		// A new endpoint by patch gets a generated secret, shown once.
		g = fresh[api.Group](t, e.patch(t, "/v1/groups/hooked", mp, `{"push":{"url":"`+wh.url+`/again"}}`), http.StatusOK)
		require.True(t, strings.HasPrefix(g.Push.Secret, "whsec_"))
		require.NotEqual(t, secret, g.Push.Secret)
		got = fresh[api.Group](t, e.Get(t, "/v1/groups/hooked"), http.StatusOK)
		require.Empty(t, got.Push.Secret)
	})

	t.Run("ValidatedLikeAPut", func(t *testing.T) {
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"consumeMode":"broadcasting"}`), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"retryMaxTimes":-1}`), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"push":{"url":"ftp://x"}}`), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"push":{"secret":"nope"}}`), http.StatusBadRequest, "invalid-argument")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"push":{"bogus":1}}`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"subscription":[]}`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"subscriptions":[{"topic":"%bad"}]}`), http.StatusBadRequest, "invalid-name")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"subscriptions":[{"topic":"t","sql":"a >"}]}`), http.StatusBadRequest, "invalid-sql")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", mp, `{"orderly":"yes"}`), http.StatusBadRequest, "malformed-request")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/hooked", "text/plain", `{}`), http.StatusUnsupportedMediaType, "unsupported-media-type")
		servertest.WantProblem(t, e.patch(t, "/v1/groups/nobody", mp, `{"orderly":true}`), http.StatusNotFound, "group-not-found")
		servertest.WantProblem(t, e.Get(t, "/v1/groups/nobody"), http.StatusNotFound, "group-not-found")
		got := fresh[api.Group](t, e.Get(t, "/v1/groups/hooked"), http.StatusOK)
		require.Equal(t, "clustering", got.ConsumeMode, "refused patches change nothing")
		require.Equal(t, 3, got.RetryMaxTimes)
		require.Equal(t, wh.url+"/again", got.Push.URL)
	})
}
