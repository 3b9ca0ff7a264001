package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/message"
)

// The send request, pinned as the facade answers it, with the code from
// before the request moved to server/broker/send: every refusal of a send
// (its sentinel and text, which check comes first, that nothing is
// written), the results of a plain, sharded, delayed, timed and
// transactional send and the records they write (decoded from the store),
// the counters, and the dedup keys the table no longer holds (after a
// restart: the store's answer, a transaction's id), a batch of duplicates
// and new keys, a refused transactional send releasing its key, and
// concurrent sends of one key. The per-message limits, the queue of a
// sharding key and the window's decisions are send_golden_internal_test.go's.

// goldenRecord renders a stored record: its topic and queue, born and
// store times (ms after goldenSendAt), flag, properties in key order
// (UNIQ_KEY, should the store set one, as "set") and body.
func goldenRecord(m *message.Message) string {
	keys := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var props []string
	for _, k := range keys {
		v := m.Properties[k]
		if k == message.PropertyUniqKey && v != "" {
			v = "set"
		}
		props = append(props, k+"="+v)
	}
	return fmt.Sprintf("%s/%d born=%d stored=%d flag=%d {%s} %q", m.Topic, m.QueueID,
		m.BornTimestamp-goldenSendAt.UnixMilli(), m.StoreTimestamp-goldenSendAt.UnixMilli(), m.Flag, strings.Join(props, " "), m.Body)
}

// goldenResult renders a send result, its message id as "id" when it
// names the record at rec's CommitLog offset.
func goldenResult(t *testing.T, b *Broker, r SendResult) (string, *message.Message) {
	t.Helper()
	id, err := message.ParseID(r.MessageID)
	require.NoError(t, err)
	m, err := b.store.LookupID(id)
	require.NoError(t, err)
	txnID := r.TransactionID
	if txnID == r.MessageID && txnID != "" {
		txnID = "id"
	}
	return fmt.Sprintf("q=%d off=%d dup=%v txn=%s", r.QueueID, r.QueueOffset, r.Duplicate, txnID), m
}

