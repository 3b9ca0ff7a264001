package broker_test

// The bugs the model-based test found (model_test.go), each pinned by a
// test of its own; all fixed.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// TestModelStaleReceiptAfterRestart: which deliveries failed (nack or
// lease expiry) is kept in memory only (cursor.sentBack). After a restart,
// an ack of a receipt of such a copy finds the copy's offset acknowledged
// (by the send-back, goneStatus) and answers ok — but the message is not
// acknowledged: its retry copy is delivered again (or it sits in the DLQ).
// The README promises expired for a receipt of an older delivery. The model also
// hit it with a receipt whose lease was merely dropped by a restart, the
// copy then redelivered and nacked to the DLQ, then a second restart.
func TestModelStaleReceiptAfterRestart(t *testing.T) {
	// On virtual time: the lease runs out and the retry copy comes due
	// when the test moves the clock, not when the machine gets to it.
	fc := clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	open := func() *broker.Broker {
		return brokertest.MustOpen(t, dir, func(o *broker.Options) { o.Clock = fc })
	}
	ctx := context.Background()
	b := open()
	_, err := b.Send(ctx, "stale", []broker.SendMessage{{Body: []byte("x")}})
	require.NoError(t, err)
	first := pullNow(t, b, "g", "stale", 50*time.Millisecond)
	require.Len(t, first, 1)
	fc.Advance(100 * time.Millisecond)                         // outlive the 50 ms lease
	require.Empty(t, pullNow(t, b, "g", "stale", time.Minute)) // takes the expired lease: the retry copy is scheduled, not yet due
	res, err := b.Ack(ctx, "g", receipts(first))
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptExpired, res[0].Status, "before the restart")
	require.NoError(t, b.Close(ctx))
	b = open()
	res, err = b.Ack(ctx, "g", receipts(first))
	require.NoError(t, err)
	fc.Advance(time.Second) // the retry copy comes due
	again := awaitPull(t, b, "g", "stale", time.Minute)
	require.Equal(t, "x", string(again.Body), "the retry copy is delivered")
	require.Equal(t, broker.ReceiptExpired, res[0].Status, "after the restart, the receipt of the failed delivery acked ok, yet the message was delivered again")
}

// TestModelResetReplaysOutOfOrderAcks: a reset commits a new offset with a
// new generation, but offset.Table.Apply (KindCommit) keeps the acked
// offsets at or above the new committed offset. A reset to the beginning
// therefore replays the messages below the old committed offset and skips
// those acknowledged out of order above it: what a reset replays depends
// on the order of earlier acks.
func TestModelResetReplaysOutOfOrderAcks(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "rs", Queues: 1})
	require.NoError(t, err)
	bd.send(t, "rs", "a", "b")
	got := bd.pull(t, "g", "rs", 2, time.Second, time.Minute)
	require.Len(t, got, 2)
	var b broker.ReceivedMessage
	for _, m := range got {
		if string(m.Body) == "b" {
			b = m
		}
	}
	res, err := bd.b.Ack(bd.ctx, "g", []string{b.Receipt}) // b acked, a still leased
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	_, err = bd.b.ResetOffset(bd.ctx, "g", "rs", time.Unix(0, 0))
	require.NoError(t, err)
	again := bd.pull(t, "g", "rs", 32, time.Second, time.Minute)
	require.Equal(t, map[string]int{"a": 1, "b": 1}, bodies(again), "a reset to the beginning replays every message")
}

// awaitCheckpoint waits until a checkpoint covers everything written so
// far: the dispatcher passes the CommitLog's end as it is on entry, then
// <dir>/checkpoint (storage/doc.go) is rewritten.
func (bd *bundle) awaitCheckpoint(t *testing.T) {
	t.Helper()
	st, err := bd.b.Status(bd.ctx)
	require.NoError(t, err)
	end := st.CommitLogMax
	brokertest.Eventually(t, 5*time.Second, func() (bool, string) {
		st, err := bd.b.Status(bd.ctx)
		require.NoError(t, err)
		return st.Dispatch.Dispatched >= end, fmt.Sprintf("dispatched %d of %d", st.Dispatch.Dispatched, end)
	})
	caughtUp := time.Now()
	brokertest.Eventually(t, 5*time.Second, func() (bool, string) {
		fi, err := os.Stat(filepath.Join(bd.dir, "checkpoint"))
		if err != nil {
			return false, err.Error()
		}
		return fi.ModTime().After(caughtUp), "no checkpoint since the dispatcher caught up"
	})
}

