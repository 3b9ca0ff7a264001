package clustercheck

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// builder writes hand-made histories on a clock of its own: every
// operation takes 10 ms and starts where the last ended, unless the test
// moves the clock.
type builder struct {
	t      *testing.T
	h      *History
	now    time.Time
	id     int64
	offset int64
	sent   map[string]Message // body → its send result
	recv   int
}

const (
	topic = "t"
	lease = time.Second
)

func newBuilder(t *testing.T) *builder {
	return &builder{t: t, h: NewHistory(), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), sent: map[string]Message{}}
}

// op appends an operation invoked with in and completed as typ with out.
func (b *builder) op(kind Kind, group string, typ Type, in, out []Message) (start, end time.Time) {
	b.id++
	start, end = b.now, b.now.Add(10*time.Millisecond)
	b.now = end
	inv := Event{ID: b.id, Process: 1, Type: Invoke, Kind: kind, Node: "http://n1", Group: group, Topic: topic, Messages: in, Start: start}
	done := inv
	done.Type, done.End, done.Messages = typ, end, out
	if out == nil {
		done.Messages = in
	}
	b.h.Append(inv, done)
	return start, end
}

// send sends bodies in one request; an ok send stores them at the next
// offsets of queue 0.
func (b *builder) send(typ Type, bodies ...string) {
	var in, out []Message
	for _, body := range bodies {
		in = append(in, Message{Body: body})
		if typ == OK {
			m := Message{Body: body, MessageID: fmt.Sprintf("ID%04d", b.offset), Topic: topic, QueueOffset: b.offset}
			b.offset++
			b.sent[body] = m
			out = append(out, m)
		}
	}
	b.op(Send, "", typ, in, out)
}

// original is the delivery of body's original as its send stored it.
func (b *builder) original(body string) Message {
	m, ok := b.sent[body]
	require.True(b.t, ok, "%s was not sent ok", body)
	return m
}

// retryCopy is a delivery of a retry copy of body, stored in group's
// retry queue at offset.
func (b *builder) retryCopy(body string, offset int64) Message {
	orig := b.sent[body]
	return Message{Body: body, MessageID: fmt.Sprintf("RT%04d", offset), OriginID: orig.MessageID, Topic: topic,
		QueueOffset: offset, ReconsumeTimes: 1}
}

// pull delivers msgs to group, each with a new receipt and a lease of
// `lease` from the pull's answer; it returns them as delivered.
func (b *builder) pull(group string, msgs ...Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		b.recv++
		m.Receipt = fmt.Sprintf("r%d", b.recv)
		m.LeaseUntil = b.now.Add(10 * time.Millisecond).Add(lease)
		out[i] = m
	}
	b.op(Pull, group, OK, nil, out)
	return out
}

// settle acks or nacks msgs; an ok request answers status for each.
func (b *builder) settle(kind Kind, group string, typ Type, status string, msgs ...Message) {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		out[i].Status = status
	}
	if typ != OK {
		out = nil
	}
	b.op(kind, group, typ, msgs, out)
}

func (b *builder) ack(group string, msgs ...Message) { b.settle(Ack, group, OK, "ok", msgs...) }

func (b *builder) wait(d time.Duration) { b.now = b.now.Add(d) }

func (b *builder) check() Report {
	r := Check(b.h)
	b.t.Log("\n" + r.String())
	return r
}

