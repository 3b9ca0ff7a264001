package server_test

// End-to-end tests of a group's consumeFrom over real HTTP: first (the
// default), last and an RFC 3339 time, shown by GET, kept by PATCH
// without moving offsets, refused when malformed.

import (
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// drain pulls and acks until a pull waiting wait comes back empty, and
// returns the bodies sorted.
func (e *e2eServer) drain(t *testing.T, group, topic string, wait time.Duration) []string {
	t.Helper()
	var out []string
	for {
		got := e.Pull(t, group, topic, api.PullRequest{MaxMessages: 32, WaitMs: wait.Milliseconds(), InvisibleMs: 60_000})
		if len(got) == 0 {
			sort.Strings(out)
			return out
		}
		receipts := make([]string, len(got))
		for i, m := range got {
			out = append(out, m.Body)
			receipts[i] = m.Receipt
		}
		for _, s := range e.Ack(t, group, receipts...) {
			require.Equal(t, "ok", s)
		}
	}
}

func (e *e2eServer) sendN(t *testing.T, topic, prefix string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
		e.Send(t, topic, api.SendMessage{Body: out[i]})
	}
	sort.Strings(out)
	return out
}

func sorted(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	sort.Strings(out)
	return out
}

func TestE2EConsumeFrom(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/cf", api.TopicRequest{Queues: 3}), http.StatusCreated, nil)
	old := e.sendN(t, "cf", "old", 5)
	var last api.Message
	for q := 0; q < 3; q++ { // the newest stored time of the backlog
		var page api.MessageList
		servertest.Decode(t, e.Get(t, fmt.Sprintf("/v1/topics/cf/queues/%d/messages?offset=0&max=32", q)), http.StatusOK, &page)
		for _, m := range page.Messages {
			if m.StoredAt > last.StoredAt {
				last = m
			}
		}
	}
	lastAt, err := time.Parse(time.RFC3339Nano, last.StoredAt)
	require.NoError(t, err)
	servertest.Eventually(t, time.Second, func() (bool, string) {
		return time.Now().UnixMilli() > lastAt.UnixMilli(), "the store's millisecond clock passes the backlog"
	})
	from := time.Now().UTC().Format(time.RFC3339Nano)
	between := e.sendN(t, "cf", "between", 2)

	put := func(group, consumeFrom string) api.Group {
		var g api.Group
		servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/"+group, api.GroupRequest{
			ConsumeFrom: consumeFrom, Subscriptions: []api.Subscription{{Topic: "cf"}}}), http.StatusCreated, &g)
		return g
	}
	require.Equal(t, "first", put("first", "").ConsumeFrom, "the default")
	require.Equal(t, "first", put("first-explicit", "first").ConsumeFrom)
	require.Equal(t, "last", put("last", "last").ConsumeFrom)
	require.Equal(t, from, put("since", from).ConsumeFrom)
	var got api.Group
	servertest.Decode(t, e.Get(t, "/v1/groups/since"), http.StatusOK, &got)
	require.Equal(t, from, got.ConsumeFrom, "GET shows it")

	fresh := e.sendN(t, "cf", "new", 4)
	require.Equal(t, sorted(old, between, fresh), e.drain(t, "first", "cf", 100*time.Millisecond))
	require.Equal(t, sorted(old, between, fresh), e.drain(t, "first-explicit", "cf", 100*time.Millisecond))
	require.Equal(t, fresh, e.drain(t, "last", "cf", 300*time.Millisecond), "last skips the backlog of the creation")
	require.Equal(t, sorted(between, fresh), e.drain(t, "since", "cf", 300*time.Millisecond), "a time skips what was stored before it")

	// Changing consumeFrom moves no offset: the group goes on where it is.
	var patched api.Group
	servertest.Decode(t, e.Do(t, http.MethodPatch, "/v1/groups/last", "application/merge-patch+json", []byte(`{"consumeFrom":"first"}`), nil), http.StatusOK, &patched)
	require.Equal(t, "first", patched.ConsumeFrom)
	require.Empty(t, e.drain(t, "last", "cf", 200*time.Millisecond), "the backlog stays skipped")
	// A PATCH of something else keeps consumeFrom.
	servertest.Decode(t, e.Do(t, http.MethodPatch, "/v1/groups/since", "application/merge-patch+json", []byte(`{"retryMaxTimes":3}`), nil), http.StatusOK, &patched)
	require.Equal(t, from, patched.ConsumeFrom)
	require.Equal(t, 3, patched.RetryMaxTimes)

	// And it survives a restart with the offsets.
	e = &e2eServer{e.Reopen(t)}
	servertest.Decode(t, e.Get(t, "/v1/groups/since"), http.StatusOK, &got)
	require.Equal(t, from, got.ConsumeFrom)
	after := e.sendN(t, "cf", "after", 2)
	require.Equal(t, after, e.drain(t, "since", "cf", 300*time.Millisecond))

	for _, bad := range []string{"LAST", "newest", "2026-02-30T00:00:00Z", "yesterday"} {
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPut, "/v1/groups/bad", api.GroupRequest{ConsumeFrom: bad}), http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "consumeFrom", bad)
	}
	p := servertest.WantProblem(t, e.Do(t, http.MethodPatch, "/v1/groups/since", "application/merge-patch+json", []byte(`{"consumeFrom":"soon"}`), nil), http.StatusBadRequest, "invalid-argument")
	require.Contains(t, p.Detail, "consumeFrom")
	servertest.WantProblem(t, e.Get(t, "/v1/groups/bad"), http.StatusNotFound, "group-not-found")
}
