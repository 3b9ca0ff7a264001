package pgmirror

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
	"github.com/mqgate/mqgate/storage/offset"
)

// waitFor polls cond every 5 ms until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		<-tick.C
	}
	return time.Since(start)
}

func TestOffsetsAppearWithinASecond(t *testing.T) {
	bd := setup(t)
	bd.m.Start(bd.ctx)
	send(t, bd.b, "orders", 40)
	consume(t, bd.b, "g1", "orders", 25)
	consume(t, bd.b, "g2", "orders", 40)
	acked := time.Now()
	for _, g := range []string{"g1", "g2"} {
		want := live(t, bd.b, g)
		require.NotEmpty(t, want)
		took := waitFor(t, time.Second, "offsets of "+g+" in PostgreSQL", func() bool {
			return len(diff(mirrored(t, bd.url, g), want)) == 0
		})
		t.Logf("%s mirrored %v after the last ack", g, took)
	}
	t.Logf("both groups mirrored %v after the last ack", time.Since(acked))
	waitFor(t, 2*time.Second, "lag 0", func() bool { r, age := bd.m.Lag(); return r == 0 && age == 0 })
	require.NoError(t, bd.m.Health())

	got, err := bd.m.Offsets(bd.ctx, "g2")
	require.NoError(t, err)
	var total int64
	for _, o := range got {
		require.True(t, o.Exact)
		require.Zero(t, o.AckedAbove)
		total += o.Committed
	}
	require.Equal(t, int64(40), total, "g2 consumed everything")
	st := bd.m.Stats()
	require.True(t, st.Healthy)
	require.GreaterOrEqual(t, st.Records, int64(65), "one record per ack")
}

// TestOffsetsOutOfOrderAcks checks the acked_above state: an unacked
// message holds the committed offset back, and acking it releases
// everything above it, also across a reload from PostgreSQL.
func TestOffsetsOutOfOrderAcks(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "one", Queues: 1})
	require.NoError(t, err)
	send(t, bd.b, "one", 10)
	msgs := pull(t, bd.b, "g", "one", 10)
	require.Len(t, msgs, 10)
	ackEach(t, bd.b, "g", msgs[1:])
	drain(t, bd.m)
	key := offset.Key{Group: "g", Topic: "one", QueueID: 0}
	require.Equal(t, int64(0), mirrored(t, bd.url, "g")[key])
	require.Equal(t, 9, count(t, bd.url, `SELECT cardinality(acked_above) FROM consumer_offsets WHERE group_name = 'g' AND queue_id = 0`))

	m2 := mustOpenMirror(t, bd.url, bd.b) // a restarted mirror: state from PostgreSQL
	ackEach(t, bd.b, "g", msgs[:1])
	res := drain(t, m2)
	require.Equal(t, 1, res.Records)
	require.Equal(t, int64(10), mirrored(t, bd.url, "g")[key])
	require.Equal(t, 0, count(t, bd.url, `SELECT cardinality(acked_above) FROM consumer_offsets WHERE group_name = 'g' AND queue_id = 0`))
	require.Empty(t, diff(mirrored(t, bd.url, "g"), live(t, bd.b, "g")))
}

// deadLetters nacks n fresh messages of topic straight to the DLQ.
func deadLetters(t testing.TB, b *broker.Broker, group, topic string, n int) {
	t.Helper()
	send(t, b, topic, n)
	msgs := pull(t, b, group, topic, n)
	require.Len(t, msgs, n)
	items := make([]broker.NackItem, n)
	for i, m := range msgs {
		items[i] = broker.NackItem{Receipt: m.Receipt, DelayLevel: -1, Reason: fmt.Sprintf("card declined #%d", i)}
	}
	res, err := b.Nack(context.Background(), group, items)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, broker.ReceiptOK, r.Status)
	}
}

