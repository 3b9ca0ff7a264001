package broker_test

// Retries beyond the ladder (package retry): a nack's delayMs and the
// group's retry policies, on the timer machinery, with the retry copy's
// semantics (reconsumeTimes, origin, attempt history, the DLQ after
// retryMaxTimes). Every delay is checked from below strictly (never
// early) and from above generously (a loaded machine is slow, never
// fast).

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// slack is how late a retry may come on a loaded 2-core machine.
const slack = 3 * time.Second

func (bd *bundle) nackItem(t *testing.T, group string, it broker.NackItem) {
	t.Helper()
	res, err := bd.b.Nack(bd.ctx, group, []broker.NackItem{it})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status, res[0].Error)
}

// pullOne long-polls for one message.
func (bd *bundle) pullOne(t *testing.T, group, topic string) broker.ReceivedMessage {
	t.Helper()
	got := bd.pull(t, group, topic, 1, 10*time.Second, time.Minute)
	require.Len(t, got, 1, "nothing arrived for %s on %s", group, topic)
	return got[0]
}

// requireWaited checks that a retry came no earlier than want after from
// and not absurdly later.
func requireWaited(t *testing.T, from time.Time, want time.Duration, what string) {
	t.Helper()
	waited := time.Since(from)
	require.GreaterOrEqual(t, waited, want, "%s came early", what)
	require.Less(t, waited, want+slack, "%s came far too late", what)
}

// A nack with delayMs: redelivered after the delay (not before), with
// reconsumeTimes counting up, and into the DLQ after retryMaxTimes with
// the delays in the attempt history.
func TestNackDelayMs(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", RetryMaxTimes: 2})
	require.NoError(t, err)
	sent := bd.send(t, "dm", "payload")
	m := bd.pullOne(t, "g", "dm")
	delays := []time.Duration{250 * time.Millisecond, 120 * time.Millisecond}
	for i, d := range delays {
		at := time.Now()
		bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt, Delay: d, Reason: "later"})
		m = bd.pullOne(t, "g", "dm")
		requireWaited(t, at, d, "the retry after a nack with delayMs")
		require.Equal(t, int32(i+1), m.ReconsumeTimes)
		require.Equal(t, sent[0].MessageID, m.OriginMessageID)
		require.Equal(t, "dm", m.Topic)
		require.Equal(t, "payload", string(m.Body))
	}
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt, Delay: time.Second, Reason: "last straw"})
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1, "retryMaxTimes 2 used up: the third failure is dead at once")
	require.Equal(t, int32(3), dead[0].ReconsumeTimes)
	require.Equal(t, "last straw", dead[0].Reason)
	require.Len(t, dead[0].Attempts, 3)
	require.EqualValues(t, 250, dead[0].Attempts[0].DelayMs)
	require.EqualValues(t, 120, dead[0].Attempts[1].DelayMs)
	require.Zero(t, dead[0].Attempts[2].DelayMs, "the last attempt waited for nothing")
	require.Empty(t, bd.pull(t, "g", "dm", 1, 200*time.Millisecond, time.Minute))
	n, _ := bd.b.TimerCount()
	require.Zero(t, n, "no retry timer left")
}

// A nack's delay is bounded and exclusive with a delay level.
func TestNackDelayMsInvalid(t *testing.T) {
	bd := setup(t)
	bd.send(t, "dmi", "x")
	m := bd.pullOne(t, "g", "dmi")
	for _, it := range []broker.NackItem{
		{Receipt: m.Receipt, Delay: time.Second, DelayLevel: 3},
		{Receipt: m.Receipt, Delay: time.Second, DelayLevel: -1},
		{Receipt: m.Receipt, Delay: -time.Second},
		{Receipt: m.Receipt, Delay: broker.MaxRetryDelay + time.Millisecond},
	} {
		_, err := bd.b.Nack(bd.ctx, "g", []broker.NackItem{it})
		require.ErrorIs(t, err, broker.ErrInvalidArgument, "%+v", it)
		require.Contains(t, err.Error(), "items[0]")
	}
	// The refused nacks changed nothing: the lease still acks.
	res, err := bd.b.Ack(bd.ctx, "g", []string{m.Receipt})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
}

