package broker_test

// Searching a topic by store time and skipping a group's backlog
// (browse.go), on a virtual clock that stamps every send.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// sendMinutely sends n messages to topic, one a minute on fc, spread over
// the queues by sharding key, and returns the store time of each.
func sendMinutely(t *testing.T, b *broker.Broker, fc interface{ Advance(time.Duration) }, topic string, n int) []string {
	t.Helper()
	var bodies []string
	for i := range n {
		fc.Advance(time.Minute)
		body := fmt.Sprintf("m%02d", i)
		_, err := b.Send(context.Background(), topic, []broker.SendMessage{{Body: []byte(body), ShardingKey: fmt.Sprint(i)}})
		require.NoError(t, err)
		bodies = append(bodies, body)
	}
	return bodies
}

// searchAll pages through a search and returns the bodies and the pages.
func searchAll(t *testing.T, b *broker.Broker, s broker.TimeSearch) (bodies []string, pages int) {
	t.Helper()
	for {
		res, err := b.SearchByTime(context.Background(), s)
		require.NoError(t, err)
		require.LessOrEqual(t, len(res.Messages), s.Limit)
		for _, m := range res.Messages {
			require.False(t, m.StoredAt.Before(s.From) || !m.StoredAt.Before(s.To), "stored %v outside [%v, %v)", m.StoredAt, s.From, s.To)
			bodies = append(bodies, string(m.Body))
		}
		pages++
		require.Less(t, pages, 100)
		if res.Next == nil {
			return bodies, pages
		}
		s.After = res.Next
	}
}

func TestSearchByTime(t *testing.T) {
	b, fc := virtualBroker(t)
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: "browse", Queues: 3})
	require.NoError(t, err)
	start := fc.Now()
	all := sendMinutely(t, b, fc, "browse", 30) // stored at start+1m … start+30m

	// The whole range, in pages of 4: every message once.
	got, pages := searchAll(t, b, broker.TimeSearch{Topic: "browse", From: start, To: fc.Now().Add(time.Second), QueueID: -1, Limit: 4})
	require.ElementsMatch(t, all, got)
	require.GreaterOrEqual(t, pages, 8)

	// Minutes 10 to 19 (half-open): ten messages, m09 … m18.
	got, _ = searchAll(t, b, broker.TimeSearch{Topic: "browse", From: start.Add(10 * time.Minute), To: start.Add(20 * time.Minute), QueueID: -1, Limit: 100})
	require.ElementsMatch(t, all[9:19], got)

	// One queue only: its messages in offset order.
	res, err := b.SearchByTime(ctx, broker.TimeSearch{Topic: "browse", From: start, To: fc.Now().Add(time.Second), QueueID: 1, Limit: 100})
	require.NoError(t, err)
	require.Nil(t, res.Next)
	require.NotEmpty(t, res.Messages)
	for i, m := range res.Messages {
		require.Equal(t, int32(1), m.QueueID)
		require.Equal(t, int64(i), m.QueueOffset)
	}

	// A range before and after everything: nothing, in one page.
	res, err = b.SearchByTime(ctx, broker.TimeSearch{Topic: "browse", From: start.Add(-time.Hour), To: start, QueueID: -1, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, res.Messages)
	require.Nil(t, res.Next)
	res, err = b.SearchByTime(ctx, broker.TimeSearch{Topic: "browse", From: fc.Now().Add(time.Second), To: fc.Now().Add(time.Hour), QueueID: -1, Limit: 10})
	require.NoError(t, err)
	require.Empty(t, res.Messages)
	require.LessOrEqual(t, res.Scanned, 3)

	// Bad input.
	for _, bad := range []broker.TimeSearch{
		{Topic: "browse", From: start, To: start, QueueID: -1, Limit: 10},
		{Topic: "browse", From: start, To: start.Add(time.Hour), QueueID: 3, Limit: 10},
		{Topic: "browse", From: start, To: start.Add(time.Hour), QueueID: -1, Limit: 0},
		{Topic: "browse", From: start, To: start.Add(time.Hour), QueueID: -1, Limit: broker.SearchMaxLimit + 1},
		{Topic: "browse", From: start, To: start.Add(time.Hour), QueueID: 1, Limit: 10, After: &broker.SearchPosition{QueueID: 0, Offset: 0}},
		{Topic: "browse", From: start, To: start.Add(time.Hour), QueueID: -1, Limit: 10, After: &broker.SearchPosition{QueueID: 1, Offset: -2}},
	} {
		_, err := b.SearchByTime(ctx, bad)
		require.ErrorIs(t, err, broker.ErrInvalidArgument, "%+v", bad)
	}
	_, err = b.SearchByTime(ctx, broker.TimeSearch{Topic: "nope", From: start, To: start.Add(time.Hour), QueueID: -1, Limit: 10})
	require.ErrorIs(t, err, broker.ErrTopicNotFound)
}