func TestDeadLetters(t *testing.T) {
	bd := setup(t)
	deadLetters(t, bd.b, "g", "pay", 5)
	res := drain(t, bd.m)
	require.Equal(t, 5, res.DeadLetters)

	want, _, err := bd.b.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 100)
	require.NoError(t, err)
	got, next, err := bd.m.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "", 100)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, got, 5)
	for i := range want {
		w, g := want[i], got[i]
		require.Equal(t, w.MessageID, g.MessageID)
		require.Equal(t, "pay", g.OriginalTopic)
		require.Equal(t, w.Reason, g.Reason)
		require.Contains(t, g.Reason, "card declined")
		require.Equal(t, w.ReconsumeTimes, g.ReconsumeTimes)
		require.Equal(t, broker.DLQDead, g.Status)
		require.WithinDuration(t, w.DeadAt, g.DeadAt, time.Microsecond)
		require.WithinDuration(t, w.FirstFailedAt, g.FirstFailedAt, time.Microsecond)
		require.Len(t, g.Attempts, 1)
		require.Equal(t, "nack", g.Attempts[0].Outcome)
		require.Equal(t, -1, g.Attempts[0].Level)
		require.Equal(t, w.Reason, g.Attempts[0].Reason)
		require.Equal(t, []string{"k"}, g.Keys)
		require.Equal(t, "t", g.Tag)
	}

	t.Run("Filters", func(t *testing.T) {
		for name, tc := range map[string]struct {
			f    broker.DLQFilter
			want int
		}{
			"All":              {broker.DLQFilter{}, 5},
			"ReasonIgnoreCase": {broker.DLQFilter{ReasonContains: "DECLINED #3"}, 1},
			"Topic":            {broker.DLQFilter{OriginalTopic: "pay"}, 5},
			"OtherTopic":       {broker.DLQFilter{OriginalTopic: "ship"}, 0},
			"Status":           {broker.DLQFilter{Status: broker.DLQResent}, 0},
			"TimeRange":        {broker.DLQFilter{From: want[0].DeadAt, To: want[4].DeadAt}, 5},
			"Future":           {broker.DLQFilter{From: time.Now().Add(time.Hour)}, 0},
		} {
			items, _, err := bd.m.ListDeadLetters(bd.ctx, "g", tc.f, "", 100)
			require.NoError(t, err)
			require.Len(t, items, tc.want, name)
		}
	})
	t.Run("KeysetPagination", func(t *testing.T) {
		var ids []string
		cursor := ""
		for page := 0; ; page++ {
			require.Less(t, page, 5)
			items, next, err := bd.m.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, cursor, 2)
			require.NoError(t, err)
			for _, d := range items {
				ids = append(ids, d.MessageID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		require.Len(t, ids, 5)
		for i := range want {
			require.Equal(t, want[i].MessageID, ids[i], "oldest first, no gaps, no repeats")
		}
		_, _, err := bd.m.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{}, "x", 2)
		require.ErrorIs(t, err, ErrBadCursor)
	})
	t.Run("StatusChanges", func(t *testing.T) {
		rr, err := bd.b.ResendDeadLetters(bd.ctx, "g", []string{want[0].MessageID}, nil)
		require.NoError(t, err)
		require.Len(t, rr.Resent, 1)
		require.NoError(t, bd.b.DiscardDeadLetter(bd.ctx, "g", want[1].MessageID))
		res := drain(t, bd.m)
		require.Equal(t, 2, res.StatusChanges)
		resent, _, err := bd.m.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{Status: broker.DLQResent}, "", 10)
		require.NoError(t, err)
		require.Len(t, resent, 1)
		require.Equal(t, want[0].MessageID, resent[0].MessageID)
		require.False(t, resent[0].StatusAt.IsZero())
		discarded, _, err := bd.m.ListDeadLetters(bd.ctx, "g", broker.DLQFilter{Status: broker.DLQDiscarded}, "", 10)
		require.NoError(t, err)
		require.Len(t, discarded, 1)
		require.Equal(t, want[1].MessageID, discarded[0].MessageID)
		require.Equal(t, 1, count(t, bd.url, `SELECT count(*) FROM dead_letters WHERE resent_at IS NOT NULL`))
		require.Equal(t, 5, count(t, bd.url, `SELECT count(*) FROM dead_letters`), "status changes update rows, never add")
	})
}

