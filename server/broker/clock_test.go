package broker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// virtualBroker opens a broker whose only clock is fc, with RocketMQ's
// real delay ladder (1 s … 2 h): on virtual time the ladder costs nothing.
func virtualBroker(t *testing.T) (*broker.Broker, *clockwork.FakeClock) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	b := brokertest.MustOpen(t, "", func(o *broker.Options) {
		o.Clock = fc
		o.DelayLevels = broker.DefaultDelayLevels
	})
	return b, fc
}

// pullNow pops at most one message of topic for group without waiting.
func pullNow(t *testing.T, b *broker.Broker, group, topic string, invisible time.Duration) []broker.ReceivedMessage {
	t.Helper()
	got, err := b.Pull(context.Background(), broker.PullRequest{Group: group, Topic: topic, MaxMessages: 1, Invisible: invisible})
	require.NoError(t, err)
	return got
}

// awaitPull polls (on the wall clock, without moving the virtual one)
// until a pull returns a message.
func awaitPull(t *testing.T, b *broker.Broker, group, topic string, invisible time.Duration) broker.ReceivedMessage {
	t.Helper()
	var got []broker.ReceivedMessage
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		got = pullNow(t, b, group, topic, invisible)
		st, _ := b.Status(context.Background())
		bl, _ := b.Backlog(context.Background(), group)
		var lv []string
		for _, l := range st.Levels {
			if l.MaxOffset > 0 {
				lv = append(lv, fmt.Sprintf("%d:%d/%d due %v", l.Level, l.Offset, l.MaxOffset, l.NextDue))
			}
		}
		return len(got) == 1, fmt.Sprintf("nothing delivered yet; levels %v retry %+v timers %d", lv, bl.Retry, bl.RetryTimers)
	})
	return got[0]
}

// TestRetryLadderOnVirtualTime walks RocketMQ's whole retry ladder — 16
// nacks, levels 3 to 18, almost five hours — on a fake clock: each retry
// is held until its level's delay has passed on the broker's clock, and
// then delivered; the store stamps the virtual time. On the wall clock the
// broker would wait hours and the test would fail.
func TestRetryLadderOnVirtualTime(t *testing.T) {
	t.Parallel()
	b, fc := virtualBroker(t)
	ctx := context.Background()
	_, _, err := b.PutGroup(ctx, broker.GroupConfig{Name: "g", RetryMaxTimes: 16})
	require.NoError(t, err)
	sent, err := b.Send(ctx, "ladder", []broker.SendMessage{{Body: []byte("payload")}})
	require.NoError(t, err)
	stored, err := b.GetMessage(ctx, sent[0].MessageID)
	require.NoError(t, err)
	require.Equal(t, fc.Now(), stored.StoredAt, "stamped with the broker's clock")

	m := awaitPull(t, b, "g", "ladder", time.Hour)
	for attempt := 1; attempt <= 16; attempt++ {
		res, err := b.Nack(ctx, "g", []broker.NackItem{{Receipt: m.Receipt, Reason: fmt.Sprint("boom ", attempt)}})
		require.NoError(t, err)
		require.Equal(t, broker.ReceiptOK, res[0].Status)
		delay := broker.DefaultDelayLevels[min(3+attempt-1, 18)-1]
		fc.Advance(delay - time.Second)
		require.Empty(t, pullNow(t, b, "g", "ladder", time.Hour), "retry %d came a second before its delay %v", attempt, delay)
		fc.Advance(time.Second)
		m = awaitPull(t, b, "g", "ladder", time.Hour)
		require.Equal(t, int32(attempt), m.ReconsumeTimes)
		require.Equal(t, "payload", string(m.Body))
	}
	res, err := b.Nack(ctx, "g", []broker.NackItem{{Receipt: m.Receipt, Reason: "last"}})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	fc.Advance(3 * time.Hour)
	require.Empty(t, pullNow(t, b, "g", "ladder", time.Hour), "a dead letter is never delivered")
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		dead, _, err := b.ListDeadLetters(ctx, "g", broker.DLQFilter{}, "", 10)
		require.NoError(t, err)
		return len(dead) == 1, fmt.Sprintf("%d dead letters", len(dead))
	})
}

