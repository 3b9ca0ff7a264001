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
	"github.com/mqgate/mqgate/storage/message"
)

// traceTypes is the event types of a trace, in order.
func traceTypes(tr broker.MessageTrace) []string {
	out := []string{}
	for _, e := range tr.Events {
		out = append(out, e.Type)
	}
	return out
}

func (bd *bundle) trace(t *testing.T, id string) broker.MessageTrace {
	t.Helper()
	tr, err := bd.b.Trace(bd.ctx, id)
	require.NoError(t, err)
	return tr
}

// Delayed sends: the send's id (the parked record's) and the delivered
// copy's id name one life — parked with its due time, stored on its topic
// when due, delivered, acked — for delayMs and delay-level sends alike.
func TestTraceDelayedSends(t *testing.T) {
	bd := setup(t)
	for _, msg := range []broker.SendMessage{{DelayMs: 30}, {DelayLevel: 1}} {
		r := bd.sendTimer(t, "later", "x", msg)
		got := bd.pull(t, "g", "later", 1, 5*time.Second, time.Minute)
		require.Len(t, got, 1)
		require.NotEqual(t, r.MessageID, got[0].MessageID, "the delivery is a copy")
		_, err := bd.b.Ack(bd.ctx, "g", []string{got[0].Receipt})
		require.NoError(t, err)
		for _, id := range []string{r.MessageID, got[0].MessageID} {
			tr := bd.trace(t, id)
			require.Equal(t, []string{"stored", "stored", "delivered", "acked"}, traceTypes(tr), "%+v via %s", msg, id)
			require.Equal(t, got[0].MessageID, tr.OriginMessageID, "the life is the delivered copy's (its retries name it)")
			parked, onTopic := tr.Events[0], tr.Events[1]
			require.Equal(t, r.MessageID, parked.MessageID)
			require.Equal(t, "later", parked.Topic)
			require.EqualValues(t, -1, parked.QueueOffset, "not on its queue yet")
			require.False(t, parked.DueAt.IsZero())
			require.False(t, onTopic.At.Before(parked.DueAt), "stored on its topic when due")
			require.Equal(t, got[0].MessageID, onTopic.MessageID)
			require.Equal(t, got[0].QueueOffset, onTopic.QueueOffset)
			if msg.DelayLevel > 0 {
				require.True(t, parked.HasDelayLevel)
				require.Equal(t, 1, parked.DelayLevel)
			}
		}
	}
}

// An ordered message retried in place (no copy) shows as retried inPlace
// with its failure count, then the dead letter carries the reasons.
func TestTraceOrderlyInPlace(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "o", Orderly: true, RetryMaxTimes: 1})
	require.NoError(t, err)
	_, err = bd.b.Send(bd.ctx, "fifo", []broker.SendMessage{{Body: []byte("a"), ShardingKey: "k"}})
	require.NoError(t, err)
	var id string
	for i := 0; i < 2; i++ {
		got := bd.pull(t, "o", "fifo", 1, 5*time.Second, time.Minute)
		require.Len(t, got, 1)
		id = got[0].MessageID
		_, err := bd.b.Nack(bd.ctx, "o", []broker.NackItem{{Receipt: got[0].Receipt, DelayLevel: 1, Reason: "no " + string(rune('a'+i))}})
		require.NoError(t, err)
	}
	var tr broker.MessageTrace
	brokertest.Eventually(t, 5*time.Second, func() (bool, string) {
		tr = bd.trace(t, id)
		return len(tr.Events) > 0 && tr.Events[len(tr.Events)-1].Type == broker.TraceDeadLettered, strings.Join(traceTypes(tr), ",")
	})
	require.Equal(t, []string{"stored", "delivered", "nacked", "retried", "delivered", "nacked", "dead-lettered"}, traceTypes(tr))
	require.True(t, tr.Events[3].InPlace)
	require.EqualValues(t, 1, tr.Events[3].ReconsumeTimes, "one failure so far")
	require.Equal(t, "no a", tr.Events[2].Reason)
	require.Equal(t, "no b", tr.Events[5].Reason)
	require.Equal(t, id, tr.Events[4].MessageID, "retried in place: the same copy")
}

