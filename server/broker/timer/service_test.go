package timer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/timerindex"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The Service over a real store, with the broker's part played by the
// test: a set of deleted topics, a topic gate, a fake clock. The broker's
// own tests (server/broker/timer_*_test.go) drive it through the facade.

var (
	errInvalid  = errors.New("invalid argument")
	errNotFound = errors.New("message not found")
)

type bundle struct {
	dir     string
	store   *storage.Store
	clock   *clockwork.FakeClock
	gate    sync.RWMutex
	mu      sync.Mutex
	deleted map[string]bool // topics deleted since every timer
	carried []string        // the ids Config.Carried was told of
	svc     *timer.Service
	done    context.CancelFunc
}

func setup(t *testing.T, dir string, clock *clockwork.FakeClock) *bundle {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if clock == nil {
		clock = clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	}
	bd := &bundle{dir: dir, clock: clock, deleted: map[string]bool{}}
	opts := storagetest.SmallOptions(dir)
	opts.Clock = bd.clock
	bd.store = storagetest.MustOpen(t, opts)
	ctx, cancel := context.WithCancel(context.Background())
	bd.done = cancel
	bd.svc = timer.New(timer.Config{
		Store:           bd.store,
		Clock:           bd.clock,
		Index:           timerindex.Options{Dir: filepath.Join(dir, "timers")},
		MaxDelay:        time.Hour,
		CheckpointEvery: time.Second,
		InvalidArgument: errInvalid,
		NotFound:        errNotFound,
		StoreError:      func(err error) error { return err },
		AwaitDispatch:   bd.store.AwaitDispatch,
		Gate:            bd.gate.RLocker(),
		Deleted: func(m *message.Message, _ int64) bool {
			bd.mu.Lock()
			defer bd.mu.Unlock()
			return bd.deleted[m.Property(message.PropertyRealTopic)]
		},
		IsRetry: func(topic string) bool { return strings.HasPrefix(topic, "%RETRY%") },
		SystemProperty: func(name string) bool {
			return name == message.PropertyTags || strings.HasPrefix(name, "REAL_") || strings.HasPrefix(name, "TIMER_") || name == message.PropertyUniqKey
		},
		Late: func(time.Duration) {},
		Carried: func(m *message.Message) {
			bd.mu.Lock()
			defer bd.mu.Unlock()
			bd.carried = append(bd.carried, timer.ID(m))
		},
		Background: ctx,
	})
	require.NoError(t, bd.svc.Open(context.Background()))
	t.Cleanup(func() { bd.close(t) })
	return bd
}

// close closes the service (its last checkpoint), then the store; again,
// it does nothing.
func (bd *bundle) close(t *testing.T) {
	t.Helper()
	if bd.svc == nil {
		return
	}
	require.NoError(t, bd.svc.Close())
	bd.done()
	require.NoError(t, bd.store.Close())
	bd.svc = nil
}

// send stores a timer's first record for topic, queue 1, due at due, as a
// send does, and tells the service.
func (bd *bundle) send(t *testing.T, topic, body string, due time.Time) string {
	t.Helper()
	m := &message.Message{Topic: topic, QueueID: 1, Body: []byte(body), BornTimestamp: bd.clock.Now().UnixMilli()}
	m.SetTag("tag")
	m.SetProperty("user", "v")
	timer.Wrap(m, due)
	res := make([]storage.PutResult, 1)
	require.NoError(t, bd.store.PutClass(storage.ClassSystem, []*message.Message{m}, res))
	require.Equal(t, int32(1), bd.svc.Sent(m))
	return res[0].ID.String()
}

// queue reads queue 1 of topic.
func (bd *bundle) queue(t *testing.T, topic string) []*message.Message {
	t.Helper()
	require.NoError(t, bd.store.AwaitDispatch(context.Background()))
	res, err := bd.store.ReadQueue(topic, 1, 0, 100, nil)
	require.NoError(t, err)
	return res.Messages
}

