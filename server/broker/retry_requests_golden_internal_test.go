package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// The retry family's failure path, pinned with the code from before it
// moved to server/broker/retry: the copy a failed delivery becomes — on
// the ladder (SCHEDULE_TOPIC_XXXX), on a timer, in the DLQ — with every
// property, its reconsume count and the progress record that ends the
// failed delivery, for a nack by level, by delay, to the DLQ, by the
// group's policy, an expired lease and a retry's own failure; the
// counters; the ladder's counts of a group's retries and of delayed
// messages, and what a topic's deletion drops from them and from the
// scheduler's deliveries.

// goldenRetryRecord renders the newest record of topic's queue and the
// newest rmq_sys_OFFSET record (its failed entries).
func goldenRetryRecord(t *testing.T, b *Broker, topic string, queue int32) string {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.store.AwaitDispatch(ctx))
	res, err := b.store.ReadQueue(topic, queue, b.store.MaxOffset(topic, queue)-1, 1, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	m := res.Messages[0]
	out := goldenRecord(m)
	out += fmt.Sprintf(" reconsume=%d", m.ReconsumeTimes)
	res, err = b.store.ReadQueue(offsetTopic, 0, b.store.MaxOffset(offsetTopic, 0)-1, 1, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	rec, err := offset.DecodeRecord(res.Messages[0].Body)
	require.NoError(t, err)
	for _, e := range rec.Entries {
		out += fmt.Sprintf(" | kind=%d %s/%s/%d offsets=%v", e.Kind, e.Key.Group, e.Key.Topic, e.Key.QueueID, e.Offsets)
	}
	return out
}

// goldenRetryBroker opens a broker on a fake clock with the default
// ladder, a topic "t" of one queue and its message "m" with a tag, a key
// and a property.
func goldenRetryBroker(t *testing.T) (*Broker, *clockwork.FakeClock) {
	t.Helper()
	b, fc := goldenSendBroker(t)
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "t", Queues: 1})
	require.NoError(t, err)
	return b, fc
}