// crashImage opens a broker on a crash copy of bd's live directory (see
// crashCopy) and closes the old one.
func (bd *bundle) crashImage(t *testing.T, opts func(string) broker.Options) {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, crashCopy(bd.dir, dst))
	require.NoError(t, bd.b.Close(bd.ctx))
	bd.dir = dst
	bd.b = brokertest.Open(t, opts(dst))
}

// TestModelDedupLostAfterCrash: index.Flush writes an indexedPhyOffset
// that leaves out the last message added (its keys may be incomplete), and
// crash recovery of the index trims entries above it; but the store
// re-dispatches from the checkpoint's dispatched offset, which already
// covers that message, so its keys are never re-added. After a crash that
// follows a checkpoint, the last keyed message before it has lost its
// index entries: here its dedup id (the same happens to scheduler UNIQ_KEYs,
// see TestModelRetryDuplicatedAfterCrash). The same result with a real
// kill -9 of a process instead of the crash copy.
func TestModelDedupLostAfterCrash(t *testing.T) {
	dir := t.TempDir()
	bd := &bundle{dir: dir, ctx: context.Background(), b: brokertest.Open(t, modelOptions(dir))}
	first, err := bd.b.Send(bd.ctx, "dd", []broker.SendMessage{{Body: []byte("two"), DedupID: "k2"}})
	require.NoError(t, err)
	bd.awaitCheckpoint(t) // every 20 ms here, 1 s by default
	bd.crashImage(t, modelOptions)
	again, err := bd.b.Send(bd.ctx, "dd", []broker.SendMessage{{Body: []byte("two"), DedupID: "k2"}})
	require.NoError(t, err)
	require.True(t, again[0].Duplicate, "a re-send with the same dedup id after a crash stored a second message")
	require.Equal(t, first[0].MessageID, again[0].MessageID)
}

// TestModelRetryDuplicatedAfterCrash: the scheduler re-checks, after a
// restart, the schedule entries its saved progress (saved every second)
// does not cover, by looking up the retry's UNIQ_KEY in the index. After a
// crash the index has lost the last keyed message before the checkpoint
// (see TestModelDedupLostAfterCrash), so a retry copy the scheduler had
// delivered is delivered a second time: two copies with reconsumeTimes 1,
// two receipts, the second delivered even after the first was acked. With
// the checkpoint file removed from the crash image (full re-dispatch) there
// is one copy.
func TestModelRetryDuplicatedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	bd := &bundle{dir: dir, ctx: context.Background(), b: brokertest.Open(t, modelOptions(dir))}
	bd.send(t, "rd", "x")
	require.Len(t, bd.pull(t, "g", "rd", 1, time.Second, 30*time.Millisecond), 1)
	time.Sleep(50 * time.Millisecond)                          // outlive the 30 ms lease
	require.Empty(t, bd.pull(t, "g", "rd", 1, 0, time.Minute)) // sends the expired lease back
	brokertest.Eventually(t, 5*time.Second, func() (bool, string) {
		n := bd.b.Stats().Scheduled
		return n >= 1, fmt.Sprintf("the scheduler delivered %d retries to %%RETRY%%g", n)
	})
	bd.awaitCheckpoint(t)
	bd.crashImage(t, modelOptions)
	var all []broker.ReceivedMessage
	for i := 0; i < 3; i++ {
		all = append(all, bd.pull(t, "g", "rd", 8, 200*time.Millisecond, time.Minute)...)
	}
	require.Len(t, all, 1, "one retry copy after the crash, got %d", len(all))
	require.Equal(t, int32(1), all[0].ReconsumeTimes)
}