func TestServiceRequests(t *testing.T) {
	bd := setup(t, "", nil)
	ctx := context.Background()
	start := bd.clock.Now()

	due, err := bd.svc.SendDue(60_000, time.Time{}, 0, start)
	require.NoError(t, err)
	require.Equal(t, start.Add(time.Minute), due)
	due, err = bd.svc.SendDue(0, start.Add(-time.Second), 0, start)
	require.NoError(t, err)
	require.True(t, due.IsZero(), "due already: no timer")
	_, err = bd.svc.SendDue(1, start.Add(time.Second), 0, start)
	require.ErrorIs(t, err, errInvalid)
	_, err = bd.svc.SendDue(0, start.Add(time.Hour+time.Millisecond), 0, start)
	require.EqualError(t, err, "invalid argument: a timer may be at most 1h0m0s ahead")

	a := bd.send(t, "orders", "a", start.Add(time.Minute))
	b := bd.send(t, "orders", "b", start.Add(2*time.Minute))
	r := bd.send(t, "%RETRY%g", "r", start.Add(3*time.Minute))
	list, next, err := bd.svc.List(ctx, "", "", 2)
	require.NoError(t, err)
	require.Equal(t, b, next)
	require.Len(t, list, 2)
	require.Equal(t, timer.View{ID: a, Topic: "orders", QueueID: 1, DeliverAt: start.Add(time.Minute), Tag: "tag",
		Properties: map[string]string{"user": "v"}, ScheduledAt: start}, list[0])
	got, err := bd.svc.Get(ctx, b)
	require.NoError(t, err)
	require.Equal(t, "b", string(got.Body))
	n, at := bd.svc.Count()
	require.Equal(t, 3, n)
	require.Equal(t, start.Add(time.Minute), at.UTC())
	require.Equal(t, 2, bd.svc.PendingFor("orders"))
	pending, ok := bd.svc.Pending()
	require.True(t, ok)
	require.Equal(t, 3, pending)

	require.ErrorIs(t, bd.svc.Cancel(ctx, r), errInvalid, "a retry is rescheduled, not cancelled")
	require.NoError(t, bd.svc.Cancel(ctx, b))
	_, err = bd.svc.Get(ctx, b)
	require.EqualError(t, err, "message not found: no pending timer "+b+" (delivered, cancelled or unknown)")
	moved, err := bd.svc.Reschedule(ctx, r, start.Add(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, r, moved.ID)
	require.Equal(t, start.Add(30*time.Second), moved.DeliverAt)

	// Nothing is due before its time; then both are, in one batch.
	require.NoError(t, bd.svc.DeliverDue(start.Add(29*time.Second)))
	require.Empty(t, bd.queue(t, "%RETRY%g"))
	require.NoError(t, bd.svc.DeliverDue(start.Add(time.Hour)))
	for topic, body := range map[string]string{"orders": "a", "%RETRY%g": "r"} {
		msgs := bd.queue(t, topic)
		require.Len(t, msgs, 1, topic)
		require.Equal(t, body, string(msgs[0].Body))
		require.Equal(t, "tag", msgs[0].Tag())
		require.Empty(t, msgs[0].Property(message.PropertyRealTopic))
	}
	n, at = bd.svc.Count()
	require.Zero(t, n)
	require.True(t, at.IsZero())
	require.ErrorIs(t, bd.svc.Cancel(ctx, a), errNotFound, "delivered")
}

// A topic's deletion cancels its pending timers; one whose topic is
// deleted when it falls due is cancelled by the delivery.
func TestServiceDeletedTopics(t *testing.T) {
	bd := setup(t, "", nil)
	ctx := context.Background()
	start := bd.clock.Now()
	bd.send(t, "gone", "x", start.Add(time.Minute))
	bd.send(t, "gone", "y", start.Add(time.Minute))
	late := bd.send(t, "late", "z", start.Add(time.Minute))
	bd.gate.Lock()
	require.NoError(t, bd.svc.CancelTopic("gone"))
	bd.gate.Unlock()
	list, _, err := bd.svc.List(ctx, "", "", 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, late, list[0].ID)

	bd.mu.Lock()
	bd.deleted["late"] = true
	bd.mu.Unlock()
	require.NoError(t, bd.svc.DeliverDue(start.Add(time.Hour)))
	require.Empty(t, bd.queue(t, "late"))
	require.Empty(t, bd.queue(t, "gone"))
	n, _ := bd.svc.Count()
	require.Zero(t, n)
	res, err := bd.store.ReadQueue(timer.StatusTopic, 0, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 2, "a cancel's record, a delivery's")
	for _, m := range res.Messages {
		recs, err := timer.DecodeStatuses(m.Body)
		require.NoError(t, err)
		for _, rec := range recs {
			require.Equal(t, timer.Cancelled, rec.Status)
		}
	}
}

// A carry copies the pending records below a cut (and tells the trace);
// the index survives a restart, and is rebuilt from the queues when lost.
func TestServiceCarryAndRecovery(t *testing.T) {
	bd := setup(t, "", nil)
	ctx := context.Background()
	start := bd.clock.Now()
	a := bd.send(t, "orders", "a", start.Add(time.Minute))
	cut := bd.store.WriteOffset()
	b := bd.send(t, "orders", "b", start.Add(2*time.Minute))
	require.NoError(t, bd.svc.Carry(cut))
	bd.mu.Lock()
	require.Equal(t, []string{a}, bd.carried)
	bd.mu.Unlock()
	res, err := bd.store.ReadQueue(timer.Topic, 0, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 3)
	c := res.Messages[2]
	require.Equal(t, a, c.Property(timer.PropID))
	require.Equal(t, "0", c.Property(timer.PropPrev))

	check := func(bd *bundle) {
		t.Helper()
		list, _, err := bd.svc.List(ctx, "", "", 10)
		require.NoError(t, err)
		require.Len(t, list, 2)
		require.Equal(t, a, list[0].ID)
		require.Equal(t, b, list[1].ID)
	}
	check(bd)
	bd.close(t)
	bd = setup(t, bd.dir, bd.clock)
	require.False(t, bd.svc.Recovered().Rebuilt)
	check(bd)
	bd.close(t)

	require.NoError(t, os.RemoveAll(filepath.Join(bd.dir, "timers")))
	bd = setup(t, bd.dir, bd.clock)
	rec := bd.svc.Recovered()
	require.True(t, rec.Rebuilt)
	require.Equal(t, int64(3), rec.Births)
	require.Equal(t, int64(2), bd.svc.IndexStats().Pending)
	check(bd)
}

// Loop, the leader's delivery, delivers a timer when the clock reaches
// it, and stops with its context.
func TestServiceLoop(t *testing.T) {
	bd := setup(t, "", nil)
	start := bd.clock.Now()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		bd.svc.Loop(ctx)
	}()
	bd.send(t, "orders", "a", start.Add(time.Minute))
	require.Empty(t, bd.queue(t, "orders"))
	bd.clock.Advance(time.Minute)
	require.Eventually(t, func() bool {
		res, err := bd.store.ReadQueue("orders", 1, 0, 10, nil)
		return err == nil && len(res.Messages) == 1
	}, 5*time.Second, 10*time.Millisecond)
	cancel()
	<-stopped
}