func TestCheckCleanHistoryPasses(t *testing.T) {
	b := newBuilder(t)
	b.send(OK, "a")
	b.send(OK, "b", "c")
	b.send(Info, "d") // unknown and never delivered: not lost
	b.send(Info, "e") // unknown and delivered: fine
	b.send(Fail, "f") // never stored, never delivered
	b.h.Append(Event{ID: 99, Type: Invoke, Kind: Pull, Group: "g", Start: b.now})
	got := b.pull("g", b.original("a"), b.original("b"), Message{Body: "e", MessageID: "IDE", Topic: topic, QueueID: 1})
	b.ack("g", got...)
	c := b.pull("g", b.original("c"))
	b.settle(Nack, "g", OK, "ok", c...)
	b.wait(100 * time.Millisecond)
	c = b.pull("g", b.retryCopy("c", 0))
	b.ack("g", c...)
	// A second group gets everything once.
	b.ack("h", b.pull("h", b.original("a"), b.original("b"), b.original("c"))...)

	r := b.check()
	require.True(t, r.OK())
	require.Equal(t, 5, r.SendRequests)
	require.Equal(t, 6, r.Sends)
	require.Equal(t, 3, r.SendsOK)
	require.Equal(t, 2, r.SendsInfo)
	require.Equal(t, 1, r.SendsFail)
	require.Equal(t, 8, r.Deliveries)
	require.Equal(t, 7, r.AcksOK)
	require.Equal(t, 1, r.NacksOK)
	require.Equal(t, Duplicates{Nack: 1}, r.Duplicates)
	require.Len(t, r.Groups, 2)
	require.Equal(t, GroupReport{Group: "g", Deliveries: 5, Delivered: 4, Settled: 4, Duplicates: Duplicates{Nack: 1}}, r.Groups[0])
	require.Equal(t, 4, r.PullsOK)
	require.Equal(t, 1, r.PullsInfo, "the pull without a completion")
}

func TestCheckFindsLostMessages(t *testing.T) {
	t.Run("NeverDelivered", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a", "b")
		b.ack("g", b.pull("g", b.original("a"))...)
		r := b.check()
		require.False(t, r.OK())
		require.Equal(t, 1, r.Lost)
		require.Equal(t, 1, r.Groups[0].LostNever)
		require.Contains(t, r.String(), `"b" sent ok, never delivered to g`)
	})
	t.Run("LostInOneGroupOnly", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.ack("g", b.pull("g", b.original("a"))...)
		b.op(Pull, "h", OK, nil, []Message{}) // h pulled and got nothing
		r := b.check()
		require.Equal(t, 1, r.Lost)
		require.Equal(t, 0, r.Groups[0].LostNever)
		require.Equal(t, 1, r.Groups[1].LostNever)
	})
	t.Run("NackedAndNeverBack", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.settle(Nack, "g", OK, "ok", b.pull("g", b.original("a"))...)
		r := b.check()
		require.Equal(t, 1, r.Groups[0].LostUnsettled)
		require.Equal(t, 1, r.Lost)
	})
	t.Run("AckExpiredAndNeverBack", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		got := b.pull("g", b.original("a"))
		b.wait(2 * lease)
		b.settle(Ack, "g", OK, "expired", got...)
		r := b.check()
		require.Equal(t, 1, r.Groups[0].LostUnsettled)
		require.Equal(t, 1, r.AcksFail)
	})
	t.Run("UnknownAckSettles", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.settle(Ack, "g", Info, "", b.pull("g", b.original("a"))...)
		r := b.check()
		require.True(t, r.OK())
		require.Equal(t, 1, r.AcksInfo)
	})
}

func TestCheckFindsUnexpectedMessages(t *testing.T) {
	t.Run("NeverSent", func(t *testing.T) {
		b := newBuilder(t)
		b.ack("g", b.pull("g", Message{Body: "ghost", MessageID: "X", Topic: topic})...)
		r := b.check()
		require.False(t, r.OK())
		require.Equal(t, 1, r.Unexpected)
		require.Contains(t, r.String(), "never sent")
	})
	t.Run("SendFailed", func(t *testing.T) {
		b := newBuilder(t)
		b.send(Fail, "a")
		b.send(Fail, "a") // a second attempt with the same outcome
		b.ack("g", b.pull("g", Message{Body: "a", MessageID: "X", Topic: topic})...)
		r := b.check()
		require.Equal(t, 1, r.Unexpected)
		require.Equal(t, 1, r.SendsFail)
		require.Contains(t, r.String(), "its every send failed")
	})
	t.Run("LongPollInvokedBeforeTheSend", func(t *testing.T) {
		b := newBuilder(t)
		pullStart := b.now
		b.wait(time.Millisecond)
		b.send(OK, "a")
		m := b.original("a")
		m.Receipt, m.LeaseUntil = "r", b.now.Add(lease)
		b.h.Append(Event{ID: 100, Type: Invoke, Kind: Pull, Group: "g", Start: pullStart},
			Event{ID: 100, Type: OK, Kind: Pull, Group: "g", Start: pullStart, End: b.now, Messages: []Message{m}})
		b.ack("g", m)
		require.True(t, b.check().OK())
	})
	t.Run("FailThenUnknownIsExpected", func(t *testing.T) {
		b := newBuilder(t)
		b.send(Fail, "a")
		b.send(Info, "a")
		b.ack("g", b.pull("g", Message{Body: "a", MessageID: "X", Topic: topic})...)
		require.True(t, b.check().OK())
	})
}

