package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

func (bd *bundle) nack(t *testing.T, group string, m broker.ReceivedMessage, level int, reason string) {
	t.Helper()
	res, err := bd.b.Nack(bd.ctx, group, []broker.NackItem{{Receipt: m.Receipt, DelayLevel: level, Reason: reason}})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
}

// The full ladder: nack with level 0 until the DLQ after retryMaxTimes;
// each retry waits at least its level (3 + reconsumeTimes) and carries the
// original topic, the origin id and the reconsume count.
func TestRetryLadderToDLQ(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", RetryMaxTimes: 16})
	require.NoError(t, err)
	sent := bd.send(t, "ladder", "payload")
	var origin string
	var last time.Time
	for attempt := 0; attempt <= 16; attempt++ {
		got := bd.pull(t, "g", "ladder", 1, 5*time.Second, time.Minute)
		require.Len(t, got, 1, "attempt %d", attempt)
		m := got[0]
		require.Equal(t, "payload", string(m.Body))
		require.Equal(t, "ladder", m.Topic)
		require.Equal(t, int32(attempt), m.ReconsumeTimes)
		if attempt == 0 {
			require.Equal(t, sent[0].MessageID, m.MessageID)
			require.Empty(t, m.OriginMessageID)
			origin = m.MessageID
		} else {
			require.Equal(t, origin, m.OriginMessageID)
			level := min(3+attempt-1, 18)
			require.GreaterOrEqual(t, time.Since(last), brokertest.Levels()[level-1], "retry %d came before its delay level %d", attempt, level)
		}
		last = time.Now()
		bd.nack(t, "g", m, 0, fmt.Sprintf("boom %d", attempt))
	}
	require.Empty(t, bd.pull(t, "g", "ladder", 1, 300*time.Millisecond, time.Minute), "a dead letter is never delivered")

	dead, next, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, dead, 1)
	d := dead[0]
	require.Equal(t, origin, d.OriginMessageID)
	require.Equal(t, "ladder", d.OriginalTopic)
	require.Equal(t, "boom 16", d.Reason)
	require.Equal(t, int32(17), d.ReconsumeTimes)
	require.Len(t, d.Attempts, 17)
	require.Equal(t, "boom 0", d.Attempts[0].Reason)
	require.Equal(t, broker.DLQDead, d.Status)
	require.False(t, d.FirstFailedAt.After(d.DeadAt))

	// Filters.
	none, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{OriginalTopic: "other"}, "", 10)
	require.NoError(t, err)
	require.Empty(t, none)
	hit, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{ReasonContains: "BOOM 16"}, "", 10)
	require.NoError(t, err)
	require.Len(t, hit, 1)

	// Resend: back on the original topic with a fresh count, origin kept.
	rr, err := bd.b.ResendDeadLetters(bd.ctx, "g", []string{d.MessageID}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{d.MessageID}, rr.Resent)
	again := bd.pull(t, "g", "ladder", 1, 5*time.Second, time.Minute)
	require.Len(t, again, 1)
	require.Zero(t, again[0].ReconsumeTimes)
	require.Equal(t, origin, again[0].OriginMessageID)
	rr, err = bd.b.ResendDeadLetters(bd.ctx, "g", []string{d.MessageID}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{d.MessageID}, rr.Skipped, "a dead letter is resent once")

	// Statuses survive a restart.
	bd.restart(t)
	got, err := bd.b.GetDeadLetter(bd.ctx, "g", d.MessageID)
	require.NoError(t, err)
	require.Equal(t, broker.DLQResent, got.Status)
	require.Equal(t, "payload", string(got.Body))
}

func TestNackLevels(t *testing.T) {
	bd := setup(t)
	bd.send(t, "lv", "to-dlq", "level-5")
	got := bd.pull(t, "g", "lv", 2, time.Second, time.Minute)
	require.Len(t, got, 2)
	var toDLQ, level5 broker.ReceivedMessage
	for _, m := range got {
		if string(m.Body) == "to-dlq" {
			toDLQ = m
		} else {
			level5 = m
		}
	}
	bd.nack(t, "g", toDLQ, -1, "poison")
	start := time.Now()
	bd.nack(t, "g", level5, 5, "later")
	again := bd.pull(t, "g", "lv", 2, 5*time.Second, time.Minute)
	require.Len(t, again, 1)
	require.Equal(t, "level-5", string(again[0].Body))
	require.GreaterOrEqual(t, time.Since(start), brokertest.Levels()[4])
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "poison", dead[0].Reason)
	require.Equal(t, int32(1), dead[0].ReconsumeTimes)

	require.NoError(t, bd.b.DiscardDeadLetter(bd.ctx, "g", dead[0].MessageID))
	dead, _, err = bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{Status: broker.DLQDead}, "", 10)
	require.NoError(t, err)
	require.Empty(t, dead)
	rr, err := bd.b.ResendDeadLetters(bd.ctx, "g", nil, &broker.DLQFilter{})
	require.NoError(t, err)
	require.Empty(t, rr.Resent, "a discarded letter is not resent by filter")

	// A stale receipt of a failed delivery is refused.
	res, err := bd.b.Ack(bd.ctx, "g", []string{level5.Receipt})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptExpired, res[0].Status)
	_, err = bd.b.Nack(bd.ctx, "g", []broker.NackItem{{Receipt: again[0].Receipt, DelayLevel: -2}})
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
}