// Exponential backoff: initialMs·2^(attempt-1) capped at maxMs, for nacks
// without a delay; an explicit level still overrides it; the DLQ after
// retryMaxTimes.
func TestRetryPolicyExponential(t *testing.T) {
	bd := setup(t)
	policy := &broker.RetryPolicy{Backoff: broker.BackoffExponential, Initial: 100 * time.Millisecond, Max: 300 * time.Millisecond}
	_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", RetryMaxTimes: 5, RetryPolicy: policy})
	require.NoError(t, err)
	bd.send(t, "exp", "payload")
	m := bd.pullOne(t, "g", "exp")
	want := []time.Duration{100, 200, 300, 300}
	for i, d := range want {
		d *= time.Millisecond
		at := time.Now()
		bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt})
		m = bd.pullOne(t, "g", "exp")
		requireWaited(t, at, d, "an exponential retry")
		require.Equal(t, int32(i+1), m.ReconsumeTimes)
	}
	// A nack's level wins over the policy (level 1: 10 ms here).
	at := time.Now()
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt, DelayLevel: 1})
	m = bd.pullOne(t, "g", "exp")
	requireWaited(t, at, brokertest.Levels()[0], "a level-1 retry")
	require.Equal(t, int32(5), m.ReconsumeTimes)
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt, Reason: "done"})
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	var got []int64
	for _, a := range dead[0].Attempts {
		got = append(got, a.DelayMs)
	}
	require.Equal(t, []int64{100, 200, 300, 300, 0, 0}, got, "the timer delays of the attempts (the level-1 one and the dead one had none)")
	require.Equal(t, 1, dead[0].Attempts[4].Level)
}

// Fixed backoff applies to expired leases too (the reaper's path), and
// jitter keeps each delay within ±jitter of initialMs.
func TestRetryPolicyFixedOnExpiredLeases(t *testing.T) {
	bd := setup(t)
	policy := &broker.RetryPolicy{Backoff: broker.BackoffFixed, Initial: 200 * time.Millisecond, Jitter: 0.5}
	g, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", RetryMaxTimes: 3, RetryPolicy: policy})
	require.NoError(t, err)
	require.Equal(t, broker.MaxRetryDelay, g.RetryPolicy.Max, "maxMs defaults to the largest delay")
	bd.send(t, "fix", "payload")
	const lease = 100 * time.Millisecond
	m := bd.pull(t, "g", "fix", 1, time.Second, lease)
	require.Len(t, m, 1)
	for i := 1; i <= 3; i++ {
		at := time.Now()
		// No ack: the lease expires, the reaper sends it back, and the
		// retry waits 200 ms ± 50 %, so at least lease + 100 ms.
		m = bd.pull(t, "g", "fix", 1, 10*time.Second, lease)
		require.Len(t, m, 1, "retry %d", i)
		requireWaited(t, at, lease+100*time.Millisecond, "a jittered fixed retry of an expired lease")
		require.Equal(t, int32(i), m[0].ReconsumeTimes)
	}
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
		require.NoError(t, err)
		return len(dead) == 1, "the last expired lease is dead"
	})
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead[0].Attempts, 4)
	for _, a := range dead[0].Attempts[:3] {
		require.Equal(t, "expired", a.Outcome)
		require.GreaterOrEqual(t, a.DelayMs, int64(100))
		require.LessOrEqual(t, a.DelayMs, int64(300))
	}
}

// An orderly group retries in place (keeping the key) after the policy's
// delay, or a nack's delayMs.
func TestRetryPolicyOrderly(t *testing.T) {
	bd := setup(t)
	policy := &broker.RetryPolicy{Backoff: broker.BackoffFixed, Initial: 150 * time.Millisecond}
	_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", Orderly: true, RetryPolicy: policy})
	require.NoError(t, err)
	_, err = bd.b.Send(bd.ctx, "ord", []broker.SendMessage{
		{Body: []byte("first"), ShardingKey: "k"}, {Body: []byte("second"), ShardingKey: "k"}})
	require.NoError(t, err)
	m := bd.pullOne(t, "g", "ord")
	require.Equal(t, "first", string(m.Body))
	at := time.Now()
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt})
	m = bd.pullOne(t, "g", "ord")
	requireWaited(t, at, 150*time.Millisecond, "an in-place retry by the policy")
	require.Equal(t, "first", string(m.Body), "the key's order holds")
	require.Equal(t, int32(1), m.ReconsumeTimes)
	at = time.Now()
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt, Delay: 300 * time.Millisecond})
	m = bd.pullOne(t, "g", "ord")
	requireWaited(t, at, 300*time.Millisecond, "an in-place retry after delayMs")
	require.Equal(t, "first", string(m.Body))
	require.Equal(t, int32(2), m.ReconsumeTimes)
}