// TestLeaseExpiryOnVirtualTime: a lease of 60 s holds for 60 s of the
// broker's clock and not a moment longer; the expired message walks the
// ladder (first retry at level 3, 10 s) and is delivered again.
func TestLeaseExpiryOnVirtualTime(t *testing.T) {
	t.Parallel()
	b, fc := virtualBroker(t)
	ctx := context.Background()
	_, err := b.Send(ctx, "leases", []broker.SendMessage{{Body: []byte("slow")}})
	require.NoError(t, err)
	first := awaitPull(t, b, "g", "leases", time.Minute)

	fc.Advance(59 * time.Second)
	require.Empty(t, pullNow(t, b, "g", "leases", time.Minute), "leased for another second")
	fc.Advance(2 * time.Second) // the reaper runs on this clock's ticks
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		bl, err := b.Backlog(ctx, "g")
		require.NoError(t, err)
		return len(bl.Retry) == 1, fmt.Sprintf("retry backlog %+v", bl.Retry)
	})
	fc.Advance(9 * time.Second)
	require.Empty(t, pullNow(t, b, "g", "leases", time.Minute), "the retry waits its 10 s")
	fc.Advance(time.Second)
	again := awaitPull(t, b, "g", "leases", time.Minute)
	require.Equal(t, int32(1), again.ReconsumeTimes)
	require.Equal(t, first.MessageID, again.OriginMessageID)

	res, err := b.Ack(ctx, "g", []string{first.Receipt})
	require.NoError(t, err)
	require.NotEqual(t, broker.ReceiptOK, res[0].Status, "the expired lease's receipt no longer acks")
}

// TestLeaderOnlyWorkFollowsTheSwitch: after Demote the broker still takes
// sends, pulls and acks, but no delay level falls due and no lease is
// reaped, however far its clock moves; Promote starts both again, and
// what fell due meanwhile is delivered.
func TestLeaderOnlyWorkFollowsTheSwitch(t *testing.T) {
	t.Parallel()
	b, fc := virtualBroker(t)
	ctx := context.Background()
	require.True(t, b.Leading(), "a single broker leads from Open")
	// A server's own leader-only service (push, the mirror's writer).
	var starts, stops atomic.Int32
	var running atomic.Bool
	b.OnLeader("test service", func(ctx context.Context) func() {
		starts.Add(1)
		running.Store(true)
		return func() { running.Store(false); stops.Add(1) }
	})
	require.Equal(t, int32(1), starts.Load(), "added while leading: started at once")
	_, err := b.Send(ctx, "sw", []broker.SendMessage{{Body: []byte("held")}})
	require.NoError(t, err)
	held := awaitPull(t, b, "g", "sw", time.Minute)

	b.Demote()
	require.False(t, b.Leading())
	b.Demote() // idempotent
	require.False(t, running.Load())
	require.Equal(t, int32(1), stops.Load())
	_, err = b.Send(ctx, "sw", []broker.SendMessage{{Body: []byte("delayed"), DelayLevel: 3}})
	require.NoError(t, err, "a follower's facade still writes (replication will forward instead)")
	fc.Advance(5 * time.Minute)
	time.Sleep(100 * time.Millisecond) // give a wrongly running service time to act
	bl, err := b.Backlog(ctx, "g")
	require.NoError(t, err)
	require.Empty(t, bl.Retry, "no lease was reaped while following")
	// A pull sends its queue's expired leases back itself (a request, not
	// leader-only work), but nothing is due without the scheduler.
	require.Empty(t, pullNow(t, b, "g", "sw", time.Minute), "neither the delayed message nor the expired lease came back")

	require.NoError(t, b.Promote(ctx))
	require.True(t, b.Leading())
	require.True(t, running.Load())
	require.Equal(t, int32(2), starts.Load(), "started again at the next promotion")
	got := map[string]bool{}
	// Virtual time moves on a second at a time (the reaper's ticks, the
	// retry's 10 s) up to an hour; the scheduler's puts and the store's
	// dispatch then still take wall time, which a loaded machine may
	// stretch past that hour's steps: the wait for them is in wall time.
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 2 {
		if fc.Since(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)) < time.Hour {
			fc.Advance(time.Second)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
		for _, m := range pullNow(t, b, "g", "sw", time.Minute) {
			got[string(m.Body)] = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("after promotion only %v came", got)
		}
	}
	require.True(t, got["held"] && got["delayed"], "%v", got)
	_ = held
	require.NoError(t, b.Close(ctx))
	require.ErrorIs(t, b.Promote(ctx), broker.ErrShuttingDown)
}