// A lease extension never counts an attempt; an expiry does, and takes the
// retry path.
func TestLeaseExtensionIsNotAnAttempt(t *testing.T) {
	bd := setup(t)
	bd.send(t, "ext", "x")
	// Margins for a loaded machine: each extension comes well within the
	// lease before it (400 ms; 100 ms apart), and together they outlive the
	// first lease.
	got := bd.pull(t, "g", "ext", 1, time.Second, 400*time.Millisecond)
	for i := 0; i < 5; i++ {
		res, err := bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: got[0].Receipt, Invisible: 400 * time.Millisecond}})
		require.NoError(t, err)
		require.Equal(t, broker.ReceiptOK, res[0].Status)
		time.Sleep(100 * time.Millisecond) // time passes: five of these outlive the first 400 ms lease
	}
	res, err := bd.b.Ack(bd.ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status, "still the same lease after five extensions")
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Empty(t, dead)
}

func TestDelayedSend(t *testing.T) {
	bd := setup(t)
	start := time.Now()
	res, err := bd.b.Send(bd.ctx, "later", []broker.SendMessage{{Body: []byte("d"), DelayLevel: 6}})
	require.NoError(t, err)
	require.Len(t, res, 1)
	got := bd.pull(t, "g", "later", 1, 5*time.Second, time.Minute)
	require.Len(t, got, 1)
	require.GreaterOrEqual(t, time.Since(start), brokertest.Levels()[5])
	require.Equal(t, "later", got[0].Topic)
	_, err = bd.b.Send(bd.ctx, "later", []broker.SendMessage{{Body: []byte("d"), DelayLevel: 19}})
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
}

// Dead letters outlive CommitLog retention: when the segment holding a dead
// letter expires, the letter is carried forward with its id, death time
// and history, and can still be listed, fetched and resent.
func TestDeadLettersOutliveRetention(t *testing.T) {
	opts := retentionOptions(t)
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	bd.send(t, "keep", "precious", "gone")
	got := bd.pull(t, "g", "keep", 2, time.Second, time.Minute)
	require.Len(t, got, 2)
	for _, m := range got {
		if string(m.Body) == "precious" {
			bd.nack(t, "g", m, -1, "poison pill")
		} else {
			bd.nack(t, "g", m, -1, "to be discarded")
		}
	}
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	var keep, drop broker.DeadLetter
	for _, d := range dead {
		if d.Reason == "poison pill" {
			keep = d
		} else {
			drop = d
		}
	}
	require.NoError(t, bd.b.DiscardDeadLetter(bd.ctx, "g", drop.MessageID))

	// Roll many segments; retention deletes every old one.
	bd.rollAndExpire(t, 20*time.Second)
	dead, _, err = bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1, "the discarded letter is gone, the dead one stays")
	require.Equal(t, keep.MessageID, dead[0].MessageID, "same id after the move")
	require.Equal(t, keep.DeadAt, dead[0].DeadAt)
	require.Equal(t, keep.Attempts, dead[0].Attempts)
	one, err := bd.b.GetDeadLetter(bd.ctx, "g", keep.MessageID)
	require.NoError(t, err)
	require.Equal(t, "precious", string(one.Body))
	rr, err := bd.b.ResendDeadLetters(bd.ctx, "g", []string{keep.MessageID}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{keep.MessageID}, rr.Resent)
	back := bd.pull(t, "g", "keep", 1, 5*time.Second, time.Minute)
	require.Len(t, back, 1)
	require.Equal(t, "precious", string(back[0].Body))
}

// The attempt history names the consumer: the nacking client, or the
// lease holder when the lease expired.
func TestAttemptHistoryNamesTheClient(t *testing.T) {
	bd := setup(t)
	bd.send(t, "who", "a", "b")
	ctx := broker.WithClient(bd.ctx, "worker-7")
	got, err := bd.b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "who", MaxMessages: 1, Wait: time.Second, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, err = bd.b.Nack(bd.b2ctx("nacker"), "g", []broker.NackItem{{Receipt: got[0].Receipt, DelayLevel: -1, Reason: "x"}})
	require.NoError(t, err)
	expiring, err := bd.b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "who", MaxMessages: 1, Wait: time.Second, Invisible: 50 * time.Millisecond})
	require.NoError(t, err)
	require.Len(t, expiring, 1)
	again := bd.pull(t, "g", "who", 1, 5*time.Second, time.Minute) // the retry copy after expiry
	require.Len(t, again, 1)
	bd.nack(t, "g", again[0], -1, "y")
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	clients := map[string][]string{}
	for _, d := range dead {
		for _, a := range d.Attempts {
			clients[d.Reason] = append(clients[d.Reason], a.Outcome+":"+a.Client)
		}
	}
	require.Equal(t, []string{"nack:nacker"}, clients["x"])
	require.Equal(t, []string{"expired:worker-7", "nack:"}, clients["y"])
}

func (bd *bundle) b2ctx(client string) context.Context { return broker.WithClient(bd.ctx, client) }

// Racing resends of one dead letter (two consoles, a retried request)
// resend it once: the status decision and its record are one step.
func TestConcurrentResendsOfOneDeadLetterResendItOnce(t *testing.T) {
	bd := setup(t)
	bd.send(t, "race", "poison")
	got := bd.pull(t, "g", "race", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	bd.nack(t, "g", got[0], -1, "poison")
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	var wg sync.WaitGroup
	resent := make([]int, 8)
	for i := range resent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr, err := bd.b.ResendDeadLetters(bd.ctx, "g", []string{dead[0].MessageID}, nil)
			if assert.NoError(t, err) {
				resent[i] = len(rr.Resent)
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range resent {
		total += n
	}
	require.Equal(t, 1, total, "resent by %v", resent)
	again := bd.pull(t, "g", "race", 4, 5*time.Second, time.Minute)
	require.Len(t, again, 1, "one copy back on the topic")
}
