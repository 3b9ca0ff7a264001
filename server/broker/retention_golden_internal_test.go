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

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Retention's decisions, pinned with the code from before they moved to
// server/broker/retention: what a deletion by age carries (dead letters,
// timers, transactions, the registry, the traces) and in which order, the
// rmq_sys_CUT record it writes and where the floors stand; a topic's
// shorter retention trimming its queues; the unconsumed messages a
// deletion under disk pressure takes from each group (the counts per
// progress key, the metric, the progress field, forgotten with the
// group); a follower applying the leader's cut records (an undecodable
// one skipped), and a reopened store applying them again.

var goldenRetentionAt = time.UnixMilli(1_700_000_000_123)

// goldenRetentionOptions are a fake-clocked leader's options with small
// segments, so that a few messages fill some.
func goldenRetentionOptions(fc clockwork.Clock, follower bool) Options {
	opts := replicaOptions(fc, follower)
	opts.MaxMessageSize = 4 << 10
	opts.Storage.SegmentSize = 128 << 10
	return opts
}

// recordsFrom lists the records at or above CommitLog offset from in log
// order: their topic, the names of their properties, the carried lives
// of a trace record (the trace follower's are left out: it writes them
// when it gets to them) and the body of a cut record.
func recordsFrom(t *testing.T, b *Broker, from int64) []string {
	t.Helper()
	require.NoError(t, b.store.AwaitDispatch(context.Background()))
	var ms []*message.Message
	for _, topic := range b.store.Topics() {
		for _, q := range b.store.QueueIDs(topic) {
			for off := b.store.MinOffset(topic, q); off < b.store.MaxOffset(topic, q); {
				res, err := b.store.ReadQueue(topic, q, off, 256, nil)
				require.NoError(t, err)
				require.NotEmpty(t, res.Messages)
				for _, m := range res.Messages {
					if m.PhysicalOffset >= from {
						ms = append(ms, m)
					}
				}
				off = res.Messages[len(res.Messages)-1].QueueOffset + 1
			}
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].PhysicalOffset < ms[j].PhysicalOffset })
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		keys := make([]string, 0, len(m.Properties))
		for k := range m.Properties {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		line := m.Topic + " " + strings.Join(keys, ",")
		if m.Topic == "rmq_sys_TRACE" {
			lives := 0
			for _, k := range m.Keys() {
				if strings.HasPrefix(k, "l") {
					lives++
				}
			}
			if lives == 0 {
				continue // the trace follower's, written when it gets to it
			}
			line += fmt.Sprintf(" lives=%d", lives)
		}
		if m.Topic == "rmq_sys_CUT" {
			line += fmt.Sprintf(" %s born=%d", m.Body, m.BornTimestamp)
		}
		out = append(out, line)
	}
	return out
}

// fill sends n messages of 2 KiB to topic "filler", which no group
// consumes.
func fill(t *testing.T, b *Broker, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := b.Send(context.Background(), "filler", []SendMessage{{Body: []byte(strings.Repeat("f", 2<<10))}})
		require.NoError(t, err)
	}
}

// droppedLines are group's progress rows: the queue, the consumer offset
// and what retention took of it unconsumed.
func droppedLines(t *testing.T, b *Broker, group string) []string {
	t.Helper()
	prog, err := b.Progress(context.Background(), group)
	require.NoError(t, err)
	var out []string
	for _, r := range prog {
		out = append(out, fmt.Sprintf("%s/%d consumer=%d dropped=%d", r.Topic, r.QueueID, r.ConsumerOffset, r.DroppedUnconsumed))
	}
	return out
}

// putQueue stores n messages on queue of topic (a send chooses the queue
// itself).
func putQueue(t *testing.T, b *Broker, topic string, queue int32, n int) {
	t.Helper()
	ms := make([]*message.Message, n)
	for i := range ms {
		ms[i] = &message.Message{Topic: topic, QueueID: queue, Body: []byte("m"), BornTimestamp: b.clock.Now().UnixMilli()}
	}
	require.NoError(t, b.store.PutClass(storage.ClassSend, ms, make([]storage.PutResult, n)))
}

