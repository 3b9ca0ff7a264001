package broker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// The timer family's requests, pinned as the facade answers them: every
// refusal's sentinel and text (a timer's send, the quota on pending
// timers, a get, cancel, reschedule and listing), the views a listing, a
// get and a reschedule return, the listing's pages and cursors, the
// counts (TimerCount, Status, a group's backlog) and a delivery on the
// broker's clock. Written against the code before the requests moved to
// server/broker/timer (server/broker/timer/doc.go).

// TestGoldenTimerRequestErrors: the refusals of the timer requests.
func TestGoldenTimerRequestErrors(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(start)
	b := brokertest.MustOpen(t, "", func(o *broker.Options) {
		o.Clock = fc
		o.MaxTimerDelay = time.Hour
		o.Quotas.MaxPendingTimers = 2
	})
	ctx := context.Background()
	send := func(ms ...broker.SendMessage) error {
		for i := range ms {
			ms[i].Body = []byte("x")
		}
		_, err := b.Send(ctx, "orders", ms)
		return err
	}
	unknown := "7F00000100001F900000000000000100"
	// A retry waiting on a timer (a nack's delay).
	res, err := b.Send(ctx, "orders", []broker.SendMessage{{Body: []byte("retried")}})
	require.NoError(t, err)
	msgs, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "orders", MaxMessages: 1, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, res[0].MessageID, msgs[0].MessageID)
	_, err = b.Nack(ctx, "g", []broker.NackItem{{Receipt: msgs[0].Receipt, Delay: 10 * time.Minute}})
	require.NoError(t, err)
	list, _, err := b.ListTimers(ctx, "", "", 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	retry := list[0]
	require.Equal(t, "%RETRY%g", retry.Topic)

	for _, c := range []struct {
		name string
		err  error
		is   error
		text string
	}{
		{"delayMs and deliverAt", send(broker.SendMessage{DelayMs: 1000, DeliverAt: start.Add(time.Minute)}), broker.ErrInvalidArgument,
			"invalid argument: give delayMs or deliverAt, not both"},
		{"delayLevel and delayMs", send(broker.SendMessage{DelayMs: 1000, DelayLevel: 2}), broker.ErrInvalidArgument,
			"invalid argument: give delayLevel or a timer (delayMs, deliverAt), not both"},
		{"delayLevel and deliverAt", send(broker.SendMessage{DeliverAt: start.Add(time.Minute), DelayLevel: 2}), broker.ErrInvalidArgument,
			"invalid argument: give delayLevel or a timer (delayMs, deliverAt), not both"},
		{"delayMs below zero", send(broker.SendMessage{DelayMs: -1}), broker.ErrInvalidArgument,
			"invalid argument: delayMs -1 must be between 0 and 3600000 (1h0m0s)"},
		{"delayMs too far", send(broker.SendMessage{DelayMs: 3_600_001}), broker.ErrInvalidArgument,
			"invalid argument: delayMs 3600001 must be between 0 and 3600000 (1h0m0s)"},
		{"deliverAt too far", send(broker.SendMessage{DeliverAt: start.Add(time.Hour + time.Millisecond)}), broker.ErrInvalidArgument,
			"invalid argument: a timer may be at most 1h0m0s ahead"},
		{"over the quota", send(broker.SendMessage{DelayMs: 1000}, broker.SendMessage{DelayMs: 1000}), broker.ErrQuotaExceeded,
			"quota exceeded: pendingTimers: the request would make 3 pending timers where the limit is 2 (--max-pending-timers; 1 exist)"},
		{"get of a bad id", func() error { _, err := b.GetTimer(ctx, "nope"); return err }(), broker.ErrInvalidArgument,
			"invalid argument: "},
		{"get of an unknown id", func() error { _, err := b.GetTimer(ctx, unknown); return err }(), broker.ErrMessageNotFound,
			"message not found: no pending timer " + unknown + " (delivered, cancelled or unknown)"},
		{"cancel of a bad id", b.CancelTimer(ctx, "nope"), broker.ErrInvalidArgument, "invalid argument: "},
		{"cancel of an unknown id", b.CancelTimer(ctx, unknown), broker.ErrMessageNotFound,
			"message not found: no pending timer " + unknown + " (delivered, cancelled or unknown)"},
		{"cancel of a retry", b.CancelTimer(ctx, retry.ID), broker.ErrInvalidArgument,
			"invalid argument: timer " + retry.ID + " is a retry waiting for %RETRY%g: reschedule it, or nack its redelivery with delayLevel -1"},
		{"reschedule too far", func() error {
			_, err := b.RescheduleTimer(ctx, retry.ID, start.Add(time.Hour+time.Millisecond))
			return err
		}(), broker.ErrInvalidArgument, "invalid argument: a timer may be at most 1h0m0s ahead"},
		{"reschedule of an unknown id", func() error { _, err := b.RescheduleTimer(ctx, unknown, start); return err }(), broker.ErrMessageNotFound,
			"message not found: no pending timer " + unknown + " (delivered, cancelled or unknown)"},
		{"reschedule of a bad id", func() error { _, err := b.RescheduleTimer(ctx, "nope", start); return err }(), broker.ErrInvalidArgument,
			"invalid argument: "},
		{"list after a bad cursor", func() error { _, _, err := b.ListTimers(ctx, "", "nope", 10); return err }(), broker.ErrInvalidArgument,
			"invalid argument: cursor is not a timer id: "},
	} {
		require.ErrorIs(t, c.err, c.is, c.name)
		require.True(t, strings.HasPrefix(c.err.Error(), c.text), "%s: %q", c.name, c.err)
	}
	// A cursor naming no timer: nothing after it is known.
	list, next, err := b.ListTimers(ctx, "", unknown, 10)
	require.NoError(t, err)
	require.Empty(t, list)
	require.Empty(t, next)
	n, at := b.TimerCount()
	require.Equal(t, 1, n, "only the retry: every refused send stored nothing")
	require.Equal(t, start.Add(10*time.Minute), at.UTC())
}

