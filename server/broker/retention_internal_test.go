package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// TestRetentionFloors drives the broker's retention policy with a clock
// moved ahead: a topic's shorter retentionHours expires its messages
// logically (counted for the group that had not consumed them), a longer
// one holds age-based deletion (Retained), topics nobody consumes count as
// unconsumed, an undelivered delay-level entry is kept (Keep), and a
// deletion counts what it takes from each group.
func TestRetentionFloors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := Open(ctx, Options{
		DataDir: t.TempDir(), AutoCreate: true, DelayLevels: []time.Duration{time.Hour}, SnapshotInterval: time.Hour, MaxMessageSize: 64 << 10,
		Storage: storage.Options{SegmentSize: 1 << 20, RetentionInterval: time.Hour},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(ctx) })
	for _, tc := range []TopicConfig{{Name: "short", Queues: 1, RetentionHours: 1}, {Name: "long", Queues: 1, RetentionHours: 100}, {Name: "plain", Queues: 1}} {
		_, _, err := b.PutTopic(ctx, tc)
		require.NoError(t, err)
	}
	for _, g := range []GroupConfig{{Name: "g", Subscriptions: []Subscription{{Topic: "short"}}}, {Name: "h", Subscriptions: []Subscription{{Topic: "plain"}}}} {
		_, _, err := b.PutGroup(ctx, g)
		require.NoError(t, err)
	}
	send := func(topic string, n int, delay int) []int64 {
		msgs := make([]SendMessage, n)
		for i := range msgs {
			msgs[i] = SendMessage{Body: []byte(topic), DelayLevel: delay}
		}
		res, err := b.Send(ctx, topic, msgs)
		require.NoError(t, err)
		phys := make([]int64, n)
		for i, r := range res {
			id, err := message.ParseID(r.MessageID)
			require.NoError(t, err)
			phys[i] = id.Offset()
		}
		return phys
	}
	short, long, plain, delayed := send("short", 10, 0), send("long", 5, 0), send("plain", 3, 0), send("plain", 1, 1)
	require.NoError(t, b.awaitDispatch(ctx))
	p := retentionPolicy{b: b}

	f, err := p.Floors(time.Now())
	require.NoError(t, err)
	require.Equal(t, storage.RetentionFloors{Keep: delayed[0], Unconsumed: short[0], Retained: long[0]}, f)

	// Two hours on: the short topic's messages are gone for its group.
	f, err = p.Floors(time.Now().Add(2 * time.Hour))
	require.NoError(t, err)
	require.Equal(t, int64(10), b.store.MinOffset("short", 0))
	require.Equal(t, int64(10), b.retention.Dropped(offset.Key{Group: "g", Topic: "short", QueueID: 0}))
	require.Equal(t, uint64(10), b.Stats().RetentionDropped["g"])
	require.Equal(t, storage.RetentionFloors{Keep: delayed[0], Unconsumed: long[0], Retained: long[0]}, f,
		"the long topic nobody consumes is unconsumed; the plain topic comes after it")
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "short", MaxMessages: 10})
	require.NoError(t, err)
	require.Empty(t, got)
	prog, err := b.Progress(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, int64(10), prog[0].DroppedUnconsumed)

	// Past the long topic's retention it no longer holds anything back.
	f, err = p.Floors(time.Now().Add(101 * time.Hour))
	require.NoError(t, err)
	require.Equal(t, storage.NoFloor, f.Retained)

	// A deletion below the third plain message takes two from group h.
	require.NoError(t, p.BeforeDelete(plain[2], storage.DeleteExpired))
	require.Equal(t, int64(2), b.retention.Dropped(offset.Key{Group: "h", Topic: "plain", QueueID: 0}))
	require.Equal(t, uint64(2), b.Stats().RetentionDropped["h"])
}
