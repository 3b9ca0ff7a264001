package broker_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// sendProps sends one message per property set to topic (the body is its
// index, tag the message's tag).
func (bd *bundle) sendProps(t *testing.T, topic string, tag func(i int) string, props ...map[string]string) {
	t.Helper()
	msgs := make([]broker.SendMessage, len(props))
	for i, p := range props {
		msgs[i] = broker.SendMessage{Body: []byte(fmt.Sprint(i)), Properties: p}
		if tag != nil {
			msgs[i].Tag = tag(i)
		}
	}
	for start := 0; start < len(msgs); start += broker.MaxSendBatch {
		_, err := bd.b.Send(bd.ctx, topic, msgs[start:min(start+broker.MaxSendBatch, len(msgs))])
		require.NoError(t, err)
	}
}

// drain pulls group's messages of topic until a pull returns none and
// acks them; it returns the bodies, sorted as numbers.
func (bd *bundle) drain(t *testing.T, req broker.PullRequest) []string {
	t.Helper()
	var out []string
	for {
		req.MaxMessages = 32
		got, err := bd.b.Pull(bd.ctx, req)
		require.NoError(t, err)
		if len(got) == 0 {
			break
		}
		for _, m := range got {
			out = append(out, string(m.Body))
		}
		_, err = bd.b.Ack(bd.ctx, req.Group, receipts(got))
		require.NoError(t, err)
	}
	sort.Slice(out, func(i, j int) bool {
		var a, b int
		fmt.Sscan(out[i], &a)
		fmt.Sscan(out[j], &b)
		return a < b
	})
	return out
}

func numbered(from, to, step int) []string {
	var out []string
	for i := from; i < to; i += step {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func (bd *bundle) consumerOffsets(t *testing.T, group string) (sum int64) {
	t.Helper()
	prog, err := bd.b.Progress(bd.ctx, group)
	require.NoError(t, err)
	for _, q := range prog {
		if q.QueueID >= 0 {
			sum += q.ConsumerOffset
		}
	}
	return sum
}

// TestSQLSubscriptionFiltersPulls: a group's SQL subscription delivers the
// matching messages only, and the others count as consumed; a tag
// expression beside it must match too; a pull's own filter takes the
// subscription's place.
func TestSQLSubscriptionFiltersPulls(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "orders", Queues: 2})
	require.NoError(t, err)
	var props []map[string]string
	for i := 0; i < 100; i++ {
		p := map[string]string{"amount": fmt.Sprint(i), "region": []string{"eu", "us"}[i%2]}
		if i%10 == 0 {
			delete(p, "amount") // missing: no comparison with it matches
		}
		props = append(props, p)
	}
	tag := func(i int) string { return []string{"red", "blue", "green"}[i%3] }
	bd.sendProps(t, "orders", tag, props...)

	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "eu-large", Subscriptions: []broker.Subscription{
		{Topic: "orders", SQL: "region = 'eu' AND amount >= 50"}}})
	require.NoError(t, err)
	var want []string
	for i := 50; i < 100; i += 2 {
		if i%10 != 0 {
			want = append(want, fmt.Sprint(i))
		}
	}
	require.Equal(t, want, bd.drain(t, broker.PullRequest{Group: "eu-large", Topic: "orders"}))
	require.Equal(t, int64(100), bd.consumerOffsets(t, "eu-large"), "the filtered-out messages count as consumed")

	// Tag and SQL: both must match. TAGS is the tag in SQL.
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "both", Subscriptions: []broker.Subscription{
		{Topic: "orders", TagExpression: "red || blue", SQL: "amount < 20 AND TAGS <> 'blue'"}}})
	require.NoError(t, err)
	require.Equal(t, []string{"3", "6", "9", "12", "15", "18"}, bd.drain(t, broker.PullRequest{Group: "both", Topic: "orders"}))

	// A pull's own SQL replaces the subscription's (its tag expression stays).
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "override", Subscriptions: []broker.Subscription{
		{Topic: "orders", TagExpression: "red", SQL: "region = 'us'"}}})
	require.NoError(t, err)
	require.Equal(t, []string{"0", "6", "30", "60", "90"}, bd.drain(t, broker.PullRequest{Group: "override", Topic: "orders", SQL: "amount IS NULL OR amount BETWEEN 5 AND 7"}))

	// NULL logic: NOT of an unknown comparison is unknown.
	require.Equal(t, numbered(0, 100, 10), bd.drain(t, broker.PullRequest{Group: "nulls", Topic: "orders", SQL: "NOT (amount > 0) OR amount IS NULL"}))
}

// TestSQLFilterScansLongBacklog: a pull whose filter passes over a long
// backlog keeps reading it at once instead of waiting for new data.
func TestSQLFilterScansLongBacklog(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "logs", Queues: 1})
	require.NoError(t, err)
	props := make([]map[string]string, 3000)
	for i := range props {
		props[i] = map[string]string{"level": "debug"}
	}
	props[len(props)-1] = map[string]string{"level": "error"}
	bd.sendProps(t, "logs", nil, props...)
	start := time.Now()
	got, err := bd.b.Pull(bd.ctx, broker.PullRequest{Group: "alerts", Topic: "logs", MaxMessages: 32, Wait: 20 * time.Second, SQL: "level = 'error'"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "2999", string(got[0].Body))
	require.Less(t, time.Since(start), 15*time.Second, "the pull found the match by reading on, not at the end of its wait")
	require.Equal(t, int64(2999), bd.consumerOffsets(t, "alerts"), "everything before the match was passed over")
}

