package broker

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage/offset"
)

// The pop states' bookkeeping, pinned with the code from before the pop
// states moved to server/broker/lease: what a pull, a lease change
// (longer; to 0 for a message without a key, which rewinds the cursor; to
// 0 for an ordered message, which waits in place), a nack (sent back; an
// ordered message's in place, then dead), the lease reaper (an expired
// lease sent back; an ordered one retried in place) and the re-offers of
// due and deferred ordered messages do to the cursors (their next offset,
// every lease with its epoch, deadline, client, key, state, failures and
// deliveries, the keys held and the offsets deferred) and to the progress
// table, what each request answers, and the rmq_sys_LEASE records they
// write.

// goldenPops lists the cursors of every pop state, one line per cursor,
// lease, busy key and deferred key; epochs above base.
func goldenPops(b *Broker, base uint64) []string {
	var out []string
	states := b.consume.States()
	for k, ps := range states {
		ps.Lock()
		for qid, c := range ps.Cursors() {
			out = append(out, fmt.Sprintf("%s/%s/%d next=%d", k.Group, k.Topic, qid, c.Next()))
			for off, l := range c.Leases() {
				d := l.Deadline()
				if l.Waiting() {
					d = l.RetryAt()
				}
				out = append(out, fmt.Sprintf("%s/%s/%d@%d e+%d d%d client=%q key=%q waiting=%v failures=%d deliveries=%d history=%d settling=%v sendingBack=%v",
					k.Group, k.Topic, qid, off, l.Epoch()-base, d.UnixMilli(), l.Client(), l.Key(), l.Waiting(), l.Failures(), l.Deliveries(), len(historyOf(l)), l.Settling(), l.SendingBack()))
			}
			for key, off := range c.Busy() {
				out = append(out, fmt.Sprintf("%s/%s/%d busy %q@%d", k.Group, k.Topic, qid, key, off))
			}
			for key, offs := range c.Deferred() {
				out = append(out, fmt.Sprintf("%s/%s/%d deferred %q%v", k.Group, k.Topic, qid, key, offs))
			}
		}
		ps.Unlock()
	}
	sort.Strings(out)
	return out
}

// historyOf is l's in-place attempt history (package lease holds it
// opaque).
func historyOf(l *leaselog.Lease) []Attempt {
	h, _ := l.History().([]Attempt)
	return h
}

// goldenPopProgress is what the progress table says of offsets 0..3 of
// group's queue 0 of orders.
func goldenPopProgress(b *Broker, group string) string {
	key := offset.Key{Group: group, Topic: "orders", QueueID: 0}
	committed, _, _ := b.progress.Get(key)
	s := fmt.Sprintf("%s committed=%d", group, committed)
	for off := int64(0); off < 4; off++ {
		s += fmt.Sprintf(" %d:acked=%v,failed=%v", off, b.progress.IsAcked(key, off), b.progress.IsFailed(key, off))
	}
	return s
}

