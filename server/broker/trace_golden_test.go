package broker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/storage/message"
)

// Golden tests of the message trace as the broker renders it: every field
// of every event of a life through a push outcome, a retry on a timer, a
// release, a dead letter with a long reason, its resend and ack; a
// discarded letter; a committed and a rolled-back transaction; the bound
// of MaxTraceEvents with its events-dropped marker and the attempt
// numbering; the errors of a bad and an unknown id; the follower's
// counters. Written against the code before the trace family's query and
// follower moved to server/broker/trace (ARCHITECTURE.md, "The broker as a
// state machine").

// goldenTrace renders a trace's events one a line, every field but the
// times (the wall clock's), ids as labels in order of first appearance
// (m1, m2, …), times as whether they are set and after the event's own.
func goldenTrace(tr broker.MessageTrace) []string {
	labels := map[string]string{}
	label := func(id string) string {
		if id == "" {
			return "-"
		}
		if l, ok := labels[id]; ok {
			return l
		}
		l := fmt.Sprintf("m%d", len(labels)+1)
		labels[id] = l
		return l
	}
	var out []string
	for _, e := range tr.Events {
		s := fmt.Sprintf("%s id=%s", e.Type, label(e.MessageID))
		if e.HasPosition {
			s += fmt.Sprintf(" at=%s/%d", e.Topic, e.QueueOffset) // the queue is the round robin's
		}
		if e.Group != "" || e.ClientID != "" {
			s += fmt.Sprintf(" group=%s client=%s", e.Group, e.ClientID)
		}
		if e.Epoch != 0 {
			s += " epoch"
		}
		if e.Attempt != 0 {
			s += fmt.Sprintf(" attempt=%d", e.Attempt)
		}
		if !e.LeaseUntil.IsZero() {
			s += fmt.Sprintf(" leaseUntilAfter=%v", e.LeaseUntil.After(e.At))
		}
		if e.Reason != "" {
			s += fmt.Sprintf(" reason=%q(%d)", cutForGolden(e.Reason), len(e.Reason))
		}
		if e.HasDelayLevel || e.DelayLevel != 0 {
			s += fmt.Sprintf(" level=%d/%v", e.DelayLevel, e.HasDelayLevel)
		}
		if e.DelayMs != 0 {
			s += fmt.Sprintf(" delayMs=%d", e.DelayMs)
		}
		if !e.DueAt.IsZero() {
			s += fmt.Sprintf(" dueNotBefore=%v", !e.DueAt.Before(e.At))
		}
		if e.ReconsumeTimes != 0 {
			s += fmt.Sprintf(" reconsume=%d", e.ReconsumeTimes)
		}
		if e.RetryMessageID != "" {
			s += " retry=" + label(e.RetryMessageID)
		}
		if e.DeadLetterID != "" {
			s += " dlq=" + label(e.DeadLetterID)
		}
		if e.TransactionID != "" {
			s += " txn=" + label(e.TransactionID)
		}
		if e.HTTPStatus != 0 || e.Result != "" {
			s += fmt.Sprintf(" http=%d result=%s", e.HTTPStatus, e.Result)
		}
		if e.InPlace {
			s += " inPlace"
		}
		if e.Count != 0 {
			s += fmt.Sprintf(" count=%d", e.Count)
		}
		out = append(out, s)
	}
	return out
}

// cutForGolden shows a long text's head and tail.
func cutForGolden(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:12] + "…" + s[len(s)-26:]
}