// TestSQLFilterRetries: retries of the group are filtered by the
// subscription as it is when they come due.
func TestSQLFilterRetries(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "jobs", Queues: 1})
	require.NoError(t, err)
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "w", Subscriptions: []broker.Subscription{{Topic: "jobs", SQL: "kind IN ('a', 'b')"}}})
	require.NoError(t, err)
	bd.sendProps(t, "jobs", nil, map[string]string{"kind": "a"}, map[string]string{"kind": "b"}, map[string]string{"kind": "c"})
	got := bd.pull(t, "w", "jobs", 32, 0, time.Minute)
	require.Len(t, got, 2)
	var items []broker.NackItem
	for _, m := range got {
		items = append(items, broker.NackItem{Receipt: m.Receipt, DelayLevel: 1})
	}
	res, err := bd.b.Nack(bd.ctx, "w", items)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, broker.ReceiptOK, r.Status, r.Error)
	}
	// Narrow the subscription before the retries come due: only a's retry
	// passes; b's counts as consumed.
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "w", Subscriptions: []broker.Subscription{{Topic: "jobs", SQL: "kind = 'a'"}}})
	require.NoError(t, err)
	var retried []broker.ReceivedMessage
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		got := bd.pull(t, "w", "jobs", 32, 100*time.Millisecond, time.Minute)
		if len(got) > 0 {
			_, err := bd.b.Ack(bd.ctx, "w", receipts(got))
			require.NoError(t, err)
		}
		retried = append(retried, got...)
		prog, err := bd.b.Progress(bd.ctx, "w")
		require.NoError(t, err)
		for _, q := range prog {
			if q.QueueID < 0 {
				// Both retries are in the retry topic and the group is past them.
				return q.BrokerOffset == 2 && q.ConsumerOffset == 2, fmt.Sprintf("%d retries delivered, retry queue %+v", len(retried), q)
			}
		}
		return false, "no retries yet"
	})
	require.Len(t, retried, 1)
	require.Equal(t, "a", retried[0].Properties["kind"])
	require.Equal(t, int32(1), retried[0].ReconsumeTimes)
}

// TestSQLSubscriptionValidation: a filter that does not compile, names a
// broker property or is too long is refused before the group is stored;
// the error names the field and the position.
func TestSQLSubscriptionValidation(t *testing.T) {
	bd := setup(t)
	put := func(sql string) error {
		_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", Subscriptions: []broker.Subscription{{Topic: "a"}, {Topic: "b", SQL: sql}}})
		return err
	}
	for _, tc := range []struct {
		sql string
		pos int
		msg string
	}{
		{"amount >", 9, "expected a property"},
		{"NOT region = 'eu'", 5, "NOT needs a condition"},
		{"KEYS = 'k1'", 1, "KEYS is a property of the broker"},
		{"TAGS = 'x' OR \"RETRY_TOPIC\" IS NULL", 15, "RETRY_TOPIC is a property of the broker"},
	} {
		err := put(tc.sql)
		require.ErrorIs(t, err, broker.ErrInvalidSQL, tc.sql)
		var se *broker.SQLError
		require.True(t, errors.As(err, &se), tc.sql)
		require.Equal(t, "subscriptions[1].sql", se.Field)
		require.Equal(t, tc.pos, se.Position, "%s: %v", tc.sql, err)
		require.Contains(t, se.Msg, tc.msg)
	}
	err := put("a = '" + strings.Repeat("x", broker.MaxSQLBytes) + "'")
	var le *broker.LimitError
	require.True(t, errors.As(err, &le), "%v", err)
	require.Equal(t, "subscriptions[1].sql", le.Field)
	require.Equal(t, broker.MaxSQLBytes, le.Limit)
	_, err = bd.b.GetGroup(bd.ctx, "g")
	require.ErrorIs(t, err, broker.ErrGroupNotFound, "nothing was stored")

	_, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g2", Topic: "a", SQL: "a = "})
	var se *broker.SQLError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, "sql", se.Field)
	require.Equal(t, 5, se.Position)
}

// TestSQLSubscriptionSurvivesRestart: the filter is part of the group's
// registry record, so it survives a restart, also without the snapshot
// files (replayed from the CommitLog).
func TestSQLSubscriptionSurvivesRestart(t *testing.T) {
	bd := setup(t)
	sub := broker.Subscription{Topic: "events", TagExpression: "x || y", SQL: "n > 2 AND n <= 4.5"}
	_, _, err := bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", Subscriptions: []broker.Subscription{sub}})
	require.NoError(t, err)
	for _, lose := range []bool{false, true} {
		bd.restart(t)
		if lose {
			require.NoError(t, bd.b.Close(bd.ctx))
			require.NoError(t, os.Remove(filepath.Join(bd.dir, "config", "groups.json")))
			require.NoError(t, os.Remove(filepath.Join(bd.dir, "config", "topics.json")))
			bd.b = brokertest.MustOpen(t, bd.dir)
		}
		g, err := bd.b.GetGroup(bd.ctx, "g")
		require.NoError(t, err)
		require.Equal(t, []broker.Subscription{sub}, g.Subscriptions)
	}
	var props []map[string]string
	for i := 0; i < 6; i++ {
		props = append(props, map[string]string{"n": fmt.Sprint(i)})
	}
	bd.sendProps(t, "events", func(i int) string { return "x" }, props...)
	require.Equal(t, []string{"3", "4"}, bd.drain(t, broker.PullRequest{Group: "g", Topic: "events"}), "n <= 4.5 reads n as a double, n > 2 as a long")
}
