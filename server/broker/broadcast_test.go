package broker_test

// Broadcasting per consumer instance (broadcast.go): every instance of a
// broadcasting group gets every message its subscription's filters take,
// with progress of its own, retries in place, dead letters and resends of
// its own, across restarts; idle instances are forgotten; the number of
// instances is bounded.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// instance is one consumer instance of a broadcasting group in a test.
type instance struct {
	bd     *bundle
	group  string
	client string
}

func (bd *bundle) instance(group, client string) instance {
	return instance{bd: bd, group: group, client: client}
}

func (in instance) ctx() context.Context { return broker.WithClient(in.bd.ctx, in.client) }

func (in instance) pull(t *testing.T, topic string, n int, wait, invisible time.Duration) []broker.ReceivedMessage {
	t.Helper()
	msgs, err := in.bd.b.Pull(in.ctx(), broker.PullRequest{Group: in.group, Topic: topic, MaxMessages: n, Wait: wait, Invisible: invisible})
	require.NoError(t, err)
	return msgs
}

// drain pulls and acks until a pull of wait comes back empty; it returns
// the bodies, sorted.
func (in instance) drain(t *testing.T, topic string, wait time.Duration) []string {
	t.Helper()
	var out []string
	for {
		got := in.pull(t, topic, 32, wait, time.Minute)
		if len(got) == 0 {
			sort.Strings(out)
			return out
		}
		for _, m := range got {
			out = append(out, string(m.Body))
		}
		in.ack(t, got...)
	}
}

func (in instance) ack(t *testing.T, msgs ...broker.ReceivedMessage) {
	t.Helper()
	res, err := in.bd.b.Ack(in.ctx(), in.group, receipts(msgs))
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, broker.ReceiptOK, r.Status, r.Error)
	}
}

func (in instance) lag(t *testing.T) int64 {
	t.Helper()
	all, err := in.bd.b.Instances(in.bd.ctx, in.group)
	require.NoError(t, err)
	for _, ip := range all {
		if ip.ClientID == in.client {
			var lag int64
			for _, q := range ip.Queues {
				lag += q.Lag
			}
			return lag
		}
	}
	t.Fatalf("instance %s of %s not listed", in.client, in.group)
	return 0
}

func broadcastSetup(t *testing.T, tweaks ...func(*broker.Options)) *bundle {
	t.Helper()
	dir := t.TempDir()
	bd := &bundle{dir: dir, ctx: context.Background(), b: brokertest.MustOpen(t, dir, tweaks...)}
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "news", Queues: 3})
	require.NoError(t, err)
	return bd
}

func broadcastGroup(name string, tweak ...func(*broker.GroupConfig)) broker.GroupConfig {
	g := broker.GroupConfig{Name: name, ConsumeMode: broker.ConsumeBroadcasting, RetryMaxTimes: 2,
		Subscriptions: []broker.Subscription{{Topic: "news"}}}
	for _, tw := range tweak {
		tw(&g)
	}
	return g
}

func (bd *bundle) sendTagged(t *testing.T, topic string, n int, tag string, props map[string]string) []string {
	t.Helper()
	var out []string
	for i := range n {
		body := fmt.Sprintf("%s-%v-%d", tag, props, i)
		_, err := bd.b.Send(bd.ctx, topic, []broker.SendMessage{{Body: []byte(body), Tag: tag, Properties: props}})
		require.NoError(t, err)
		out = append(out, body)
	}
	return out
}

