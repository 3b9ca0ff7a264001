package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Timer records written before the timer index existed name timers by id
// only: a reschedule was a copy with TIMER_ID (no TIMER_PREV, no
// UNIQ_KEY), a status settled an id (no seq). A data directory of that
// time is indexed right — by the running broker that follows such records
// and by the rebuild at the first start without an index — and its
// pending timers are delivered once.
func TestTimersLegacyRecords(t *testing.T) {
	dir := t.TempDir()
	opts := Options{DataDir: dir, AutoCreate: true, SnapshotInterval: 50 * time.Millisecond, MaxMessageSize: 64 << 10,
		Storage: storage.Options{SegmentSize: 1 << 20, QueueEntriesPerFile: 1024, IndexSlots: 1024, IndexEntries: 4096}}
	ctx := context.Background()
	b, err := Open(ctx, opts)
	require.NoError(t, err)
	at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	send := func(body string, due time.Time) (string, *message.Message) {
		res, err := b.Send(ctx, "legacy", []SendMessage{{Body: []byte(body), DeliverAt: due}})
		require.NoError(t, err)
		mid, err := message.ParseID(res[0].MessageID)
		require.NoError(t, err)
		m, err := b.store.LookupID(mid)
		require.NoError(t, err)
		return res[0].MessageID, m
	}
	oldCopy := func(m *message.Message, id string, due time.Time) *message.Message { // the old copyTimer
		c := copyOf(m, timerTopic)
		c.SetProperty(timer.PropID, id)
		c.SetProperty(message.PropertyDeliverTimeMs, dueMs(due))
		_, err := b.store.Put(c)
		require.NoError(t, err)
		return c
	}
	oldStatus := func(id, status string) {
		body, err := json.Marshal([]map[string]any{{"id": id, "status": status, "at": time.Now().UTC()}})
		require.NoError(t, err)
		_, err = b.store.Put(&message.Message{Topic: timerStatusTopic, Body: body, BornTimestamp: time.Now().UnixMilli()})
		require.NoError(t, err)
	}
	plain, _ := send("plain", at)
	moved, m := send("moved-twice", at.Add(time.Minute))
	m = oldCopy(m, moved, at.Add(3*time.Minute))
	oldCopy(m, moved, at.Add(2*time.Minute))
	cancelled, _ := send("cancelled", at.Add(4*time.Minute))
	oldStatus(cancelled, timer.Cancelled)
	movedCancelled, m := send("moved-then-cancelled", at.Add(5*time.Minute))
	oldCopy(m, movedCancelled, at.Add(6*time.Minute))
	oldStatus(movedCancelled, timer.Cancelled)
	delivered, _ := send("delivered", at.Add(7*time.Minute))
	oldStatus(delivered, timer.Delivered)

	check := func(b *Broker) {
		t.Helper()
		list, next, err := b.ListTimers(ctx, "", "", 10)
		require.NoError(t, err)
		require.Empty(t, next)
		require.Len(t, list, 2)
		require.Equal(t, plain, list[0].ID)
		require.Equal(t, moved, list[1].ID)
		require.Equal(t, at.Add(2*time.Minute).UTC(), list[1].DeliverAt, "the latest copy wins")
		n, first := b.TimerCount()
		require.Equal(t, 2, n)
		require.Equal(t, at.UTC(), first.UTC())
		require.Equal(t, 2, b.pendingFor("legacy"))
	}
	check(b) // followed by the running broker
	require.NoError(t, b.Close(ctx))

	require.NoError(t, os.RemoveAll(filepath.Join(dir, timerIndexDir))) // as before the upgrade
	b, err = Open(ctx, opts)
	require.NoError(t, err)
	defer b.Close(ctx)
	require.True(t, b.TimerRecovered().Rebuilt)
	check(b)
	require.NoError(t, b.Close(ctx))
	b, err = Open(ctx, opts) // the index opens; the rebuild left every pending copy findable by id
	require.NoError(t, err)
	defer b.Close(ctx)
	require.False(t, b.TimerRecovered().Rebuilt)
	check(b)
	tm, err := b.GetTimer(ctx, moved)
	require.NoError(t, err)
	require.Equal(t, "moved-twice", string(tm.Body))

	for _, id := range []string{plain, moved} {
		_, err := b.RescheduleTimer(ctx, id, time.Now())
		require.NoError(t, err)
	}
	var got []string
	require.Eventually(t, func() bool {
		msgs, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "legacy", MaxMessages: 32, Wait: 50 * time.Millisecond, Invisible: time.Hour})
		require.NoError(t, err)
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
		return len(got) >= 2
	}, 5*time.Second, 10*time.Millisecond)
	msgs, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "legacy", MaxMessages: 32, Wait: 300 * time.Millisecond, Invisible: time.Hour})
	require.NoError(t, err)
	require.Empty(t, msgs, "nothing else fires")
	sort.Strings(got)
	require.Equal(t, []string{"moved-twice", "plain"}, got)
}
