package server_test

// End-to-end test of GET /v1/stats, the compact stats the console polls:
// totals move with traffic, lag rises with sends and falls with acks, and
// the rows stay under the label limit.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

func (e *e2eServer) stats(t *testing.T) api.Stats {
	t.Helper()
	var s api.Stats
	servertest.Decode(t, e.Get(t, "/v1/stats"), http.StatusOK, &s)
	return s
}

func TestE2EStatsFollowTraffic(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	s := e.stats(t)
	require.Zero(t, s.SentTotal)
	require.NotNil(t, s.Topics)
	require.NotNil(t, s.Consumers)
	require.NotEmpty(t, s.DelayedBacklog, "every delay level is listed")
	require.Positive(t, s.DiskSendCeiling)

	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/st", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/sg", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "st"}}}), http.StatusCreated, nil)
	for i := range 6 {
		e.Send(t, "st", api.SendMessage{Body: fmt.Sprint(i)})
	}
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		s = e.stats(t)
		return s.TotalLag == 6, fmt.Sprintf("totalLag %d, want 6", s.TotalLag)
	})
	require.EqualValues(t, 6, s.SentTotal)
	require.Equal(t, []api.TopicStat{{Topic: "st", SentTotal: 6}}, s.Topics)
	require.Len(t, s.Consumers, 1)
	require.Equal(t, "sg", s.Consumers[0].Group)
	require.EqualValues(t, 6, s.Consumers[0].Lag)

	got := e.PullN(t, "sg", "st", 6, 30_000, 10*time.Second)
	s = e.stats(t)
	require.EqualValues(t, 6, s.DeliveredTotal)
	require.EqualValues(t, 6, s.InFlight)
	e.Ack(t, "sg", got[0].Receipt, got[1].Receipt, got[2].Receipt, got[3].Receipt)
	e.Nack(t, "sg", got[4].Receipt, 2, "later")
	e.Nack(t, "sg", got[5].Receipt, -1, "poison")
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		s = e.stats(t)
		return s.TotalLag == 0, fmt.Sprintf("totalLag %d after acks and nacks, want 0", s.TotalLag)
	})
	require.EqualValues(t, 4, s.AckedTotal)
	require.EqualValues(t, 1, s.RetriedTotal)
	require.EqualValues(t, 1, s.DeadLetteredTotal)
	require.Zero(t, s.InFlight)
	require.Zero(t, s.OldestUnackedMs)
}