func TestCheckFindsIllegalDuplicates(t *testing.T) {
	t.Run("AfterOkAck", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.ack("g", b.pull("g", b.original("a"))...)
		b.wait(5 * lease)
		b.ack("g", b.pull("g", b.retryCopy("a", 0))...)
		r := b.check()
		require.False(t, r.OK())
		require.Equal(t, 1, r.IllegalDuplicates)
		require.Equal(t, 1, r.Groups[0].IllegalDuplicates)
		require.Contains(t, r.String(), "after an ok ack")
	})
	t.Run("OriginalAgainAfterOkAck", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.ack("g", b.pull("g", b.original("a"))...)
		b.wait(time.Millisecond)
		b.ack("g", b.pull("g", b.original("a"))...)
		require.Equal(t, 1, b.check().IllegalDuplicates)
	})
	t.Run("OtherGroupIsNoDuplicate", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.ack("g", b.pull("g", b.original("a"))...)
		b.ack("h", b.pull("h", b.original("a"))...)
		r := b.check()
		require.True(t, r.OK())
		require.Zero(t, r.Duplicates.Total())
	})
	t.Run("PullConcurrentWithAckIsLegal", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		got := b.pull("g", b.original("a"))
		// The second pull is invoked before the ack completes, and
		// answers the copy: a race the client cannot order.
		b.id++
		pullStart := b.now
		b.wait(lease + 50*time.Millisecond)
		b.ack("g", got...)
		again := b.retryCopy("a", 0)
		again.Receipt, again.LeaseUntil = "late", b.now.Add(lease)
		b.h.Append(Event{ID: b.id + 100, Type: Invoke, Kind: Pull, Group: "g", Start: pullStart},
			Event{ID: b.id + 100, Type: OK, Kind: Pull, Group: "g", Start: pullStart, End: b.now, Messages: []Message{again}})
		r := b.check()
		require.Zero(t, r.IllegalDuplicates)
		require.Equal(t, 1, r.Duplicates.Total())
	})
}

func TestCheckCountsLegitimateDuplicatesByCause(t *testing.T) {
	b := newBuilder(t)
	b.send(OK, "nacked", "expired", "unknown", "early")
	b.settle(Nack, "g", Info, "", b.pull("g", b.original("nacked"))...)
	b.ack("g", b.pull("g", b.retryCopy("nacked", 0))...)

	got := b.pull("g", b.original("expired"))
	b.wait(lease)
	b.settle(Ack, "g", OK, "expired", got...)
	b.ack("g", b.pull("g", b.retryCopy("expired", 1))...)

	b.settle(Ack, "g", Info, "", b.pull("g", b.original("unknown"))...)
	b.ack("g", b.pull("g", b.retryCopy("unknown", 2))...)

	b.pull("g", b.original("early"))
	b.ack("g", b.pull("g", b.original("early"))...)

	r := b.check()
	require.True(t, r.OK(), "legitimate duplicates fail nothing")
	require.Equal(t, Duplicates{Nack: 1, LeaseExpiry: 1, UnknownAck: 1, Other: 1}, r.Duplicates)
	require.Equal(t, 4, r.Duplicates.Total())
	require.Contains(t, r.String(), "early redelivery")
}