// TestGoldenTimerRequests: what the timer requests answer, on a virtual
// clock.
func TestGoldenTimerRequests(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	fc := clockwork.NewFakeClockAt(start)
	b := brokertest.MustOpen(t, "", func(o *broker.Options) { o.Clock = fc })
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: "orders", Queues: 4})
	require.NoError(t, err)
	sendTimer := func(body string, m broker.SendMessage) broker.SendResult {
		t.Helper()
		m.Body = []byte(body)
		m.Tag = "tag"
		m.Keys = []string{"k1", "k2"}
		m.Properties = map[string]string{"user": "v"}
		m.ShardingKey = "s"
		res, err := b.Send(ctx, "orders", []broker.SendMessage{m})
		require.NoError(t, err)
		return res[0]
	}
	a := sendTimer("a", broker.SendMessage{DelayMs: 60_000})
	c := sendTimer("c", broker.SendMessage{DeliverAt: start.Add(3 * time.Minute).Add(500 * time.Microsecond)})
	bb := sendTimer("b", broker.SendMessage{DelayMs: 120_000})
	now := sendTimer("now", broker.SendMessage{DeliverAt: start})
	q := a.QueueID // the sharding key's
	require.Equal(t, broker.SendResult{MessageID: a.MessageID, QueueID: q, QueueOffset: -1}, a)
	require.Equal(t, int64(-1), c.QueueOffset)
	require.Equal(t, q, now.QueueID)
	require.Equal(t, int64(0), now.QueueOffset, "due already: an ordinary send")

	view := func(id, body string, due time.Time) broker.Timer {
		return broker.Timer{ID: id, Topic: "orders", QueueID: q, DeliverAt: due, Tag: "tag", Keys: []string{"k1", "k2"},
			Properties: map[string]string{"user": "v"}, Body: []byte(body), ScheduledAt: start}
	}
	noBody := func(tm broker.Timer) broker.Timer { tm.Body = nil; return tm }
	wantA := view(a.MessageID, "a", start.Add(time.Minute))
	wantB := view(bb.MessageID, "b", start.Add(2*time.Minute))
	wantC := view(c.MessageID, "c", start.Add(3*time.Minute).Add(time.Millisecond)) // rounded up

	list, next, err := b.ListTimers(ctx, "", "", 0) // 0: the default page
	require.NoError(t, err)
	require.Empty(t, next)
	require.Equal(t, []broker.Timer{noBody(wantA), noBody(wantB), noBody(wantC)}, list)
	list, next, err = b.ListTimers(ctx, "orders", "", 2)
	require.NoError(t, err)
	require.Equal(t, []broker.Timer{noBody(wantA), noBody(wantB)}, list)
	require.Equal(t, bb.MessageID, next)
	list, next, err = b.ListTimers(ctx, "orders", next, 2)
	require.NoError(t, err)
	require.Equal(t, []broker.Timer{noBody(wantC)}, list)
	require.Empty(t, next)
	list, _, err = b.ListTimers(ctx, "other", "", 10)
	require.NoError(t, err)
	require.Empty(t, list)
	got, err := b.GetTimer(ctx, c.MessageID)
	require.NoError(t, err)
	require.Equal(t, wantC, got)

	n, at := b.TimerCount()
	require.Equal(t, 3, n)
	require.Equal(t, start.Add(time.Minute), at.UTC())
	st, err := b.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, st.TimersPending)
	require.Equal(t, start.Add(time.Minute), st.NextTimerAt.UTC())

	// A reschedule: the view of the copy, the same id; a time in the past
	// is now, and the timer is delivered on the broker's clock.
	fc.Advance(time.Second)
	moved, err := b.RescheduleTimer(ctx, c.MessageID, start.Add(-time.Hour))
	require.NoError(t, err)
	wantMoved := noBody(wantC)
	wantMoved.DeliverAt = start.Add(time.Second)
	wantMoved.ScheduledAt = start.Add(time.Second)
	require.Equal(t, wantMoved, moved)
	_, _, err = b.PutGroup(ctx, broker.GroupConfig{Name: "g", Subscriptions: []broker.Subscription{{Topic: "orders"}}})
	require.NoError(t, err)
	var bodies []string
	brokertest.Eventually(t, 5*time.Second, func() (bool, string) {
		msgs, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "orders", MaxMessages: 10, Invisible: time.Hour})
		require.NoError(t, err)
		for _, m := range msgs {
			bodies = append(bodies, string(m.Body))
		}
		return len(bodies) > 1, "got " + strings.Join(bodies, ",")
	})
	require.Equal(t, []string{"now", "c"}, bodies)
	_, err = b.GetTimer(ctx, c.MessageID)
	require.ErrorIs(t, err, broker.ErrMessageNotFound, "delivered")
	require.ErrorIs(t, b.CancelTimer(ctx, c.MessageID), broker.ErrMessageNotFound)
	// A delivered timer's id still pages: after its latest record's due
	// time.
	list, next, err = b.ListTimers(ctx, "", c.MessageID, 10)
	require.NoError(t, err)
	require.Equal(t, []broker.Timer{noBody(wantA), noBody(wantB)}, list)
	require.Empty(t, next)

	// A cancel; the cancelled timer is gone.
	require.NoError(t, b.CancelTimer(ctx, bb.MessageID))
	_, err = b.GetTimer(ctx, bb.MessageID)
	require.ErrorIs(t, err, broker.ErrMessageNotFound)
	list, _, err = b.ListTimers(ctx, "", "", 10)
	require.NoError(t, err)
	require.Equal(t, []broker.Timer{noBody(wantA)}, list)

	// The backlog of a group counts the timers destined to its topic.
	backlog, err := b.Backlog(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, int64(1), backlog.Timers)

	// A reschedule ahead; the copy is what a get answers.
	moved, err = b.RescheduleTimer(ctx, a.MessageID, start.Add(90*time.Second).Add(time.Microsecond))
	require.NoError(t, err)
	wantA.DeliverAt = start.Add(90 * time.Second).Add(time.Millisecond) // rounded up
	wantA.ScheduledAt = start.Add(time.Second)
	require.Equal(t, noBody(wantA), moved)
	got, err = b.GetTimer(ctx, a.MessageID)
	require.NoError(t, err)
	require.Equal(t, wantA, got)
	n, at = b.TimerCount()
	require.Equal(t, 1, n)
	require.Equal(t, wantA.DeliverAt, at.UTC())
}
