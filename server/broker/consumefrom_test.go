package broker_test

// Where a group starts (package progress: consumefrom.go): first, last, or a time, set when
// the group meets a topic by subscribing to it.

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// drainBodies pulls (and acks) until a pull of wait comes back empty and
// returns the bodies, sorted.
func (bd *bundle) drainBodies(t *testing.T, group, topic string, wait time.Duration) []string {
	t.Helper()
	var out []string
	for {
		got := bd.pull(t, group, topic, 32, wait, time.Minute)
		if len(got) == 0 {
			sort.Strings(out)
			return out
		}
		for _, m := range got {
			out = append(out, string(m.Body))
		}
		res, err := bd.b.Ack(bd.ctx, group, receipts(got))
		require.NoError(t, err)
		for _, r := range res {
			require.Equal(t, broker.ReceiptOK, r.Status)
		}
	}
}

func (bd *bundle) sendN(t *testing.T, topic, prefix string, n int) {
	t.Helper()
	for i := range n {
		bd.send(t, topic, fmt.Sprintf("%s%d", prefix, i))
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	sort.Strings(out)
	return out
}

func subscribed(name, from string, topics ...string) broker.GroupConfig {
	g := broker.GroupConfig{Name: name, ConsumeFrom: from}
	for _, topic := range topics {
		g.Subscriptions = append(g.Subscriptions, broker.Subscription{Topic: topic})
	}
	return g
}

// last skips the backlog stored when the group is created, in every queue,
// and delivers what is sent after, across a restart; the default (first)
// and an auto-created group get the backlog.
func TestConsumeFromLast(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "cf", Queues: 3})
	require.NoError(t, err)
	bd.sendN(t, "cf", "old", 7)
	g, created, err := bd.b.PutGroup(bd.ctx, subscribed("late", "last", "cf"))
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "last", g.ConsumeFrom)
	_, _, err = bd.b.PutGroup(bd.ctx, subscribed("early", "", "cf"))
	require.NoError(t, err)
	bd.sendN(t, "cf", "new", 5)

	// The committed offsets start at the max offsets of the creation.
	prog, err := bd.b.Progress(bd.ctx, "late")
	require.NoError(t, err)
	var committed int64
	for _, p := range prog {
		committed += p.ConsumerOffset
	}
	require.EqualValues(t, 7, committed)

	require.Equal(t, names("new", 5), bd.drainBodies(t, "late", "cf", 300*time.Millisecond))
	require.Equal(t, append(names("new", 5), names("old", 7)...), bd.drainBodies(t, "early", "cf", 100*time.Millisecond))
	require.Len(t, bd.drainBodies(t, "auto", "cf", 100*time.Millisecond), 12, "an auto-created group starts at the first offset")

	bd.restart(t)
	bd.sendN(t, "cf", "after", 2)
	require.Equal(t, names("after", 2), bd.drainBodies(t, "late", "cf", 300*time.Millisecond))
	g, err = bd.b.GetGroup(bd.ctx, "late")
	require.NoError(t, err)
	require.Equal(t, "last", g.ConsumeFrom, "persisted with the group")
}

// A time starts at the first message stored at or after it.
func TestConsumeFromTimestamp(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "ts", Queues: 2})
	require.NoError(t, err)
	bd.sendN(t, "ts", "before", 4)
	res := bd.send(t, "ts", "before-last")
	last, err := bd.b.GetMessage(bd.ctx, res[0].MessageID)
	require.NoError(t, err)
	// Let the store's millisecond clock pass the last old message.
	brokertest.Eventually(t, time.Second, func() (bool, string) {
		return time.Now().UnixMilli() > last.StoredAt.UnixMilli(), "a millisecond passes"
	})
	from := time.Now()
	bd.sendN(t, "ts", "between", 3)
	g, _, err := bd.b.PutGroup(bd.ctx, subscribed("g", from.Format(time.RFC3339Nano), "ts"))
	require.NoError(t, err)
	require.Equal(t, from.UTC().Format(time.RFC3339Nano), g.ConsumeFrom)
	bd.sendN(t, "ts", "after", 2)
	require.Equal(t, append(names("after", 2), names("between", 3)...), bd.drainBodies(t, "g", "ts", 300*time.Millisecond))

	// A time after the creation is the same as last.
	_, _, err = bd.b.PutGroup(bd.ctx, subscribed("future", time.Now().Add(time.Hour).Format(time.RFC3339), "ts"))
	require.NoError(t, err)
	bd.send(t, "ts", "later")
	require.Equal(t, []string{"later"}, bd.drainBodies(t, "future", "ts", 300*time.Millisecond))
}