// Trace records are written after the records they come from, so they
// outlive the message in the CommitLog; a dead letter that retention
// carries forward keeps its whole trace (carried under its life's key),
// and its life goes on after the carry.
func TestTraceOutlivesRetention(t *testing.T) {
	opts := retentionOptions(t)
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	sent := bd.send(t, "keep", "precious")[0]
	got := bd.pull(t, "g", "keep", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	_, err := bd.b.Nack(broker.WithClient(bd.ctx, "w1"), "g", []broker.NackItem{{Receipt: got[0].Receipt, Delay: time.Millisecond, Reason: "flaky"}})
	require.NoError(t, err)
	again := bd.pull(t, "g", "keep", 1, 5*time.Second, time.Minute)
	require.Len(t, again, 1)
	bd.nack(t, "g", again[0], -1, "poison pill")
	before := bd.trace(t, sent.MessageID)
	want := []string{"stored", "delivered", "nacked", "retried", "delivered", "nacked", "dead-lettered"}
	require.Equal(t, want, traceTypes(before))
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)

	bd.rollAndExpire(t, 20*time.Second)
	st, err := bd.b.Status(bd.ctx)
	require.NoError(t, err)
	mid, err := message.ParseID(sent.MessageID)
	require.NoError(t, err)
	require.Greater(t, st.CommitLogMin, mid.Offset(), "retention deleted the message and its copies below the dead letter's carry")
	_, err = bd.b.GetMessage(bd.ctx, sent.MessageID)
	require.Error(t, err, "the original is gone")

	for _, id := range []string{dead[0].MessageID, sent.MessageID} {
		after := bd.trace(t, id)
		require.Equal(t, want, traceTypes(after), "via %s", id)
		require.Equal(t, before.Events, after.Events, "the carried trace is the trace")
	}
	// A second carry carries the carried trace: still whole, once.
	st, err = bd.b.Status(bd.ctx)
	require.NoError(t, err)
	bd.expirePast(t, st.CommitLogMax)
	require.Equal(t, want, traceTypes(bd.trace(t, dead[0].MessageID)))

	rr, err := bd.b.ResendDeadLetters(bd.ctx, "g", []string{dead[0].MessageID}, nil)
	require.NoError(t, err)
	require.Len(t, rr.Resent, 1)
	back := bd.pull(t, "g", "keep", 1, 5*time.Second, time.Minute)
	require.Len(t, back, 1)
	_, err = bd.b.Ack(bd.ctx, "g", []string{back[0].Receipt})
	require.NoError(t, err)
	require.Equal(t, append(want, "resent", "delivered", "acked"), traceTypes(bd.trace(t, back[0].MessageID)))

	// Once nothing of the message is left, neither is its trace.
	st, err = bd.b.Status(bd.ctx)
	require.NoError(t, err)
	bd.expirePast(t, st.CommitLogMax)
	for _, id := range []string{sent.MessageID, dead[0].MessageID, back[0].MessageID} {
		_, err = bd.b.Trace(bd.ctx, id)
		require.ErrorIs(t, err, broker.ErrMessageNotFound)
	}
}