// TestRetryQueueOffsets mirrors queue id -1, a topic's view of the
// group's retry topic.
func TestRetryQueueOffsets(t *testing.T) {
	bd := setup(t)
	send(t, bd.b, "jobs", 3)
	msgs := pull(t, bd.b, "g", "jobs", 3)
	require.Len(t, msgs, 3)
	_, err := bd.b.Nack(bd.ctx, "g", []broker.NackItem{{Receipt: msgs[0].Receipt, DelayLevel: 1, Reason: "later"}})
	require.NoError(t, err)
	ackEach(t, bd.b, "g", msgs[1:])
	var retried []broker.ReceivedMessage
	waitFor(t, 5*time.Second, "retry delivered", func() bool {
		got, err := bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "jobs", MaxMessages: 1, Wait: 100 * time.Millisecond, Invisible: time.Minute})
		require.NoError(t, err)
		retried = append(retried, got...)
		return len(retried) > 0
	})
	require.EqualValues(t, 1, retried[0].ReconsumeTimes)
	ackEach(t, bd.b, "g", retried)
	drain(t, bd.m)
	got := mirrored(t, bd.url, "g")
	require.Equal(t, int64(1), got[offset.Key{Group: "g", Topic: "jobs", QueueID: -1}])
	require.Empty(t, diff(got, live(t, bd.b, "g")))
}

