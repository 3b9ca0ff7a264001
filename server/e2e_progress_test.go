package server_test

// End-to-end test of consumer progress you can trust, over real HTTP: the
// lag counts the retries waiting in the delay ladder and the delayed
// messages of the group's topics, and a topic's retry view counts that
// topic's retries only.

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// slowLevel3 keeps the e2e levels but makes level 3 (the first retry of
// the default ladder) last long enough to look at the waiting retry.
const slowLevel3 = "20ms 40ms 1500ms 80ms 100ms 120ms 140ms 160ms 180ms 200ms 220ms 240ms 260ms 280ms 300ms 320ms 340ms 360ms"

// progress fetches a group's progress.
func (e *e2eServer) progress(t *testing.T, group string) api.Progress {
	t.Helper()
	return fresh[api.Progress](t, e.Get(t, "/v1/groups/"+group+"/progress"), http.StatusOK)
}

// levelCounts maps level to count (-1 for unknown).
func levelCounts(levels []api.LevelBacklog) map[int]int64 {
	out := map[int]int64{}
	for _, l := range levels {
		if l.Count == nil {
			out[l.Level] = -1
			continue
		}
		out[l.Level] = *l.Count
	}
	return out
}

func queueLag(p api.Progress, topic string, queue int32) (int64, bool) {
	for _, q := range p.Queues {
		if q.Topic == topic && q.QueueID == queue {
			return q.Lag, true
		}
	}
	return 0, false
}

func TestE2EProgressCountsTheLadder(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) {
		require.NoError(t, c.DelayLevels.UnmarshalText([]byte(slowLevel3)))
	})
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/lag", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/g", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "lag"}}}), http.StatusCreated, nil)

	p := e.progress(t, "g")
	require.Zero(t, p.TotalLag)
	require.NotNil(t, p.Retry.Total)
	require.Zero(t, *p.Retry.Total)
	require.Empty(t, p.Retry.ByLevel)
	require.NotNil(t, p.Delayed.Total)
	require.False(t, p.TotalLagIsLowerBound)

	e.Send(t, "lag", api.SendMessage{Body: "fails once"})
	require.EqualValues(t, 1, e.progress(t, "g").TotalLag)
	m := e.PullN(t, "g", "lag", 1, 30_000, 10*time.Second)[0]
	e.Nack(t, "g", m.Receipt, 0, "later") // the default ladder: level 3 + reconsumeTimes
	nackedAt := time.Now()

	p = e.progress(t, "g")
	require.Equal(t, map[int]int64{3: 1}, levelCounts(p.Retry.ByLevel), "the retry waits at level 3")
	require.EqualValues(t, 1500, p.Retry.ByLevel[0].DelayMs)
	require.EqualValues(t, 1, *p.Retry.Total)
	require.EqualValues(t, 1, p.TotalLag, "totalLag includes the waiting retry")
	lag, _ := queueLag(p, "lag", 0)
	require.Zero(t, lag, "the failed delivery is done in its queue")

	// The same after a restart: the ladder is counted again from the log.
	e.Close(t)
	e = openE2E(t, e.Cfg)
	p = e.progress(t, "g")
	if time.Since(nackedAt) < time.Second { // else the retry may have fallen due meanwhile
		require.Equal(t, map[int]int64{3: 1}, levelCounts(p.Retry.ByLevel), "counted again after a restart")
		require.EqualValues(t, 1, p.TotalLag)
	} else {
		t.Logf("the restart took %v: not checking the ladder after it", time.Since(nackedAt))
	}

	retry := e.PullN(t, "g", "lag", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, m.MessageID, retry.OriginMessageID)
	p = e.progress(t, "g")
	require.Empty(t, p.Retry.ByLevel, "delivered: no longer in the ladder")
	require.Zero(t, *p.Retry.Total)
	require.EqualValues(t, 1, p.TotalLag, "leased, not acked: still lag (in flight)")
	l, _ := queueLag(p, "lag", -1)
	require.EqualValues(t, 1, l, "the retry is in the retry view now")
	require.Equal(t, []string{"ok"}, e.Ack(t, "g", retry.Receipt))
	p = e.progress(t, "g")
	require.Zero(t, p.TotalLag)
	require.Zero(t, *p.Retry.Total)

	// Delayed messages of the group's topics: delay levels and timers.
	e.Send(t, "lag", api.SendMessage{Body: "later", DelayLevel: 3})
	e.Send(t, "lag", api.SendMessage{Body: "much later", DelayMs: 3_600_000})
	e.Send(t, "elsewhere", api.SendMessage{Body: "not g's", DelayLevel: 3})
	p = e.progress(t, "g")
	require.Equal(t, map[int]int64{3: 1}, levelCounts(p.Delayed.ByLevel))
	require.EqualValues(t, 1, p.Delayed.Timers)
	require.EqualValues(t, 2, *p.Delayed.Total)
	require.EqualValues(t, 2, p.TotalLag)
	require.Zero(t, *p.Retry.Total, "a delayed message is no retry")

	got := e.PullN(t, "g", "lag", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, "later", got.Body)
	require.Equal(t, []string{"ok"}, e.Ack(t, "g", got.Receipt))
	p = e.progress(t, "g")
	require.Empty(t, p.Delayed.ByLevel)
	require.EqualValues(t, 1, *p.Delayed.Total, "the timer still waits")
	require.EqualValues(t, 1, p.TotalLag)
}

// TestE2EProgressRetryViewPerTopic: the group's retry topic is shared by
// its topics; each topic's retry view counts its own retries only, so
// totalLag does not count one retry twice.
func TestE2EProgressRetryViewPerTopic(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/two", api.GroupRequest{
		Subscriptions: []api.Subscription{{Topic: "left"}, {Topic: "right"}},
	}), http.StatusCreated, nil)
	for _, topic := range []string{"left", "right"} {
		e.Send(t, topic, api.SendMessage{Body: topic})
		m := e.PullN(t, "two", topic, 1, 30_000, 10*time.Second)[0]
		e.Nack(t, "two", m.Receipt, 1, "retry now")
	}
	// Both retries land in %RETRY%two; only "left" pulls its own.
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		p := e.progress(t, "two")
		return *p.Retry.Total == 0, "retries still in the ladder"
	})
	p := e.progress(t, "two")
	l, ok := queueLag(p, "left", -1)
	require.True(t, ok)
	r, ok := queueLag(p, "right", -1)
	require.True(t, ok)
	require.Equal(t, [2]int64{1, 1}, [2]int64{l, r}, "%+v", p.Queues)
	require.EqualValues(t, 2, p.TotalLag)

	back := e.PullN(t, "two", "left", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, "left", back.Body)
	require.Equal(t, []string{"ok"}, e.Ack(t, "two", back.Receipt))
	p = e.progress(t, "two")
	l, _ = queueLag(p, "left", -1)
	r, _ = queueLag(p, "right", -1)
	require.Equal(t, [2]int64{0, 1}, [2]int64{l, r}, "%+v", p.Queues)
	require.EqualValues(t, 1, p.TotalLag)
}
