package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// TestMain fails the binary when a test leaves goroutines running.
func TestMain(m *testing.M) { brokertest.VerifyNoLeaks(m) }

type bundle struct {
	dir string
	b   *broker.Broker
	ctx context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	dir := t.TempDir()
	bd := &bundle{dir: dir, ctx: context.Background()}
	bd.b = brokertest.MustOpen(t, dir)
	return bd
}

func (bd *bundle) restart(t *testing.T) {
	t.Helper()
	require.NoError(t, bd.b.Close(bd.ctx))
	bd.b = brokertest.MustOpen(t, bd.dir)
}

func (bd *bundle) send(t *testing.T, topic string, bodies ...string) []broker.SendResult {
	t.Helper()
	msgs := make([]broker.SendMessage, len(bodies))
	for i, body := range bodies {
		msgs[i] = broker.SendMessage{Body: []byte(body)}
	}
	res, err := bd.b.Send(bd.ctx, topic, msgs)
	require.NoError(t, err)
	return res
}

func (bd *bundle) pull(t *testing.T, group, topic string, n int, wait, invisible time.Duration) []broker.ReceivedMessage {
	t.Helper()
	msgs, err := bd.b.Pull(bd.ctx, broker.PullRequest{Group: group, Topic: topic, MaxMessages: n, Wait: wait, Invisible: invisible})
	require.NoError(t, err)
	return msgs
}

func receipts(msgs []broker.ReceivedMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Receipt
	}
	return out
}

func bodies(msgs []broker.ReceivedMessage) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		out[string(m.Body)]++
	}
	return out
}

func TestSendPullAck(t *testing.T) {
	bd := setup(t)
	sent := bd.send(t, "orders", "a", "b", "c")
	require.Len(t, sent, 3)
	got := bd.pull(t, "g1", "orders", 10, time.Second, time.Minute)
	require.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1}, bodies(got))
	for _, m := range got {
		require.Equal(t, "orders", m.Topic)
		require.NotEmpty(t, m.Receipt)
		require.Len(t, m.MessageID, 32)
	}
	// Leased: invisible to the same group, visible to another.
	require.Empty(t, bd.pull(t, "g1", "orders", 10, 0, time.Minute))
	require.Len(t, bd.pull(t, "g2", "orders", 10, 0, time.Minute), 3)

	res, err := bd.b.Ack(bd.ctx, "g1", receipts(got))
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, broker.ReceiptOK, r.Status)
	}
	// A repeated ack is idempotent.
	res, err = bd.b.Ack(bd.ctx, "g1", receipts(got)[:1])
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)

	prog, err := bd.b.Progress(bd.ctx, "g1")
	require.NoError(t, err)
	var lag int64
	for _, p := range prog {
		lag += p.Lag
		require.Zero(t, p.InFlight)
	}
	require.Zero(t, lag)
}

func TestLongPollWakesOnSend(t *testing.T) {
	bd := setup(t)
	bd.send(t, "lp", "warm-up")
	got := bd.pull(t, "g", "lp", 1, 0, time.Minute)
	require.Len(t, got, 1)
	done := make(chan []broker.ReceivedMessage, 1)
	start := time.Now()
	go func() {
		msgs, _ := bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "lp", MaxMessages: 1, Wait: 20 * time.Second})
		done <- msgs
	}()
	// Let the poll park: the broker shows no parked poll to wait for, and
	// the send is delivered either way; this makes it the wake-up path.
	time.Sleep(50 * time.Millisecond)
	bd.send(t, "lp", "wake")
	select {
	case msgs := <-done:
		require.Len(t, msgs, 1)
		require.Equal(t, "wake", string(msgs[0].Body))
		require.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(10 * time.Second):
		t.Fatal("long poll was not woken by the send")
	}
	// And an empty long poll times out empty.
	start = time.Now()
	require.Empty(t, bd.pull(t, "g", "lp", 1, 200*time.Millisecond, time.Minute))
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond)
}