// TestSearchByTimeBoundedWork: a topic of more queues than one call may
// start answers over several calls, none starting more than
// SearchMaxQueues queues or reading more than SearchMaxScan entries.
func TestSearchByTimeBoundedWork(t *testing.T) {
	b, fc := virtualBroker(t)
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: "wide", Queues: 2*broker.SearchMaxQueues + 5})
	require.NoError(t, err)
	start := fc.Now()
	fc.Advance(time.Minute)
	_, err = b.Send(ctx, "wide", []broker.SendMessage{{Body: []byte("only"), ShardingKey: "k"}})
	require.NoError(t, err)
	got, pages := searchAll(t, b, broker.TimeSearch{Topic: "wide", From: start, To: fc.Now().Add(time.Second), QueueID: -1, Limit: 10})
	require.Equal(t, []string{"only"}, got)
	require.Equal(t, 3, pages, "64 + 64 + 5 queues started")
}

func TestSkipBacklog(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "skip", Queues: 2})
	require.NoError(t, err)
	_, _, err = bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "keep", Queues: 1})
	require.NoError(t, err)
	_, _, err = bd.b.PutGroup(bd.ctx, subscribed("skipper", "", "skip", "keep"))
	require.NoError(t, err)
	bd.sendN(t, "skip", "old", 6)
	bd.sendN(t, "keep", "kept", 2)

	p, err := bd.b.SkipBacklog(bd.ctx, "skipper", "skip")
	require.NoError(t, err)
	require.NotEmpty(t, p)
	for _, q := range p {
		require.Equal(t, "skip", q.Topic)
		require.Zero(t, q.Lag, "%+v", q)
	}
	bd.sendN(t, "skip", "new", 3)
	require.Equal(t, append(names("kept", 2), names("new", 3)...), func() []string {
		got := bd.drainBodies(t, "skipper", "skip", 0)
		return append(bd.drainBodies(t, "skipper", "keep", 0), got...)
	}())

	// Every topic of the group at once.
	bd.sendN(t, "skip", "x", 2)
	bd.sendN(t, "keep", "y", 2)
	p, err = bd.b.SkipBacklog(bd.ctx, "skipper", "")
	require.NoError(t, err)
	for _, q := range p {
		require.Zero(t, q.Lag, "%+v", q)
	}
	_, err = bd.b.SkipBacklog(bd.ctx, "nobody", "")
	require.ErrorIs(t, err, broker.ErrGroupNotFound)
	_, err = bd.b.SkipBacklog(bd.ctx, "skipper", "gone")
	require.ErrorIs(t, err, broker.ErrTopicNotFound)
}

// BenchmarkSearchByTime: one page of 32 from the middle of 40 000
// messages over 4 queues, stored one batch of 100 a second: the cost is
// the binary searches and the page, not the topic's size.
func BenchmarkSearchByTime(b *testing.B) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	br := brokertest.MustOpen(b, "", func(o *broker.Options) { o.Clock = fc })
	ctx := context.Background()
	_, _, err := br.PutTopic(ctx, broker.TopicConfig{Name: "bench", Queues: 4})
	require.NoError(b, err)
	start := fc.Now()
	batch := make([]broker.SendMessage, 100)
	for i := range 400 {
		fc.Advance(time.Second)
		for j := range batch {
			batch[j] = broker.SendMessage{Body: []byte("payload"), ShardingKey: fmt.Sprint(i*100 + j)}
		}
		_, err := br.Send(ctx, "bench", batch)
		require.NoError(b, err)
	}
	s := broker.TimeSearch{Topic: "bench", From: start.Add(200 * time.Second), To: start.Add(260 * time.Second), QueueID: -1, Limit: 32}
	b.ResetTimer()
	scanned := 0
	for range b.N {
		res, err := br.SearchByTime(ctx, s)
		if err != nil || len(res.Messages) != 32 {
			b.Fatalf("%v, %d messages", err, len(res.Messages))
		}
		scanned += res.Scanned
	}
	b.ReportMetric(float64(scanned)/float64(b.N), "entries/op")
}