// goldenRetentionLeader is a leader holding what a deletion by age must
// carry: a dead letter of group g, a pending timer and an unresolved
// transaction; g consumed orders/0 up to 2 of 4, and filler messages come
// after. It returns the transaction's id.
func goldenRetentionLeader(t *testing.T, b *Broker, fc *clockwork.FakeClock) string {
	t.Helper()
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g", RetryMaxTimes: 1, Subscriptions: []Subscription{{Topic: "orders"}}})
	require.NoError(t, err)
	_, err = b.Send(ctx, "orders", []SendMessage{{Body: []byte("m0")}, {Body: []byte("m1")}, {Body: []byte("m2")}, {Body: []byte("m3")}})
	require.NoError(t, err)
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "orders", MaxMessages: 2, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 2)
	_, err = b.Nack(ctx, "g", []NackItem{{Receipt: got[0].Receipt, DelayLevel: -1, Reason: "poison"}})
	require.NoError(t, err)
	_, err = b.Ack(ctx, "g", []string{got[1].Receipt})
	require.NoError(t, err)
	fc.Advance(time.Second)
	_, err = b.Send(ctx, "orders", []SendMessage{{Body: []byte("later"), DelayMs: time.Hour.Milliseconds()}})
	require.NoError(t, err)
	res, err := b.Send(ctx, "orders", []SendMessage{{Body: []byte("half"), Transactional: true, ProducerGroup: "pg", CheckAfterMs: time.Hour.Milliseconds()}})
	require.NoError(t, err)
	fill(t, b, 80)
	require.NoError(t, b.awaitDispatch(ctx))
	return res[0].TransactionID
}

// TestGoldenRetentionByAge: a deletion by age carries the dead letters,
// the pending timers, the unresolved transactions, the registry and the
// traces (in that order) above the cut, then writes the cut record, and
// counts what group g had not consumed; the store then deletes below the
// cut and the carried survive it, and a reopen.
func TestGoldenRetentionByAge(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenRetentionAt)
	opts := goldenRetentionOptions(fc, false)
	opts.DataDir = t.TempDir()
	ctx := context.Background()
	b, err := Open(ctx, opts)
	require.NoError(t, err)
	defer func() { _ = b.Close(ctx) }()
	txID := goldenRetentionLeader(t, b, fc)
	p := retentionPolicy{b: b}

	// The floors before: the delay levels hold nothing, the offset, lease
	// and transaction records no snapshot covers are kept, g's committed
	// offset on orders is the unconsumed floor, nothing is retained
	// longer than the store.
	half, err := b.store.ReadQueue("rmq_sys_TRANS_HALF", 0, 0, 1, nil)
	require.NoError(t, err)
	first := func(topic string) int64 {
		t.Helper()
		res, err := b.store.ReadQueue(topic, 0, 0, 1, nil)
		require.NoError(t, err)
		require.NotEmpty(t, res.Messages, topic)
		return res.Messages[0].PhysicalOffset
	}
	f, err := p.Floors(fc.Now())
	require.NoError(t, err)
	orders, err := b.store.ReadQueue("orders", 0, 2, 1, nil)
	require.NoError(t, err)
	require.Equal(t, storage.RetentionFloors{
		Keep:       min(first("rmq_sys_OFFSET"), first("rmq_sys_LEASE"), half.Messages[0].PhysicalOffset),
		Unconsumed: orders.Messages[0].PhysicalOffset,
		Retained:   storage.NoFloor,
	}, f)

	fc.Advance(time.Minute)
	cut := b.store.WriteOffset()
	require.NoError(t, p.BeforeDelete(cut, storage.DeleteExpired))
	require.Equal(t, []string{
		"%DLQ%g ATTEMPTS,DLQ_DEAD_AT,DLQ_ID,DLQ_REASON,MAX_RECONSUME_TIMES,ORIGIN_MESSAGE_ID,RETRY_TOPIC,UNIQ_KEY",
		"rmq_sys_TIMER REAL_QID,REAL_TOPIC,TIMER_DELIVER_MS,TIMER_ID,TIMER_PREV,UNIQ_KEY",
		"rmq_sys_TRANS_HALF REAL_QID,REAL_TOPIC,TRAN_CHECK_AFTER_MS,TRAN_CHECK_TIMES,TRAN_ID,TRAN_NEXT_CHECK_MS,TRAN_PGROUP,UNIQ_KEY",
		"rmq_sys_META ",
		"rmq_sys_TRACE KEYS lives=1",
		`rmq_sys_CUT  {"cut":` + fmt.Sprint(cut) + `,"reason":"expired","at":1700000061123} born=1700000061123`,
	}, recordsFrom(t, b, cut))
	prog, err := b.Progress(ctx, "g")
	require.NoError(t, err)
	var dropped []string
	for _, r := range prog {
		dropped = append(dropped, fmt.Sprintf("%s/%d %d", r.Topic, r.QueueID, r.DroppedUnconsumed))
	}
	require.Equal(t, []string{"orders/0 2"}, dropped, "m2 and m3; the dead letter and the ack count not")
	require.Equal(t, map[string]uint64{"g": 2}, b.Stats().RetentionDropped)

	n, err := b.store.ApplyRetentionCut(cut)
	require.NoError(t, err)
	require.Positive(t, n)
	require.Greater(t, b.store.Stats().CommitLogMin, half.Messages[0].PhysicalOffset)
	survivors := func(b *Broker) {
		t.Helper()
		dead, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
		require.NoError(t, err)
		require.Len(t, dead, 1)
		require.Equal(t, "poison", dead[0].Reason)
		timers, _, err := b.ListTimers(ctx, "orders", "", 10)
		require.NoError(t, err)
		require.Len(t, timers, 1)
		tx, err := b.GetTransaction(ctx, txID)
		require.NoError(t, err)
		require.Equal(t, "pg", tx.ProducerGroup)
		topics, err := b.ListTopics(ctx)
		require.NoError(t, err)
		require.Len(t, topics, 2)
	}
	survivors(b)
	require.NoError(t, b.Close(ctx))

	// Reopened, the cut record is applied again (nothing left to delete).
	b, err = Open(ctx, opts)
	require.NoError(t, err)
	survivors(b)
	require.Equal(t, int64(1), b.follow.cuts)
}