func TestLeaseExpiryRedeliversAndStaleReceiptIsRefused(t *testing.T) {
	bd := setup(t)
	bd.send(t, "inv", "x")
	first := bd.pull(t, "g", "inv", 1, 0, 100*time.Millisecond)
	require.Len(t, first, 1)
	require.Zero(t, first[0].ReconsumeTimes)
	second := bd.pull(t, "g", "inv", 1, 5*time.Second, time.Minute)
	require.Len(t, second, 1, "redelivered after the lease expired")
	require.Equal(t, first[0].MessageID, second[0].OriginMessageID, "the retry copy keeps the origin id")
	require.Equal(t, "inv", second[0].Topic, "the original topic is restored")
	require.Equal(t, int32(1), second[0].ReconsumeTimes)

	res, err := bd.b.Ack(bd.ctx, "g", receipts(first))
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptExpired, res[0].Status, "the old receipt must not ack the new lease")
	prog, _ := bd.b.Progress(bd.ctx, "g")
	inflight := 0
	for _, p := range prog {
		inflight += p.InFlight
	}
	require.Equal(t, 1, inflight)

	res, err = bd.b.Ack(bd.ctx, "g", receipts(second))
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)

	res, err = bd.b.Ack(bd.ctx, "g", []string{"garbage", second[0].Receipt[:len(second[0].Receipt)-2] + "AA"})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptInvalid, res[0].Status)
	require.Equal(t, broker.ReceiptInvalid, res[1].Status)
	res, err = bd.b.Ack(bd.ctx, "other", receipts(second))
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptInvalid, res[0].Status, "a receipt of another group is invalid")
}

func TestChangeLease(t *testing.T) {
	bd := setup(t)
	bd.send(t, "cl", "x")
	got := bd.pull(t, "g", "cl", 1, 0, 100*time.Millisecond)
	res, err := bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: got[0].Receipt, Invisible: time.Minute}})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	require.Empty(t, bd.pull(t, "g", "cl", 1, 300*time.Millisecond, time.Minute), "extended lease keeps it invisible")
	res, err = bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: got[0].Receipt, Invisible: 0}})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	again := bd.pull(t, "g", "cl", 1, time.Second, time.Minute)
	require.Len(t, again, 1)
	require.Zero(t, again[0].ReconsumeTimes, "a postponement is not a failed attempt")
}

// TestSameReceiptTwiceInOneRequest: a request naming one receipt twice
// acts on it twice, in order, the second time on the lease as the first
// left it: two extensions both hold (the later's deadline stands); an
// extension after a release finds the lease ended; a nack in place after
// a lease change of an ordered message to 0 finds a newer epoch.
func TestSameReceiptTwiceInOneRequest(t *testing.T) {
	bd := setup(t)
	bd.send(t, "dup", "x")
	got := bd.pull(t, "g", "dup", 1, 0, time.Minute)
	r := got[0].Receipt
	res, err := bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: r, Invisible: time.Hour}, {Receipt: r, Invisible: 2 * time.Hour}})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	require.Equal(t, broker.ReceiptOK, res[1].Status)
	require.True(t, res[1].LeaseUntil.After(res[0].LeaseUntil))

	res, err = bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: r, Invisible: 0}, {Receipt: r, Invisible: time.Hour}})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	require.Equal(t, broker.ReceiptExpired, res[1].Status, "released by the first: %s", res[1].Error)
	again := bd.pull(t, "g", "dup", 1, time.Second, time.Minute)
	require.Len(t, again, 1, "visible again: the second item did not bring the lease back")
	require.Zero(t, again[0].ReconsumeTimes)

	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "o", Orderly: true, RetryMaxTimes: 16})
	require.NoError(t, err)
	bd.send(t, "dupo", "y")
	got = bd.pull(t, "o", "dupo", 1, 0, time.Minute)
	r = got[0].Receipt
	nres, err := bd.b.Nack(bd.ctx, "o", []broker.NackItem{{Receipt: r, DelayLevel: 1}, {Receipt: r, DelayLevel: 1}})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, nres[0].Status)
	require.Equal(t, broker.ReceiptExpired, nres[1].Status, "one failure, not two: %s", nres[1].Error)
}