// Two instances each get every message the subscription's tag and SQL
// filters take, by pop pull; one's acks leave the other's progress alone;
// a pull without a client id is refused.
func TestBroadcastEveryInstanceGetsEveryMessage(t *testing.T) {
	bd := broadcastSetup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broadcastGroup("fan", func(g *broker.GroupConfig) {
		g.Subscriptions = []broker.Subscription{{Topic: "news", TagExpression: "sport || tech", SQL: "region = 'eu'"}}
	}))
	require.NoError(t, err)
	want := bd.sendTagged(t, "news", 6, "sport", map[string]string{"region": "eu"})
	want = append(want, bd.sendTagged(t, "news", 4, "tech", map[string]string{"region": "eu"})...)
	bd.sendTagged(t, "news", 5, "sport", map[string]string{"region": "us"}) // the SQL filter refuses them
	bd.sendTagged(t, "news", 5, "food", map[string]string{"region": "eu"})  // the tag filter refuses them
	sort.Strings(want)

	_, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "fan", Topic: "news", MaxMessages: 1})
	require.ErrorIs(t, err, broker.ErrClientIDRequired, "a broadcasting pull names its instance")

	a, b := bd.instance("fan", "a"), bd.instance("fan", "b")
	got := b.pull(t, "news", 32, time.Second, time.Minute)
	require.Len(t, got, len(want), "b gets every message the filters take")
	before := b.lag(t)
	require.Positive(t, before, "b's leases are not acked yet")
	require.Equal(t, want, a.drain(t, "news", 100*time.Millisecond), "and so does a")
	require.Zero(t, a.lag(t))
	require.Equal(t, before, b.lag(t), "a's acks are a's: b's progress did not move")
	res, err := bd.b.Ack(a.ctx(), "fan", receipts(got[:3]))
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, broker.ReceiptOK, r.Status, "a receipt settles its own instance's lease, whoever sends it")
	}
	b.ack(t, got...) // the first three again: ok, idempotent
	require.Zero(t, b.lag(t))
	require.Empty(t, a.pull(t, "news", 32, 50*time.Millisecond, time.Minute), "a's progress did not move back")

	// Receipts of a broadcasting group bind to it: another group's ack is invalid.
	res, err = bd.b.Ack(bd.ctx, "other", receipts(got[:1]))
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptInvalid, res[0].Status)

	// The group's own progress is not listed: its instances consume.
	rows, err := bd.b.Progress(bd.ctx, "fan")
	require.NoError(t, err)
	require.Empty(t, rows)
	rows, err = bd.b.Progress(a.ctx(), "fan")
	require.NoError(t, err)
	require.Len(t, rows, 3, "with a client id: the instance's queues")
}

// A nack and an expired lease are retried in place, to the same instance
// and no other, with reconsumeTimes counted; after retryMaxTimes the
// message is the group's dead letter, naming the instance, and a resend
// goes to that instance only.
func TestBroadcastRetriesStayWithTheInstance(t *testing.T) {
	bd := broadcastSetup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broadcastGroup("fan"))
	require.NoError(t, err)
	bd.send(t, "news", "m")
	a, b := bd.instance("fan", "a"), bd.instance("fan", "b")
	got := a.pull(t, "news", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	require.Equal(t, []string{"m"}, b.drain(t, "news", 50*time.Millisecond))

	res, err := bd.b.Nack(a.ctx(), "fan", []broker.NackItem{{Receipt: got[0].Receipt, Reason: "first"}})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	again := a.pull(t, "news", 1, 2*time.Second, 200*time.Millisecond)
	require.Len(t, again, 1, "the nacked message comes back to a after its delay")
	require.Equal(t, "m", string(again[0].Body))
	require.Equal(t, int32(1), again[0].ReconsumeTimes)
	require.Equal(t, got[0].QueueOffset, again[0].QueueOffset, "in place, not a %RETRY% copy")
	require.Empty(t, b.pull(t, "news", 1, 50*time.Millisecond, time.Minute), "b's done, whatever a does")
	ack, err := bd.b.Ack(a.ctx(), "fan", []string{got[0].Receipt})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptExpired, ack[0].Status, "the failed delivery's receipt is stale")

	// The 200 ms lease expires: retried again (the second and last retry).
	third := a.pull(t, "news", 1, 3*time.Second, time.Minute)
	require.Len(t, third, 1, "an expired lease comes back to a")
	require.Equal(t, int32(2), third[0].ReconsumeTimes)
	_, err = bd.b.Nack(a.ctx(), "fan", []broker.NackItem{{Receipt: third[0].Receipt, Reason: "last"}})
	require.NoError(t, err)

	var letters []broker.DeadLetter
	brokertest.Eventually(t, 3*time.Second, func() (bool, string) {
		letters, _, err = bd.b.ListDeadLetters(bd.ctx, "fan", broker.DLQFilter{}, "", 10)
		require.NoError(t, err)
		return len(letters) == 1, fmt.Sprintf("%d dead letters", len(letters))
	})
	require.Equal(t, "last", letters[0].Reason)
	require.Len(t, letters[0].Attempts, 3, "nack, expiry, nack")
	for _, at := range letters[0].Attempts {
		require.Equal(t, "a", at.Client)
	}
	require.Empty(t, a.pull(t, "news", 1, 50*time.Millisecond, time.Minute))
	require.Zero(t, a.lag(t))

	_, err = bd.b.ResendDeadLetters(bd.ctx, "fan", []string{letters[0].MessageID}, nil)
	require.NoError(t, err)
	resent := a.pull(t, "news", 1, 2*time.Second, time.Minute)
	require.Len(t, resent, 1, "the resend goes to a")
	require.Equal(t, "m", string(resent[0].Body))
	require.Equal(t, int32(0), resent[0].ReconsumeTimes)
	require.NotContains(t, resent[0].Properties, "BROADCAST_INSTANCE", "the instance property is the broker's, not shown")
	require.Empty(t, b.pull(t, "news", 1, 100*time.Millisecond, time.Minute), "not to b")
	newcomer := bd.instance("fan", "c").pull(t, "news", 32, 100*time.Millisecond, time.Minute)
	require.Len(t, newcomer, 1, "a newcomer starts at the first message")
	require.Empty(t, newcomer[0].OriginMessageID, "the original, not the resend")
	a.ack(t, resent...)
	require.Zero(t, a.lag(t))
}