func TestCheckFindsInconsistentOffsets(t *testing.T) {
	t.Run("TwoBodiesAtOnePosition", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.offset-- // the gateway hands out a's offset again
		b.send(OK, "b")
		r := b.check()
		require.False(t, r.OK())
		require.Positive(t, r.InconsistentOffsets)
		require.Contains(t, r.String(), `t/0@0 holds "a" and "b"`)
	})
	t.Run("DeliveredElsewhere", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		m := b.original("a")
		m.QueueOffset = 7 // stored twice, or the send result lied
		m.MessageID = "OTHER"
		b.ack("g", b.pull("g", m)...)
		r := b.check()
		require.Equal(t, 1, r.InconsistentOffsets)
		require.Contains(t, r.String(), `"a" stored at 2 places`)
	})
	t.Run("OneIDTwoBodies", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a", "b")
		m := b.original("b")
		m.MessageID = b.original("a").MessageID
		b.ack("g", b.pull("g", b.original("a"), m)...)
		r := b.check()
		require.Equal(t, 1, r.InconsistentOffsets)
		require.Contains(t, r.String(), "names \"a\" and \"b\"")
	})
	t.Run("RetryCopyOfAnotherOrigin", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a", "b")
		b.settle(Nack, "g", OK, "ok", b.pull("g", b.original("a"))...)
		c := b.retryCopy("a", 0)
		c.OriginID = b.original("b").MessageID
		b.ack("g", b.pull("g", c)...)
		b.ack("g", b.pull("g", b.original("b"))...)
		r := b.check()
		require.Equal(t, 1, r.InconsistentOffsets)
		require.Contains(t, r.String(), "names origin")
	})
	t.Run("TwoSendResults", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.send(OK, "a") // an idempotent retry that stored it again
		r := b.check()
		require.Equal(t, 1, r.InconsistentOffsets)
	})
	t.Run("ReplayedSendResultIsConsistent", func(t *testing.T) {
		b := newBuilder(t)
		b.send(OK, "a")
		b.offset--
		b.send(OK, "a") // the replay answers the first result
		b.ack("g", b.pull("g", b.original("a"))...)
		require.True(t, b.check().OK())
	})
}

func TestCheckMeasuresWriteUnavailability(t *testing.T) {
	b := newBuilder(t)
	b.send(OK, "before")
	kills := []time.Duration{300 * time.Millisecond, 100 * time.Millisecond, 900 * time.Millisecond}
	for i, down := range kills {
		b.h.Fault(fmt.Sprintf("kill %d", i), b.now)
		b.send(Info, fmt.Sprintf("k%d-refused", i))
		b.wait(down - 20*time.Millisecond)
		b.send(OK, fmt.Sprintf("k%d", i)) // ends down after the fault
		b.wait(time.Second)
	}
	b.h.Fault("last", b.now)
	b.send(Info, "never")
	r := b.check()
	require.Len(t, r.Unavailability, 4)
	require.Equal(t, 300*time.Millisecond, r.Unavailability[0].Duration)
	require.Equal(t, 100*time.Millisecond, r.Unavailability[1].Duration)
	require.Equal(t, 900*time.Millisecond, r.Unavailability[2].Duration)
	require.False(t, r.Unavailability[3].Recovered)
	require.Equal(t, 10*time.Millisecond, r.Unavailability[3].Duration, "to the history's end")
	require.Equal(t, 100*time.Millisecond, r.UnavailableP50)
	require.Equal(t, 900*time.Millisecond, r.UnavailableP99)
	require.Equal(t, 900*time.Millisecond, r.UnavailableMax)
	require.Contains(t, r.String(), "no ok send after it")
	require.True(t, r.OK(), "unavailability is measured, not failed")
}

func TestQuantile(t *testing.T) {
	ds := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.Equal(t, time.Duration(5), quantile(ds, 0.5))
	require.Equal(t, time.Duration(10), quantile(ds, 0.99))
	require.Equal(t, time.Duration(1), quantile(ds[:1], 0.99))
	require.Zero(t, quantile(nil, 0.5))
}

// TestHistoryConcurrentRecording: operations recorded from many
// goroutines keep distinct ids and pair up (run with -race).
func TestHistoryConcurrentRecording(t *testing.T) {
	h := NewHistory()
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for i := range 100 {
				o := h.Invoke(Event{Process: p, Kind: Send, Messages: []Message{{Body: fmt.Sprintf("%d-%d", p, i)}}})
				o.Complete(OK, []Message{{Body: fmt.Sprintf("%d-%d", p, i), MessageID: fmt.Sprintf("%d-%d", p, i), QueueOffset: int64(p*100 + i)}}, 200, nil)
				if i%10 == 0 {
					h.Fault("f", time.Now())
				}
			}
		})
	}
	wg.Wait()
	evs := h.Events()
	require.Len(t, evs, 1600)
	require.Len(t, h.Faults(), 80)
	ids := map[int64]int{}
	for _, ev := range evs {
		ids[ev.ID]++
		if ev.Type != Invoke {
			require.False(t, ev.End.Before(ev.Start))
		}
	}
	require.Len(t, ids, 800)
	r := Check(h)
	require.Equal(t, 800, r.SendsOK)
	require.True(t, r.OK())
}

