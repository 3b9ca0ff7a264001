package server_test

// End-to-end test of GET /v1/stats, the compact stats the console polls:
// totals move with traffic, lag rises with sends and falls with acks, and
// the rows stay under the label limit.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
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
	require.Equal(t, api.MirrorStat{}, s.Mirror, "embedded mode: no mirror")

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

// sseEvent is one server-sent event.
type sseEvent struct {
	name, id, retry, data string
}

// readEvent reads the next event of a text/event-stream.
func readEvent(r *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return ev, nil
		}
		field, value, _ := strings.Cut(line, ": ")
		switch field {
		case "event":
			ev.name = value
		case "id":
			ev.id = value
		case "retry":
			ev.retry = value
		case "data":
			ev.data += value
		}
	}
}

// TestE2EStatsStream: GET /v1/stats/stream answers text/event-stream
// with a stats event at once and one every intervalMs, numbers that move
// with traffic, past the server's WriteTimeout; a bad interval is a 400
// problem; shutting the server down ends the stream.
func TestE2EStatsStream(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) { c.WriteTimeout = time.Second })
	servertest.WantProblem(t, e.Get(t, "/v1/stats/stream?intervalMs=10"), http.StatusBadRequest, "invalid-argument")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Base+"/v1/stats/stream?intervalMs=500", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req) // not the spec-checking client: it reads whole bodies
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	events := bufio.NewReader(resp.Body)
	next := func() (sseEvent, api.Stats) {
		t.Helper()
		ev, err := readEvent(events)
		require.NoError(t, err)
		require.Equal(t, "stats", ev.name, "%+v", ev)
		var s api.Stats
		require.NoError(t, json.Unmarshal([]byte(ev.data), &s), ev.data)
		return ev, s
	}
	start := time.Now()
	first, s := next()
	require.Equal(t, "1", first.id)
	require.Equal(t, "500", first.retry)
	require.Zero(t, s.SentTotal)

	e.Send(t, "sse", api.SendMessage{Body: "one"})
	e.Send(t, "sse", api.SendMessage{Body: "two"})
	for s.SentTotal < 2 {
		_, s = next()
		require.Less(t, time.Since(start), 10*time.Second, "the sends never showed")
	}
	// Past the 1 s WriteTimeout: the stream goes on.
	var last sseEvent
	for time.Since(start) < 2500*time.Millisecond {
		last, _ = next()
	}
	require.GreaterOrEqual(t, len(last.id), 1)
	require.NotEqual(t, "1", last.id)

	// Shutdown ends the stream (the long polls' signal).
	closed := make(chan error, 1)
	go func() { closed <- e.Srv.Close(context.Background()) }()
	for {
		if _, err := readEvent(events); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	require.NoError(t, <-closed)
}
