package pgmirror

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
)

// consumeAs pulls and acks n messages of topic as client's instance of a
// broadcasting group.
func consumeAs(t testing.TB, b *broker.Broker, group, client, topic string, n int) {
	t.Helper()
	ctx := broker.WithClient(context.Background(), client)
	for n > 0 {
		msgs, err := b.Pull(ctx, broker.PullRequest{Group: group, Topic: topic, MaxMessages: min(n, 32), Invisible: time.Minute})
		require.NoError(t, err)
		require.NotEmpty(t, msgs)
		res, err := b.Ack(ctx, group, receiptsOf(msgs))
		require.NoError(t, err)
		for _, r := range res {
			require.Equal(t, broker.ReceiptOK, r.Status)
		}
		n -= len(msgs)
	}
}

func receiptsOf(msgs []broker.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Receipt
	}
	return out
}

// The consumer instances of a broadcasting group are mirrored row by row
// (client_id), follow a restarted mirror, go when the instance is
// forgotten or the group deleted, and come back into a restored data dir
// with SeedOffsets.
func TestInstanceOffsetsMirrored(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	group := broker.GroupConfig{Name: "fan", ConsumeMode: broker.ConsumeBroadcasting, InstanceIdle: time.Second,
		Subscriptions: []broker.Subscription{{Topic: "news"}}}
	b1, err := broker.Open(ctx, brokerOptions(dir, "sync"))
	require.NoError(t, err)
	_, _, err = b1.PutTopic(ctx, broker.TopicConfig{Name: "news", Queues: 2})
	require.NoError(t, err)
	_, _, err = b1.PutGroup(ctx, group)
	require.NoError(t, err)
	send(t, b1, "news", 30)
	require.NoError(t, b1.Close(ctx))
	backup := filepath.Join(t.TempDir(), "backup")
	copyDir(t, dir, backup)

	b := mustOpenBroker(t, dir, "sync")
	m := mustOpenMirror(t, url, b)
	consumeAs(t, b, "fan", "a", "news", 30)
	consumeAs(t, b, "fan", "b", "news", 12)
	drain(t, m)
	for _, c := range []string{"a", "b"} {
		want := liveInstance(t, b, "fan", c)
		require.Len(t, want, 2)
		require.Empty(t, diff(mirroredInstance(t, url, "fan", c), want), "instance %s", c)
	}
	require.Empty(t, mirrored(t, url, "fan"), "the group has no offsets of its own")
	got, err := m.InstancesOffsets(ctx, "fan")
	require.NoError(t, err)
	require.Len(t, got["a"], 3, "two queues and the topic's retry view")
	require.Len(t, got["b"], 3)
	own, err := m.Offsets(ctx, "fan")
	require.NoError(t, err)
	require.Empty(t, own)

	m2 := mustOpenMirror(t, url, b) // restarted: state from PostgreSQL, instance rows included
	consumeAs(t, b, "fan", "b", "news", 10)
	res := drain(t, m2)
	require.Positive(t, res.Records)
	require.Empty(t, diff(mirroredInstance(t, url, "fan", "b"), liveInstance(t, b, "fan", "b")))
	before := mirroredInstance(t, url, "fan", "b")

	// b stays active, a is forgotten after its second of idleness: its rows go.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		bctx := broker.WithClient(ctx, "b")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := b.Pull(bctx, broker.PullRequest{Group: "fan", Topic: "news", MaxMessages: 1, Wait: 50 * time.Millisecond, Invisible: time.Minute}); err != nil {
				return
			}
		}
	}()
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		drain(t, m2)
		n := count(t, url, `SELECT count(*) FROM consumer_offsets WHERE group_name = 'fan' AND client_id = 'a'`)
		return n == 0, "rows of the forgotten instance a left"
	})
	close(stop)
	<-done
	require.Equal(t, 3, count(t, url, `SELECT count(*) FROM consumer_offsets WHERE group_name = 'fan' AND client_id = 'b'`))
	require.NoError(t, m2.Close())
	require.NoError(t, b.Close(ctx))

	// The backup (taken before anyone consumed) gets b's offsets back.
	b2 := mustOpenBroker(t, backup, "sync")
	m3 := mustOpenMirror(t, url, b2)
	_, err = m3.runOnce(ctx)
	require.ErrorIs(t, err, ErrLogBehind)
	seeded, err := m3.SeedOffsets(ctx, b2)
	require.NoError(t, err)
	require.Positive(t, seeded.Committed)
	require.Zero(t, seeded.Skipped)
	require.Empty(t, diff(before, liveInstance(t, b2, "fan", "b")), "b resumes where PostgreSQL saw it")
	drain(t, m3)
	require.Empty(t, diff(mirroredInstance(t, url, "fan", "b"), liveInstance(t, b2, "fan", "b")))

	require.NoError(t, b2.DeleteGroup(ctx, "fan"))
	drain(t, m3)
	require.Zero(t, count(t, url, `SELECT count(*) FROM consumer_offsets WHERE group_name = 'fan'`), "a deleted group's rows go, its instances' too")
}