// TestGoldenRetentionShortTopic: a topic whose retentionHours is shorter
// than the store's is trimmed logically by every pass's floors: its
// queues' minimum rises past the messages older than its retention,
// what a group had not consumed of them is counted once, and its other
// messages stay; a topic with no retentionHours of its own is left alone.
func TestGoldenRetentionShortTopic(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenRetentionAt)
	b := openReplica(t, goldenRetentionOptions(fc, false))
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "short", Queues: 2, RetentionHours: 1})
	require.NoError(t, err)
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "plain", Queues: 1})
	require.NoError(t, err)
	for _, g := range []string{"g", "h"} {
		_, _, err = b.PutGroup(ctx, GroupConfig{Name: g, Subscriptions: []Subscription{{Topic: "short"}, {Topic: "plain"}}})
		require.NoError(t, err)
	}
	send := func(topic string, queue int32, n int) { t.Helper(); putQueue(t, b, topic, queue, n) }
	send("short", 0, 3)
	send("short", 1, 2)
	send("plain", 0, 2)
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "short", MaxMessages: 1, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, err = b.Ack(ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)
	fc.Advance(90 * time.Minute)
	send("short", 0, 1)
	require.NoError(t, b.awaitDispatch(ctx))

	p := retentionPolicy{b: b}
	for i := 0; i < 2; i++ { // the second pass finds nothing more to trim
		_, err := p.Floors(fc.Now())
		require.NoError(t, err)
	}
	lines := func(group string) []string { t.Helper(); return droppedLines(t, b, group) }
	require.Equal(t, int64(3), b.store.MinOffset("short", 0))
	require.Equal(t, int64(2), b.store.MinOffset("short", 1))
	// g had acked one of queue 0's old messages; a consumer offset below
	// the queue's new minimum reads as the minimum.
	require.Equal(t, []string{
		"plain/0 consumer=0 dropped=0",
		"short/0 consumer=3 dropped=2",
		"short/1 consumer=2 dropped=2",
	}, lines("g"))
	require.Equal(t, []string{
		"plain/0 consumer=0 dropped=0",
		"short/0 consumer=3 dropped=3",
		"short/1 consumer=2 dropped=2",
	}, lines("h"))
	require.Equal(t, map[string]uint64{"g": 4, "h": 5}, b.Stats().RetentionDropped)
	got, err = b.Pull(ctx, PullRequest{Group: "h", Topic: "short", MaxMessages: 10, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1, "the message within the hour")
	require.Equal(t, int64(3), got[0].QueueOffset)
}

