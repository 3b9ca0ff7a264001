package server_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
)

// leaseUntilFormat is RFC 3339 with milliseconds, in UTC.
var leaseUntilFormat = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// requireLeaseUntil parses a leaseUntil and requires it within
// [before+lease, after+lease], before and after bracketing the request
// (the wire form is cut to milliseconds).
func requireLeaseUntil(t *testing.T, s string, before, after time.Time, lease time.Duration) time.Time {
	t.Helper()
	require.Regexp(t, leaseUntilFormat, s)
	until, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	lo, hi := before.Add(lease).Truncate(time.Millisecond), after.Add(lease)
	require.False(t, until.Before(lo) || until.After(hi), "leaseUntil %s, want between %s and %s", s, lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano))
	return until
}

// TestE2ELeaseUntil: every pulled message says when its lease runs out —
// the pull's invisibleMs from the moment of the pull, else the group's
// invisibleMs, else the default lease of 30 s — in the JSON and the
// binary renderings; an ok lease change answers the changed lease's end,
// and an ack or an expired receipt answers none.
func TestE2ELeaseUntil(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	require.Equal(t, http.StatusCreated, e.JSON(t, http.MethodPut, "/v1/topics/lu", api.TopicRequest{Queues: 1}).Status)
	require.Equal(t, http.StatusCreated, e.JSON(t, http.MethodPut, "/v1/groups/configured", api.GroupRequest{InvisibleMs: 50_000}).Status)
	for _, b := range []string{"a", "b"} {
		e.Send(t, "lu", api.SendMessage{Body: b})
	}
	pullOne := func(group string, invisibleMs int64) (api.PulledMessage, time.Time, time.Time) {
		t.Helper()
		before := time.Now()
		msgs := e.Pull(t, group, "lu", api.PullRequest{MaxMessages: 1, WaitMs: 5000, InvisibleMs: invisibleMs})
		after := time.Now()
		require.Len(t, msgs, 1)
		return msgs[0], before, after
	}

	m, before, after := pullOne("explicit", 45_000)
	first := requireLeaseUntil(t, m.LeaseUntil, before, after, 45*time.Second)

	d, before, after := pullOne("default", 0)
	requireLeaseUntil(t, d.LeaseUntil, before, after, 30*time.Second) // the default lease

	g, before, after := pullOne("configured", 0)
	requireLeaseUntil(t, g.LeaseUntil, before, after, 50*time.Second) // the group's invisibleMs

	// The binary rendering carries it in each message's metadata.
	before = time.Now()
	r := e.Do(t, http.MethodPost, "/v1/groups/binary/topics/lu/pull", "application/json",
		[]byte(`{"maxMessages":1,"invisibleMs":20000}`), http.Header{"Accept": {api.ContentTypeBatch}})
	after = time.Now()
	require.Equal(t, http.StatusOK, r.Status, r.String())
	batch, err := api.DecodePullBatch(r.Body)
	require.NoError(t, err)
	require.Len(t, batch, 1)
	requireLeaseUntil(t, batch[0].Message.LeaseUntil, before, after, 20*time.Second)

	// A lease change moves it: its result says where to.
	before = time.Now()
	res := e.Receipts(t, "explicit", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: m.Receipt, InvisibleMs: 120_000}}})
	after = time.Now()
	require.Len(t, res, 1)
	require.Equal(t, "ok", res[0].Status)
	moved := requireLeaseUntil(t, res[0].LeaseUntil, before, after, 2*time.Minute)
	require.True(t, moved.After(first), "the extended lease ends later: %s, was %s", res[0].LeaseUntil, m.LeaseUntil)
	// Shortened, then given back at once (invisibleMs 0: visible again now).
	before = time.Now()
	res = e.Receipts(t, "explicit", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: m.Receipt, InvisibleMs: 1000}}})
	after = time.Now()
	requireLeaseUntil(t, res[0].LeaseUntil, before, after, time.Second)
	before = time.Now()
	res = e.Receipts(t, "explicit", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: m.Receipt, InvisibleMs: 0}}})
	after = time.Now()
	requireLeaseUntil(t, res[0].LeaseUntil, before, after, 0)

	// The message is offered again under a new receipt: the old one is
	// expired, and its result has no leaseUntil; acks have none either.
	again, _, _ := pullOne("explicit", 10_000)
	require.Equal(t, m.MessageID, again.MessageID)
	res = e.Receipts(t, "explicit", "leases", api.LeaseRequest{Items: []api.LeaseItem{{Receipt: m.Receipt, InvisibleMs: 5000}}})
	require.Equal(t, "expired", res[0].Status)
	require.Empty(t, res[0].LeaseUntil)
	raw := e.JSON(t, http.MethodPost, "/v1/groups/explicit/ack", api.AckRequest{Receipts: []string{again.Receipt}})
	require.Equal(t, http.StatusOK, raw.Status)
	var ack map[string][]map[string]any
	require.NoError(t, json.Unmarshal(raw.Body, &ack))
	require.Equal(t, "ok", ack["results"][0]["status"])
	require.NotContains(t, ack["results"][0], "leaseUntil")
}