// The policy is part of the group record: it survives a restart, and a
// retry waiting on its timer is delivered after the restart.
func TestRetryPolicySurvivesRestart(t *testing.T) {
	bd := setup(t)
	policy := &broker.RetryPolicy{Backoff: broker.BackoffExponential, Initial: 300 * time.Millisecond, Max: 5 * time.Second, Jitter: 0.1}
	_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", RetryPolicy: policy})
	require.NoError(t, err)
	bd.send(t, "rs", "payload")
	m := bd.pullOne(t, "g", "rs")
	at := time.Now()
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt})
	backlog, err := bd.b.Backlog(bd.ctx, "g")
	require.NoError(t, err)
	require.EqualValues(t, 1, backlog.RetryTimers, "the retry waits on a timer")

	bd.restart(t)
	g, err := bd.b.GetGroup(bd.ctx, "g")
	require.NoError(t, err)
	require.Equal(t, policy, g.RetryPolicy)
	m = bd.pullOne(t, "g", "rs")
	requireWaited(t, at, 270*time.Millisecond, "the retry across a restart (300 ms - 10 %)")
	require.Equal(t, int32(1), m.ReconsumeTimes)
	at = time.Now()
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt})
	m = bd.pullOne(t, "g", "rs")
	requireWaited(t, at, 540*time.Millisecond, "the second retry after the restart (600 ms - 10 %)")
	require.Equal(t, int32(2), m.ReconsumeTimes)
	backlog, err = bd.b.Backlog(bd.ctx, "g")
	require.NoError(t, err)
	require.Zero(t, backlog.RetryTimers)
}

// A retry waiting on a timer for a topic deleted meanwhile is dropped when
// due, like the ladder's: the topic created again never sees it.
func TestRetryTimerOfDeletedTopicDropped(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "gone", Queues: 1})
	require.NoError(t, err)
	bd.send(t, "gone", "old")
	m := bd.pullOne(t, "g", "gone")
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt, Delay: 200 * time.Millisecond})
	require.NoError(t, bd.b.DeleteTopic(bd.ctx, "gone"))
	_, _, err = bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "gone", Queues: 1})
	require.NoError(t, err)
	bd.send(t, "gone", "new")
	require.Equal(t, "new", string(bd.pullOne(t, "g", "gone").Body))
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		n, _ := bd.b.TimerCount()
		return n == 0, "the retry timer is settled"
	})
	require.Empty(t, bd.pull(t, "g", "gone", 1, 300*time.Millisecond, time.Minute), "the old retry is not delivered")
}

// Group validation of the policy.
func TestRetryPolicyInvalid(t *testing.T) {
	bd := setup(t)
	for _, p := range []broker.RetryPolicy{
		{Backoff: "linear", Initial: time.Second},
		{Backoff: broker.BackoffExponential},
		{Backoff: broker.BackoffFixed, Initial: time.Second, Max: time.Millisecond},
		{Backoff: broker.BackoffFixed, Initial: time.Second, Jitter: 2},
		{Backoff: broker.BackoffLevels, Initial: time.Second},
	} {
		_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", RetryPolicy: &p})
		require.ErrorIs(t, err, broker.ErrInvalidArgument, "%+v", p)
		require.Contains(t, err.Error(), "retryPolicy.")
	}
	_, err := bd.b.GetGroup(bd.ctx, "g")
	require.ErrorIs(t, err, broker.ErrGroupNotFound, "nothing was created")
}

// A retry waiting on a timer is listed with its destination and can be
// rescheduled, but not cancelled (that would drop it without a dead
// letter).
func TestRetryTimerAdmin(t *testing.T) {
	bd := setup(t)
	bd.send(t, "adm", "payload")
	m := bd.pullOne(t, "g", "adm")
	bd.nackItem(t, "g", broker.NackItem{Receipt: m.Receipt, Delay: time.Hour})
	timers, _, err := bd.b.ListTimers(bd.ctx, "", "", 10)
	require.NoError(t, err)
	require.Len(t, timers, 1)
	require.Equal(t, broker.RetryTopic("g"), timers[0].Topic)
	err = bd.b.CancelTimer(bd.ctx, timers[0].ID)
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
	require.Contains(t, err.Error(), "retry")
	_, err = bd.b.RescheduleTimer(bd.ctx, timers[0].ID, time.Now())
	require.NoError(t, err)
	m = bd.pullOne(t, "g", "adm")
	require.Equal(t, int32(1), m.ReconsumeTimes)
	require.Equal(t, "adm", m.Topic)
}