// A restart keeps the acknowledgements and the leases: nothing acked comes
// back, nothing still leased is offered before its lease ends, and the
// leases' receipts still settle them.
func TestRestartKeepsAcksAndLeases(t *testing.T) {
	bd := setup(t)
	var all []string
	for i := 0; i < 20; i++ {
		all = append(all, fmt.Sprintf("m%02d", i))
	}
	bd.send(t, "rs", all...)
	got := bd.pull(t, "g", "rs", 20, time.Second, time.Minute)
	require.Len(t, got, 20)
	var toAck, leased []string
	for i, m := range got {
		if i%3 != 0 {
			toAck = append(toAck, m.Receipt)
		} else {
			leased = append(leased, m.Receipt)
		}
	}
	_, err := bd.b.Ack(bd.ctx, "g", toAck)
	require.NoError(t, err)
	bd.restart(t)
	require.Empty(t, bd.pull(t, "g", "rs", 32, 200*time.Millisecond, time.Minute), "neither acked nor leased messages are offered")
	res, err := bd.b.Ack(bd.ctx, "g", leased)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, broker.ReceiptOK, r.Status, "a receipt of before the restart")
	}
	bd.restart(t)
	require.Empty(t, bd.pull(t, "g", "rs", 32, 200*time.Millisecond, time.Minute))
}

func TestIdempotentSend(t *testing.T) {
	bd := setup(t)
	msg := broker.SendMessage{Body: []byte("pay 10"), DedupID: "order-1"}
	r1, err := bd.b.Send(bd.ctx, "pay", []broker.SendMessage{msg})
	require.NoError(t, err)
	r2, err := bd.b.Send(bd.ctx, "pay", []broker.SendMessage{msg})
	require.NoError(t, err)
	require.True(t, r2[0].Duplicate)
	require.Equal(t, r1[0].MessageID, r2[0].MessageID)
	_, err = bd.b.Send(bd.ctx, "pay", []broker.SendMessage{{Body: []byte("pay 20"), DedupID: "order-1"}})
	require.ErrorIs(t, err, broker.ErrIdempotencyKeyReused)
	bd.restart(t)
	r3, err := bd.b.Send(bd.ctx, "pay", []broker.SendMessage{msg})
	require.NoError(t, err)
	require.True(t, r3[0].Duplicate, "dedup survives a restart (through the index)")
	require.Equal(t, r1[0].MessageID, r3[0].MessageID)
	got := bd.pull(t, "g", "pay", 32, time.Second, time.Minute)
	require.Len(t, got, 1)
}

func TestTagFilterAndOffsets(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "tags", Queues: 1})
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		tag := "red"
		if i%2 == 1 {
			tag = "blue"
		}
		_, err := bd.b.Send(bd.ctx, "tags", []broker.SendMessage{{Body: []byte(fmt.Sprint(i)), Tag: tag}})
		require.NoError(t, err)
	}
	got, err := bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "tags", MaxMessages: 32, TagExpression: "blue"})
	require.NoError(t, err)
	require.Len(t, got, 5)
	for _, m := range got {
		require.Equal(t, "blue", m.Tag)
	}
	_, err = bd.b.Ack(bd.ctx, "g", receipts(got))
	require.NoError(t, err)
	prog, err := bd.b.Progress(bd.ctx, "g")
	require.NoError(t, err)
	require.Len(t, prog, 1)
	require.Equal(t, int64(10), prog[0].ConsumerOffset, "filtered messages count as consumed")

	// Reset to the beginning: everything comes back.
	_, err = bd.b.ResetOffset(bd.ctx, "g", "tags", time.Unix(0, 0))
	require.NoError(t, err)
	got, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "tags", MaxMessages: 32})
	require.NoError(t, err)
	require.Len(t, got, 10)

	msgs, next, err := bd.b.ReadQueue(bd.ctx, "tags", 0, 3, 4)
	require.NoError(t, err)
	require.Len(t, msgs, 4)
	require.Equal(t, int64(7), next)
	require.Equal(t, "3", string(msgs[0].Body))
}