// TestTimerOnVirtualTime: a timer six hours out (deliverAt) stays
// invisible until the broker's clock reaches it, to the second, and is
// delivered then; a cancelled one never is. (A fake clock fires every tick
// of the broker's tickers on its way, so hours, not years, keep it quick.)
func TestTimerOnVirtualTime(t *testing.T) {
	t.Parallel()
	b, fc := virtualBroker(t)
	ctx := context.Background()
	due := fc.Now().Add(6 * time.Hour)
	_, err := b.Send(ctx, "later", []broker.SendMessage{{Body: []byte("tonight"), DeliverAt: due}})
	require.NoError(t, err)
	cancelled, err := b.Send(ctx, "later", []broker.SendMessage{{Body: []byte("never"), DelayMs: (24 * time.Hour).Milliseconds()}})
	require.NoError(t, err)
	require.NoError(t, b.CancelTimer(ctx, cancelled[0].MessageID))

	fc.Advance(due.Sub(fc.Now()) - time.Second)
	time.Sleep(50 * time.Millisecond) // a timer loop on the wrong clock would act now
	require.Empty(t, pullNow(t, b, "g", "later", time.Minute), "a second early")
	fc.Advance(time.Second)
	m := awaitPull(t, b, "g", "later", time.Minute)
	require.Equal(t, "tonight", string(m.Body))
	require.Empty(t, pullNow(t, b, "g", "later", time.Minute), "the cancelled timer")
}

// TestTransactionChecksOnVirtualTime: an unresolved transaction is checked
// when its checkAfterMs has passed on the broker's clock, again every
// check interval, and rolled back after the last unanswered check.
func TestTransactionChecksOnVirtualTime(t *testing.T) {
	t.Parallel()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	b := brokertest.MustOpen(t, "", func(o *broker.Options) {
		o.Clock = fc
		o.TransactionMaxChecks = 3
		o.TransactionCheckInterval = time.Minute
	})
	ctx := context.Background()
	sent, err := b.Send(ctx, "orders", []broker.SendMessage{{Body: []byte("half"), Transactional: true, ProducerGroup: "pg", CheckAfterMs: 30_000}})
	require.NoError(t, err)
	id := sent[0].TransactionID
	checks := func() []broker.TransactionCheck {
		got, err := b.PullTransactionChecks(ctx, "pg", 8, 0)
		require.NoError(t, err)
		return got
	}
	fc.Advance(29 * time.Second)
	require.Empty(t, checks(), "checkAfterMs has not passed")
	fc.Advance(time.Second)
	got := checks()
	require.Len(t, got, 1)
	require.Equal(t, id, got[0].Transaction.ID)
	for n := 2; n <= 3; n++ {
		fc.Advance(59 * time.Second)
		require.Empty(t, checks(), "check %d before its interval", n)
		fc.Advance(time.Second)
		require.Len(t, checks(), 1, "check %d", n)
	}
	fc.Advance(time.Minute) // the fourth would fall due: rolled back instead
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		tx, err := b.GetTransaction(ctx, id)
		require.NoError(t, err)
		return tx.State == broker.TxnRolledBack, tx.State
	})
	require.Empty(t, pullNow(t, b, "g", "orders", time.Minute), "a rolled-back half is never delivered")
}
