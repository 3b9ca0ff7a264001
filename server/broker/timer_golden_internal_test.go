package broker

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/send"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage/message"
)

// The timer family's formats, pinned byte for byte with the code from
// before the family moved to server/broker/timer: a timer record's
// properties (as a send writes it, as a reschedule and a carry past
// retention copy it), the rmq_sys_TIMER_STATUS record bodies (a cancel, a
// delivery, a topic's deletion) and their born times, the delivered
// message, and what applying the records makes of them (the index's
// births and kills; an undecodable status record is skipped).

var goldenTimerAt = time.UnixMilli(1_700_000_000_123)

func goldenTimerBroker(t *testing.T) (*Broker, *clockwork.FakeClock) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(goldenTimerAt)
	b := openReplica(t, replicaOptions(fc, false))
	ctx := context.Background()
	for _, name := range []string{"orders", "gone"} {
		_, _, err := b.PutTopic(ctx, TopicConfig{Name: name, Queues: 2})
		require.NoError(t, err)
	}
	return b, fc
}

// timerQueue reads queue 0 of a timer topic as stored.
func timerQueue(t *testing.T, b *Broker, topic string, from int64) []*message.Message {
	t.Helper()
	awaitLogged(t, b)
	res, err := b.store.ReadQueue(topic, 0, from, 100, nil)
	require.NoError(t, err)
	return res.Messages
}

// goldenTimerSend sends one timer to topic with a tag, keys and a user
// property.
func goldenTimerSend(t *testing.T, b *Broker, topic string, i int, msg SendMessage) string {
	t.Helper()
	msg.Body = []byte(fmt.Sprintf("body %d", i))
	msg.Tag = "tag"
	msg.Keys = []string{"k1", "k2"}
	msg.Properties = map[string]string{"user": "v"}
	msg.ShardingKey = "s"
	res, err := b.Send(context.Background(), topic, []SendMessage{msg})
	require.NoError(t, err)
	require.Equal(t, int64(-1), res[0].QueueOffset)
	return res[0].MessageID
}