// Each instance's offsets, leases and waiting retries survive a restart.
func TestBroadcastInstancesSurviveRestart(t *testing.T) {
	bd := broadcastSetup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broadcastGroup("fan"))
	require.NoError(t, err)
	bd.sendN(t, "news", "m", 10)
	a, b := bd.instance("fan", "a"), bd.instance("fan", "b")
	got := a.pull(t, "news", 10, time.Second, time.Minute)
	require.Len(t, got, 10)
	a.ack(t, got[:6]...)
	held := got[6:] // leased for a minute
	bgot := b.pull(t, "news", 4, time.Second, time.Minute)
	require.Len(t, bgot, 4)
	b.ack(t, bgot...)

	bd.restart(t)
	a, b = bd.instance("fan", "a"), bd.instance("fan", "b")
	require.Empty(t, a.pull(t, "news", 10, 100*time.Millisecond, time.Minute), "a's acks and leases held")
	a.ack(t, held...) // the receipts of before the restart still settle
	require.Zero(t, a.lag(t))
	require.Len(t, b.drain(t, "news", 100*time.Millisecond), 6, "b continues where it was")
	clients, err := bd.b.Instances(bd.ctx, "fan")
	require.NoError(t, err)
	require.Len(t, clients, 2)
}

// An instance idle longer than the group's InstanceIdle is forgotten,
// durably; back, it starts again by the group's ConsumeFrom.
func TestBroadcastIdleInstanceIsForgotten(t *testing.T) {
	bd := broadcastSetup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broadcastGroup("fan", func(g *broker.GroupConfig) {
		g.ConsumeFrom = "last"
		g.InstanceIdle = time.Second
	}))
	require.NoError(t, err)
	bd.sendN(t, "news", "old", 3)
	a, b := bd.instance("fan", "a"), bd.instance("fan", "b")
	require.Empty(t, a.drain(t, "news", 50*time.Millisecond), "last: the backlog is skipped")
	bd.sendN(t, "news", "new", 4)
	got := a.pull(t, "news", 2, time.Second, time.Minute) // leased, never acked
	require.Len(t, got, 2)
	stop, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stopB := func() { once.Do(func() { close(stop); <-done }) }
	defer stopB()
	go func() { // b stays active: pulls all the time
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := bd.b.Pull(b.ctx(), broker.PullRequest{Group: "fan", Topic: "news", MaxMessages: 32, Wait: 100 * time.Millisecond, Invisible: time.Minute}); err != nil && !errors.Is(err, broker.ErrShuttingDown) {
				t.Errorf("b's pull: %v", err)
				return
			}
		}
	}()
	brokertest.Eventually(t, 5*time.Second, func() (bool, string) {
		all, err := bd.b.Instances(bd.ctx, "fan")
		require.NoError(t, err)
		var clients []string
		for _, ip := range all {
			clients = append(clients, ip.ClientID)
		}
		return len(clients) == 1 && clients[0] == "b", fmt.Sprintf("instances %v", clients)
	})
	res, err := bd.b.Ack(a.ctx(), "fan", receipts(got))
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptExpired, res[0].Status, "a forgotten instance's receipts are void")

	stopB()
	bd.restart(t)
	all, err := bd.b.Instances(bd.ctx, "fan")
	require.NoError(t, err)
	require.Len(t, all, 1, "the forget is durable")
	require.Equal(t, "b", all[0].ClientID)
	a = bd.instance("fan", "a")
	require.Empty(t, a.drain(t, "news", 50*time.Millisecond), "a starts again at last: the 4 of before are skipped")
	bd.send(t, "news", "later")
	require.Equal(t, []string{"later"}, a.drain(t, "news", 500*time.Millisecond))
}