// A subscription added later starts by the group's consumeFrom then; the
// topics it had keep their offsets; changing consumeFrom moves nothing;
// a queue added to a topic later starts at its first offset.
func TestConsumeFromLaterSubscriptions(t *testing.T) {
	bd := setup(t)
	for _, name := range []string{"a", "b", "c"} {
		_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: name, Queues: 2})
		require.NoError(t, err)
	}
	bd.sendN(t, "a", "a-old", 3)
	_, _, err := bd.b.PutGroup(bd.ctx, subscribed("g", "", "a"))
	require.NoError(t, err)
	bd.sendN(t, "b", "b-old", 3)
	bd.sendN(t, "c", "c-old", 3)

	// consumeFrom changes to last: a's offsets do not move (it has none
	// yet: it never consumed), b joins later and skips its backlog.
	_, err = bd.b.PatchGroup(bd.ctx, "g", func(g broker.GroupConfig) (broker.GroupConfig, error) {
		g.ConsumeFrom = "last"
		g.Subscriptions = append(g.Subscriptions, broker.Subscription{Topic: "b"})
		return g, nil
	})
	require.NoError(t, err)
	bd.send(t, "b", "b-new")
	require.Equal(t, names("a-old", 3), bd.drainBodies(t, "g", "a", 100*time.Millisecond), "a met the group under first")
	require.Equal(t, []string{"b-new"}, bd.drainBodies(t, "g", "b", 300*time.Millisecond))

	// A PUT that adds c: the same.
	_, _, err = bd.b.PutGroup(bd.ctx, subscribed("g", "last", "a", "b", "c"))
	require.NoError(t, err)
	bd.send(t, "c", "c-new")
	require.Equal(t, []string{"c-new"}, bd.drainBodies(t, "g", "c", 300*time.Millisecond))

	// b grows to 4 queues: the new queues' messages are all newer than the
	// group's meeting with b, and delivered.
	_, _, err = bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "b", Queues: 4})
	require.NoError(t, err)
	bd.sendN(t, "b", "b-grown", 8)
	require.Equal(t, names("b-grown", 8), bd.drainBodies(t, "g", "b", 300*time.Millisecond))

	// Dropping and re-adding b keeps its offsets (the group has them).
	_, _, err = bd.b.PutGroup(bd.ctx, subscribed("g", "last", "a", "c"))
	require.NoError(t, err)
	bd.send(t, "b", "b-while-unsubscribed")
	_, _, err = bd.b.PutGroup(bd.ctx, subscribed("g", "last", "a", "b", "c"))
	require.NoError(t, err)
	require.Equal(t, []string{"b-while-unsubscribed"}, bd.drainBodies(t, "g", "b", 300*time.Millisecond))

	// A group deleted and created again meets its topics again.
	require.NoError(t, bd.b.DeleteGroup(bd.ctx, "g"))
	bd.send(t, "a", "a-gap")
	_, _, err = bd.b.PutGroup(bd.ctx, subscribed("g", "last", "a"))
	require.NoError(t, err)
	bd.send(t, "a", "a-fresh")
	require.Equal(t, []string{"a-fresh"}, bd.drainBodies(t, "g", "a", 300*time.Millisecond))
}

// Subscribing to a topic that does not exist yet: it is created empty, so
// the group gets everything sent to it.
func TestConsumeFromTopicCreatedLater(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, subscribed("g", "last", "notyet"))
	require.NoError(t, err)
	bd.sendN(t, "notyet", "m", 3) // auto-created
	require.Equal(t, names("m", 3), bd.drainBodies(t, "g", "notyet", 300*time.Millisecond))
}

func TestConsumeFromInvalid(t *testing.T) {
	bd := setup(t)
	for _, v := range []string{"Last", "latest", "2026-13-01T00:00:00Z", "1700000000000"} {
		_, _, err := bd.b.PutGroup(bd.ctx, subscribed("g", v, "x"))
		require.ErrorIs(t, err, broker.ErrInvalidArgument, v)
		require.Contains(t, err.Error(), "consumeFrom", v)
	}
	_, err := bd.b.GetGroup(bd.ctx, "g")
	require.ErrorIs(t, err, broker.ErrGroupNotFound)
}
