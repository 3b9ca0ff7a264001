package server_test

// End-to-end test of topic deletion over real HTTP: DELETE
// /v1/topics/{topic} removes the topic's messages for every purpose, so
// that a topic created again under the same name starts empty for every
// group — also after a restart, and after a start that had to rebuild the
// topic's queues from the CommitLog.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

func TestE2EDeleteTopicDropsItsMessages(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) {
		require.NoError(t, c.DelayLevels.UnmarshalText([]byte(slowLevel3)))
	})
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/doomed", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	var old []api.SendResult
	for i := 0; i < 10; i++ {
		old = append(old, e.Send(t, "doomed", api.SendMessage{Body: fmt.Sprint("old-", i), Keys: []string{fmt.Sprint("old-", i)}}))
	}

	// Group A consumes 3, fails one into the ladder (level 3, 1.5 s) and
	// one into its retry topic (level 1, delivered at once, not pulled).
	got := e.PullN(t, "ga", "doomed", 5, 30_000, 10*time.Second)
	require.Equal(t, []string{"ok", "ok", "ok"}, e.Ack(t, "ga", got[0].Receipt, got[1].Receipt, got[2].Receipt))
	e.Nack(t, "ga", got[3].Receipt, 0, "into the ladder")
	e.Nack(t, "ga", got[4].Receipt, 1, "into the retry topic")
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		lag, _ := queueLag(e.progress(t, "ga"), "doomed", -1)
		return lag == 1, fmt.Sprintf("retry view lag %d", lag)
	})
	// A delayed message and a timer of the topic.
	e.Send(t, "doomed", api.SendMessage{Body: "old-delayed", DelayLevel: 3})
	timer := e.Send(t, "doomed", api.SendMessage{Body: "old-timer", DelayMs: 60_000})
	p := e.progress(t, "ga")
	require.Equal(t, map[int]int64{3: 1}, levelCounts(p.Retry.ByLevel))
	require.EqualValues(t, 2, *p.Delayed.Total)

	r := e.Do(t, http.MethodDelete, "/v1/topics/doomed", "", nil, nil)
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r)
	servertest.WantProblem(t, e.Get(t, "/v1/topics/doomed"), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.Do(t, http.MethodDelete, "/v1/topics/doomed", "", nil, nil), http.StatusNotFound, "topic-not-found")
	servertest.WantProblem(t, e.Get(t, "/v1/timers/"+timer.MessageID), http.StatusNotFound, "message-not-found")
	p = e.progress(t, "ga")
	require.Empty(t, p.Retry.ByLevel, "the retry waiting for the deleted topic is not lag")
	require.Zero(t, *p.Delayed.Total)

	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/doomed", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	var fresh []api.SendResult
	for i := 0; i < 2; i++ {
		res := e.Send(t, "doomed", api.SendMessage{Body: fmt.Sprint("new-", i), Keys: []string{fmt.Sprint("new-", i)}})
		require.GreaterOrEqual(t, res.QueueOffset, int64(5), "queue offsets continue: never reused")
		fresh = append(fresh, res)
	}

	// Each group gets exactly the new messages.
	bodies := func(ms []api.PulledMessage) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Body)
		}
		sort.Strings(out)
		return out
	}
	for _, g := range []string{"ga", "gb"} {
		ms := e.PullN(t, g, "doomed", 2, 30_000, 10*time.Second)
		require.Equal(t, []string{"new-0", "new-1"}, bodies(ms), "group %s", g)
		require.Equal(t, []string{"ok", "ok"}, e.Ack(t, g, ms[0].Receipt, ms[1].Receipt))
	}

	gone := func(e *e2eServer) {
		t.Helper()
		// Let the ladder pass the old retry and the old delayed message.
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			st := fresh2[api.BrokerStatus](t, e.Get(t, "/v1/broker/status"))
			for _, l := range st.Levels {
				if l.Backlog > 0 {
					return false, fmt.Sprintf("level %d backlog %d", l.Level, l.Backlog)
				}
			}
			return st.TimersPending == 0, fmt.Sprintf("%d timers pending", st.TimersPending)
		})
		for _, g := range []string{"ga", "gb"} {
			require.Empty(t, e.Pull(t, g, "doomed", api.PullRequest{WaitMs: 300}), "group %s: nothing old, not even after the retry delay", g)
			p := e.progress(t, g)
			require.Zero(t, p.TotalLag, "group %s: %+v", g, p)
			require.Zero(t, *p.Retry.Total)
			require.Zero(t, *p.Delayed.Total)
			require.Zero(t, p.Delayed.Timers)
		}
		byKey := func(key string) []api.Message {
			return fresh2[api.MessageList](t, e.Get(t, "/v1/messages?topic=doomed&key="+key)).Messages
		}
		require.Empty(t, byKey("old-0"), "an old key finds nothing")
		require.Len(t, byKey("new-0"), 1)
		for _, m := range old {
			servertest.WantProblem(t, e.Get(t, "/v1/messages/"+m.MessageID), http.StatusNotFound, "message-not-found")
		}
		require.Equal(t, "new-1", e.Message(t, fresh[1].MessageID).Body)
		servertest.WantProblem(t, e.Get(t, "/v1/topics/doomed/queues/0/messages?offset=0"), http.StatusBadRequest, "offset-out-of-range")
	}
	gone(e)

	// After a restart.
	e.Close(t)
	e = openE2E(t, e.Cfg)
	gone(e)
	sent := e.Send(t, "doomed", api.SendMessage{Body: "after the restart"})
	for _, g := range []string{"ga", "gb"} {
		m := e.PullN(t, g, "doomed", 1, 30_000, 10*time.Second)[0]
		require.Equal(t, sent.MessageID, m.MessageID)
		require.Equal(t, []string{"ok"}, e.Ack(t, g, m.Receipt))
	}

	// After a start that rebuilds the topic's queues from the CommitLog
	// (queue files and checkpoint lost, unclean shutdown): the deletion is
	// applied again.
	e.Close(t)
	dir := e.Cfg.DataDir
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue", "doomed")))
	require.NoError(t, os.Remove(filepath.Join(dir, "checkpoint")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "abort"), nil, 0o644))
	e = openE2E(t, e.Cfg)
	gone(e)
	require.Equal(t, "after the restart", e.Message(t, sent.MessageID).Body)
}

// fresh2 decodes a 200 answer into a new value.
func fresh2[T any](t *testing.T, r servertest.Resp) T {
	t.Helper()
	return fresh[T](t, r, http.StatusOK)
}