// A dead letter resent after retention carried it: the records its life
// was carried in lie in a segment retention deletes while the resend, past
// it, lives on; the life is carried once more, and the resend's trace
// stays whole.
func TestTraceOfAResendOutlivesItsCarry(t *testing.T) {
	opts := retentionOptions(t)
	segment := opts.Storage.SegmentSize
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	sent := bd.send(t, "keep", "precious")[0]
	got := bd.pull(t, "g", "keep", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	bd.nack(t, "g", got[0], -1, "poison pill")
	want := []string{"stored", "delivered", "nacked", "dead-lettered"}
	require.Equal(t, want, traceTypes(bd.trace(t, sent.MessageID)))
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	bd.rollAndExpire(t, 20*time.Second) // carries the letter and its life

	// Seal the segment the carry landed in before resending, so the resend
	// lands in the next one.
	bd.b.PauseRetention()
	st, err := bd.b.Status(bd.ctx)
	require.NoError(t, err)
	boundary := (st.CommitLogMax/segment + 1) * segment
	for st.CommitLogMax < boundary {
		bd.send(t, "filler", strings.Repeat("f", 3000))
		st, err = bd.b.Status(bd.ctx)
		require.NoError(t, err)
	}
	rr, err := bd.b.ResendDeadLetters(bd.ctx, "g", []string{dead[0].MessageID}, nil)
	require.NoError(t, err)
	require.Len(t, rr.Resent, 1)
	bd.b.ResumeRetention()
	brokertest.Eventually(t, 20*time.Second, func() (bool, string) {
		st, err := bd.b.Status(bd.ctx)
		require.NoError(t, err)
		return st.CommitLogMin >= boundary, fmt.Sprintf("the sealed segment is still there (min %d)", st.CommitLogMin)
	})

	back := bd.pull(t, "g", "keep", 1, 5*time.Second, time.Minute)
	require.Len(t, back, 1)
	require.Equal(t, "precious", string(back[0].Body))
	_, err = bd.b.Ack(bd.ctx, "g", []string{back[0].Receipt})
	require.NoError(t, err)
	whole := append(want, "resent", "delivered", "acked")
	require.Equal(t, whole, traceTypes(bd.trace(t, back[0].MessageID)))
	require.Equal(t, whole, traceTypes(bd.trace(t, sent.MessageID)))
}

// expirePast sends filler until retention has deleted the CommitLog below
// phys.
func (bd *bundle) expirePast(t *testing.T, phys int64) {
	t.Helper()
	filler := strings.Repeat("f", 3000)
	brokertest.Eventually(t, 20*time.Second, func() (bool, string) {
		for i := 0; i < 20; i++ {
			bd.send(t, "filler", filler)
		}
		st, err := bd.b.Status(bd.ctx)
		require.NoError(t, err)
		return st.CommitLogMin > phys, "retention has not passed the offset yet"
	})
}

// Tracing off: no follower, no trace records; a trace lists what the
// message's records hold and says it is partial.
func TestTraceOff(t *testing.T) {
	b := brokertest.MustOpen(t, "", func(o *broker.Options) { o.NoMessageTrace = true })
	bd := &bundle{ctx: context.Background(), b: b}
	sent := bd.send(t, "quiet", "x")[0]
	got := bd.pull(t, "g", "quiet", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	_, err := b.Ack(bd.ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)
	b.TracePushed("g", got[0].Receipt, 200, "ok")
	tr := bd.trace(t, sent.MessageID)
	require.True(t, tr.Partial)
	require.Equal(t, []string{"stored"}, traceTypes(tr))
	st := b.TraceStats()
	require.False(t, st.Enabled)
	require.Zero(t, st.Events)
}

// Tracing turned on for the first time starts there: what was delivered
// before is not traced, what comes after is, also after a restart.
func TestTraceTurnedOnLater(t *testing.T) {
	dir := t.TempDir()
	b := brokertest.MustOpen(t, dir, func(o *broker.Options) { o.NoMessageTrace = true })
	bd := &bundle{dir: dir, ctx: context.Background(), b: b}
	sent := bd.send(t, "late", "a", "b")
	got := bd.pull(t, "g", "late", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	_, err := b.Ack(bd.ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)
	require.NoError(t, b.Close(bd.ctx))

	bd.b = brokertest.MustOpen(t, dir)
	first, second := sent[0].MessageID, sent[1].MessageID
	if got[0].MessageID == second {
		first, second = second, first
	}
	tr := bd.trace(t, first)
	require.False(t, tr.Partial)
	require.Equal(t, []string{"stored"}, traceTypes(tr), "delivered and acked before tracing was on")
	more := bd.pull(t, "g", "late", 1, time.Second, time.Minute)
	require.Len(t, more, 1)
	require.Equal(t, second, more[0].MessageID)
	_, err = bd.b.Ack(bd.ctx, "g", []string{more[0].Receipt})
	require.NoError(t, err)
	require.Equal(t, []string{"stored", "delivered", "acked"}, traceTypes(bd.trace(t, second)))
	bd.restart(t)
	require.Equal(t, []string{"stored", "delivered", "acked"}, traceTypes(bd.trace(t, second)))
	require.Equal(t, []string{"stored"}, traceTypes(bd.trace(t, first)))
}