func TestValidation(t *testing.T) {
	bd := setup(t)
	for _, name := range []string{"", "%RETRY%x", "rmq_sys_x", "a|b", "ünï", "../x", string(make([]byte, 128))} {
		_, err := bd.b.Send(bd.ctx, name, []broker.SendMessage{{Body: []byte("x")}})
		require.Error(t, err, "topic %q", name)
	}
	_, err := bd.b.Send(bd.ctx, "ok", []broker.SendMessage{{Body: nil}})
	require.ErrorIs(t, err, broker.ErrEmptyBody)
	_, err = bd.b.Send(bd.ctx, "ok", []broker.SendMessage{{Body: []byte("x"), Properties: map[string]string{"KEYS": "x"}}})
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
	_, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "missing"})
	require.ErrorIs(t, err, broker.ErrTopicNotFound)
	_, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "ok", Wait: 31 * time.Second})
	require.Error(t, err)
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "bc", ConsumeMode: "broadcasting"})
	require.NoError(t, err)
	_, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "bc", Topic: "ok"})
	require.ErrorIs(t, err, broker.ErrClientIDRequired, "a broadcasting group's pull names its consumer instance")
	_, err = bd.b.GetMessage(bd.ctx, "nothex")
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
	_, err = bd.b.GetMessage(bd.ctx, "7F0000010000000000000000000FFFFF")
	require.ErrorIs(t, err, broker.ErrMessageNotFound)
}

// 8 producers × 8 consumers in two groups: every message is delivered and
// acknowledged exactly once per group; none is lost.
func TestManyProducersAndConsumers(t *testing.T) {
	bd := setup(t)
	const producers, perProducer, consumers = 8, 200, 8
	total := producers * perProducer
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "load", Queues: 4})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < perProducer; i++ {
				_, err := bd.b.Send(bd.ctx, "load", []broker.SendMessage{{Body: []byte(fmt.Sprintf("p%d-%d", p, i))}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}(p)
	}
	for _, group := range []string{"ga", "gb"} {
		seen := make(chan string, total*2)
		var cwg sync.WaitGroup
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var mu sync.Mutex
		count := 0
		for c := 0; c < consumers; c++ {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				for ctx.Err() == nil {
					msgs, err := bd.b.Pull(ctx, broker.PullRequest{Group: group, Topic: "load", MaxMessages: 16, Wait: 200 * time.Millisecond, Invisible: time.Minute})
					if err != nil {
						if ctx.Err() == nil {
							t.Error(err)
						}
						return
					}
					if len(msgs) == 0 {
						continue
					}
					res, err := bd.b.Ack(ctx, group, receipts(msgs))
					if err != nil {
						t.Error(err)
						return
					}
					for i, r := range res {
						if r.Status == broker.ReceiptOK {
							seen <- string(msgs[i].Body)
						}
					}
					mu.Lock()
					count += len(msgs)
					if count >= total {
						cancel()
					}
					mu.Unlock()
				}
			}()
		}
		cwg.Wait()
		cancel()
		close(seen)
		got := map[string]int{}
		for s := range seen {
			got[s]++
		}
		require.Len(t, got, total, "group %s: every message delivered", group)
		for k, v := range got {
			require.Equal(t, 1, v, "group %s: %s acked %d times", group, k, v)
		}
	}
	wg.Wait()
}

