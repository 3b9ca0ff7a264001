package broker

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The dead-letter family's formats, pinned byte for byte with the code
// from before the family moved to server/broker/dlq: the rmq_sys_DLQ
// status record bodies and what applying them makes, the dead letter's
// properties (as the failure path writes them, as a resend and a carry
// past retention rewrite them), the view a listing makes of them, and the
// listing's cursor (its filter: dlq/golden_test.go, since it moved).

var goldenDLQAt = time.UnixMilli(1_700_000_000_123)

// goldenDeadLetter is a dead letter as the failure path writes it.
func goldenDeadLetter(i int) *message.Message {
	m := &message.Message{Topic: "%DLQ%g", Body: []byte(fmt.Sprintf("body %d", i)), BornTimestamp: 1_699_999_990_000, ReconsumeTimes: 3}
	m.SetProperty(message.PropertyTags, "tag")
	m.SetProperty(message.PropertyKeys, "k1 k2")
	m.SetProperty("user", "v")
	m.SetProperty(message.PropertyRetryTopic, "orders")
	m.SetProperty(message.PropertyOriginMessageID, "7F00000100001F900000000000000010")
	m.SetProperty(message.PropertyMaxReconsumeTimes, "3")
	m.SetProperty(propAttempts, `[{"at":"2023-11-14T22:13:10Z","outcome":"nack","client":"c1","reason":"boom","delayLevel":0}]`)
	m.SetProperty(propDLQReason, fmt.Sprintf("Boom %d", i))
	return m
}

func goldenDLQBroker(t *testing.T) (*Broker, *clockwork.FakeClock) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(goldenDLQAt)
	b := openReplica(t, replicaOptions(fc, false))
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g"})
	require.NoError(t, err)
	msgs := []*message.Message{goldenDeadLetter(0), goldenDeadLetter(1), goldenDeadLetter(2)}
	require.NoError(t, b.store.PutClass(storage.ClassSend, msgs, make([]storage.PutResult, len(msgs))))
	require.NoError(t, b.store.AwaitDispatch(ctx))
	return b, fc
}

// dlqRecords reads rmq_sys_DLQ's records as stored.
func dlqRecords(t *testing.T, b *Broker) []*message.Message {
	t.Helper()
	awaitLogged(t, b)
	res, err := b.store.ReadQueue("rmq_sys_DLQ", 0, 0, 100, nil)
	require.NoError(t, err)
	return res.Messages
}

func TestGoldenDLQStatusRecords(t *testing.T) {
	b, fc := goldenDLQBroker(t)
	ctx := context.Background()
	dead, next, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 3)
	require.Equal(t, "", next)

	require.NoError(t, b.DiscardDeadLetter(ctx, "g", dead[0].MessageID))
	fc.Advance(1500 * time.Millisecond)
	rr, err := b.ResendDeadLetters(ctx, "g", []string{dead[1].MessageID, dead[2].MessageID}, nil)
	require.NoError(t, err)
	require.Len(t, rr.Resent, 2)

	want := []string{
		`[{"group":"g","messageId":"` + dead[0].MessageID + `","status":"discarded","at":"2023-11-14T22:13:20.123Z"}]`,
		`[{"group":"g","messageId":"` + dead[1].MessageID + `","status":"resent","at":"2023-11-14T22:13:21.623Z"},` +
			`{"group":"g","messageId":"` + dead[2].MessageID + `","status":"resent","at":"2023-11-14T22:13:21.623Z"}]`,
	}
	recs := dlqRecords(t, b)
	require.Len(t, recs, 2)
	for i, m := range recs {
		if string(m.Body) != want[i] {
			t.Errorf("status record %d:\n got %s\nwant %s", i, m.Body, want[i])
		}
		if m.QueueID != 0 || len(m.Properties) != 0 {
			t.Errorf("status record %d: queue %d properties %v", i, m.QueueID, m.Properties)
		}
	}
	if recs[0].BornTimestamp != 1_700_000_000_123 || recs[1].BornTimestamp != 1_700_000_001_623 {
		t.Errorf("born: %d %d", recs[0].BornTimestamp, recs[1].BornTimestamp)
	}

	// What the projection feed makes of them.
	changes, end, err := b.DeadLetterStatusChanges(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, int64(2), end)
	require.Len(t, changes, 3)
	if changes[1].Group != "g" || changes[1].MessageID != dead[1].MessageID || changes[1].Status != DLQResent ||
		!changes[1].At.Equal(time.UnixMilli(1_700_000_001_623)) || changes[1].At.Location() != time.UTC {
		t.Errorf("change: %+v", changes[1])
	}

	// The resent copy, on the group's retry topic.
	res, err := b.store.ReadQueue("%RETRY%g", 0, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 2)
	c := res.Messages[0]
	wantProps := map[string]string{"TAGS": "tag", "KEYS": "k1 k2", "user": "v", "RETRY_TOPIC": "orders",
		"ORIGIN_MESSAGE_ID": "7F00000100001F900000000000000010"}
	if c.ReconsumeTimes != 0 || string(c.Body) != "body 1" || c.BornTimestamp != 1_699_999_990_000 || !maps.Equal(c.Properties, wantProps) {
		t.Errorf("resent copy: reconsume %d body %q born %d %v", c.ReconsumeTimes, c.Body, c.BornTimestamp, c.Properties)
	}

	// Applying the records (as at open, and on a follower) makes the
	// same table; an undecodable record is skipped.
	b2 := &Broker{deadLetters: dlq.New(dlq.Config{})}
	for _, m := range recs {
		b2.deadLetters.Apply(m)
	}
	b2.deadLetters.Apply(&message.Message{Body: []byte(`{"group":"g"}`)})
	b2.deadLetters.Apply(&message.Message{Body: []byte(`[{"group":"g","messageId":"X","status":"resent","at":"not a time"}]`)})
	for i, st := range []string{DLQDiscarded, DLQResent, DLQResent} {
		r, ok := b2.deadLetters.Table().Get("g", dead[i].MessageID)
		at := goldenDLQAt
		if i > 0 {
			at = at.Add(1500 * time.Millisecond)
		}
		if !ok || r.Status != st || !r.At.Equal(at) || r.Group != "g" || r.MessageID != dead[i].MessageID {
			t.Errorf("applied %d: %+v %v", i, r, ok)
		}
	}
	if _, ok := b2.deadLetters.Table().Get("g", "X"); ok {
		t.Error("a record that does not decode was applied")
	}
	if n := b2.deadLetters.Table().Len(); n != 3 {
		t.Errorf("%d statuses", n)
	}
	// The newest status wins.
	b2.deadLetters.Apply(&message.Message{Body: []byte(`[{"group":"g","messageId":"` + dead[0].MessageID + `","status":"resent","at":"2023-11-14T22:13:30Z"}]`)})
	if r, _ := b2.deadLetters.Table().Get("g", dead[0].MessageID); r.Status != DLQResent || !r.At.Equal(time.UnixMilli(1_700_000_010_000)) {
		t.Errorf("newest: %+v", r)
	}
}