func TestExactlyOnce(t *testing.T) {
	bd := setup(t)
	send(t, bd.b, "orders", 30)
	consume(t, bd.b, "g", "orders", 20)
	deadLetters(t, bd.b, "g", "pay", 4)
	drain(t, bd.m)
	snapshot := func() (map[offset.Key]int64, int, int) {
		return mirrored(t, bd.url, "g"),
			count(t, bd.url, `SELECT count(*) FROM dead_letters`),
			count(t, bd.url, `SELECT coalesce(sum(cardinality(acked_above)), 0)::int FROM consumer_offsets`)
	}
	offs, letters, acked := snapshot()
	require.Equal(t, 4, letters)

	t.Run("RerunFromCommittedCursors", func(t *testing.T) {
		// A restarted mirror (the crash can only happen before or after the
		// one transaction) starts from the committed cursors: nothing again.
		m2 := mustOpenMirror(t, bd.url, bd.b)
		res, err := m2.runOnce(bd.ctx)
		require.NoError(t, err)
		require.Zero(t, res.Records)
		require.Zero(t, res.DeadLetters)
		o, l, a := snapshot()
		require.Equal(t, offs, o)
		require.Equal(t, letters, l)
		require.Equal(t, acked, a)
	})
	t.Run("FailedCommitWritesNothing", func(t *testing.T) {
		// Make the cursor update fail after the rows were written in the
		// same transaction: none of the rows may survive.
		execSQL(t, bd.url, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;
CREATE TRIGGER refuse BEFORE UPDATE OR INSERT ON mirror_cursors FOR EACH ROW EXECUTE FUNCTION refuse();`)
		consume(t, bd.b, "g", "orders", 5)
		deadLetters(t, bd.b, "g", "pay", 3)
		_, err := bd.m.runOnce(bd.ctx)
		require.ErrorContains(t, err, "refused")
		require.ErrorIs(t, bd.m.Health(), ErrDegraded)
		o, l, _ := snapshot()
		require.Equal(t, offs, o, "no offset row without its cursor")
		require.Equal(t, letters, l, "no dead letter without its cursor")

		execSQL(t, bd.url, `DROP TRIGGER refuse ON mirror_cursors`)
		drain(t, bd.m)
		require.NoError(t, bd.m.Health())
		require.Equal(t, 7, count(t, bd.url, `SELECT count(*) FROM dead_letters`))
		require.Equal(t, 7, count(t, bd.url, `SELECT count(DISTINCT dlq_offset) FROM dead_letters`), "each arrival once")
		require.Empty(t, diff(mirrored(t, bd.url, "g"), live(t, bd.b, "g")))
	})
	t.Run("ErrConcurrentWriter", func(t *testing.T) {
		m2 := mustOpenMirror(t, bd.url, bd.b)
		_, err := m2.runOnce(bd.ctx) // loads its state
		require.NoError(t, err)
		consume(t, bd.b, "g", "orders", 5)
		drain(t, bd.m)
		_, err = m2.runOnce(bd.ctx)
		require.ErrorIs(t, err, ErrConcurrentWriter)
		res, err := m2.runOnce(bd.ctx) // reloads, finds nothing new
		require.NoError(t, err)
		require.Zero(t, res.Records)
		require.Empty(t, diff(mirrored(t, bd.url, "g"), live(t, bd.b, "g")))
	})
}

// TestLogBehindThenSeed restores a backup of the data dir taken before the
// consumers ran: the mirror refuses to follow it until SeedOffsets, which
// brings the consumers back to where PostgreSQL saw them.
func TestLogBehindThenSeed(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	b1, err := broker.Open(ctx, brokerOptions(dir, "sync"))
	require.NoError(t, err)
	send(t, b1, "orders", 60)
	require.NoError(t, b1.Close(ctx))
	backup := filepath.Join(t.TempDir(), "backup")
	copyDir(t, dir, backup)

	b1 = mustOpenBroker(t, dir, "sync")
	consume(t, b1, "g", "orders", 45)
	m1 := mustOpenMirror(t, url, b1)
	drain(t, m1)
	before := mirrored(t, url, "g")
	require.Empty(t, diff(before, live(t, b1, "g")))
	require.NoError(t, m1.Close())
	require.NoError(t, b1.Close(ctx))

	b2 := mustOpenBroker(t, backup, "sync")
	m2 := mustOpenMirror(t, url, b2)
	_, err = m2.runOnce(ctx)
	require.ErrorIs(t, err, ErrLogBehind)
	require.ErrorIs(t, m2.Health(), ErrLogBehind)
	require.Equal(t, before, mirrored(t, url, "g"), "nothing written over the old projection")

	res, err := m2.SeedOffsets(ctx, b2)
	require.NoError(t, err)
	require.Positive(t, res.Committed)
	require.Zero(t, res.Skipped)
	require.Empty(t, diff(before, live(t, b2, "g")), "the restored broker resumes where PostgreSQL saw the group")

	res, err = m2.SeedOffsets(ctx, b2)
	require.NoError(t, err)
	require.Zero(t, res.Committed, "seeding twice changes nothing")

	drain(t, m2)
	require.NoError(t, m2.Health())
	require.Empty(t, diff(mirrored(t, url, "g"), live(t, b2, "g")))
	consume(t, b2, "g", "orders", 15)
	drain(t, m2)
	require.Empty(t, diff(mirrored(t, url, "g"), live(t, b2, "g")))
}

// gappySource pretends that retention deleted every progress record
// below min.
type gappySource struct {
	*broker.Broker
	min int64
}

func (g *gappySource) OffsetRecordsMin() int64 { return max(g.min, g.Broker.OffsetRecordsMin()) }

func (g *gappySource) OffsetRecords(ctx context.Context, from int64, n int) ([]offset.Record, int64, error) {
	if from < g.min {
		return nil, from, fmt.Errorf("%w: %d < %d", broker.ErrOffsetOutOfRange, from, g.min)
	}
	return g.Broker.OffsetRecords(ctx, from, n)
}

func TestRebaseAfterRetention(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "one", Queues: 1})
	require.NoError(t, err)
	send(t, bd.b, "one", 20)
	consume(t, bd.b, "g", "one", 5)
	drain(t, bd.m)
	msgs := pull(t, bd.b, "g", "one", 10)
	ackEach(t, bd.b, "g", msgs[1:]) // 5 stays unacked: 6..14 acked above it

	src := &gappySource{Broker: bd.b}
	src.min, err = (&Mirror{src: bd.b}).offsetHead(bd.ctx, 0)
	require.NoError(t, err)
	m := mustOpenMirror(t, bd.url, src)
	res, err := m.runOnce(bd.ctx)
	require.NoError(t, err)
	require.True(t, res.Rebased)
	key := offset.Key{Group: "g", Topic: "one", QueueID: 0}
	offs, err := m.Offsets(bd.ctx, "g")
	require.NoError(t, err)
	require.Len(t, offs, 1)
	require.False(t, offs[0].Exact)
	require.Equal(t, int64(5), offs[0].Committed)

	ackEach(t, bd.b, "g", msgs[:1]) // live jumps to 15; the acked set was lost
	drain(t, m)
	require.Equal(t, int64(15), mirrored(t, bd.url, "g")[key], "a loose key follows live progress")

	require.NoError(t, bd.b.CommitOffsets(bd.ctx, "g", []broker.OffsetCommit{{Topic: "one", QueueID: 0, Offset: 3}}))
	drain(t, m)
	offs, err = m.Offsets(bd.ctx, "g")
	require.NoError(t, err)
	require.True(t, offs[0].Exact, "an explicit commit makes the key exact again")
	require.Equal(t, int64(3), offs[0].Committed)
	require.Empty(t, diff(mirrored(t, bd.url, "g"), live(t, bd.b, "g")))
}

func TestDeletedGroupForgotten(t *testing.T) {
	bd := setup(t)
	send(t, bd.b, "orders", 8)
	consume(t, bd.b, "gone", "orders", 8)
	consume(t, bd.b, "kept", "orders", 8)
	drain(t, bd.m)
	require.NotEmpty(t, mirrored(t, bd.url, "gone"))
	require.NoError(t, bd.b.DeleteGroup(bd.ctx, "gone"))
	res, err := bd.m.runOnce(bd.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.ForgottenGroups)
	require.Empty(t, mirrored(t, bd.url, "gone"))
	require.Empty(t, diff(mirrored(t, bd.url, "kept"), live(t, bd.b, "kept")))
}

func TestDegradedWhenDatabaseUnreachable(t *testing.T) {
	bd := &bundle{ctx: context.Background(), dir: t.TempDir()}
	bd.b = mustOpenBroker(t, bd.dir, "sync")
	// A port nothing listens on: Open succeeds (lazy), passes fail.
	m := mustOpenMirror(t, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1", bd.b)
	_, err := m.runOnce(bd.ctx)
	require.Error(t, err)
	require.ErrorIs(t, m.Health(), ErrDegraded)
	send(t, bd.b, "orders", 3)
	consume(t, bd.b, "g", "orders", 3)
	_, err = m.runOnce(bd.ctx)
	require.Error(t, err)
	records, age := m.Lag()
	require.Equal(t, int64(3), records, "lag counts the progress records the mirror has not written")
	require.Positive(t, age)
	require.False(t, m.Stats().Healthy)

	m.Start(bd.ctx)
	m.Stop()
	m.Stop()
	require.NoError(t, m.Close())
	require.True(t, errors.Is(m.Health(), ErrClosed))
}

// TestWriterFollowsLeadership: the writer stops with Stop (a broker that
// stops leading) and a later Start runs a new one that mirrors what came
// meanwhile; after Close, Start does nothing.
func TestWriterFollowsLeadership(t *testing.T) {
	bd := setup(t)
	bd.m.Start(bd.ctx)
	send(t, bd.b, "orders", 10)
	consume(t, bd.b, "g", "orders", 4)
	waitFor(t, 5*time.Second, "first offsets mirrored", func() bool { return len(diff(mirrored(t, bd.url, "g"), live(t, bd.b, "g"))) == 0 })
	bd.m.Stop()

	consume(t, bd.b, "g", "orders", 6)
	time.Sleep(300 * time.Millisecond) // a writer still running would mirror them now
	require.NotEmpty(t, diff(mirrored(t, bd.url, "g"), live(t, bd.b, "g")), "nothing is written while stopped")

	bd.m.Start(bd.ctx)
	waitFor(t, 5*time.Second, "offsets mirrored after the restart", func() bool { return len(diff(mirrored(t, bd.url, "g"), live(t, bd.b, "g"))) == 0 })
	require.NoError(t, bd.m.Close())
	bd.m.Start(bd.ctx) // after Close: nothing runs
	require.ErrorIs(t, bd.m.Health(), ErrClosed)
}