// TestPullWithoutAutoCreate: a pull with NoAutoCreate of an unknown group
// fails with ErrGroupNotFound and creates nothing, on a broker that
// creates groups on first use (which a pull without it still does).
func TestPullWithoutAutoCreate(t *testing.T) {
	bd := setup(t)
	bd.send(t, "auto", "a message")
	_, err := bd.b.Pull(bd.ctx, broker.PullRequest{Group: "unknown", Topic: "auto", NoAutoCreate: true})
	require.ErrorIs(t, err, broker.ErrGroupNotFound)
	_, err = bd.b.GetGroup(bd.ctx, "unknown")
	require.ErrorIs(t, err, broker.ErrGroupNotFound, "nothing was created")
	require.Len(t, bd.pull(t, "unknown", "auto", 1, time.Second, time.Minute), 1, "a plain pull creates it")
	_, err = bd.b.GetGroup(bd.ctx, "unknown")
	require.NoError(t, err)
	msgs, err := bd.b.Pull(bd.ctx, broker.PullRequest{Group: "unknown", Topic: "auto", NoAutoCreate: true})
	require.NoError(t, err, "an existing group pulls as before")
	require.Empty(t, msgs)
}

func TestAutoCreateGroupsCanBeSwitchedOff(t *testing.T) {
	opts := brokertest.Options(t.TempDir())
	opts.NoAutoCreateGroups = true
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	bd.send(t, "auto", "topics still auto-create")
	_, err := bd.b.Pull(bd.ctx, broker.PullRequest{Group: "unknown", Topic: "auto"})
	require.ErrorIs(t, err, broker.ErrGroupNotFound)
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "known"})
	require.NoError(t, err)
	require.Len(t, bd.pull(t, "known", "auto", 1, time.Second, time.Minute), 1)
}

// A group deleted and created again under its name starts afresh after a
// crash: the old group's acks, replayed from the progress records that no
// snapshot covered, must not apply to the new one. Also when the broker
// crashes between the deletion and the re-creation.
func TestRecreatedGroupInheritsNoProgress(t *testing.T) {
	opts := func(dir string) broker.Options {
		o := brokertest.Options(dir)
		o.SnapshotInterval = time.Hour // only Close writes one: a crash replays every record
		return o
	}
	dir := t.TempDir()
	bd := &bundle{dir: dir, ctx: context.Background(), b: brokertest.Open(t, opts(dir))}
	bodies := []string{"a", "b", "c", "d", "e"}
	bd.send(t, "rg", bodies...)
	drainAll := func(round int) {
		t.Helper()
		var got []string
		for len(got) < len(bodies) {
			msgs := bd.pull(t, "g", "rg", 32, time.Second, time.Minute)
			require.NotEmpty(t, msgs, "round %d: got %v of %v", round, got, bodies)
			for _, m := range msgs {
				got = append(got, string(m.Body))
			}
			res, err := bd.b.Ack(bd.ctx, "g", receipts(msgs))
			require.NoError(t, err)
			for _, r := range res {
				require.Equal(t, broker.ReceiptOK, r.Status)
			}
		}
		require.ElementsMatch(t, bodies, got)
	}
	group := broker.GroupConfig{Name: "g", Subscriptions: []broker.Subscription{{Topic: "rg"}}}
	for round, crashBetween := range []bool{false, true} {
		_, _, err := bd.b.PutGroup(bd.ctx, group)
		require.NoError(t, err)
		drainAll(round)
		require.NoError(t, bd.b.DeleteGroup(bd.ctx, "g"))
		if crashBetween {
			bd.crashImage(t, opts)
		}
		_, _, err = bd.b.PutGroup(bd.ctx, group)
		require.NoError(t, err)
		bd.crashImage(t, opts)
		drainAll(round) // the new group gets every message, from the first offset
		require.NoError(t, bd.b.DeleteGroup(bd.ctx, "g"))
	}
}