func TestGoldenDLQView(t *testing.T) {
	b, _ := goldenDLQBroker(t)
	ctx := context.Background()
	dead, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	d := dead[0]
	attempt := Attempt{At: time.Date(2023, 11, 14, 22, 13, 10, 0, time.UTC), Outcome: "nack", Client: "c1", Reason: "boom"}
	require.Len(t, d.Attempts, 1)
	if d.OriginMessageID != "7F00000100001F900000000000000010" || d.OriginalTopic != "orders" || d.ReconsumeTimes != 3 ||
		d.Reason != "Boom 0" || d.Status != DLQDead || !d.StatusAt.IsZero() || d.Tag != "tag" ||
		strings.Join(d.Keys, ",") != "k1,k2" || d.Body != nil || d.Attempts[0] != attempt || !d.FirstFailedAt.Equal(attempt.At) ||
		!maps.Equal(d.Properties, map[string]string{"user": "v"}) {
		t.Errorf("view: %+v", d)
	}
	m, err := b.deadLetters.Lookup(ctx, "g", d.MessageID)
	require.NoError(t, err)
	if d.MessageID != message.NewID(m.StoreHost, m.PhysicalOffset).String() || !d.DeadAt.Equal(time.UnixMilli(m.StoreTimestamp)) || d.DeadAt.Location() != time.UTC {
		t.Errorf("id %s dead at %v (stored %d)", d.MessageID, d.DeadAt, m.StoreTimestamp)
	}
	one, err := b.GetDeadLetter(ctx, "g", d.MessageID)
	require.NoError(t, err)
	require.Equal(t, "body 0", string(one.Body))

	// A letter without attempts failed first when it died; DLQ_DEAD_AT
	// (a carried copy's) is its death time; DLQ_ID its id.
	m2 := goldenDeadLetter(5)
	m2.Properties[propAttempts] = "not json"
	m2.SetProperty(dlq.PropID, "7F00000100001F900000000000000ABC")
	m2.SetProperty(dlq.PropDeadAt, "1699999999000")
	m2.StoreTimestamp = 1_700_000_100_000
	b.deadLetters.Table().Apply(dlq.StatusRecord{Group: "g", MessageID: "7F00000100001F900000000000000ABC", Status: DLQDiscarded, At: goldenDLQAt.UTC()})
	d2 := b.deadLetters.View("g", m2, true)
	if d2.MessageID != "7F00000100001F900000000000000ABC" || !d2.DeadAt.Equal(time.UnixMilli(1_699_999_999_000)) || !d2.FirstFailedAt.Equal(d2.DeadAt) ||
		d2.Attempts != nil || d2.Status != DLQDiscarded || !d2.StatusAt.Equal(goldenDLQAt) || string(d2.Body) != "body 5" {
		t.Errorf("carried view: %+v", d2)
	}
	if d3 := b.deadLetters.View("other", m2, false); d3.Status != DLQDead {
		t.Errorf("another group's status: %+v", d3)
	}
}