// TestGoldenSendRequestRefusals: every refusal of a send, in the order its
// checks run, and that none writes anything.
func TestGoldenSendRequestRefusals(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenSendAt)
	opts := replicaOptions(fc, false)
	opts.Quotas.MaxPendingTimers = 1
	opts.Quotas.MaxTransactionsPerProducerGroup = 1
	b := openReplica(t, opts)
	ctx := context.Background()
	body := []byte("b")
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "ro", Queues: 2, Perm: "r"})
	require.NoError(t, err)
	_, _, err = b.PutTopic(ctx, TopicConfig{Name: "rw", Queues: 2})
	require.NoError(t, err)
	// One pending timer and one unresolved transaction of "pg": the quotas
	// are full.
	_, err = b.Send(ctx, "rw", []SendMessage{{Body: body, DelayMs: 60_000}})
	require.NoError(t, err)
	_, err = b.Send(ctx, "rw", []SendMessage{{Body: body, Transactional: true, ProducerGroup: "pg"}})
	require.NoError(t, err)
	// The timer quota counts what the timer index holds, which follows the
	// store.
	require.Eventually(t, func() bool { n, ok := b.timers.Pending(); return ok && n == 1 }, 5*time.Second, time.Millisecond)
	sentBefore := b.Stats().Sent["rw"]
	maxBefore := []int64{b.store.MaxOffset("rw", 0), b.store.MaxOffset("rw", 1)}

	for _, tc := range []struct {
		name  string
		topic string
		msgs  []SendMessage
		want  string
	}{
		{"empty topic name", "", []SendMessage{{Body: body}},
			"invalid name: topic name is empty [ErrInvalidName]"},
		{"topic name with a space", "a b", []SendMessage{{Body: body}},
			"invalid name: topic name \"a b\" may only contain letters, digits, '_' and '-' [ErrInvalidName]"},
		{"retry topic", "%RETRY%g", []SendMessage{{Body: body}},
			"reserved name: topic name \"%RETRY%g\" uses a reserved prefix (%, rmq_sys_) or name [ErrReservedName]"},
		{"system topic", "rmq_sys_META", []SendMessage{{Body: body}},
			"reserved name: topic name \"rmq_sys_META\" uses a reserved prefix (%, rmq_sys_) or name [ErrReservedName]"},
		{"schedule topic", "SCHEDULE_TOPIC_XXXX", []SendMessage{{Body: body}},
			"reserved name: topic name \"SCHEDULE_TOPIC_XXXX\" uses a reserved prefix (%, rmq_sys_) or name [ErrReservedName]"},
		{"name before batch size", "a b", nil,
			"invalid name: topic name \"a b\" may only contain letters, digits, '_' and '-' [ErrInvalidName]"},
		{"no messages", "rw", nil,
			"invalid argument: a send carries 1 to 256 messages, got 0 [ErrInvalidArgument]"},
		{"batch size before the topic", "ro", []SendMessage{},
			"invalid argument: a send carries 1 to 256 messages, got 0 [ErrInvalidArgument]"},
		{"transactional in a batch", "rw", []SendMessage{{Body: body}, {Body: body, Transactional: true, ProducerGroup: "pg2"}},
			"invalid argument: a transactional send carries one message (messages[1] is transactional; as in RocketMQ, batches are not) [ErrInvalidArgument]"},
		{"transactional batch before the topic", "ro", []SendMessage{{Body: body, Transactional: true}, {}},
			"invalid argument: a transactional send carries one message (messages[0] is transactional; as in RocketMQ, batches are not) [ErrInvalidArgument]"},
		{"read-only topic", "ro", []SendMessage{{Body: body}},
			"invalid argument: topic ro is read-only [ErrInvalidArgument]"},
		{"topic before the message", "ro", []SendMessage{{}},
			"invalid argument: topic ro is read-only [ErrInvalidArgument]"},
		{"delay level too high", "rw", []SendMessage{{Body: body, DelayLevel: 19}},
			"invalid argument: delayLevel must be 1..18 [ErrInvalidArgument]"},
		{"delay level negative", "rw", []SendMessage{{Body: body, DelayLevel: -1}},
			"invalid argument: delayLevel must be 1..18 [ErrInvalidArgument]"},
		{"delay level in a batch", "rw", []SendMessage{{Body: body}, {Body: body, DelayLevel: 19}},
			"messages[1]: invalid argument: delayLevel must be 1..18 [ErrInvalidArgument]"},
		{"limits before the delay level", "rw", []SendMessage{{Body: body, DelayLevel: 19, Tag: "a b"}},
			"invalid argument: tag \"a b\" may not contain white space or control characters [ErrInvalidArgument]"},
		{"transactional and delayed", "rw", []SendMessage{{Body: body, Transactional: true, ProducerGroup: "pg2", DelayLevel: 1}},
			"invalid argument: a transactional message cannot be delayed (delayLevel, delayMs, deliverAt): commit it when it should be delivered [ErrInvalidArgument]"},
		{"transactional without a group", "rw", []SendMessage{{Body: body, Transactional: true}},
			"invalid argument: a transactional send needs a producerGroup (the group asked about it when it is not resolved) [ErrInvalidArgument]"},
		{"timers over the quota", "rw", []SendMessage{{Body: body, DelayMs: 1000}},
			"quota exceeded: pendingTimers: the request would make 2 pending timers where the limit is 1 (--max-pending-timers; 1 exist) [ErrQuotaExceeded]"},
		{"timers over the quota in a batch", "rw", []SendMessage{{Body: body}, {Body: body, DelayMs: 1000}, {Body: body, DelayMs: 2000}},
			"quota exceeded: pendingTimers: the request would make 3 pending timers where the limit is 1 (--max-pending-timers; 1 exist) [ErrQuotaExceeded]"},
		{"transactions over the quota", "rw", []SendMessage{{Body: body, Transactional: true, ProducerGroup: "pg"}},
			"quota exceeded: transactionsPerProducerGroup: the request would make 2 unresolved transactions of producer group pg where the limit is 1 (--max-transactions-per-producer-group; 1 exist) [ErrQuotaExceeded]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Send(ctx, tc.topic, tc.msgs)
			got := describeSendErr(err)
			for _, k := range []error{ErrQuotaExceeded, ErrReservedName} {
				if errors.Is(err, k) {
					got = strings.TrimSuffix(got, "]") + map[error]string{ErrQuotaExceeded: "ErrQuotaExceeded", ErrReservedName: "ErrReservedName"}[k] + "]"
				}
			}
			require.Equal(t, tc.want, got)
		})
	}
	// Nothing was written.
	require.Equal(t, sentBefore, b.Stats().Sent["rw"])
	require.Equal(t, maxBefore, []int64{b.store.MaxOffset("rw", 0), b.store.MaxOffset("rw", 1)})
	_, ok := b.registry.Topic("a")
	require.False(t, ok)

	// Without auto-create, a topic must exist; a closed broker refuses first.
	opts = replicaOptions(fc, false)
	opts.AutoCreate = false
	nb := openReplica(t, opts)
	_, err = nb.Send(ctx, "missing", []SendMessage{{Body: body}})
	require.Equal(t, "topic not found: missing [ErrTopicNotFound]", describeSendErr(err))
	_, err = nb.Send(ctx, "missing", []SendMessage{{}})
	require.Equal(t, "topic not found: missing [ErrTopicNotFound]", describeSendErr(err))
	require.NoError(t, nb.Close(ctx))
	_, err = nb.Send(ctx, "a b", nil)
	require.ErrorIs(t, err, ErrShuttingDown)
	require.Equal(t, "the server is shutting down", err.Error())
}