func TestClassify(t *testing.T) {
	require.Equal(t, OK, classify(200, nil))
	require.Equal(t, Info, classify(0, fmt.Errorf("connection refused")))
	require.Equal(t, Info, classify(0, fmt.Errorf("decode answer")), "a 200 that could not be read")
	for _, s := range []int{400, 404, 413, 422, 429} {
		require.Equal(t, Fail, classify(s, errStatus), s)
	}
	for _, s := range []int{409, 500, 502, 503, 504, 507} {
		require.Equal(t, Info, classify(s, errStatus), s)
	}
}

// keyedSend is an ok send of bodies with sharding key k, stored at the
// offsets given (queue q).
func (b *builder) keyedSend(k string, q int32, bodies []string, offsets ...int64) {
	var in, out []Message
	for i, body := range bodies {
		in = append(in, Message{Body: body, ShardingKey: k})
		m := Message{Body: body, ShardingKey: k, MessageID: fmt.Sprintf("K%s%04d", k, offsets[i]), Topic: topic, QueueID: q, QueueOffset: offsets[i]}
		b.sent[body] = m
		out = append(out, m)
	}
	b.op(Send, "", OK, in, out)
}

func TestCheckFindsPerKeyOrderViolations(t *testing.T) {
	settleAll := func(b *builder, bodies ...string) {
		for _, body := range bodies {
			b.ack("g", b.pull("g", b.original(body))...)
		}
	}
	t.Run("InOrder", func(t *testing.T) {
		b := newBuilder(t)
		b.keyedSend("k", 1, []string{"a", "b"}, 0, 1)
		b.keyedSend("k", 1, []string{"c"}, 5)
		b.keyedSend("other", 2, []string{"d"}, 0) // another key's offsets are its own
		settleAll(b, "a", "b", "c", "d")
		r := b.check()
		require.True(t, r.OK(), r.String())
		require.Zero(t, r.OrderViolations)
	})
	t.Run("LaterSendStoredBefore", func(t *testing.T) {
		b := newBuilder(t)
		b.keyedSend("k", 1, []string{"a"}, 4)
		b.keyedSend("k", 1, []string{"b"}, 3) // a failover that reordered the key
		settleAll(b, "a", "b")
		r := b.check()
		require.False(t, r.OK())
		require.Equal(t, 1, r.OrderViolations)
		require.Contains(t, r.String(), "key k: a at queue 1 offset 4, then b (sent after it) at queue 1 offset 3")
	})
	t.Run("KeyOnTwoQueues", func(t *testing.T) {
		b := newBuilder(t)
		b.keyedSend("k", 1, []string{"a"}, 0)
		b.keyedSend("k", 2, []string{"b"}, 1)
		settleAll(b, "a", "b")
		require.Equal(t, 1, b.check().OrderViolations)
	})
	t.Run("BatchOutOfOrder", func(t *testing.T) {
		b := newBuilder(t)
		b.keyedSend("k", 1, []string{"a", "b"}, 1, 0)
		settleAll(b, "a", "b")
		r := b.check()
		require.Equal(t, 1, r.OrderViolations)
		require.Contains(t, r.String(), "(in one batch)")
	})
	t.Run("OverlappingSendsAreNotOrdered", func(t *testing.T) {
		b := newBuilder(t)
		b.keyedSend("k", 1, []string{"a"}, 4)
		// b invoked before a ended: concurrent, either order is fine.
		b.id++
		inv := Event{ID: b.id, Process: 2, Type: Invoke, Kind: Send, Node: "http://n1", Topic: topic,
			Messages: []Message{{Body: "b", ShardingKey: "k"}}, Start: b.now.Add(-5 * time.Millisecond)}
		m := Message{Body: "b", ShardingKey: "k", MessageID: "KB", Topic: topic, QueueID: 1, QueueOffset: 3}
		b.sent["b"] = m
		done := inv
		done.Type, done.End, done.Messages = OK, b.now.Add(time.Millisecond), []Message{m}
		b.h.Append(inv, done)
		settleAll(b, "a", "b")
		require.Zero(t, b.check().OrderViolations)
	})
}