func TestGoldenDLQCursor(t *testing.T) {
	b, _ := goldenDLQBroker(t)
	ctx := context.Background()
	var ids []string
	cursor := ""
	var cursors []string
	for {
		page, next, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, cursor, 1)
		require.NoError(t, err)
		for _, d := range page {
			ids = append(ids, d.MessageID)
		}
		cursors = append(cursors, next)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, []string{"1", "2", ""}, cursors)
	require.Len(t, ids, 3)
	page, next, err := b.ListDeadLetters(ctx, "g", DLQFilter{ReasonContains: "boom 2"}, "0", 1)
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.Equal(t, "", next)
	page, next, err = b.ListDeadLetters(ctx, "g", DLQFilter{}, "7", 10)
	require.NoError(t, err)
	require.Empty(t, page)
	require.Equal(t, "", next)
	for _, c := range []string{"x", "-1", "1.5", " 1", "99999999999999999999"} {
		_, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, c, 10)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.Equal(t, "invalid argument: bad cursor "+QuoteValue(c), err.Error(), c)
	}
}

func TestGoldenDLQCarried(t *testing.T) {
	b, _ := goldenDLQBroker(t)
	ctx := context.Background()
	dead, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.NoError(t, b.DiscardDeadLetter(ctx, "g", dead[1].MessageID))
	first, err := b.deadLetters.Lookup(ctx, "g", dead[2].MessageID)
	require.NoError(t, err)
	require.NoError(t, b.carryDeadLetters(first.PhysicalOffset+1))
	require.NoError(t, b.store.AwaitDispatch(ctx))
	res, err := b.store.ReadQueue("%DLQ%g", 0, 3, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 2, "the discarded letter is not carried")
	var got []string
	for i, c := range res.Messages {
		id := dead[[]int{0, 2}[i]].MessageID
		orig, err := b.store.LookupID(mustParseID(t, id))
		require.NoError(t, err)
		want := maps.Clone(orig.Properties)
		want["DLQ_ID"] = id
		want["DLQ_DEAD_AT"] = fmt.Sprint(orig.StoreTimestamp)
		want["UNIQ_KEY"] = "dlq:" + id
		if !maps.Equal(c.Properties, want) || string(c.Body) != string(orig.Body) || c.ReconsumeTimes != 3 {
			t.Errorf("carried %d: %v\nwant %v", i, c.Properties, want)
		}
		keys := make([]string, 0, len(c.Properties))
		for k := range c.Properties {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		got = append(got, strings.Join(keys, ","))
	}
	require.Equal(t, "ATTEMPTS,DLQ_DEAD_AT,DLQ_ID,DLQ_REASON,KEYS,MAX_RECONSUME_TIMES,ORIGIN_MESSAGE_ID,RETRY_TOPIC,TAGS,UNIQ_KEY,user", got[0])
	// The listing and a lookup find the copies under the first ids.
	after, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, after, 2)
	for i, d := range after {
		want := dead[[]int{0, 2}[i]]
		if d.MessageID != want.MessageID || !d.DeadAt.Equal(want.DeadAt) {
			t.Errorf("after the carry %d: %s %v, want %s %v", i, d.MessageID, d.DeadAt, want.MessageID, want.DeadAt)
		}
		one, err := b.GetDeadLetter(ctx, "g", d.MessageID)
		require.NoError(t, err)
		require.Equal(t, "body "+fmt.Sprint([]int{0, 2}[i]), string(one.Body))
	}
	// A copy carried again keeps its id and death time.
	c := res.Messages[0]
	// (The test reset the carried mark here while it was the broker's;
	// a carry reads below it all the same — the mark only hides the
	// copies below it from a listing and a lookup — so the line went with
	// the mark to package dlq.)
	require.NoError(t, b.carryDeadLetters(c.PhysicalOffset+1))
	require.NoError(t, b.store.AwaitDispatch(ctx))
	again, err := b.store.ReadQueue("%DLQ%g", 0, 5, 10, nil)
	require.NoError(t, err)
	n := 0
	for _, m := range again.Messages {
		if m.Property("DLQ_ID") == dead[0].MessageID {
			n++
			if m.Property("DLQ_DEAD_AT") != c.Property("DLQ_DEAD_AT") || m.Property("UNIQ_KEY") != "dlq:"+dead[0].MessageID {
				t.Errorf("carried again: %v", m.Properties)
			}
		}
	}
	// Below the new cut lie both the first place and its copy (the
	// carried mark was reset): each is carried, under the same id and
	// death time.
	require.Equal(t, 2, n, "the letter and its copy carried again")
}

func mustParseID(t *testing.T, s string) message.ID {
	t.Helper()
	id, err := message.ParseID(s)
	require.NoError(t, err)
	return id
}
