package server_test

// End-to-end tests of retries beyond the delay ladder over real HTTP: a
// nack's delayMs and a group's retryPolicy (exponential, fixed, jitter),
// their validation, the retry timers in the progress, the policy across
// a restart. Delays are checked strictly from below (never early) and
// generously from above.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// retrySlack is how late a retry may come on a loaded machine.
const retrySlack = 3 * time.Second

// nackItem nacks one item and requires ok.
func (e *e2eServer) nackItem(t *testing.T, group string, it api.NackItem) {
	t.Helper()
	res := e.Receipts(t, group, "nack", api.NackRequest{Items: []api.NackItem{it}})
	require.Len(t, res, 1)
	require.Equal(t, "ok", res[0].Status, "%+v", res[0])
}

// retried nacks m with it and returns the redelivery, checking that it
// came no sooner than want.
func (e *e2eServer) retried(t *testing.T, group, topic string, it api.NackItem, want time.Duration) api.PulledMessage {
	t.Helper()
	at := time.Now()
	e.nackItem(t, group, it)
	m := e.PullN(t, group, topic, 1, 60_000, want+retrySlack)[0]
	waited := time.Since(at)
	require.GreaterOrEqual(t, waited, want, "the retry came early")
	t.Logf("retry %d after %v (want >= %v)", m.ReconsumeTimes, waited.Round(time.Millisecond), want)
	return m
}

func TestE2ENackDelayMs(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/g", api.GroupRequest{RetryMaxTimes: 2}), http.StatusCreated, nil)
	sent := e.Send(t, "dms", api.SendMessage{Body: "payload"})
	m := e.PullN(t, "g", "dms", 1, 60_000, 10*time.Second)[0]

	// Invalid nacks change nothing.
	for _, c := range []struct{ body, field string }{
		{`{"items":[{"receipt":"` + m.Receipt + `","delayMs":500,"delayLevel":3}]}`, "items[0]"},
		{`{"items":[{"receipt":"` + m.Receipt + `","delayMs":500,"delayLevel":-1}]}`, "items[0]"},
		{`{"items":[{"receipt":"` + m.Receipt + `","delayMs":-1}]}`, "items[0].delayMs"},
		{`{"items":[{"receipt":"` + m.Receipt + `","delayMs":7200001}]}`, "items[0].delayMs"},
		{`{"items":[{"receipt":"` + m.Receipt + `","delayMs":9223372036854775807}]}`, "items[0].delayMs"},
	} {
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/g/nack", c.body), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, c.field, c.body)
	}

	m = e.retried(t, "g", "dms", api.NackItem{Receipt: m.Receipt, DelayMs: 400, Reason: "later"}, 400*time.Millisecond)
	require.EqualValues(t, 1, m.ReconsumeTimes)
	require.Equal(t, sent.MessageID, m.OriginMessageID)
	require.Equal(t, "dms", m.Topic)

	// While a retry waits on its timer, the progress counts it.
	e.nackItem(t, "g", api.NackItem{Receipt: m.Receipt, DelayMs: 1500})
	var progress api.Progress
	servertest.Decode(t, e.Get(t, "/v1/groups/g/progress"), http.StatusOK, &progress)
	require.EqualValues(t, 1, progress.Retry.Timers)
	require.NotNil(t, progress.Retry.Total)
	require.EqualValues(t, 1, *progress.Retry.Total)
	require.EqualValues(t, 1, progress.TotalLag)
	m = e.PullN(t, "g", "dms", 1, 60_000, 1500*time.Millisecond+retrySlack)[0]
	require.EqualValues(t, 2, m.ReconsumeTimes)

	// retryMaxTimes 2 used up: the next failure is a dead letter.
	e.nackItem(t, "g", api.NackItem{Receipt: m.Receipt, DelayMs: 100, Reason: "give up"})
	var dlq api.DeadLetterList
	servertest.Decode(t, e.Get(t, "/v1/groups/g/dlq"), http.StatusOK, &dlq)
	require.Len(t, dlq.Items, 1)
	d := dlq.Items[0]
	require.EqualValues(t, 3, d.ReconsumeTimes)
	require.Equal(t, "give up", d.Reason)
	require.Len(t, d.Attempts, 3)
	require.EqualValues(t, 400, d.Attempts[0].DelayMs)
	require.EqualValues(t, 1500, d.Attempts[1].DelayMs)
	require.Empty(t, e.Pull(t, "g", "dms", api.PullRequest{WaitMs: 300}))
}