// The instances per group are bounded: a new one past the limit is
// refused before anything is written, a known one goes on.
func TestBroadcastInstanceLimit(t *testing.T) {
	limit := func(o *broker.Options) { o.Quotas.MaxInstancesPerGroup = 2 }
	bd := broadcastSetup(t, limit)
	_, _, err := bd.b.PutGroup(bd.ctx, broadcastGroup("fan"))
	require.NoError(t, err)
	bd.send(t, "news", "m")
	require.Len(t, bd.instance("fan", "a").pull(t, "news", 1, time.Second, time.Minute), 1)
	require.Len(t, bd.instance("fan", "b").pull(t, "news", 1, time.Second, time.Minute), 1)
	_, err = bd.b.Pull(broker.WithClient(bd.ctx, "c"), broker.PullRequest{Group: "fan", Topic: "news", MaxMessages: 1})
	var qe *broker.QuotaError
	require.ErrorAs(t, err, &qe)
	require.Equal(t, "instancesPerGroup", qe.Quota)
	require.Equal(t, 2, qe.Limit)
	err = bd.b.CommitOffsets(broker.WithClient(bd.ctx, "c"), "fan", []broker.OffsetCommit{{Topic: "news", QueueID: 0, Offset: 0}})
	require.ErrorAs(t, err, &qe, "an offset commit registers too")
	require.NoError(t, bd.b.Close(bd.ctx))
	bd.b = brokertest.MustOpen(t, bd.dir, limit)
	_, err = bd.b.Pull(broker.WithClient(bd.ctx, "c"), broker.PullRequest{Group: "fan", Topic: "news", MaxMessages: 1})
	require.ErrorAs(t, err, &qe, "the known instances are known after a restart, the refused one never was")
	require.Len(t, mustInstances(t, bd, "fan"), 2)
	require.Empty(t, bd.instance("fan", "a").pull(t, "news", 1, 50*time.Millisecond, time.Minute))
}

func mustInstances(t *testing.T, bd *bundle, group string) []broker.InstanceProgress {
	t.Helper()
	all, err := bd.b.Instances(bd.ctx, group)
	require.NoError(t, err)
	return all
}

// Offset reads of an instance apply the subscription's filters, start at
// the instance's committed offset, and commits move that instance only.
func TestBroadcastOffsetReadsPerInstance(t *testing.T) {
	bd := broadcastSetup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broadcastGroup("fan", func(g *broker.GroupConfig) {
		g.Subscriptions = []broker.Subscription{{Topic: "news", TagExpression: "keep", SQL: "n > 1"}}
	}))
	require.NoError(t, err)
	var want []string
	for i := range 8 {
		tag := "keep"
		if i%2 == 1 {
			tag = "drop"
		}
		body := fmt.Sprintf("%s-%d", tag, i)
		_, err := bd.b.Send(bd.ctx, "news", []broker.SendMessage{{Body: []byte(body), Tag: tag, Properties: map[string]string{"n": fmt.Sprint(i)}, ShardingKey: "k"}})
		require.NoError(t, err)
		if tag == "keep" && i > 1 {
			want = append(want, body)
		}
	}
	q := int32(-1)
	// The sharding key put all eight in one queue: find it.
	for id := int32(0); id < 3; id++ {
		msgs, _, err := bd.b.ReadQueue(bd.ctx, "news", id, 0, 32)
		require.NoError(t, err)
		if len(msgs) == 8 {
			q = id
		}
	}
	require.GreaterOrEqual(t, q, int32(0))
	a := bd.instance("fan", "a")
	msgs, next, err := bd.b.ReadQueueFor(a.ctx(), "fan", "news", q, -1, 32)
	require.NoError(t, err)
	require.Equal(t, want, bodiesOf(msgs), "the subscription's filters apply")
	require.Equal(t, int64(8), next, "the next offset passes over what they refused")
	require.NoError(t, bd.b.CommitOffsets(a.ctx(), "fan", []broker.OffsetCommit{{Topic: "news", QueueID: q, Offset: 5}}))
	msgs, _, err = bd.b.ReadQueueFor(a.ctx(), "fan", "news", q, -1, 32)
	require.NoError(t, err)
	require.Equal(t, []string{"keep-6"}, bodiesOf(msgs), "from a's committed offset")
	b := bd.instance("fan", "b")
	msgs, _, err = bd.b.ReadQueueFor(b.ctx(), "fan", "news", q, -1, 32)
	require.NoError(t, err)
	require.Equal(t, want, bodiesOf(msgs), "b's own offset is untouched")
	offs, err := bd.b.GetOffsets(a.ctx(), "fan")
	require.NoError(t, err)
	for _, o := range offs {
		if o.QueueID == q {
			require.Equal(t, int64(5), o.ConsumerOffset)
		}
	}
	require.Len(t, mustInstances(t, bd, "fan"), 2, "reads register instances")
}
