package server_test

// End-to-end test of the state a graceful restart keeps.

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

	// The leases outlive the restart: nothing is offered while they run
	// (60 s), and the receipts of before the restart settle them.
	require.Empty(t, e.Pull(t, "keeper", "durable", api.PullRequest{WaitMs: 300}), "leased messages are not offered before their lease ends")
	var leased []string
	for _, m := range got {
		if !acked[m.Body] {
			leased = append(leased, m.Receipt)
		}
	}
	for _, st := range e.Ack(t, "keeper", leased...) {
		require.Equal(t, "ok", st, "the receipt of a lease granted before the restart")
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
