package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/offset"
)

// The progress family's records and answers, pinned with the code from
// before its request logic moved to server/broker/progress: the
// rmq_sys_OFFSET records (entries and born times) that a group's
// ConsumeFrom, an ack, a nack, an offset reset, a skip past retention's
// floor and a group's deletion write; the rows of Progress and of Backlog;
// the errors of a ConsumeFrom that is not one.

// offsetRecords reads rmq_sys_OFFSET as stored, from queue offset from,
// one line per entry: born time, kind, key, generation, offset(s).
func offsetRecords(t *testing.T, b *Broker, from int64) []string {
	t.Helper()
	awaitLogged(t, b)
	res, err := b.store.ReadQueue(offsetTopic, 0, from, 100, nil)
	require.NoError(t, err)
	var out []string
	for _, m := range res.Messages {
		rec, err := offset.DecodeRecord(m.Body)
		require.NoError(t, err)
		for _, e := range rec.Entries {
			out = append(out, fmt.Sprintf("%d %d %s/%s/%d gen=%d off=%d offs=%v",
				m.BornTimestamp, e.Kind, e.Key.Group, e.Key.Topic, e.Key.QueueID, e.Generation, e.Offset, e.Offsets))
		}
	}
	return out
}

// progressLines is rows, one line each.
func progressLines(rows []QueueProgress) []string {
	var lines []string
	for _, r := range rows {
		lines = append(lines, fmt.Sprintf("%s/%d broker=%d consumer=%d lag=%d lower=%v inflight=%d stored=%d dropped=%d",
			r.Topic, r.QueueID, r.BrokerOffset, r.ConsumerOffset, r.Lag, r.LagIsLowerBound, r.InFlight, r.LastStoredAt.UnixMilli(), r.DroppedUnconsumed))
	}
	return lines
}

func TestProgressGolden(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.UnixMilli(1_700_000_000_123)
	fc := clockwork.NewFakeClockAt(at)
	b := openReplica(t, replicaOptions(fc, false))
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 2})
	require.NoError(t, err)
	send := func(n int) {
		t.Helper()
		msgs := make([]SendMessage, n)
		for i := range msgs {
			msgs[i] = SendMessage{Body: []byte(fmt.Sprintf("m%d", i)), ShardingKey: "k"}
		}
		_, err := b.Send(ctx, "orders", msgs)
		require.NoError(t, err)
	}
	send(3) // the backlog "last" skips
	fc.Advance(time.Second)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g", RetryMaxTimes: 16, ConsumeFrom: "last",
		Subscriptions: []Subscription{{Topic: "orders"}}})
	require.NoError(t, err)
	first := offsetRecords(t, b, 0)
	fc.Advance(time.Second)
	send(3)
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "orders", MaxMessages: 3, Invisible: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, got, 3)
	inFlight, err := b.Progress(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, []string{
		"orders/0 broker=6 consumer=3 lag=3 lower=false inflight=3 stored=1700000002123 dropped=0",
		"orders/1 broker=0 consumer=0 lag=0 lower=false inflight=0 stored=-62135596800000 dropped=0",
	}, progressLines(inFlight))
	fc.Advance(time.Second)
	res, err := b.Ack(ctx, "g", []string{got[0].Receipt, got[1].Receipt})
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, ReceiptOK, r.Status)
	}
	fc.Advance(time.Second)
	res, err = b.Nack(ctx, "g", []NackItem{{Receipt: got[2].Receipt, DelayLevel: 1, Reason: "no"}})
	require.NoError(t, err)
	require.Equal(t, ReceiptOK, res[0].Status)

	rows, err := b.Progress(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, []string{
		"orders/0 broker=6 consumer=6 lag=0 lower=false inflight=0 stored=1700000002123 dropped=0",
		"orders/1 broker=0 consumer=0 lag=0 lower=false inflight=0 stored=-62135596800000 dropped=0",
	}, progressLines(rows))
	offs, err := b.GetOffsets(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, rows, offs)

	backlog, err := b.Backlog(ctx, "g")
	require.NoError(t, err)
	require.Len(t, backlog.Retry, 1)
	require.Equal(t, 1, backlog.Retry[0].Level)
	require.Equal(t, time.Second, backlog.Retry[0].Delay)
	require.NotNil(t, backlog.Retry[0].Count)
	require.Equal(t, int64(1), *backlog.Retry[0].Count)
	require.Empty(t, backlog.Delayed)
	require.Zero(t, backlog.Timers)
	require.Zero(t, backlog.RetryTimers)
	require.Empty(t, backlog.Notes)

	fc.Advance(time.Second)
	_, err = b.ResetOffset(ctx, "g", "orders", at)
	require.NoError(t, err)
	fc.Advance(time.Second)
	require.NoError(t, b.advance(offset.Key{Group: "g", Topic: "orders", QueueID: 1}, 0))
	require.NoError(t, b.commit(offset.Key{Group: "h", Topic: "orders", QueueID: 1}, 7))
	fc.Advance(time.Second)
	require.NoError(t, b.DeleteGroup(ctx, "g"))

	require.Equal(t, []string{
		// "last": each queue of the subscribed topic at its max offset, generation 1.
		"1700000001123 2 g/orders/0 gen=1 off=3 offs=[]",
		"1700000001123 2 g/orders/1 gen=1 off=0 offs=[]",
	}, first)
	all := offsetRecords(t, b, 0)
	require.Equal(t, append(first,
		// The ack: one record, an entry per receipt with the key's generation.
		"1700000003123 1 g/orders/0 gen=1 off=0 offs=[3]",
		"1700000003123 1 g/orders/0 gen=1 off=0 offs=[4]",
		// The nack: the failed mark, written with the retry copy.
		"1700000004123 4 g/orders/0 gen=1 off=0 offs=[5]",
		// The reset: a commit of a new generation per queue.
		"1700000005123 2 g/orders/0 gen=2 off=0 offs=[]",
		"1700000005123 2 g/orders/1 gen=2 off=0 offs=[]",
		// advance and commit as retention's floor and a clamp write them.
		"1700000006123 3 g/orders/1 gen=0 off=0 offs=[]",
		"1700000006123 2 h/orders/1 gen=1 off=7 offs=[]",
		// The group's deletion: a forget of the group.
		"1700000007123 5 g//0 gen=0 off=0 offs=[]",
	), all)

	for in, want := range map[string]string{
		"Last":                 `invalid argument: consumeFrom "Last" must be "first", "last" or an RFC 3339 time`,
		"2026-13-01T00:00:00Z": `invalid argument: consumeFrom "2026-13-01T00:00:00Z" must be "first", "last" or an RFC 3339 time`,
	} {
		_, err := normalizeConsumeFrom(in)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.EqualError(t, err, want)
	}
	for in, want := range map[string]string{"": "", "first": "", "last": "last", "2024-01-02T03:04:05.5+02:00": "2024-01-02T01:04:05.5Z"} {
		got, err := normalizeConsumeFrom(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}