func TestTraceGoldenLife(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", RetryMaxTimes: 5})
	require.NoError(t, err)
	sent := bd.send(t, "gold", "a")[0]
	w1, w2 := broker.WithClient(bd.ctx, "w1"), broker.WithClient(bd.ctx, "w2")

	got, err := bd.b.Pull(w1, broker.PullRequest{Group: "g", Topic: "gold", MaxMessages: 1, Wait: time.Second, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	bd.b.TracePushed("g", got[0].Receipt, 503, "5xx")
	// The retry is due 200 ms after the nack: its record, written at once,
	// is stored before it is due even on a loaded machine (1 ms was not).
	_, err = bd.b.Nack(w1, "g", []broker.NackItem{{Receipt: got[0].Receipt, Delay: 200 * time.Millisecond, Reason: "flaky"}})
	require.NoError(t, err)

	retry, err := bd.b.Pull(w2, broker.PullRequest{Group: "g", Topic: "gold", MaxMessages: 1, Wait: 5 * time.Second, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, retry, 1)
	_, err = bd.b.ChangeLease(w2, "g", []broker.LeaseItem{{Receipt: retry[0].Receipt}})
	require.NoError(t, err)
	again, err := bd.b.Pull(w2, broker.PullRequest{Group: "g", Topic: "gold", MaxMessages: 1, Wait: 5 * time.Second, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, again, 1)
	long := strings.Repeat("é", 400) // 800 bytes: cut by the attempt history, then by the trace
	_, err = bd.b.Nack(w2, "g", []broker.NackItem{{Receipt: again[0].Receipt, DelayLevel: -1, Reason: long}})
	require.NoError(t, err)

	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	rr, err := bd.b.ResendDeadLetters(bd.ctx, "g", []string{dead[0].MessageID}, nil)
	require.NoError(t, err)
	require.Len(t, rr.Resent, 1)
	back := bd.pull(t, "g", "gold", 1, 5*time.Second, time.Minute)
	require.Len(t, back, 1)
	_, err = bd.b.Ack(bd.ctx, "g", []string{back[0].Receipt})
	require.NoError(t, err)

	want := []string{
		`stored id=m1 at=gold/0`,
		`delivered id=m1 group=g client=w1 epoch attempt=1 leaseUntilAfter=true`,
		`pushed id=m1 group=g client= epoch http=503 result=5xx`,
		`nacked id=m1 group=g client=w1 reason="flaky"(5) level=0/true delayMs=200`,
		`retried id=m1 group=g client= delayMs=200 dueNotBefore=true reconsume=1 retry=m2`,
		`delivered id=m2 group=g client=w2 epoch attempt=2 leaseUntilAfter=true`,
		`released id=m2 group=g client= epoch`,
		`delivered id=m2 group=g client=w2 epoch attempt=3 leaseUntilAfter=true`,
		`nacked id=m2 group=g client=w2 reason="éééééé…… [truncated: 800 bytes]"(256) level=-1/true`,
		`dead-lettered id=m2 group=g client= reason="éééééé…… [truncated: 800 bytes]"(256) reconsume=2 dlq=m3`,
		`resent id=m4 group=g client= dlq=m3`,
		`delivered id=m4 group=g client= epoch attempt=4 leaseUntilAfter=true`,
		`acked id=m4 group=g client=`,
	}
	for _, id := range []string{sent.MessageID, retry[0].MessageID, dead[0].MessageID, back[0].MessageID} {
		tr := bd.trace(t, id)
		require.Equal(t, sent.MessageID, tr.OriginMessageID)
		require.False(t, tr.Partial)
		require.False(t, tr.Truncated)
		require.Zero(t, tr.DroppedEvents)
		require.Equal(t, want, goldenTrace(tr), "via %s", id)
	}
	tr := bd.trace(t, sent.MessageID)
	require.Equal(t, retry[0].MessageID, tr.Events[4].RetryMessageID)
	require.Equal(t, dead[0].MessageID, tr.Events[9].DeadLetterID)
	require.Equal(t, back[0].MessageID, tr.Events[10].MessageID)
	for i := 1; i < len(tr.Events); i++ {
		require.False(t, tr.Events[i].At.Before(tr.Events[i-1].At), "time order")
		require.Equal(t, time.UTC, tr.Events[i].At.Location())
	}

	st := bd.b.TraceStats()
	require.True(t, st.Enabled)
	require.NotZero(t, st.Events)
	require.NotZero(t, st.Records)
	require.Zero(t, st.Dropped)
	require.Zero(t, st.Lag, "a trace waits for the follower")
}

func TestTraceGoldenDiscarded(t *testing.T) {
	bd := setup(t)
	sent := bd.send(t, "gone", "a")[0]
	got := bd.pull(t, "g", "gone", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	bd.nack(t, "g", got[0], -1, "no")
	dead, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.NoError(t, bd.b.DiscardDeadLetter(bd.ctx, "g", dead[0].MessageID))
	require.Equal(t, []string{
		`stored id=m1 at=gone/0`,
		`delivered id=m1 group=g client= epoch attempt=1 leaseUntilAfter=true`,
		`nacked id=m1 group=g client= reason="no"(2) level=-1/true`,
		`dead-lettered id=m1 group=g client= reason="no"(2) reconsume=1 dlq=m2`,
		`discarded id=m2 group=g client= dlq=m2`,
	}, goldenTrace(bd.trace(t, sent.MessageID)))
}

func TestTraceGoldenTransactions(t *testing.T) {
	bd := setup(t)
	ids := bd.sendTxns(t, "tx", 2, 60_000)
	_, err := bd.b.CommitTransaction(bd.ctx, ids[0])
	require.NoError(t, err)
	_, err = bd.b.RollbackTransaction(bd.ctx, ids[1])
	require.NoError(t, err)
	got := bd.pull(t, "g", "tx", 1, 5*time.Second, time.Minute)
	require.Len(t, got, 1)
	require.Equal(t, ids[0], got[0].MessageID, "a committed message is shown under the transaction's id")
	_, err = bd.b.Ack(bd.ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)

	committed := bd.trace(t, ids[0])
	require.Equal(t, ids[0], committed.OriginMessageID)
	require.Equal(t, []string{
		`stored id=m1 at=tx/-1 txn=m1`,
		`transaction-committed id=m1 at=tx/0 txn=m1`,
		`delivered id=m1 group=g client= epoch attempt=1 leaseUntilAfter=true`,
		`acked id=m1 group=g client=`,
	}, goldenTrace(committed))
	require.Equal(t, []string{
		`stored id=m1 at=tx/-1 txn=m1`,
		`transaction-rolled-back id=m1 reason="producer"(8) txn=m1`,
	}, goldenTrace(bd.trace(t, ids[1])))
}

// A life longer than MaxTraceEvents: the oldest and the newest half with
// an events-dropped event between them; deliveries are numbered across
// the whole life.
func TestTraceGoldenBound(t *testing.T) {
	bd := setup(t)
	sent := bd.send(t, "busy", "a")[0]
	const cycles = 70 // stored + 70 × (delivered, released) = 141 events
	for i := 0; i < cycles; i++ {
		got := bd.pull(t, "g", "busy", 1, 5*time.Second, time.Minute)
		require.Len(t, got, 1)
		_, err := bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: got[0].Receipt}})
		require.NoError(t, err)
	}
	tr := bd.trace(t, sent.MessageID)
	require.Equal(t, broker.MaxTraceEvents, len(tr.Events))
	require.Equal(t, 141-64-63, tr.DroppedEvents)
	require.False(t, tr.Truncated)
	g := goldenTrace(tr)
	require.Equal(t, `stored id=m1 at=busy/0`, g[0])
	require.Equal(t, `delivered id=m1 group=g client= epoch attempt=1 leaseUntilAfter=true`, g[1])
	require.Equal(t, `delivered id=m1 group=g client= epoch attempt=32 leaseUntilAfter=true`, g[63])
	require.Equal(t, `events-dropped id=- count=14`, g[64])
	require.Equal(t, `released id=m1 group=g client= epoch`, g[65])
	require.Equal(t, `delivered id=m1 group=g client= epoch attempt=40 leaseUntilAfter=true`, g[66])
	require.Equal(t, `delivered id=m1 group=g client= epoch attempt=70 leaseUntilAfter=true`, g[126])
	require.Equal(t, `released id=m1 group=g client= epoch`, g[127])
}

func TestTraceGoldenErrors(t *testing.T) {
	bd := setup(t)
	_, err := bd.b.Trace(bd.ctx, "nonsense")
	require.ErrorIs(t, err, broker.ErrInvalidArgument)
	require.ErrorIs(t, err, message.ErrBadID)
	require.Equal(t, broker.ErrInvalidArgument.Error()+": "+message.ErrBadID.Error()+": length 8, want 32", err.Error())
	sent := bd.send(t, "t", "a")[0]
	mid, err := message.ParseID(sent.MessageID)
	require.NoError(t, err)
	absent := message.NewID(mid.Host(), mid.Offset()+1<<20).String()
	_, err = bd.b.Trace(bd.ctx, absent)
	require.ErrorIs(t, err, broker.ErrMessageNotFound)
	require.Equal(t, broker.ErrMessageNotFound.Error()+": "+absent, err.Error())
}