// TestGoldenSendRecords: what each kind of send answers and writes.
func TestGoldenSendRecords(t *testing.T) {
	b, fc := goldenSendBroker(t)
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "rec", Queues: 4})
	require.NoError(t, err)
	fc.Advance(7 * time.Millisecond)

	// A batch: a full message, a plain one, one delayed by level, one on a
	// timer (delayMs and deliverAt), one with a sharding key.
	res, err := b.Send(ctx, "rec", []SendMessage{
		{Body: []byte("a"), Tag: "t", Keys: []string{"k1", "k2"}, Properties: map[string]string{"p": "v", "q": ""}, DedupID: "d1"},
		{Body: []byte("b")},
		{Body: []byte("c"), DelayLevel: 2},
		{Body: []byte("d"), DelayMs: 1500, Tag: "late"},
		{Body: []byte("e"), DeliverAt: goldenSendAt.Add(time.Hour)},
		{Body: []byte("f"), ShardingKey: "order-1"},
	})
	require.NoError(t, err)
	var got []string
	for _, r := range res {
		line, m := goldenResult(t, b, r)
		got = append(got, line+" "+goldenRecord(m))
	}
	require.Equal(t, []string{
		`q=1 off=0 dup=false txn= rec/1 born=7 stored=7 flag=0 {DEDUP_ID=d1 KEYS=k1 k2 TAGS=t p=v q=} "a"`,
		`q=2 off=0 dup=false txn= rec/2 born=7 stored=7 flag=0 {} "b"`,
		`q=3 off=-1 dup=false txn= SCHEDULE_TOPIC_XXXX/1 born=7 stored=7 flag=0 {DELAY=2 REAL_QID=3 REAL_TOPIC=rec TIMER_DELIVER_MS=1700000005130} "c"`,
		`q=0 off=-1 dup=false txn= rmq_sys_TIMER/0 born=7 stored=7 flag=0 {REAL_QID=0 REAL_TOPIC=rec TAGS=late TIMER_DELIVER_MS=1700000001630} "d"`,
		`q=1 off=-1 dup=false txn= rmq_sys_TIMER/0 born=7 stored=7 flag=0 {REAL_QID=1 REAL_TOPIC=rec TIMER_DELIVER_MS=1700003600123} "e"`,
		`q=1 off=1 dup=false txn= rec/1 born=7 stored=7 flag=0 {SHARDING_KEY=order-1} "f"`,
	}, got)
	// The counters count the messages stored on the topic (the delayed
	// and timed ones among them) and their bodies.
	st := b.Stats()
	require.Equal(t, uint64(6), st.Sent["rec"])
	require.Equal(t, uint64(6), st.SentBytes["rec"])

	// A transactional send: the id names the transaction; the queue is its
	// destination, the offset -1 until committed.
	fc.Advance(time.Millisecond)
	res, err = b.Send(ctx, "rec", []SendMessage{{Body: []byte("tx"), Transactional: true, ProducerGroup: "pg", CheckAfterMs: 2000, DedupID: "d2"}})
	require.NoError(t, err)
	line, m := goldenResult(t, b, res[0])
	require.Equal(t, `q=2 off=-1 dup=false txn=id rmq_sys_TRANS_HALF/0 born=8 stored=8 flag=0 {DEDUP_ID=d2 REAL_QID=2 REAL_TOPIC=rec TRAN_CHECK_AFTER_MS=2000 TRAN_PGROUP=pg} "tx"`,
		line+" "+goldenRecord(m))
	// Its repeat, from the table.
	again, err := b.Send(ctx, "rec", []SendMessage{{Body: []byte("tx"), Transactional: true, ProducerGroup: "pg", CheckAfterMs: 2000, DedupID: "d2"}})
	require.NoError(t, err)
	want := res[0]
	want.Duplicate = true
	require.Equal(t, want, again[0])
	st = b.Stats()
	require.Equal(t, uint64(7), st.Sent["rec"])
	require.Equal(t, uint64(8), st.SentBytes["rec"])

	// A batch of a repeat and a new key: only the new one is stored and
	// counted; the repeat answers its first result.
	res, err = b.Send(ctx, "rec", []SendMessage{{Body: []byte("tx"), DedupID: "d2"}, {Body: []byte("g"), DedupID: "d3"}})
	require.NoError(t, err)
	require.Equal(t, want, res[0])
	line, m = goldenResult(t, b, res[1])
	require.Equal(t, `q=1 off=2 dup=false txn= rec/1 born=8 stored=8 flag=0 {DEDUP_ID=d3} "g"`, line+" "+goldenRecord(m))
	require.Equal(t, uint64(8), b.Stats().Sent["rec"])
}

