package broker_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

func (bd *bundle) sendTimer(t *testing.T, topic, body string, msg broker.SendMessage) broker.SendResult {
	t.Helper()
	msg.Body = []byte(body)
	res, err := bd.b.Send(bd.ctx, topic, []broker.SendMessage{msg})
	require.NoError(t, err)
	return res[0]
}

// delayMs and deliverAt deliver at an arbitrary time, never early; pending
// timers can be listed, cancelled and rescheduled.
func TestTimers(t *testing.T) {
	bd := setup(t)
	start := time.Now()
	r := bd.sendTimer(t, "tm", "in-150ms", broker.SendMessage{DelayMs: 150, Tag: "t1"})
	require.Equal(t, int64(-1), r.QueueOffset, "not in a queue until it fires")
	cancel := bd.sendTimer(t, "tm", "cancelled", broker.SendMessage{DelayMs: 200})
	later := bd.sendTimer(t, "tm", "moved-earlier", broker.SendMessage{DeliverAt: time.Now().Add(time.Hour)})
	now := bd.sendTimer(t, "tm", "past-is-now", broker.SendMessage{DeliverAt: time.Now().Add(-time.Minute)})
	require.GreaterOrEqual(t, now.QueueOffset, int64(0), "a due time in the past is an ordinary send")

	list, next, err := bd.b.ListTimers(bd.ctx, "tm", "", 10)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, list, 3)
	require.Equal(t, r.MessageID, list[0].ID, "soonest first")
	require.Equal(t, later.MessageID, list[2].ID)
	require.Equal(t, "t1", list[0].Tag)
	one, err := bd.b.GetTimer(bd.ctx, later.MessageID)
	require.NoError(t, err)
	require.Equal(t, "moved-earlier", string(one.Body))

	require.NoError(t, bd.b.CancelTimer(bd.ctx, cancel.MessageID))
	require.ErrorIs(t, bd.b.CancelTimer(bd.ctx, cancel.MessageID), broker.ErrMessageNotFound)
	moved, err := bd.b.RescheduleTimer(bd.ctx, later.MessageID, time.Now().Add(250*time.Millisecond))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(250*time.Millisecond), moved.DeliverAt, 100*time.Millisecond)

	got := map[string]time.Duration{}
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		for _, m := range bd.pull(t, "g", "tm", 10, time.Second, time.Minute) {
			got[string(m.Body)] = time.Since(start)
			_, err := bd.b.Ack(bd.ctx, "g", []string{m.Receipt})
			require.NoError(t, err)
		}
	}
	require.Len(t, got, 3, "got %v", got)
	require.Contains(t, got, "past-is-now")
	require.GreaterOrEqual(t, got["in-150ms"], 150*time.Millisecond, "never early")
	require.GreaterOrEqual(t, got["moved-earlier"], 250*time.Millisecond)
	require.NotContains(t, got, "cancelled")
	require.Empty(t, bd.pull(t, "g", "tm", 10, 300*time.Millisecond, time.Minute), "the cancelled timer never fires")
	list, _, err = bd.b.ListTimers(bd.ctx, "", "", 10)
	require.NoError(t, err)
	require.Empty(t, list)

	_, err = bd.b.Send(bd.ctx, "tm", []broker.SendMessage{{Body: []byte("x"), DelayMs: int64(400 * 24 * time.Hour / time.Millisecond)}})
	require.ErrorIs(t, err, broker.ErrInvalidArgument, "at most a year ahead")
	_, err = bd.b.Send(bd.ctx, "tm", []broker.SendMessage{{Body: []byte("x"), DelayMs: 10, DelayLevel: 2}})
	require.ErrorIs(t, err, broker.ErrInvalidArgument, "one kind of delay")
}

// retentionOptions are broker options whose retention deletes every
// segment but the active one as soon as it can (128 KiB segments).
func retentionOptions(t *testing.T) broker.Options {
	opts := brokertest.Options(t.TempDir())
	opts.Storage.SegmentSize = 128 << 10
	opts.Storage.FileReservedTime = time.Millisecond
	opts.Storage.RetentionInterval = 20 * time.Millisecond
	opts.Storage.DiskMaxUsedRatio = 1
	opts.MaxMessageSize = 4 << 10
	return opts
}

// rollAndExpire sends enough filler to roll several segments and waits
// until retention has deleted everything written before the filler: the
// pass that carried what lay there is over, so no carry of this round is
// still running when the caller goes on (a crash image taken meanwhile
// would catch it half done).
func (bd *bundle) rollAndExpire(t *testing.T, timeout time.Duration) {
	t.Helper()
	st, err := bd.b.Status(bd.ctx)
	require.NoError(t, err)
	start := st.CommitLogMax
	filler := strings.Repeat("f", 3000)
	for i := 0; i < 200; i++ {
		bd.send(t, "filler", filler)
	}
	brokertest.Eventually(t, timeout, func() (bool, string) {
		st, err := bd.b.Status(bd.ctx)
		require.NoError(t, err)
		return st.CommitLogMin > max(start, 128<<10*2), fmt.Sprintf("retention has not passed %d (min %d)", start, st.CommitLogMin)
	})
}

// Pending timers survive a restart (delivered once, not early) and
// CommitLog retention.
func TestTimersSurviveRestartAndRetention(t *testing.T) {
	opts := retentionOptions(t)
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	due := time.Now().Add(2 * time.Second).Truncate(time.Millisecond) // timers keep milliseconds: "never early" is at that precision
	r := bd.sendTimer(t, "tr", "survivor", broker.SendMessage{DeliverAt: due})
	bd.rollAndExpire(t, 10*time.Second)
	require.NoError(t, bd.b.Close(bd.ctx))
	bd.b = brokertest.Open(t, opts)
	list, _, err := bd.b.ListTimers(bd.ctx, "tr", "", 10)
	require.NoError(t, err)
	require.Len(t, list, 1, "the timer outlived retention and the restart")
	require.Equal(t, r.MessageID, list[0].ID)
	got := bd.pull(t, "g", "tr", 10, 5*time.Second, time.Minute)
	require.Len(t, got, 1)
	require.Equal(t, "survivor", string(got[0].Body))
	require.False(t, time.Now().Before(due), "never early")
	_, err = bd.b.Ack(bd.ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)
	bd.restart(t)
	require.Empty(t, bd.pull(t, "g", "tr", 10, 500*time.Millisecond, time.Minute), "delivered once")
}
