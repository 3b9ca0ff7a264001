package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/offset"
)

// The consumer's requests, pinned with the code from before they moved to
// server/broker/consume: a pull's checks and what it refuses, its tag and
// SQL filters (the request's and the group's subscription) with the
// offsets they pass over marked consumed, the retry view's filter, a long
// poll woken by a send and one that runs out on the clock; the receipt
// loop's answers to invalid, foreign, stale, repeated and settled
// receipts, and the checks of Ack, ChangeLease and Nack; a broadcasting
// group's instances: each pulls every message, retries in place (a nack,
// an expiry found by the reaper) and dead-letters naming the instance.
// TestGoldenPopStates (pop_golden_internal_test.go) pins the cursors'
// bookkeeping and the lease records beside these.

// goldenConsumeBroker is a broker on fc with the topics and groups of the
// consume goldens.
func goldenConsumeBroker(t *testing.T, fc clockwork.Clock) *Broker {
	t.Helper()
	b := openReplica(t, replicaOptions(fc, false))
	ctx := context.Background()
	for _, tc := range []TopicConfig{{Name: "f", Queues: 1}, {Name: "wo", Queues: 1, Perm: "w"}, {Name: "lp", Queues: 2}} {
		_, _, err := b.PutTopic(ctx, tc)
		require.NoError(t, err)
	}
	for _, g := range []GroupConfig{
		{Name: "sub", RetryMaxTimes: 16, Subscriptions: []Subscription{{Topic: "f", TagExpression: "a || c", SQL: "n > 1"}}},
		{Name: "plain", RetryMaxTimes: 16},
		{Name: "bc", ConsumeMode: ConsumeBroadcasting, RetryMaxTimes: 1},
	} {
		_, _, err := b.PutGroup(ctx, g)
		require.NoError(t, err)
	}
	return b
}

// goldenConsumeProgress is what the progress table says of key's offsets
// below n.
func goldenConsumeProgress(b *Broker, key offset.Key, n int64) string {
	committed, _, _ := b.progress.Get(key)
	s := fmt.Sprintf("%s/%s/%d committed=%d", key.Group, key.Topic, key.QueueID, committed)
	for off := int64(0); off < n; off++ {
		if b.progress.IsAcked(key, off) || b.progress.IsFailed(key, off) {
			s += fmt.Sprintf(" %d:acked=%v,failed=%v", off, b.progress.IsAcked(key, off), b.progress.IsFailed(key, off))
		}
	}
	return s
}

