package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// A group or topic deleted and created again under its name within one
// millisecond (here: a clock that does not move) is created after the
// deletion, so the deleted namesake's leases never pass for the new
// one's. The group's case end to end: its first messages are not found
// leased by the deleted group after a restart replays the lease records.
func TestRecreatedNamesAreYounger(t *testing.T) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	open := func() *broker.Broker {
		return brokertest.MustOpen(t, dir, func(o *broker.Options) {
			o.Clock = fc
			o.SnapshotInterval = time.Hour // a restart replays the lease records
		})
	}
	b := open()
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: "rt", Queues: 1})
	require.NoError(t, err)
	_, err = b.Send(ctx, "rt", []broker.SendMessage{{Body: []byte("a")}})
	require.NoError(t, err)
	group := broker.GroupConfig{Name: "rg", Subscriptions: []broker.Subscription{{Topic: "rt"}}}
	old, _, err := b.PutGroup(ctx, group)
	require.NoError(t, err)
	got, err := b.Pull(ctx, broker.PullRequest{Group: "rg", Topic: "rt", MaxMessages: 1, Invisible: time.Hour})
	require.NoError(t, err)
	require.Len(t, got, 1) // leased for an hour by the group about to go
	require.NoError(t, b.DeleteGroup(ctx, "rg"))
	now, _, err := b.PutGroup(ctx, group)
	require.NoError(t, err)
	require.True(t, now.CreatedAt.After(old.CreatedAt), "created %s, its namesake %s", now.CreatedAt, old.CreatedAt)

	require.NoError(t, b.Close(ctx))
	b = open()
	got, err = b.Pull(ctx, broker.PullRequest{Group: "rg", Topic: "rt", MaxMessages: 1, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1, "the new group's first message is not held by the deleted group's lease")

	before, err := b.GetTopic(ctx, "rt")
	require.NoError(t, err)
	require.NoError(t, b.DeleteTopic(ctx, "rt"))
	after, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: "rt", Queues: 1})
	require.NoError(t, err)
	require.True(t, after.CreatedAt.After(before.CreatedAt), "created %s, its namesake %s", after.CreatedAt, before.CreatedAt)
	require.NoError(t, b.Close(ctx))
}