// TestGoldenSendDedupFromStore: keys the table no longer holds (a
// restart) are answered from the store, a transaction's by its id, within
// the window only.
func TestGoldenSendDedupFromStore(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenSendAt)
	opts := replicaOptions(fc, false)
	opts.DataDir = memDir(t)
	ctx := context.Background()
	b, err := Open(ctx, opts)
	require.NoError(t, err)
	send := func(b *Broker, body, id string, txn bool) (SendResult, error) {
		msg := SendMessage{Body: []byte(body), DedupID: id}
		if txn {
			msg.Transactional, msg.ProducerGroup = true, "pg"
		}
		r, err := b.Send(ctx, "dd", []SendMessage{msg})
		if err != nil {
			return SendResult{}, err
		}
		return r[0], nil
	}
	plain, err := send(b, "one", "k1", false)
	require.NoError(t, err)
	half, err := send(b, "two", "k2", true)
	require.NoError(t, err)
	committed, err := send(b, "three", "k3", true)
	require.NoError(t, err)
	view, err := b.CommitTransaction(ctx, committed.TransactionID)
	require.NoError(t, err)
	require.Equal(t, "committed", view.State)
	require.NoError(t, b.Close(ctx))

	fc.Advance(time.Minute)
	b, err = Open(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	dup := func(r SendResult) SendResult { r.Duplicate = true; return r }
	r, err := send(b, "one", "k1", false)
	require.NoError(t, err)
	require.Equal(t, dup(plain), r)
	_, err = send(b, "other", "k1", false)
	require.Equal(t, "idempotency key reused with a different request: k1 [ErrIdempotencyKeyReused]", describeSendErr(err))
	// The half message's key: its transaction's id, the queue of its
	// destination (whether the repeat is transactional or not).
	r, err = send(b, "two", "k2", true)
	require.NoError(t, err)
	require.Equal(t, dup(half), r)
	r, err = send(b, "two", "k2", false)
	require.NoError(t, err)
	require.Equal(t, dup(half), r)
	// The committed one's: the transaction's id, the committed message's
	// queue and offset.
	r, err = send(b, "three", "k3", true)
	require.NoError(t, err)
	require.Equal(t, SendResult{MessageID: committed.TransactionID, TransactionID: committed.TransactionID,
		QueueID: committed.QueueID, QueueOffset: 0, Duplicate: true}, r)
	require.Equal(t, uint64(0), b.Stats().Sent["dd"])

	// The window counts from the first send's store time: at its last
	// instant a repeat, after it a new send.
	fc.Advance(b.opts.DedupWindow - time.Minute)
	r, err = send(b, "one", "k1", false)
	require.NoError(t, err)
	require.True(t, r.Duplicate)
	require.NoError(t, b.Close(ctx))
	b, err = Open(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	fc.Advance(time.Millisecond)
	r, err = send(b, "other", "k1", false)
	require.NoError(t, err)
	require.False(t, r.Duplicate)
	require.NotEqual(t, plain.MessageID, r.MessageID)
}

// TestGoldenSendDedupReleased: a send refused after its keys were claimed
// (the transaction quota) releases them: the next send of the key stores.
func TestGoldenSendDedupReleased(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenSendAt)
	opts := replicaOptions(fc, false)
	opts.Quotas.MaxTransactionsPerProducerGroup = 1
	b := openReplica(t, opts)
	ctx := context.Background()
	tx := func(id string) (SendResult, error) {
		r, err := b.Send(ctx, "dd", []SendMessage{{Body: []byte("x"), DedupID: id, Transactional: true, ProducerGroup: "pg"}})
		if err != nil {
			return SendResult{}, err
		}
		return r[0], nil
	}
	first, err := tx("t1")
	require.NoError(t, err)
	_, err = tx("t2")
	require.ErrorIs(t, err, ErrQuotaExceeded)
	// A repeat of a stored key is answered before the quota.
	r, err := tx("t1")
	require.NoError(t, err)
	require.True(t, r.Duplicate)
	_, err = b.RollbackTransaction(ctx, first.TransactionID)
	require.NoError(t, err)
	r, err = tx("t2")
	require.NoError(t, err)
	require.False(t, r.Duplicate)
}