// goldenPopPulled is a pull's messages: offset, reconsume count, lease end.
func goldenPopPulled(msgs []ReceivedMessage) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, fmt.Sprintf("%s@%d r%d u%d", m.Topic, m.QueueOffset, m.ReconsumeTimes, m.LeaseUntil.UnixMilli()))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// goldenPopStatuses is a receipt request's statuses.
func goldenPopStatuses(res []ReceiptResult, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var parts []string
	for _, r := range res {
		s := string(r.Status)
		if !r.LeaseUntil.IsZero() {
			s += fmt.Sprintf(" u%d", r.LeaseUntil.UnixMilli())
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// goldenPopRecords is every rmq_sys_LEASE record, decoded, one line per
// entry, epochs above base.
func goldenPopRecords(t *testing.T, b *Broker, base uint64) []string {
	t.Helper()
	var out []string
	for i, m := range leaseQueue(t, b, 0) {
		rec, err := leaselog.DecodeRecord(m.Body)
		require.NoError(t, err)
		for _, e := range rec.Entries {
			s := fmt.Sprintf("%d %s/%s/%d gen=%d at=%d client=%q", i, e.Key.Group, e.Key.Topic, e.Key.QueueID, e.Generation, e.At, e.Client)
			for _, it := range e.Items {
				s += fmt.Sprintf(" [%d e+%d d%d f%d s%d]", it.Offset, it.Epoch-base, it.Deadline, it.Failures, it.State)
			}
			out = append(out, s)
		}
	}
	return out
}

// goldenPopsWant is the transcript of TestGoldenPopStates.
var goldenPopsWant = `pull g c1: [orders@0 r0 u1700000010123 orders@1 r0 u1700000010123 orders@2 r0 u1700000010123 orders@3 r0 u1700000010123]
-- g pulled
g/orders/-1 next=0
g/orders/0 next=4
g/orders/0@0 e+1 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@1 e+2 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@2 e+3 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@3 e+4 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=false,failed=false
o committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=false,failed=false
change g@0 30s, g@1 0: ok u1700000031123,ok u1700000001123
-- g changed
g/orders/-1 next=0
g/orders/0 next=1
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@2 e+3 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@3 e+4 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=false,failed=false
o committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=false,failed=false
pull g c2: [orders@1 r0 u1700000011123]
nack g@2 level 1: ok
ack g@1 old, new: expired,ok
-- g nacked
g/orders/-1 next=0
g/orders/0 next=2
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@3 e+4 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 3:acked=false,failed=false
o committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=false,failed=false
pull o c3: [orders@0 r0 u1700000011123 orders@2 r0 u1700000011123 orders@3 r0 u1700000011123]
-- o pulled
g/orders/-1 next=0
g/orders/0 next=2
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@3 e+4 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/-1 next=0
o/orders/0 busy "j"@2
o/orders/0 busy "k"@0
o/orders/0 deferred "k"[1]
o/orders/0 next=4
o/orders/0@0 e+6 d1700000011123 client="c3" key="k" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/0@2 e+7 d1700000011123 client="c3" key="j" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/0@3 e+8 d1700000011123 client="c3" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 3:acked=false,failed=false
o committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=false,failed=false
nack o@0 level 1: ok
change o@2 0: ok u1700000001123
-- o failed in place
g/orders/-1 next=0
g/orders/0 next=2
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@3 e+4 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/-1 next=0
o/orders/0 busy "j"@2
o/orders/0 busy "k"@0
o/orders/0 deferred "k"[1]
o/orders/0 next=4
o/orders/0@0 e+9 d1700000002123 client="c3" key="k" waiting=true failures=1 deliveries=1 history=1 settling=false sendingBack=false
o/orders/0@2 e+10 d1700000001123 client="c3" key="j" waiting=true failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/0@3 e+8 d1700000011123 client="c3" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 3:acked=false,failed=false
o committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=false,failed=false
pull o c4: [orders@2 r0 u1700000011123]
-- o offered again
g/orders/-1 next=0
g/orders/0 next=2
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g/orders/0@3 e+4 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/-1 next=0
o/orders/0 busy "j"@2
o/orders/0 busy "k"@0
o/orders/0 deferred "k"[1]
o/orders/0 next=4
o/orders/0@0 e+9 d1700000002123 client="c3" key="k" waiting=true failures=1 deliveries=1 history=1 settling=false sendingBack=false
o/orders/0@2 e+11 d1700000011123 client="c4" key="j" waiting=false failures=0 deliveries=2 history=0 settling=false sendingBack=false
o/orders/0@3 e+8 d1700000011123 client="c3" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 3:acked=false,failed=false
o committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=false,failed=false
-- reaped
g/orders/-1 next=0
g/orders/0 next=2
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/-1 next=0
o/orders/0 busy "j"@2
o/orders/0 busy "k"@0
o/orders/0 deferred "k"[1]
o/orders/0 next=4
o/orders/0@0 e+9 d1700000002123 client="c3" key="k" waiting=true failures=1 deliveries=1 history=1 settling=false sendingBack=false
o/orders/0@2 e+12 d1700000022123 client="c4" key="j" waiting=true failures=1 deliveries=2 history=1 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 3:acked=true,failed=true
o committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=true,failed=true
ack g@3 (expired): expired
pull o c5: [orders@0 r1 u1700000022123]
-- o@0 offered again
g/orders/-1 next=0
g/orders/0 next=2
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/-1 next=0
o/orders/0 busy "j"@2
o/orders/0 busy "k"@0
o/orders/0 deferred "k"[1]
o/orders/0 next=4
o/orders/0@0 e+13 d1700000022123 client="c5" key="k" waiting=false failures=1 deliveries=2 history=1 settling=false sendingBack=false
o/orders/0@2 e+12 d1700000022123 client="c4" key="j" waiting=true failures=1 deliveries=2 history=1 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 3:acked=true,failed=true
o committed=0 0:acked=false,failed=false 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=true,failed=true
nack o@0 again: ok
-- o@0 dead
g/orders/-1 next=0
g/orders/0 next=2
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/-1 next=0
o/orders/0 busy "j"@2
o/orders/0 deferred "k"[1]
o/orders/0 next=4
o/orders/0@2 e+12 d1700000022123 client="c4" key="j" waiting=true failures=1 deliveries=2 history=1 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 3:acked=true,failed=true
o committed=1 0:acked=true,failed=true 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=true,failed=true
pull o c6: [orders@1 r0 u1700000022123]
-- o@1 offered
g/orders/-1 next=0
g/orders/0 next=2
g/orders/0@0 e+1 d1700000031123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/-1 next=0
o/orders/0 busy "j"@2
o/orders/0 busy "k"@1
o/orders/0 next=4
o/orders/0@1 e+14 d1700000022123 client="c6" key="k" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
o/orders/0@2 e+12 d1700000022123 client="c4" key="j" waiting=true failures=1 deliveries=2 history=1 settling=false sendingBack=false
g committed=0 0:acked=false,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 3:acked=true,failed=true
o committed=1 0:acked=true,failed=true 1:acked=false,failed=false 2:acked=false,failed=false 3:acked=true,failed=true
dead letter of o: reconsume=2
-- lease records
0 g/orders/0 gen=0 at=1700000000123 client="c1" [0 e+1 d1700000010123 f0 s1] [1 e+2 d1700000010123 f0 s1] [2 e+3 d1700000010123 f0 s1] [3 e+4 d1700000010123 f0 s1]
1 g/orders/0 gen=0 at=1700000001123 client="c1" [0 e+1 d1700000031123 f0 s1]
1 g/orders/0 gen=0 at=1700000001123 client="" [1 e+2 d0 f0 s3]
2 g/orders/0 gen=0 at=1700000001123 client="c2" [1 e+5 d1700000011123 f0 s1]
3 o/orders/0 gen=0 at=1700000001123 client="c3" [0 e+6 d1700000011123 f0 s1] [2 e+7 d1700000011123 f0 s1] [3 e+8 d1700000011123 f0 s1]
4 o/orders/0 gen=0 at=1700000001123 client="c3" [0 e+9 d1700000002123 f1 s2]
5 o/orders/0 gen=0 at=1700000001123 client="c3" [2 e+10 d1700000001123 f0 s2]
6 o/orders/0 gen=0 at=1700000001123 client="c4" [2 e+11 d1700000011123 f0 s1]
7 o/orders/0 gen=0 at=1700000012123 client="c4" [2 e+12 d1700000022123 f1 s2]
8 o/orders/0 gen=0 at=1700000012123 client="c5" [0 e+13 d1700000022123 f1 s1]
9 o/orders/0 gen=0 at=1700000012123 client="c6" [1 e+14 d1700000022123 f0 s1]`

func TestGoldenPopStates(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenLeaseAt)
	b := openReplica(t, replicaOptions(fc, false))
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 1})
	require.NoError(t, err)
	for _, g := range []GroupConfig{{Name: "g", RetryMaxTimes: 16}, {Name: "o", Orderly: true, RetryMaxTimes: 1}} {
		_, _, err := b.PutGroup(ctx, g)
		require.NoError(t, err)
	}
	var msgs []SendMessage
	for i, k := range []string{"k", "k", "j", ""} {
		msgs = append(msgs, SendMessage{Body: []byte(fmt.Sprintf("m%d", i)), ShardingKey: k})
	}
	_, err = b.Send(ctx, "orders", msgs)
	require.NoError(t, err)
	base := b.epoch.Load()

	var log []string
	say := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	state := func(step string) {
		say("-- %s", step)
		log = append(log, goldenPops(b, base)...)
		say("%s", goldenPopProgress(b, "g"))
		say("%s", goldenPopProgress(b, "o"))
	}
	pull := func(client, group string, n int) []ReceivedMessage {
		got, err := b.Pull(WithClient(ctx, client), PullRequest{Group: group, Topic: "orders", MaxMessages: n, Invisible: 10 * time.Second})
		require.NoError(t, err)
		say("pull %s %s: %s", group, client, goldenPopPulled(got))
		return got
	}
	// reap runs the lease reaper and waits for the leader's own reaper,
	// which the clock's advance may have started, to finish its send-backs.
	reap := func() {
		b.consume.ReapExpired()
		require.Eventually(t, func() bool {
			for _, l := range goldenPops(b, base) {
				if strings.Contains(l, "sendingBack=true") {
					return false
				}
			}
			return true
		}, 5*time.Second, time.Millisecond)
	}

	// A clustering group: a lease extended, one changed to 0 (released, the
	// cursor rewound, offered again), one nacked, one left to expire.
	g := pull("c1", "g", 4)
	require.Len(t, g, 4)
	state("g pulled")
	fc.Advance(time.Second)
	res, err := b.ChangeLease(ctx, "g", []LeaseItem{{Receipt: g[0].Receipt, Invisible: 30 * time.Second}, {Receipt: g[1].Receipt, Invisible: 0}})
	say("change g@0 30s, g@1 0: %s", goldenPopStatuses(res, err))
	state("g changed")
	g1 := pull("c2", "g", 1)
	require.Len(t, g1, 1)
	res, err = b.Nack(WithClient(ctx, "c1"), "g", []NackItem{{Receipt: g[2].Receipt, DelayLevel: 1, Reason: "bad"}})
	say("nack g@2 level 1: %s", goldenPopStatuses(res, err))
	res, err = b.Ack(ctx, "g", []string{g[1].Receipt, g1[0].Receipt})
	say("ack g@1 old, new: %s", goldenPopStatuses(res, err))
	state("g nacked")

	// An orderly group: the key's later message deferred, a nack retried in
	// place, a lease to 0 waiting in place, offered again.
	o := pull("c3", "o", 4)
	require.Len(t, o, 3)
	state("o pulled")
	res, err = b.Nack(WithClient(ctx, "c3"), "o", []NackItem{{Receipt: o[0].Receipt, DelayLevel: 1, Reason: "bad"}})
	say("nack o@0 level 1: %s", goldenPopStatuses(res, err))
	res, err = b.ChangeLease(ctx, "o", []LeaseItem{{Receipt: o[1].Receipt, Invisible: 0}})
	say("change o@2 0: %s", goldenPopStatuses(res, err))
	state("o failed in place")
	pull("c4", "o", 4)
	state("o offered again")

	// The reaper: g@3 and o@3 (no key) sent back, o@2 retried in place.
	fc.Advance(11 * time.Second)
	reap()
	state("reaped")
	res, err = b.Ack(ctx, "g", []string{g[3].Receipt})
	say("ack g@3 (expired): %s", goldenPopStatuses(res, err))

	// o@0 due: offered again, then dead after its retries; its key's
	// deferred message follows.
	o2 := pull("c5", "o", 4)
	state("o@0 offered again")
	for _, m := range o2 {
		if m.QueueOffset == 0 {
			res, err = b.Nack(WithClient(ctx, "c5"), "o", []NackItem{{Receipt: m.Receipt, Reason: "worse"}})
			say("nack o@0 again: %s", goldenPopStatuses(res, err))
		}
	}
	state("o@0 dead")
	pull("c6", "o", 4)
	state("o@1 offered")
	dead, _, err := b.ListDeadLetters(ctx, "o", DLQFilter{}, "", 10)
	require.NoError(t, err)
	for _, d := range dead {
		say("dead letter of o: reconsume=%d", d.ReconsumeTimes)
	}
	say("-- lease records")
	log = append(log, goldenPopRecords(t, b, base)...)

	got := strings.Join(log, "\n")
	if got != goldenPopsWant {
		t.Errorf("transcript:\n%s", got)
	}
}