func TestGoldenTimerRecords(t *testing.T) {
	b, fc := goldenTimerBroker(t)
	ctx := context.Background()
	at := goldenTimerAt
	ids := []string{
		goldenTimerSend(t, b, "orders", 0, SendMessage{DelayMs: 60_000}),
		goldenTimerSend(t, b, "orders", 1, SendMessage{DeliverAt: at.Add(2 * time.Minute).Add(500 * time.Microsecond)}),
		goldenTimerSend(t, b, "orders", 2, SendMessage{DelayMs: 180_000}),
		goldenTimerSend(t, b, "gone", 3, SendMessage{DelayMs: 240_000}),
	}
	qid := send.ShardQueue("s", 2)
	recs := timerQueue(t, b, "rmq_sys_TIMER", 0)
	require.Len(t, recs, 4)
	for i, m := range recs {
		dest := "orders"
		if i == 3 {
			dest = "gone"
		}
		want := map[string]string{"TAGS": "tag", "KEYS": "k1 k2", "user": "v", "SHARDING_KEY": "s",
			"REAL_TOPIC": dest, "REAL_QID": fmt.Sprint(qid),
			"TIMER_DELIVER_MS": fmt.Sprint([]int64{1_700_000_060_123, 1_700_000_120_124, 1_700_000_180_123, 1_700_000_240_123}[i])}
		if !maps.Equal(m.Properties, want) || m.QueueID != 0 || string(m.Body) != fmt.Sprintf("body %d", i) {
			t.Errorf("timer record %d: queue %d %v\nwant %v", i, m.QueueID, m.Properties, want)
		}
		if id := message.NewID(m.StoreHost, m.PhysicalOffset).String(); id != ids[i] {
			t.Errorf("timer record %d: id %s, the send said %s", i, id, ids[i])
		}
	}

	// A reschedule: a copy naming the timer and the record it supersedes.
	fc.Advance(time.Second)
	_, err := b.RescheduleTimer(ctx, ids[0], at.Add(5*time.Minute))
	require.NoError(t, err)
	resched := timerQueue(t, b, "rmq_sys_TIMER", 4)
	require.Len(t, resched, 1)
	want := maps.Clone(recs[0].Properties)
	want["TIMER_ID"] = ids[0]
	want["TIMER_PREV"] = "0"
	want["UNIQ_KEY"] = "timer:" + ids[0]
	want["TIMER_DELIVER_MS"] = "1700000300123"
	if c := resched[0]; !maps.Equal(c.Properties, want) || string(c.Body) != "body 0" || c.BornTimestamp != recs[0].BornTimestamp {
		t.Errorf("rescheduled copy: %v born %d\nwant %v", c.Properties, c.BornTimestamp, want)
	}

	// A cancel, then a topic's deletion: status records.
	fc.Advance(time.Second)
	require.NoError(t, b.CancelTimer(ctx, ids[2]))
	fc.Advance(time.Second)
	require.NoError(t, b.DeleteTopic(ctx, "gone"))
	statuses := timerQueue(t, b, "rmq_sys_TIMER_STATUS", 0)
	require.Len(t, statuses, 2)
	wantBodies := []string{
		`[{"id":"` + ids[2] + `","status":"cancelled","at":"2023-11-14T22:13:22.123Z","seq":2,"topic":"orders"}]`,
		`[{"id":"` + ids[3] + `","status":"cancelled","at":"2023-11-14T22:13:23.123Z","seq":3,"topic":"gone"}]`,
	}
	for i, m := range statuses {
		if string(m.Body) != wantBodies[i] || m.QueueID != 0 || len(m.Properties) != 0 {
			t.Errorf("status record %d: queue %d %v\n got %s\nwant %s", i, m.QueueID, m.Properties, m.Body, wantBodies[i])
		}
	}
	if statuses[0].BornTimestamp != 1_700_000_002_123 || statuses[1].BornTimestamp != 1_700_000_003_123 {
		t.Errorf("born: %d %d", statuses[0].BornTimestamp, statuses[1].BornTimestamp)
	}

	// A carry past retention: a copy of each pending record below the
	// cut, the same due time.
	require.NoError(t, b.carryTimers(recs[1].PhysicalOffset+1))
	carried := timerQueue(t, b, "rmq_sys_TIMER", 5)
	require.Len(t, carried, 1, "only timer 1's first record is pending below the cut")
	want = maps.Clone(recs[1].Properties)
	want["TIMER_ID"] = ids[1]
	want["TIMER_PREV"] = "1"
	want["UNIQ_KEY"] = "timer:" + ids[1]
	if c := carried[0]; !maps.Equal(c.Properties, want) || string(c.Body) != "body 1" {
		t.Errorf("carried copy: %v\nwant %v", c.Properties, want)
	}

	// A delivery: the messages on their topic and queue, and one status
	// record of the batch.
	deliverAt := at.Add(time.Hour)
	require.NoError(t, b.timers.DeliverDue(deliverAt))
	statuses = timerQueue(t, b, "rmq_sys_TIMER_STATUS", 2)
	require.Len(t, statuses, 1)
	wantBody := `[{"id":"` + ids[1] + `","status":"delivered","at":"2023-11-14T23:13:20.123Z","seq":5,"topic":"orders"},` +
		`{"id":"` + ids[0] + `","status":"delivered","at":"2023-11-14T23:13:20.123Z","seq":4,"topic":"orders"}]`
	if m := statuses[0]; string(m.Body) != wantBody || m.BornTimestamp != deliverAt.UnixMilli() || len(m.Properties) != 0 {
		t.Errorf("delivery status:\n got %s\nwant %s (born %d)", m.Body, wantBody, m.BornTimestamp)
	}
	res, err := b.store.ReadQueue("orders", qid, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 2)
	for i, m := range res.Messages {
		id := ids[1-i]
		want := map[string]string{"TAGS": "tag", "KEYS": "k1 k2", "user": "v", "SHARDING_KEY": "s", "UNIQ_KEY": "timer:" + id}
		if !maps.Equal(m.Properties, want) || string(m.Body) != fmt.Sprintf("body %d", 1-i) || m.BornTimestamp != recs[1-i].BornTimestamp {
			t.Errorf("delivered %d: %v born %d\nwant %v", i, m.Properties, m.BornTimestamp, want)
		}
	}
	n, next := b.TimerCount()
	require.Equal(t, 0, n)
	require.True(t, next.IsZero())

	// What applying the records makes: a birth per timer record (a copy
	// also kills the record it supersedes), a kill per status entry.
	all := timerQueue(t, b, "rmq_sys_TIMER", 0)
	require.Len(t, all, 6)
	// (Birth and Kills take the timer lock, which following holds.)
	var u timerindex.Update
	for _, m := range all {
		b.timers.Birth(&u, m)
	}
	first := func(i int) int64 { return mustParseID(t, ids[i]).Offset() }
	wantBirths := []timerindex.Entry{
		{Due: 1_700_000_060_123, ID: first(0), Seq: 0, Topic: "orders"},
		{Due: 1_700_000_120_124, ID: first(1), Seq: 1, Topic: "orders"},
		{Due: 1_700_000_180_123, ID: first(2), Seq: 2, Topic: "orders"},
		{Due: 1_700_000_240_123, ID: first(3), Seq: 3, Topic: "gone"},
		{Due: 1_700_000_300_123, ID: first(0), Seq: 4, Topic: "orders"},
		{Due: 1_700_000_120_124, ID: first(1), Seq: 5, Topic: "orders"},
	}
	require.Equal(t, wantBirths, u.Births)
	require.Equal(t, []timerindex.Kill{{Seq: 0, Topic: "orders"}, {Seq: 1, Topic: "orders"}}, u.Kills)
	u = timerindex.Update{}
	for _, m := range timerQueue(t, b, "rmq_sys_TIMER_STATUS", 0) {
		b.timers.Kills(&u, m)
	}
	require.Empty(t, u.Births)
	require.Equal(t, []timerindex.Kill{{Seq: 2, Topic: "orders"}, {Seq: 3, Topic: "gone"}, {Seq: 5, Topic: "orders"}, {Seq: 4, Topic: "orders"}}, u.Kills)

	// An undecodable status record is skipped.
	u = timerindex.Update{}
	for _, body := range []string{`{"id":"x"}`, `[{"id":"x","status":"delivered","at":"not a time","seq":1}]`, `[{"seq":"1"}]`, ``} {
		b.timers.Kills(&u, &message.Message{Topic: "rmq_sys_TIMER_STATUS", Body: []byte(body)})
	}
	require.Empty(t, u.Kills)
	// Whatever its status, an entry with a seq kills that seq.
	b.timers.Kills(&u, &message.Message{Body: []byte(`[{"id":"","status":"whatever","at":"0001-01-01T00:00:00Z","seq":7},{"seq":-1,"topic":"t"}]`)})
	require.Equal(t, []timerindex.Kill{{Seq: 7}, {Seq: -1, Topic: "t"}}, u.Kills)
	// An entry without one (written before the index) kills every record
	// of its timer: the newest copy, found by its UNIQ_KEY, and the first,
	// which its id names.
	u = timerindex.Update{}
	b.timers.Kills(&u, &message.Message{Body: []byte(`[{"id":"` + ids[0] + `","status":"cancelled","at":"2023-11-14T22:13:20.123Z"},{"id":"not an id","status":"cancelled","at":"2023-11-14T22:13:20.123Z"}]`)})
	require.Equal(t, []timerindex.Kill{{Seq: 4, Topic: "orders"}, {Seq: 0, Topic: "orders"}}, u.Kills)

	// A copy written before the index (TIMER_ID, no TIMER_PREV) kills the
	// timer's earlier records, and is remembered by id for the entries
	// without a seq that follow it.
	old := copyOf(recs[2], "rmq_sys_TIMER")
	old.SetProperty("TIMER_ID", ids[2])
	old.SetProperty("TIMER_DELIVER_MS", "1700000400000")
	old.QueueOffset = 10
	u = timerindex.Update{}
	b.timers.Birth(&u, old)
	require.Equal(t, []timerindex.Entry{{Due: 1_700_000_400_000, ID: first(2), Seq: 10, Topic: "orders"}}, u.Births)
	require.Equal(t, []timerindex.Kill{{Seq: 2, Topic: "orders"}}, u.Kills)
	u = timerindex.Update{}
	b.timers.Kills(&u, &message.Message{Body: []byte(`[{"id":"` + ids[2] + `","status":"delivered","at":"2023-11-14T22:13:20.123Z"}]`)})
	require.Equal(t, []timerindex.Kill{{Seq: 10, Topic: "orders"}, {Seq: 2, Topic: "orders"}}, u.Kills)
}
