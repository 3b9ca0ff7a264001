package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

// The broadcasting consumer-instance family's requests, pinned with the
// code from before they moved to server/broker/instance: the
// rmq_sys_OFFSET records an instance's registration writes (its start
// offsets by each ConsumeFrom, the retry view's at the end of the group's
// retry topic, the generation taken from the clock), a known instance
// meeting a topic, a reset of a broadcasting group with and without a
// client id, a sweep's forget record and a returning client id's new
// generation; the rows Instances reports, and the offsets of an instance
// the group does not know (nothing written).

// instanceLines is what Instances reports of group, one line per
// instance and one per queue (times in ms since goldenInstAt).
func instanceLines(t *testing.T, b *Broker, group string) []string {
	t.Helper()
	all, err := b.Instances(context.Background(), group)
	require.NoError(t, err)
	var out []string
	for _, ip := range all {
		forget := "-"
		if !ip.ForgetAt.IsZero() {
			forget = fmt.Sprint(ip.ForgetAt.Sub(goldenInstAt).Milliseconds())
		}
		out = append(out, fmt.Sprintf("%s seen=%d forget=%s active=%d", ip.ClientID, ip.LastSeen.Sub(goldenInstAt).Milliseconds(), forget, ip.Active))
		for _, l := range progressLines(ip.Queues) {
			out = append(out, "  "+l)
		}
	}
	return out
}

func TestGoldenInstanceRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fc := clockwork.NewFakeClockAt(goldenInstAt)
	b := openReplica(t, replicaOptions(fc, false))
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "news", Queues: 2})
	require.NoError(t, err)
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "other", Queues: 1})
	require.NoError(t, err)
	send := func(topic string, n int) {
		t.Helper()
		msgs := make([]SendMessage, n)
		for i := range msgs {
			msgs[i] = SendMessage{Body: []byte(fmt.Sprintf("m%d", i)), ShardingKey: "k"}
		}
		_, err := b.Send(ctx, topic, msgs)
		require.NoError(t, err)
	}
	send("news", 3)
	fc.Advance(time.Second)
	send("news", 2)
	send("other", 2)
	require.NoError(t, b.store.AwaitDispatch(ctx))
	q := int32(-1) // the queue the sharding key chose
	for id := int32(0); id < 2; id++ {
		if b.store.MaxOffset("news", id) == 5 {
			q = id
		}
	}
	require.GreaterOrEqual(t, q, int32(0))
	for _, g := range []GroupConfig{
		{Name: "first", ConsumeMode: ConsumeBroadcasting, Subscriptions: []Subscription{{Topic: "news"}}},
		{Name: "last", ConsumeMode: ConsumeBroadcasting, ConsumeFrom: "last", Subscriptions: []Subscription{{Topic: "news"}}},
		{Name: "time", ConsumeMode: ConsumeBroadcasting, ConsumeFrom: goldenInstAt.Add(time.Second).UTC().Format(time.RFC3339Nano),
			InstanceIdle: time.Hour, Subscriptions: []Subscription{{Topic: "news"}}},
	} {
		_, _, err = b.PutGroup(ctx, g)
		require.NoError(t, err)
	}
	mark := len(offsetRecords(t, b, 0))
	since := func() []string {
		t.Helper()
		all := offsetRecords(t, b, 0)
		out := all[mark:]
		mark = len(all)
		return out
	}
	require.Empty(t, offsetRecords(t, b, 0), "a broadcasting group has no offsets of its own: each instance starts by its ConsumeFrom")
	require.Equal(t, int32(0), q, "the sharding key's queue")

	// Registration by a queue read: each ConsumeFrom's starts, the retry
	// view's at the end of the group's retry topic.
	fc.Advance(time.Second)
	c := WithClient(ctx, "c")
	read := func(group string) string {
		t.Helper()
		msgs, next, err := b.ReadQueueFor(c, group, "news", q, -1, 10)
		require.NoError(t, err)
		return fmt.Sprintf("%d messages, next %d", len(msgs), next)
	}
	require.Equal(t, "5 messages, next 5", read("first"))
	require.Equal(t, "0 messages, next 5", read("last"))
	require.Equal(t, "2 messages, next 5", read("time"))
	require.Equal(t, []string{
		"1700000002123 2 first@c/news/-1 gen=1700000002 off=0 offs=[]",
		"1700000002123 2 first@c/news/0 gen=1700000002 off=0 offs=[]",
		"1700000002123 2 first@c/news/1 gen=1700000002 off=0 offs=[]",
		"1700000002123 2 last@c/news/-1 gen=1700000002 off=0 offs=[]",
		"1700000002123 2 last@c/news/0 gen=1700000002 off=5 offs=[]",
		"1700000002123 2 last@c/news/1 gen=1700000002 off=0 offs=[]",
		"1700000002123 2 time@c/news/-1 gen=1700000002 off=0 offs=[]",
		"1700000002123 2 time@c/news/0 gen=1700000002 off=3 offs=[]",
		"1700000002123 2 time@c/news/1 gen=1700000002 off=0 offs=[]",
	}, since())
	require.Equal(t, "0 messages, next 5", read("last"), "a known instance writes nothing")
	require.Empty(t, since())

	fc.Advance(time.Second)
	const (
		news0 = "news/0 broker=5 consumer=0 lag=5 lower=false inflight=0 stored=1700000001123 dropped=0"
		news1 = "news/1 broker=0 consumer=0 lag=0 lower=false inflight=0 stored=-62135596800000 dropped=0"
	)
	require.Equal(t, []string{
		"c seen=2000 forget=3602000 active=0",
		"  news/0 broker=5 consumer=3 lag=2 lower=false inflight=0 stored=1700000001123 dropped=0",
		"  " + news1,
	}, instanceLines(t, b, "time"))
	require.Equal(t, []string{"c seen=2000 forget=86402000 active=0", "  " + news0, "  " + news1}, instanceLines(t, b, "first"))

	// An instance the group does not know: the rows it would start with,
	// nothing written, nothing registered.
	offs, err := b.GetOffsets(WithClient(ctx, "new"), "last")
	require.NoError(t, err)
	require.Equal(t, []string{news0, news1}, progressLines(offs))
	require.Empty(t, since())
	require.Equal(t, []string{"c"}, b.instanceClients("last"))

	// A known instance meets a topic: its starts there, then the commit.
	fc.Advance(time.Second)
	require.NoError(t, b.CommitOffsets(c, "first", []OffsetCommit{{Topic: "other", QueueID: 0, Offset: 1}}))
	require.Equal(t, []string{
		"1700000004123 2 first@c/other/-1 gen=1700000004 off=0 offs=[]",
		"1700000004123 2 first@c/other/0 gen=1700000004 off=0 offs=[]",
		"1700000004123 2 first@c/other/0 gen=1700000005 off=1 offs=[]",
	}, since())
	lines := instanceLines(t, b, "first")
	require.Len(t, lines, 4, "the topics it met and the group's")
	require.Equal(t, "c seen=4000 forget=86404000 active=0", lines[0])
	require.Equal(t, "  other/0 broker=2 consumer=1 lag=1 lower=false inflight=0 stored=1700000001123 dropped=0", lines[3])

	// A reset without a client id: every known instance, the group's own
	// offsets only when it has some.
	fc.Advance(time.Second)
	_, err = b.ResetOffset(ctx, "first", "other", goldenInstAt)
	require.NoError(t, err)
	require.Equal(t, []string{"1700000005123 2 first@c/other/0 gen=1700000006 off=0 offs=[]"}, since())
	require.NoError(t, b.CommitOffsets(ctx, "first", []OffsetCommit{{Topic: "other", QueueID: 0, Offset: 2}}))
	require.Equal(t, []string{"1700000005123 2 first/other/0 gen=1 off=2 offs=[]"}, since())
	_, err = b.SkipBacklog(ctx, "first", "other")
	require.NoError(t, err)
	require.Equal(t, []string{
		"1700000005123 2 first/other/0 gen=2 off=2 offs=[]",
		"1700000005123 2 first@c/other/0 gen=1700000007 off=2 offs=[]",
	}, since())
	_, err = b.ResetOffset(c, "first", "other", goldenInstAt)
	require.NoError(t, err)
	require.Equal(t, []string{"1700000005123 2 first@c/other/0 gen=1700000008 off=0 offs=[]"}, since(), "with a client id: that instance only")
	_, err = b.ResetOffset(ctx, "time", "news", goldenInstAt)
	require.NoError(t, err)
	require.Equal(t, []string{
		"1700000005123 2 time@c/news/0 gen=1700000003 off=0 offs=[]",
		"1700000005123 2 time@c/news/1 gen=1700000003 off=0 offs=[]",
	}, since(), "its instance's only: the group has no offsets of its own")

	// The sweep: time's idle hour is up, the others' day is not.
	b.forgetIdleInstances(goldenInstAt.Add(time.Hour + 5*time.Second))
	require.Equal(t, []string{"1700000005123 5 time@c//0 gen=0 off=0 offs=[]"}, since(), "the forget record (born at the clock's time, not the sweep's)")
	require.Empty(t, b.instanceClients("time"))
	fc.Advance(time.Hour)
	require.Equal(t, "2 messages, next 5", read("time"), "a returning client id is a new instance")
	require.Equal(t, []string{
		"1700003605123 2 time@c/news/-1 gen=1700003605 off=0 offs=[]",
		"1700003605123 2 time@c/news/0 gen=1700003605 off=3 offs=[]",
		"1700003605123 2 time@c/news/1 gen=1700003605 off=0 offs=[]",
	}, since())
}