// TestGoldenRetentionPressureCounts: a deletion under disk pressure
// counts, per progress key, the messages below the cut a group has not
// consumed — its acked offsets above its committed one left out, a retry
// view counting only its own topic's retries, each instance of a
// broadcasting group on its own, a queue the topic no longer configures,
// a topic a group consumes only by a commit of its offsets — into the
// progress field and the metric; a topic nobody consumes counts for no
// one; a deleted group's counts are forgotten.
func TestGoldenRetentionPressureCounts(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenRetentionAt)
	b := openReplica(t, goldenRetentionOptions(fc, false))
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "a", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "b", Queues: 2})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g", Subscriptions: []Subscription{{Topic: "a"}, {Topic: "b"}}})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "fan", ConsumeMode: ConsumeBroadcasting, Subscriptions: []Subscription{{Topic: "a"}}})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "late"})
	require.NoError(t, err)
	send := func(topic string, queue int32, n int) { t.Helper(); putQueue(t, b, topic, queue, n) }
	send("a", 0, 5)
	send("b", 0, 3)
	send("b", 1, 2)
	send("b", 2, 2) // a queue the topic does not configure
	fill(t, b, 1)
	// g leases a/0..2 and acks 1 and 2: its committed offset stays 0.
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "a", MaxMessages: 3, Invisible: time.Hour})
	require.NoError(t, err)
	require.Len(t, got, 3)
	_, err = b.Ack(ctx, "g", []string{got[1].Receipt, got[2].Receipt})
	require.NoError(t, err)
	// g's retries: two of a, one of b.
	var retries []*message.Message
	for _, topic := range []string{"a", "a", "b"} {
		m := &message.Message{Topic: "%RETRY%g", Body: []byte("r")}
		m.SetProperty(message.PropertyRetryTopic, topic)
		retries = append(retries, m)
	}
	require.NoError(t, b.store.PutClass(storage.ClassSend, retries, make([]storage.PutResult, len(retries))))

	// fan's instances: x consumed all of a, y two.
	for c, n := range map[string]int{"x": 5, "y": 2} {
		got, err := b.Pull(WithClient(ctx, c), PullRequest{Group: "fan", Topic: "a", MaxMessages: 5, Invisible: time.Hour})
		require.NoError(t, err)
		require.Len(t, got, 5)
		rs := make([]string, n)
		for i := range rs {
			rs[i] = got[i].Receipt
		}
		_, err = b.Ack(WithClient(ctx, c), "fan", rs)
		require.NoError(t, err)
	}
	// late consumes b only by a commit.
	require.NoError(t, b.CommitOffsets(ctx, "late", []OffsetCommit{{Topic: "b", QueueID: 0, Offset: 1}}))
	require.NoError(t, b.awaitDispatch(ctx))

	cut := b.store.WriteOffset()
	fc.Advance(time.Second)
	require.NoError(t, retentionPolicy{b: b}.BeforeDelete(cut, storage.DeletePressure))
	recs := recordsFrom(t, b, cut)
	require.Equal(t, `rmq_sys_CUT  {"cut":`+fmt.Sprint(cut)+`,"reason":"disk-pressure","at":1700000001123} born=1700000001123`, recs[len(recs)-1])

	lines := func(group string) []string { t.Helper(); return droppedLines(t, b, group) }
	require.Equal(t, []string{
		"a/-1 consumer=0 dropped=2",
		"a/0 consumer=0 dropped=3",
		"b/-1 consumer=0 dropped=1",
		"b/0 consumer=0 dropped=3",
		"b/1 consumer=0 dropped=2",
	}, lines("g"))
	require.Equal(t, []string{"b/0 consumer=1 dropped=2", "b/1 consumer=0 dropped=2"}, lines("late"))
	instances, err := b.Instances(ctx, "fan")
	require.NoError(t, err)
	var fan []string
	for _, in := range instances {
		for _, r := range in.Queues {
			fan = append(fan, fmt.Sprintf("%s %s/%d consumer=%d dropped=%d", in.ClientID, r.Topic, r.QueueID, r.ConsumerOffset, r.DroppedUnconsumed))
		}
	}
	require.Equal(t, []string{"x a/0 consumer=5 dropped=0", "y a/0 consumer=2 dropped=3"}, fan)
	// The metric has b/2 too (two for g, two for late), which the
	// progress rows, of the configured queues, leave out.
	require.Equal(t, map[string]uint64{"g": 13, "fan": 3, "late": 6}, b.Stats().RetentionDropped)

	// A deleted group's counts go with it.
	require.NoError(t, b.DeleteGroup(ctx, "g"))
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g", Subscriptions: []Subscription{{Topic: "a"}}})
	require.NoError(t, err)
	require.Equal(t, []string{"a/-1 consumer=0 dropped=0", "a/0 consumer=0 dropped=0"}, lines("g"))
}

