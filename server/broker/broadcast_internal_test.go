package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/retention"
	"github.com/mqgate/mqgate/storage"
)

// Retention sees each consumer instance of a broadcasting group as a
// position of its own, and the group's own position only when it has
// offsets of its own: the slowest instance holds the unconsumed floor.
func TestRetentionPositionsOfInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, Options{
		DataDir: t.TempDir(), AutoCreate: true, DelayLevels: []time.Duration{time.Hour}, SnapshotInterval: time.Hour, MaxMessageSize: 64 << 10,
		Storage: storage.Options{SegmentSize: 1 << 20, RetentionInterval: time.Hour},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(ctx) })
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "t", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "fan", ConsumeMode: ConsumeBroadcasting, Subscriptions: []Subscription{{Topic: "t"}}})
	require.NoError(t, err)
	msgs := make([]SendMessage, 5)
	for i := range msgs {
		msgs[i] = SendMessage{Body: []byte("m")}
	}
	_, err = b.Send(ctx, "t", msgs)
	require.NoError(t, err)
	for _, c := range []string{"fast", "slow"} {
		got, err := b.Pull(WithClient(ctx, c), PullRequest{Group: "fan", Topic: "t", MaxMessages: 5, Invisible: time.Minute})
		require.NoError(t, err)
		require.Len(t, got, 5)
		n := 5
		if c == "slow" {
			n = 2
		}
		rs := make([]string, n)
		for i := range rs {
			rs[i] = got[i].Receipt
		}
		_, err = b.Ack(ctx, "fan", rs)
		require.NoError(t, err)
	}
	positions := b.retention.Positions()[retention.Queue{Topic: "t", Queue: 0}]
	var keys []string
	for _, p := range positions {
		keys = append(keys, p.View.Key.Group)
	}
	require.Equal(t, []string{"fan@slow", "fan@fast"}, keys, "each instance, lowest first; not the group, which has no offsets of its own")
	require.Equal(t, int64(2), positions[0].Committed)
	require.Equal(t, int64(5), positions[1].Committed)

	require.NoError(t, b.CommitOffsets(ctx, "fan", []OffsetCommit{{Topic: "t", QueueID: 0, Offset: 1}}))
	positions = b.retention.Positions()[retention.Queue{Topic: "t", Queue: 0}]
	require.Len(t, positions, 3, "with offsets of its own the group counts too")
	require.Equal(t, "fan", positions[0].View.Key.Group)
}