// TestGoldenSendDedupConcurrent: concurrent sends of one key store it
// once; every other answers the stored result or that the key is in
// flight.
func TestGoldenSendDedupConcurrent(t *testing.T) {
	b, _ := goldenSendBroker(t)
	ctx := context.Background()
	const n = 16
	results := make([]SendResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := b.Send(ctx, "cc", []SendMessage{{Body: []byte("same"), DedupID: "k"}})
			if err == nil {
				results[i] = r[0]
			}
			errs[i] = err
		}(i)
	}
	wg.Wait()
	var stored []SendResult
	for i := 0; i < n; i++ {
		switch {
		case errs[i] != nil:
			require.Equal(t, "a request with this idempotency key is still in progress: k [ErrIdempotencyInFlight]", describeSendErr(errs[i]))
		case !results[i].Duplicate:
			stored = append(stored, results[i])
		}
	}
	require.Len(t, stored, 1)
	for i := 0; i < n; i++ {
		if errs[i] == nil && results[i].Duplicate {
			want := stored[0]
			want.Duplicate = true
			require.Equal(t, want, results[i])
		}
	}
	require.Equal(t, uint64(1), b.Stats().Sent["cc"])
	require.NoError(t, b.store.AwaitDispatch(ctx))
	var total int64
	for q := int32(0); q < 4; q++ {
		total += b.store.MaxOffset("cc", q)
	}
	require.Equal(t, int64(1), total)
}