// TestGoldenFollowerAppliesCuts: a follower deletes what the leader's cut
// records say, in their order, skipping one that does not decode, and
// keeps what the leader carried.
func TestGoldenFollowerAppliesCuts(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenRetentionAt)
	leader := openReplica(t, goldenRetentionOptions(fc, false))
	follower := openReplica(t, goldenRetentionOptions(fc, true))
	goldenRetentionLeader(t, leader, fc)
	ship(t, leader, follower)
	p := retentionPolicy{b: leader}
	cutAt := func(reason storage.DeleteReason) {
		t.Helper()
		cut := leader.store.WriteOffset()
		require.NoError(t, p.BeforeDelete(cut, reason))
		ship(t, leader, follower) // the follower deletes when it applies the record
		_, err := leader.store.ApplyRetentionCut(cut)
		require.NoError(t, err)
		require.Equal(t, leader.store.Stats().CommitLogMin, follower.store.Stats().CommitLogMin)
	}
	cutAt(storage.DeleteExpired)
	first := follower.store.Stats().CommitLogMin
	require.Positive(t, first)
	bad := &message.Message{Topic: "rmq_sys_CUT", Body: []byte("not json"), BornTimestamp: fc.Now().UnixMilli()}
	require.NoError(t, leader.store.PutClass(storage.ClassSystem, []*message.Message{bad}, make([]storage.PutResult, 1)))
	fill(t, leader, 80)
	cutAt(storage.DeleteConsumed)
	require.Greater(t, follower.store.Stats().CommitLogMin, first)
	require.Equal(t, int64(3), follower.follow.cuts)
	prog, err := follower.Progress(context.Background(), "g")
	require.NoError(t, err)
	require.Zero(t, prog[0].DroppedUnconsumed, "the counts are the leader's, in memory")
	dead, _, err := follower.ListDeadLetters(context.Background(), "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 1, "the carried dead letter")
}

// TestRetentionCountsNoRetriesOfADeletedNamesake: a topic deleted and
// created again under its name starts its retry view above the old
// topic's retries (the pull passes over them): a deletion under disk
// pressure counts only the new topic's retries as unconsumed, and the
// group's progress shows the view's position and lag without the old
// ones.
func TestRetentionCountsNoRetriesOfADeletedNamesake(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenRetentionAt)
	b := openReplica(t, goldenRetentionOptions(fc, false))
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "a", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g", Subscriptions: []Subscription{{Topic: "a"}}})
	require.NoError(t, err)
	retries := func(n int) {
		t.Helper()
		ms := make([]*message.Message, n)
		for i := range ms {
			ms[i] = &message.Message{Topic: "%RETRY%g", Body: []byte("r"), BornTimestamp: fc.Now().UnixMilli()}
			ms[i].SetProperty(message.PropertyRetryTopic, "a")
		}
		require.NoError(t, b.store.PutClass(storage.ClassSend, ms, make([]storage.PutResult, n)))
	}
	retries(3) // the first topic a's
	require.NoError(t, b.DeleteTopic(ctx, "a"))
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "a", Queues: 1})
	require.NoError(t, err)
	retries(2) // the second's
	require.NoError(t, b.awaitDispatch(ctx))
	// The retry view starts at the second topic's retries: its position
	// and lag leave the first's out, as its pull passes over them.
	prog, err := b.Progress(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, int32(retryQueueID), prog[0].QueueID)
	require.Equal(t, int64(3), prog[0].ConsumerOffset)
	require.Equal(t, int64(2), prog[0].Lag)

	cut := b.store.WriteOffset()
	fc.Advance(time.Second)
	require.NoError(t, retentionPolicy{b: b}.BeforeDelete(cut, storage.DeletePressure))
	require.Equal(t, []string{"a/-1 consumer=3 dropped=2", "a/0 consumer=0 dropped=0"}, droppedLines(t, b, "g"))
	require.Equal(t, uint64(2), b.Stats().RetentionDropped["g"])
}