// goldenConsumeResults is a receipt request's statuses with their texts.
func goldenConsumeResults(res []ReceiptResult, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var parts []string
	for _, r := range res {
		s := string(r.Status)
		if r.Error != "" {
			s += " (" + r.Error + ")"
		}
		if !r.LeaseUntil.IsZero() {
			s += fmt.Sprintf(" u%d", r.LeaseUntil.UnixMilli())
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// goldenConsumePulled is a pull's messages with their bodies.
func goldenConsumePulled(msgs []ReceivedMessage, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	var parts []string
	for _, m := range msgs {
		parts = append(parts, fmt.Sprintf("%s/%d@%d %q tag=%q r%d u%d", m.Topic, m.QueueID, m.QueueOffset, m.Body, m.Tag, m.ReconsumeTimes, m.LeaseUntil.UnixMilli()))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

var goldenConsumePullChecksWant = `bad group: error: invalid name: group name "a b" may only contain letters, digits, '_' and '-'
maxMessages 33: error: invalid argument: maxMessages must be 1..32
maxMessages -1: error: invalid argument: maxMessages must be 1..32
wait 31s: error: invalid argument: wait must be 0..30s
invisible -1s: error: invalid argument: invisibility must be 0..12h0m0s
bad sql: error: invalid SQL filter: sql at position 4: expected a property, a literal ('text', a number, TRUE, FALSE, NULL) or (, found the end of the expression
broker property in sql: error: invalid SQL filter: sql at position 1: UNIQ_KEY is a property of the broker; a filter reads the message's own properties and TAGS (its tag)
unknown topic: error: topic not found: nope
write-only topic: error: invalid argument: topic wo is write-only (perm w)
unknown group, no auto-create: error: group not found: newgroup
bad tag expression: error: invalid argument: tag expression "a b": tags are separated by '||' and contain no white space
long tag expression: error: value too long: tagExpression is 4097 bytes; the limit is 4096 bytes
broadcasting group without a client: error: client id required: group bc is broadcasting: every consumer instance names itself with X-Mqgate-Client-Id
auto-created group: [] groups=true`

// TestGoldenConsumePullChecks pins what a pull refuses, and its error
// texts.
func TestGoldenConsumePullChecks(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenLeaseAt)
	b := goldenConsumeBroker(t, fc)
	ctx := context.Background()
	var log []string
	try := func(what string, req PullRequest) {
		if req.Topic == "" {
			req.Topic = "f"
		}
		if req.Group == "" {
			req.Group = "plain"
		}
		got, err := b.Pull(ctx, req)
		log = append(log, fmt.Sprintf("%s: %s", what, goldenConsumePulled(got, err)))
	}
	try("bad group", PullRequest{Group: "a b"})
	try("maxMessages 33", PullRequest{MaxMessages: 33})
	try("maxMessages -1", PullRequest{MaxMessages: -1})
	try("wait 31s", PullRequest{Wait: 31 * time.Second})
	try("invisible -1s", PullRequest{Invisible: -time.Second})
	try("bad sql", PullRequest{SQL: "n >"})
	try("broker property in sql", PullRequest{SQL: "UNIQ_KEY = 'x'"})
	try("unknown topic", PullRequest{Topic: "nope"})
	try("write-only topic", PullRequest{Topic: "wo"})
	try("unknown group, no auto-create", PullRequest{Group: "newgroup", NoAutoCreate: true})
	try("bad tag expression", PullRequest{TagExpression: "a b"})
	try("long tag expression", PullRequest{TagExpression: strings.Repeat("a", MaxTagExpressionBytes+1)})
	try("broadcasting group without a client", PullRequest{Group: "bc"})
	got, err := b.Pull(ctx, PullRequest{Group: "newgroup", Topic: "f"})
	_, ok := b.registry.Group("newgroup")
	log = append(log, fmt.Sprintf("auto-created group: %s groups=%v", goldenConsumePulled(got, err), ok))

	if got := strings.Join(log, "\n"); got != goldenConsumePullChecksWant {
		t.Errorf("transcript:\n%s", got)
	}
}

var goldenConsumeFiltersWant = `sub (a || c, n > 1): [f/0@2 "m2" tag="c" r0 u1700000010123 f/0@3 "m3" tag="a" r0 u1700000010123 f/0@4 "m4" tag="c" r0 u1700000010123]
  sub/f/0 committed=2 0:acked=true,failed=false 1:acked=true,failed=false 5:acked=true,failed=false
  sub/f/-1 committed=0
plain, tag b: [f/0@1 "m1" tag="b" r0 u1700000010123 f/0@5 "m5" tag="b" r0 u1700000010123]
plain, sql n = 3: []
  plain/f/0 committed=1 0:acked=true,failed=false 2:acked=true,failed=false 3:acked=true,failed=false 4:acked=true,failed=false
  plain/f/-1 committed=0
plain, tag c and sql n < 5: []
  plain/f/0 committed=1 0:acked=true,failed=false 2:acked=true,failed=false 3:acked=true,failed=false 4:acked=true,failed=false
  plain/f/-1 committed=0
nack sub m2: ok
sub after the retry's delay: [f/0@0 "m2" tag="c" r1 u1700000012123]
sub, sql n = 4 (the retry copy, n=2, refused): []
  sub/f/0 committed=3 0:acked=true,failed=false 1:acked=true,failed=false 2:acked=true,failed=true 5:acked=true,failed=false
  sub/f/-1 committed=0
-- lease records
0 sub/f/0 gen=0 at=1700000000123 client="c" [2 e+1 d1700000010123 f0 s1] [3 e+2 d1700000010123 f0 s1] [4 e+3 d1700000010123 f0 s1]
1 plain/f/0 gen=0 at=1700000000123 client="c" [1 e+4 d1700000010123 f0 s1] [5 e+5 d1700000010123 f0 s1]
2 sub/f/-1 gen=0 at=1700000002123 client="c" [0 e+6 d1700000012123 f0 s1]
-- offset records
1 sub/f/0 gen=0 [0 1 5]
1 plain/f/0 gen=0 [0 2 3 4]
4 sub/f/0 gen=0 [2]`

// TestGoldenConsumeFilters pins the filters of a pull: the group's
// subscription (tag and SQL), a pull's own, what they pass over marked
// consumed (in the progress table and in the rmq_sys_LEASE and
// rmq_sys_OFFSET records), and the retry view's filter.
func TestGoldenConsumeFilters(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenLeaseAt)
	b := goldenConsumeBroker(t, fc)
	ctx := context.Background()
	var msgs []SendMessage
	for i, tag := range []string{"a", "b", "c", "a", "c", "b"} {
		msgs = append(msgs, SendMessage{Body: []byte(fmt.Sprintf("m%d", i)), Tag: tag, Properties: map[string]string{"n": fmt.Sprint(i)}})
	}
	_, err := b.Send(ctx, "f", msgs)
	require.NoError(t, err)
	base := b.epoch.Load()
	var log []string
	say := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	pull := func(what string, req PullRequest) []ReceivedMessage {
		req.Topic = "f"
		if req.MaxMessages == 0 {
			req.MaxMessages = 8
		}
		if req.Invisible == 0 {
			req.Invisible = 10 * time.Second
		}
		got, err := b.Pull(WithClient(ctx, "c"), req)
		say("%s: %s", what, goldenConsumePulled(got, err))
		return got
	}
	state := func(groups ...string) {
		for _, g := range groups {
			say("  %s", goldenConsumeProgress(b, offset.Key{Group: g, Topic: "f", QueueID: 0}, 6))
			say("  %s", goldenConsumeProgress(b, offset.Key{Group: g, Topic: "f", QueueID: retryQueueID}, 4))
		}
	}

	sub := pull("sub (a || c, n > 1)", PullRequest{Group: "sub"})
	state("sub")
	pull("plain, tag b", PullRequest{Group: "plain", TagExpression: "b"})
	pull("plain, sql n = 3", PullRequest{Group: "plain", SQL: "n = 3"})
	state("plain")
	pull("plain, tag c and sql n < 5", PullRequest{Group: "plain", TagExpression: "c", SQL: "n < 5"})
	state("plain")

	// A nack of sub's m2 (tag c, n=2): its retry copy passes the filters.
	for _, m := range sub {
		if string(m.Body) == "m2" {
			res, err := b.Nack(ctx, "sub", []NackItem{{Receipt: m.Receipt, DelayLevel: 1, Reason: "r"}})
			say("nack sub m2: %s", goldenConsumeResults(res, err))
		}
	}
	fc.Advance(2 * time.Second)
	require.Eventually(t, func() bool { return b.store.MaxOffset(RetryTopic("sub"), 0) > 0 }, 5*time.Second, time.Millisecond)
	pull("sub after the retry's delay", PullRequest{Group: "sub"})
	// A pull whose own filter refuses the retry copy passes over it.
	pull("sub, sql n = 4 (the retry copy, n=2, refused)", PullRequest{Group: "sub", SQL: "n = 4"})
	state("sub")
	say("-- lease records")
	log = append(log, goldenPopRecords(t, b, base)...)
	say("-- offset records")
	awaitLogged(t, b)
	res, err := b.store.ReadQueue(offsetTopic, 0, 0, 100, nil)
	require.NoError(t, err)
	for _, m := range res.Messages {
		rec, err := offset.DecodeRecord(m.Body)
		require.NoError(t, err)
		for _, e := range rec.Entries {
			if e.Key.Topic == "f" {
				say("%d %s/%s/%d gen=%d %v", e.Kind, e.Key.Group, e.Key.Topic, e.Key.QueueID, e.Generation, e.Offsets)
			}
		}
	}
	if got := strings.Join(log, "\n"); got != goldenConsumeFiltersWant {
		t.Errorf("transcript:\n%s", got)
	}
}

var goldenConsumeReceiptsWant = `pull: [lp/0@0 "m1" tag="" r0 u1700000010123 lp/0@1 "m3" tag="" r0 u1700000010123 lp/0@2 "m5" tag="" r0 u1700000010123 lp/1@0 "m0" tag="" r0 u1700000010123 lp/1@1 "m2" tag="" r0 u1700000010123 lp/1@2 "m4" tag="" r0 u1700000010123]
ack none: error: invalid argument: 1 to 1024 items
ack too many: error: invalid argument: 1 to 1024 items
ack bad group: error: invalid name: group name "a b" may only contain letters, digits, '_' and '-'
ack garbage, another group's, damaged: invalid (malformed, forged, of another group, or signed by a receipt key that was rotated out or lost); invalid (malformed, forged, of another group, or signed by a receipt key that was rotated out or lost); invalid (malformed, forged, of another group, or signed by a receipt key that was rotated out or lost)
ack twice in one request: ok; ok
ack again: ok
change an acked: expired (the message is already acknowledged)
nack an acked: expired (the message is already acknowledged)
change -1s: error: invalid argument: item 0: invisibility must be 0..12h0m0s
change 13h: error: invalid argument: item 0: invisibility must be 0..12h0m0s
change 20s, 0: ok u1700000020123; ok u1700000000123
change a released: expired (the lease ended (it ran out or was released, or the broker restarted); the message will be delivered again)
pull again: [lp/0@2 "m5" tag="" r0 u1700000010123]
ack the released one's old receipt: expired (the message was redelivered under a newer receipt)
nack level 19: error: invalid argument: items[0].delayLevel 19 must be -1 (DLQ), 0 (the group's retry policy) or a delay level 1..18
nack level -2: error: invalid argument: items[0].delayLevel -2 must be -1 (DLQ), 0 (the group's retry policy) or a delay level 1..18
nack level and delay: error: invalid argument: items[0]: give delayLevel or delayMs, not both
nack long reason: error: value too long: items[0].reason is 16385 bytes; the limit is 16384 bytes
nack reason not UTF-8: error: invalid argument: items[0].reason is not valid UTF-8
nack, nack to the DLQ: ok; ok
nack again: expired (the delivery failed (nack or lease expiry); its retry copy takes over)
ack a dead-lettered: expired (the delivery failed (nack or lease expiry); its retry copy takes over)
ack an expired (reaped): expired (the delivery failed (nack or lease expiry); its retry copy takes over)
dead letter: reason="dead" reconsume=1 attempts=1`

// TestGoldenConsumeReceipts pins the receipt loop's answers and the checks
// of Ack, ChangeLease and Nack.
func TestGoldenConsumeReceipts(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenLeaseAt)
	b := goldenConsumeBroker(t, fc)
	ctx := context.Background()
	var sends []SendMessage
	for i := range 6 {
		sends = append(sends, SendMessage{Body: []byte(fmt.Sprintf("m%d", i))})
	}
	_, err := b.Send(ctx, "lp", sends)
	require.NoError(t, err)
	var log []string
	say := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	got, err := b.Pull(WithClient(ctx, "c"), PullRequest{Group: "plain", Topic: "lp", MaxMessages: 6, Invisible: 10 * time.Second})
	require.NoError(t, err)
	say("pull: %s", goldenConsumePulled(got, err))
	other, err := b.Pull(ctx, PullRequest{Group: "sub", Topic: "lp", MaxMessages: 1, Invisible: 10 * time.Second})
	require.NoError(t, err)
	r := func(i int) string { return got[i].Receipt }

	res, err := b.Ack(ctx, "plain", nil)
	say("ack none: %s", goldenConsumeResults(res, err))
	res, err = b.Ack(ctx, "plain", make([]string, MaxBatchItems+1))
	say("ack too many: %s", goldenConsumeResults(res, err))
	res, err = b.Ack(ctx, "a b", []string{r(0)})
	say("ack bad group: %s", goldenConsumeResults(res, err))
	res, err = b.Ack(ctx, "plain", []string{"xyz", other[0].Receipt, r(0) + "A"})
	say("ack garbage, another group's, damaged: %s", goldenConsumeResults(res, err))
	res, err = b.Ack(ctx, "plain", []string{r(0), r(0)})
	say("ack twice in one request: %s", goldenConsumeResults(res, err))
	res, err = b.Ack(ctx, "plain", []string{r(0)})
	say("ack again: %s", goldenConsumeResults(res, err))
	res, err = b.ChangeLease(ctx, "plain", []LeaseItem{{Receipt: r(0), Invisible: time.Second}})
	say("change an acked: %s", goldenConsumeResults(res, err))
	res, err = b.Nack(ctx, "plain", []NackItem{{Receipt: r(0)}})
	say("nack an acked: %s", goldenConsumeResults(res, err))

	res, err = b.ChangeLease(ctx, "plain", []LeaseItem{{Receipt: r(1), Invisible: -time.Second}})
	say("change -1s: %s", goldenConsumeResults(res, err))
	res, err = b.ChangeLease(ctx, "plain", []LeaseItem{{Receipt: r(1), Invisible: 13 * time.Hour}})
	say("change 13h: %s", goldenConsumeResults(res, err))
	res, err = b.ChangeLease(ctx, "plain", []LeaseItem{{Receipt: r(1), Invisible: 20 * time.Second}, {Receipt: r(2), Invisible: 0}})
	say("change 20s, 0: %s", goldenConsumeResults(res, err))
	res, err = b.ChangeLease(ctx, "plain", []LeaseItem{{Receipt: r(2), Invisible: time.Second}})
	say("change a released: %s", goldenConsumeResults(res, err))
	again, err := b.Pull(WithClient(ctx, "c"), PullRequest{Group: "plain", Topic: "lp", MaxMessages: 6, Invisible: 10 * time.Second})
	say("pull again: %s", goldenConsumePulled(again, err))
	res, err = b.Ack(ctx, "plain", []string{r(2)})
	say("ack the released one's old receipt: %s", goldenConsumeResults(res, err))

	res, err = b.Nack(ctx, "plain", []NackItem{{Receipt: r(3), DelayLevel: 19}})
	say("nack level 19: %s", goldenConsumeResults(res, err))
	res, err = b.Nack(ctx, "plain", []NackItem{{Receipt: r(3), DelayLevel: -2}})
	say("nack level -2: %s", goldenConsumeResults(res, err))
	res, err = b.Nack(ctx, "plain", []NackItem{{Receipt: r(3), DelayLevel: 2, Delay: time.Second}})
	say("nack level and delay: %s", goldenConsumeResults(res, err))
	res, err = b.Nack(ctx, "plain", []NackItem{{Receipt: r(3), Reason: strings.Repeat("x", MaxReasonBytes+1)}})
	say("nack long reason: %s", goldenConsumeResults(res, err))
	res, err = b.Nack(ctx, "plain", []NackItem{{Receipt: r(3), Reason: "\xff"}})
	say("nack reason not UTF-8: %s", goldenConsumeResults(res, err))
	res, err = b.Nack(ctx, "plain", []NackItem{{Receipt: r(3), Reason: "r"}, {Receipt: r(4), DelayLevel: -1, Reason: "dead"}})
	say("nack, nack to the DLQ: %s", goldenConsumeResults(res, err))
	res, err = b.Nack(ctx, "plain", []NackItem{{Receipt: r(3)}})
	say("nack again: %s", goldenConsumeResults(res, err))
	res, err = b.Ack(ctx, "plain", []string{r(4)})
	say("ack a dead-lettered: %s", goldenConsumeResults(res, err))

	fc.Advance(11 * time.Second)
	b.consume.ReapExpired()
	res, err = b.Ack(ctx, "plain", []string{r(5)})
	say("ack an expired (reaped): %s", goldenConsumeResults(res, err))
	dead, _, err := b.ListDeadLetters(ctx, "plain", DLQFilter{}, "", 10)
	require.NoError(t, err)
	for _, d := range dead {
		say("dead letter: reason=%q reconsume=%d attempts=%d", d.Reason, d.ReconsumeTimes, len(d.Attempts))
	}
	if got := strings.Join(log, "\n"); got != goldenConsumeReceiptsWant {
		t.Errorf("transcript:\n%s", got)
	}
}

var goldenConsumeBroadcastWant = `pull c1: [lp/0@0 "m1" tag="" r0 u1700000010123 lp/1@0 "m0" tag="" r0 u1700000010123]
pull c2: [lp/0@0 "m1" tag="" r0 u1700000010123 lp/1@0 "m0" tag="" r0 u1700000010123]
-- pulled
bc@c1/lp/-1 next=0
bc@c1/lp/0 next=1
bc@c1/lp/0@0 e+1 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
bc@c1/lp/1 next=1
bc@c1/lp/1@0 e+2 d1700000010123 client="c1" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
bc@c2/lp/-1 next=0
bc@c2/lp/0 next=1
bc@c2/lp/0@0 e+3 d1700000010123 client="c2" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
bc@c2/lp/1 next=1
bc@c2/lp/1@0 e+4 d1700000010123 client="c2" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
nack c1 0: ok
ack c1 0: ok
ack c2's receipt as c1: ok
-- c1 nacked in place
bc@c1/lp/-1 next=0
bc@c1/lp/0 next=1
bc@c1/lp/0@0 e+5 d1700000001123 client="c1" key="" waiting=true failures=1 deliveries=1 history=1 settling=false sendingBack=false
bc@c1/lp/1 next=1
bc@c2/lp/-1 next=0
bc@c2/lp/0 next=1
bc@c2/lp/0@0 e+3 d1700000010123 client="c2" key="" waiting=false failures=0 deliveries=1 history=0 settling=false sendingBack=false
bc@c2/lp/1 next=1
-- reaped (c2's leases in place)
bc@c1/lp/-1 next=0
bc@c1/lp/0 next=1
bc@c1/lp/0@0 e+5 d1700000001123 client="c1" key="" waiting=true failures=1 deliveries=1 history=1 settling=false sendingBack=false
bc@c1/lp/1 next=1
bc@c2/lp/-1 next=0
bc@c2/lp/0 next=1
bc@c2/lp/0@0 e+6 d1700000021123 client="c2" key="" waiting=true failures=1 deliveries=1 history=1 settling=false sendingBack=false
bc@c2/lp/1 next=1
pull c1: [lp/0@0 "m1" tag="" r1 u1700000021123]
pull c2: []
-- offered again
bc@c1/lp/-1 next=0
bc@c1/lp/0 next=1
bc@c1/lp/0@0 e+7 d1700000021123 client="c1" key="" waiting=false failures=1 deliveries=2 history=1 settling=false sendingBack=false
bc@c1/lp/1 next=1
bc@c2/lp/-1 next=0
bc@c2/lp/0 next=1
bc@c2/lp/0@0 e+6 d1700000021123 client="c2" key="" waiting=true failures=1 deliveries=1 history=1 settling=false sendingBack=false
bc@c2/lp/1 next=1
nack c1 again: ok
-- c1 dead
bc@c1/lp/-1 next=0
bc@c1/lp/0 next=1
bc@c1/lp/1 next=1
bc@c2/lp/-1 next=0
bc@c2/lp/0 next=1
bc@c2/lp/0@0 e+6 d1700000021123 client="c2" key="" waiting=true failures=1 deliveries=1 history=1 settling=false sendingBack=false
bc@c2/lp/1 next=1
dead letter: reason="worse" reconsume=2 attempts=2
pull c3: [lp/0@0 "m1" tag="" r0 u1700000021123 lp/1@0 "m0" tag="" r0 u1700000021123]
long poll c3, woken by a send: [lp/1@1 "wake" tag="" r0 u1700000021123]
long poll c3, run out: []`

// TestGoldenConsumeBroadcast pins a broadcasting group's instances' pulls:
// each its own cursors and leases, a nack retried in place, an expired
// lease retried in place by the reaper, a dead letter naming its instance,
// and a long poll woken by a send and one that runs out on the clock.
func TestGoldenConsumeBroadcast(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenLeaseAt)
	b := goldenConsumeBroker(t, fc)
	ctx := context.Background()
	_, err := b.Send(ctx, "lp", []SendMessage{{Body: []byte("m0")}, {Body: []byte("m1")}})
	require.NoError(t, err)
	base := b.epoch.Load()
	var log []string
	say := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	pull := func(client string) []ReceivedMessage {
		got, err := b.Pull(WithClient(ctx, client), PullRequest{Group: "bc", Topic: "lp", MaxMessages: 4, Invisible: 10 * time.Second})
		say("pull %s: %s", client, goldenConsumePulled(got, err))
		return got
	}
	state := func(step string) {
		say("-- %s", step)
		log = append(log, goldenPops(b, base)...)
	}
	one := pull("c1")
	two := pull("c2")
	state("pulled")
	res, err := b.Nack(WithClient(ctx, "c1"), "bc", []NackItem{{Receipt: one[0].Receipt, DelayLevel: 1, Reason: "r"}})
	say("nack c1 %d: %s", one[0].QueueOffset, goldenConsumeResults(res, err))
	res, err = b.Ack(WithClient(ctx, "c1"), "bc", []string{one[1].Receipt})
	say("ack c1 %d: %s", one[1].QueueOffset, goldenConsumeResults(res, err))
	res, err = b.Ack(WithClient(ctx, "c1"), "bc", []string{two[1].Receipt})
	say("ack c2's receipt as c1: %s", goldenConsumeResults(res, err))
	state("c1 nacked in place")
	fc.Advance(11 * time.Second)
	b.consume.ReapExpired()
	state("reaped (c2's leases in place)")
	again := pull("c1")
	pull("c2")
	state("offered again")
	res, err = b.Nack(WithClient(ctx, "c1"), "bc", []NackItem{{Receipt: again[0].Receipt, Reason: "worse"}})
	say("nack c1 again: %s", goldenConsumeResults(res, err))
	state("c1 dead")
	dead, _, err := b.ListDeadLetters(ctx, "bc", DLQFilter{}, "", 10)
	require.NoError(t, err)
	for _, d := range dead {
		say("dead letter: reason=%q reconsume=%d attempts=%d", d.Reason, d.ReconsumeTimes, len(d.Attempts))
	}

	// A long poll of c3 (nothing for it after its first pull) woken by a send.
	pull("c3")
	done := make(chan string, 1)
	go func() {
		got, err := b.Pull(WithClient(ctx, "c3"), PullRequest{Group: "bc", Topic: "lp", MaxMessages: 4, Invisible: 10 * time.Second, Wait: 20 * time.Second})
		done <- goldenConsumePulled(got, err)
	}()
	time.Sleep(50 * time.Millisecond)
	_, err = b.Send(ctx, "lp", []SendMessage{{Body: []byte("wake")}})
	require.NoError(t, err)
	select {
	case s := <-done:
		say("long poll c3, woken by a send: %s", s)
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll was not woken by the send")
	}
	// And one that runs out on the clock, empty.
	go func() {
		got, err := b.Pull(WithClient(ctx, "c3"), PullRequest{Group: "bc", Topic: "lp", MaxMessages: 4, Invisible: 10 * time.Second, Wait: 5 * time.Second})
		done <- goldenConsumePulled(got, err)
	}()
	for waiting := true; waiting; {
		select {
		case s := <-done:
			say("long poll c3, run out: %s", s)
			waiting = false
		case <-time.After(10 * time.Millisecond):
			fc.Advance(500 * time.Millisecond)
		}
	}
	if got := strings.Join(log, "\n"); got != goldenConsumeBroadcastWant {
		t.Errorf("transcript:\n%s", got)
	}
}