func TestE2ERetryPolicy(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	req := api.GroupRequest{RetryMaxTimes: 10, RetryPolicy: &api.RetryPolicy{Backoff: "exponential", InitialMs: 200, MaxMs: 500}}
	policy := func(r servertest.Resp, status int) api.RetryPolicy {
		t.Helper()
		var g api.Group
		servertest.Decode(t, r, status, &g)
		return g.RetryPolicy
	}
	require.Equal(t, api.RetryPolicy{Backoff: "exponential", InitialMs: 200, MaxMs: 500}, policy(e.JSON(t, http.MethodPut, "/v1/groups/exp", req), http.StatusCreated))
	require.Equal(t, api.RetryPolicy{Backoff: "levels"}, policy(e.JSON(t, http.MethodPut, "/v1/groups/plain", api.GroupRequest{}), http.StatusCreated), "the default")

	e.Send(t, "rp", api.SendMessage{Body: "payload"})
	m := e.PullN(t, "exp", "rp", 1, 60_000, 10*time.Second)[0]
	for i, want := range []time.Duration{200, 400, 500} {
		m = e.retried(t, "exp", "rp", api.NackItem{Receipt: m.Receipt}, want*time.Millisecond)
		require.EqualValues(t, i+1, m.ReconsumeTimes)
	}
	// A nack's delayLevel overrides the policy (level 1: 20 ms here).
	m = e.retried(t, "exp", "rp", api.NackItem{Receipt: m.Receipt, DelayLevel: 1}, servertest.LevelDelay(t, e.Cfg, 1))
	require.EqualValues(t, 4, m.ReconsumeTimes)

	// The policy survives a restart; a pending retry timer too.
	e.nackItem(t, "exp", api.NackItem{Receipt: m.Receipt})
	at := time.Now()
	e = &e2eServer{e.Reopen(t)}
	require.Equal(t, api.RetryPolicy{Backoff: "exponential", InitialMs: 200, MaxMs: 500}, policy(e.Get(t, "/v1/groups/exp"), http.StatusOK))
	m = e.PullN(t, "exp", "rp", 1, 60_000, 10*time.Second)[0]
	require.GreaterOrEqual(t, time.Since(at), 400*time.Millisecond, "the retry across the restart came early")
	require.EqualValues(t, 5, m.ReconsumeTimes)

	// PATCH to fixed with jitter: 300 ms ± 20 %, so never before 240 ms;
	// the fields not named stay (maxMs 500).
	require.Equal(t, api.RetryPolicy{Backoff: "fixed", InitialMs: 300, MaxMs: 500, Jitter: 0.2}, policy(e.Do(t, http.MethodPatch, "/v1/groups/exp", "application/merge-patch+json",
		[]byte(`{"retryPolicy":{"backoff":"fixed","initialMs":300,"jitter":0.2}}`), nil), http.StatusOK))
	for range 2 {
		m = e.retried(t, "exp", "rp", api.NackItem{Receipt: m.Receipt}, 240*time.Millisecond)
	}
	require.EqualValues(t, 7, m.ReconsumeTimes)
	// An expired lease takes the policy too.
	e.Send(t, "lease", api.SendMessage{Body: "slow"})
	first := e.Pull(t, "exp", "lease", api.PullRequest{MaxMessages: 1, WaitMs: 5000, InvisibleMs: 100})
	require.Len(t, first, 1)
	at = time.Now()
	again := e.PullN(t, "exp", "lease", 1, 60_000, 10*time.Second)[0]
	require.GreaterOrEqual(t, time.Since(at), 100*time.Millisecond+240*time.Millisecond, "lease plus the fixed delay")
	require.EqualValues(t, 1, again.ReconsumeTimes)

	// null goes back to the ladder.
	require.Equal(t, api.RetryPolicy{Backoff: "levels"}, policy(e.Do(t, http.MethodPatch, "/v1/groups/exp", "application/merge-patch+json",
		[]byte(`{"retryPolicy":null}`), nil), http.StatusOK))
}

func TestE2ERetryPolicyInvalid(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	for _, c := range []struct{ body, field string }{
		{`{"retryPolicy":{"backoff":"linear","initialMs":100}}`, "retryPolicy.backoff"},
		{`{"retryPolicy":{"backoff":"exponential"}}`, "retryPolicy.initialMs"},
		{`{"retryPolicy":{"backoff":"fixed","initialMs":-5}}`, "retryPolicy.initialMs"},
		{`{"retryPolicy":{"backoff":"fixed","initialMs":7200001}}`, "retryPolicy.initialMs"},
		{`{"retryPolicy":{"backoff":"fixed","initialMs":9223372036854775807}}`, "retryPolicy.initialMs"},
		{`{"retryPolicy":{"backoff":"exponential","initialMs":1000,"maxMs":999}}`, "retryPolicy.maxMs"},
		{`{"retryPolicy":{"backoff":"exponential","initialMs":1000,"maxMs":7200001}}`, "retryPolicy.maxMs"},
		{`{"retryPolicy":{"backoff":"exponential","initialMs":1000,"jitter":1.01}}`, "retryPolicy.jitter"},
		{`{"retryPolicy":{"backoff":"fixed","initialMs":1000,"jitter":-0.5}}`, "retryPolicy.jitter"},
		{`{"retryPolicy":{"backoff":"levels","initialMs":1000}}`, "retryPolicy.initialMs"},
	} {
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/bad", c.body), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, c.field, c.body)
	}
	servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/bad", `{"retryPolicy":{"backoff":"fixed","initialMs":1,"color":"red"}}`),
		http.StatusBadRequest, "malformed-request")
	servertest.WantProblem(t, e.Get(t, "/v1/groups/bad"), http.StatusNotFound, "group-not-found")

	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/ok", `{"retryPolicy":{"backoff":"fixed","initialMs":1000}}`), http.StatusCreated, nil)
	p := servertest.WantProblem(t, e.Do(t, http.MethodPatch, "/v1/groups/ok", "application/merge-patch+json",
		[]byte(`{"retryPolicy":{"maxMs":10}}`), nil), http.StatusBadRequest, "invalid-argument")
	require.Contains(t, p.Detail, "retryPolicy.maxMs")
	var g api.Group
	servertest.Decode(t, e.Get(t, "/v1/groups/ok"), http.StatusOK, &g)
	require.Equal(t, api.RetryPolicy{Backoff: "fixed", InitialMs: 1000, MaxMs: 7200000}, g.RetryPolicy, "a refused patch changes nothing")
}