func goldenPull(t *testing.T, b *Broker, group, topic string) ReceivedMessage {
	t.Helper()
	got, err := b.Pull(WithClient(context.Background(), "c1"), PullRequest{Group: group, Topic: topic, MaxMessages: 1, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

func goldenNack(t *testing.T, b *Broker, client, group string, item NackItem) {
	t.Helper()
	res, err := b.Nack(WithClient(context.Background(), client), group, []NackItem{item})
	require.NoError(t, err)
	require.Equal(t, ReceiptOK, res[0].Status)
}

// TestGoldenRetryCopies: the copy each kind of failure writes.
func TestGoldenRetryCopies(t *testing.T) {
	b, fc := goldenRetryBroker(t)
	ctx := context.Background()
	sent, err := b.Send(ctx, "t", []SendMessage{{Body: []byte("m"), Tag: "tg", Keys: []string{"k"}, Properties: map[string]string{"p": "v"}, DedupID: "d"}})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g"})
	require.NoError(t, err)

	// A nack at level 2: on the ladder, queue 1, destination %RETRY%g.
	fc.Advance(10 * time.Millisecond)
	m := goldenPull(t, b, "g", "t")
	require.Equal(t, sent[0].MessageID, m.MessageID)
	goldenNack(t, b, "c1", "g", NackItem{Receipt: m.Receipt, DelayLevel: 2, Reason: "r1"})
	require.Equal(t, `SCHEDULE_TOPIC_XXXX/1 born=0 stored=10 flag=0 {ATTEMPTS=[{"at":"2023-11-14T22:13:20.133Z","outcome":"nack","client":"c1","reason":"r1","delayLevel":2}] DELAY=2 KEYS=k MAX_RECONSUME_TIMES=16 ORIGIN_MESSAGE_ID=`+sent[0].MessageID+` REAL_QID=0 REAL_TOPIC=%RETRY%g RETRY_TOPIC=t TAGS=tg TIMER_DELIVER_MS=1700000005133 p=v} "m" reconsume=1 | kind=4 g/t/0 offsets=[0]`,
		goldenRetryRecord(t, b, message.ScheduleTopic, 1))

	// The ladder counts it for g; delivered when due, to the retry view.
	bl, err := b.Backlog(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, "2:1", goldenLevels(bl.Retry))
	fc.Advance(5 * time.Second)
	var r ReceivedMessage
	require.Eventually(t, func() bool {
		got, err := b.Pull(WithClient(ctx, "c2"), PullRequest{Group: "g", Topic: "t", MaxMessages: 1, Invisible: time.Minute})
		require.NoError(t, err)
		if len(got) == 1 {
			r = got[0]
		}
		return len(got) == 1
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, int32(1), r.ReconsumeTimes)
	require.Equal(t, "t", r.Topic)

	// The retry fails again, with a delay: a timer whose destination is
	// %RETRY%g, the history grown, the origin kept.
	goldenNack(t, b, "c2", "g", NackItem{Receipt: r.Receipt, Delay: 90 * time.Second, Reason: "r2"})
	require.Equal(t, `rmq_sys_TIMER/0 born=0 stored=5010 flag=0 {ATTEMPTS=[{"at":"2023-11-14T22:13:20.133Z","outcome":"nack","client":"c1","reason":"r1","delayLevel":2},{"at":"2023-11-14T22:13:25.133Z","outcome":"nack","client":"c2","reason":"r2","delayLevel":0,"delayMs":90000}] KEYS=k MAX_RECONSUME_TIMES=16 ORIGIN_MESSAGE_ID=`+sent[0].MessageID+` REAL_QID=0 REAL_TOPIC=%RETRY%g RETRY_TOPIC=t TAGS=tg TIMER_DELIVER_MS=1700000095133 p=v} "m" reconsume=2 | kind=4 g/t/-1 offsets=[0]`,
		goldenRetryRecord(t, b, timerTopic, 0))
	// The scheduler counts its level-2 entry delivered once its put
	// returns, which the pull above may have overtaken.
	require.Eventually(t, func() bool {
		bl, err = b.Backlog(ctx, "g")
		require.NoError(t, err)
		return goldenLevels(bl.Retry) == ""
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, "", goldenLevels(bl.Retry))
	require.Equal(t, int64(1), bl.RetryTimers)

	// Straight to the DLQ: the reason kept, cut to its bound.
	_, err = b.Send(ctx, "t", []SendMessage{{Body: []byte("n")}})
	require.NoError(t, err)
	n := goldenPull(t, b, "g", "t")
	goldenNack(t, b, "c1", "g", NackItem{Receipt: n.Receipt, DelayLevel: -1, Reason: strings.Repeat("x", 3000)})
	got := goldenRetryRecord(t, b, DLQTopic("g"), 0)
	require.Contains(t, got, `DLQ_REASON=`+strings.Repeat("x", 2000))
	require.Contains(t, got, `… [truncated: 3000 bytes]`)
	require.Regexp(t, `^%DLQ%g/0 born=5010 stored=5010 flag=0 \{ATTEMPTS=\[\{"at":"2023-11-14T22:13:25.133Z","outcome":"nack","client":"c1","reason":"x+… \[truncated: 3000 bytes\]","delayLevel":-1\}\] DLQ_REASON=x+… \[truncated: 3000 bytes\] MAX_RECONSUME_TIMES=16 ORIGIN_MESSAGE_ID=[0-9A-F]{32} RETRY_TOPIC=t\} "n" reconsume=1 \| kind=4 g/t/0 offsets=\[1\]$`, got)

	// The counters: by group and level (0: on a timer), and the DLQ's.
	st := b.Stats()
	require.Equal(t, []RetryCount{{Group: "g", Level: 0, Count: 1}, {Group: "g", Level: 2, Count: 1}}, goldenRetryCounts(st.Retries))
	require.Equal(t, uint64(1), st.DeadLetters["g"])
}

// TestGoldenRetryPolicies: a nack without a level and an expired lease
// take the group's policy (the ladder: level 3 + reconsume; exponential:
// a timer); retryMaxTimes sends the last copy to the DLQ.
func TestGoldenRetryPolicies(t *testing.T) {
	b, fc := goldenRetryBroker(t)
	ctx := context.Background()
	_, _, err := b.PutGroup(ctx, GroupConfig{Name: "lad", RetryMaxTimes: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "exp", RetryPolicy: &RetryPolicy{Backoff: BackoffExponential, Initial: time.Second, Max: time.Minute}})
	require.NoError(t, err)
	_, err = b.Send(ctx, "t", []SendMessage{{Body: []byte("m")}})
	require.NoError(t, err)

	m := goldenPull(t, b, "lad", "t")
	goldenNack(t, b, "c1", "lad", NackItem{Receipt: m.Receipt})
	require.Regexp(t, `^SCHEDULE_TOPIC_XXXX/2 born=0 stored=0 flag=0 \{ATTEMPTS=\[\{"at":"2023-11-14T22:13:20.123Z","outcome":"nack","client":"c1","delayLevel":0\}\] DELAY=3 MAX_RECONSUME_TIMES=1 ORIGIN_MESSAGE_ID=[0-9A-F]{32} REAL_QID=0 REAL_TOPIC=%RETRY%lad RETRY_TOPIC=t TIMER_DELIVER_MS=1700000010123\} "m" reconsume=1 \| kind=4 lad/t/0 offsets=\[0\]$`,
		goldenRetryRecord(t, b, message.ScheduleTopic, 2))

	// An expired lease of the exponential group: Initial·2^0 on a timer.
	got, err := b.Pull(WithClient(ctx, "c3"), PullRequest{Group: "exp", Topic: "t", MaxMessages: 1, Invisible: time.Second})
	require.NoError(t, err)
	require.Len(t, got, 1)
	before := b.store.MaxOffset(timerTopic, 0)
	fc.Advance(2 * time.Second)
	require.Eventually(t, func() bool {
		_ = b.store.AwaitDispatch(ctx)
		return b.store.MaxOffset(timerTopic, 0) > before
	}, 10*time.Second, time.Millisecond)
	out := goldenRetryRecord(t, b, timerTopic, 0)
	require.Regexp(t, `^rmq_sys_TIMER/0 born=0 stored=2000 flag=0 \{ATTEMPTS=\[\{"at":"2023-11-14T22:13:22.123Z","outcome":"expired","client":"c3","reason":"lease expired without ack","delayLevel":0,"delayMs":1000\}\] MAX_RECONSUME_TIMES=16 ORIGIN_MESSAGE_ID=[0-9A-F]{32} REAL_QID=0 REAL_TOPIC=%RETRY%exp RETRY_TOPIC=t TIMER_DELIVER_MS=1700000003123\} "m" reconsume=1 \| kind=4 exp/t/0 offsets=\[0\]$`, out)

	// lad's retry, delivered at level 3 (10 s), fails again: used up, dead.
	fc.Advance(10 * time.Second)
	var r ReceivedMessage
	require.Eventually(t, func() bool {
		got, err := b.Pull(WithClient(ctx, "c1"), PullRequest{Group: "lad", Topic: "t", MaxMessages: 1, Invisible: time.Minute})
		require.NoError(t, err)
		if len(got) == 1 {
			r = got[0]
		}
		return len(got) == 1
	}, 10*time.Second, time.Millisecond)
	goldenNack(t, b, "c1", "lad", NackItem{Receipt: r.Receipt, Reason: "last"})
	require.Regexp(t, `^%DLQ%lad/0 born=0 stored=12000 flag=0 \{ATTEMPTS=\[\{"at":"2023-11-14T22:13:20.123Z","outcome":"nack","client":"c1","delayLevel":0\},\{"at":"2023-11-14T22:13:32.123Z","outcome":"nack","client":"c1","reason":"last","delayLevel":0\}\] DLQ_REASON=last MAX_RECONSUME_TIMES=1 ORIGIN_MESSAGE_ID=[0-9A-F]{32} RETRY_TOPIC=t UNIQ_KEY=set\} "m" reconsume=2 \| kind=4 lad/t/-1 offsets=\[0\]$`,
		goldenRetryRecord(t, b, DLQTopic("lad"), 0))
}

// TestGoldenRetryLadderAndDeletion: the ladder counts a group's retries
// and the delayed messages of the topics it consumes, per level; a
// topic's deletion drops its entries from the counts and from the
// scheduler's deliveries (a recreated topic gets none of them).
func TestGoldenRetryLadderAndDeletion(t *testing.T) {
	b, fc := goldenRetryBroker(t)
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "gone", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g", Subscriptions: []Subscription{{Topic: "t"}, {Topic: "gone"}}})
	require.NoError(t, err)
	_, err = b.Send(ctx, "t", []SendMessage{{Body: []byte("a"), DelayLevel: 1}, {Body: []byte("b"), DelayLevel: 3}})
	require.NoError(t, err)
	_, err = b.Send(ctx, "gone", []SendMessage{{Body: []byte("c"), DelayLevel: 3}, {Body: []byte("d"), DelayLevel: 3}})
	require.NoError(t, err)
	_, err = b.Send(ctx, "gone", []SendMessage{{Body: []byte("e")}})
	require.NoError(t, err)
	m := goldenPull(t, b, "g", "gone")
	goldenNack(t, b, "c1", "g", NackItem{Receipt: m.Receipt, DelayLevel: 3})

	bl, err := b.Backlog(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, "1:1 3:3", goldenLevels(bl.Delayed))
	require.Equal(t, "3:1", goldenLevels(bl.Retry))

	require.NoError(t, b.DeleteTopic(ctx, "gone"))
	bl, err = b.Backlog(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, "1:1 3:1", goldenLevels(bl.Delayed))
	require.Equal(t, "", goldenLevels(bl.Retry))

	// Recreated, the topic gets none of its old delayed messages or
	// retries when they fall due; t gets its own.
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "gone", Queues: 1})
	require.NoError(t, err)
	fc.Advance(11 * time.Second)
	require.Eventually(t, func() bool {
		_ = b.store.AwaitDispatch(ctx)
		return b.store.MaxOffset("t", 0) == 2
	}, 10*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		for _, s := range b.scheduler.Status() {
			if s.Offset < s.MaxOffset {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, b.store.AwaitDispatch(ctx))
	require.Equal(t, int64(1), b.store.MaxOffset("gone", 0), "only the message sent before the deletion's purge")
	require.Equal(t, int64(0), b.store.MaxOffset(RetryTopic("g"), 0))
	bl, err = b.Backlog(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, "", goldenLevels(bl.Delayed))
}

// goldenLevels renders the levels with a known count above 0.
func goldenLevels(ls []LevelBacklog) string {
	var out []string
	for _, l := range ls {
		if l.Count != nil && *l.Count > 0 {
			out = append(out, fmt.Sprintf("%d:%d", l.Level, *l.Count))
		}
	}
	return strings.Join(out, " ")
}

func goldenRetryCounts(cs []RetryCount) []RetryCount {
	out := append([]RetryCount(nil), cs...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j].Group < out[i].Group || (out[j].Group == out[i].Group && out[j].Level < out[i].Level) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestGoldenRetryDeadLetterMarks: a broadcasting group's instance's dead
// letter names the instance; a message with a sharding key (an ordered
// one) its queue offset.
func TestGoldenRetryDeadLetterMarks(t *testing.T) {
	b, _ := goldenRetryBroker(t)
	ctx := context.Background()
	_, _, err := b.PutGroup(ctx, GroupConfig{Name: "bc", ConsumeMode: "broadcasting"})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "ord", Orderly: true, RetryMaxTimes: 1})
	require.NoError(t, err)
	_, err = b.Send(ctx, "t", []SendMessage{{Body: []byte("m"), ShardingKey: "s"}})
	require.NoError(t, err)

	m := goldenPull(t, b, "bc", "t")
	goldenNack(t, b, "c1", "bc", NackItem{Receipt: m.Receipt, DelayLevel: -1, Reason: "no"})
	require.Regexp(t, `^%DLQ%bc/0 born=0 stored=0 flag=0 \{ATTEMPTS=\[\{"at":"2023-11-14T22:13:20.123Z","outcome":"nack","client":"c1","reason":"no","delayLevel":-1\}\] BROADCAST_INSTANCE=c1 DLQ_REASON=no MAX_RECONSUME_TIMES=16 ORDER_SEQ=0 ORIGIN_MESSAGE_ID=[0-9A-F]{32} RETRY_TOPIC=t SHARDING_KEY=s\} "m" reconsume=1 \| kind=4 bc@c1/t/0 offsets=\[0\]$`,
		goldenRetryRecord(t, b, DLQTopic("bc"), 0))

	m = goldenPull(t, b, "ord", "t")
	goldenNack(t, b, "c1", "ord", NackItem{Receipt: m.Receipt, DelayLevel: -1, Reason: "no"})
	require.Regexp(t, `^%DLQ%ord/0 born=0 stored=0 flag=0 \{ATTEMPTS=\[\{"at":"2023-11-14T22:13:20.123Z","outcome":"nack","client":"c1","reason":"no","delayLevel":-1\}\] DLQ_REASON=no MAX_RECONSUME_TIMES=1 ORDER_SEQ=0 ORIGIN_MESSAGE_ID=[0-9A-F]{32} RETRY_TOPIC=t SHARDING_KEY=s\} "m" reconsume=1 \| kind=4 ord/t/0 offsets=\[0\]$`,
		goldenRetryRecord(t, b, DLQTopic("ord"), 0))
}
