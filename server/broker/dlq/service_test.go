package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The Service over a real store, with the broker's part played by the
// test: the groups and topics that exist, a topic gate, a fake clock, the
// trace's note of carried letters. The broker's own tests
// (server/broker/dlq_*_test.go, retry_test.go) drive it through the
// facade.

var (
	errInvalid  = errors.New("invalid argument")
	errNotFound = errors.New("message not found")
	errNoGroup  = errors.New("group not found")
	errNoTopic  = errors.New("topic not found")
)

type bundle struct {
	store   *storage.Store
	clock   *clockwork.FakeClock
	gate    sync.RWMutex
	mu      sync.Mutex
	carried []string // the bodies NoteCarried was told of
	svc     *dlq.Service
}

func setup(t *testing.T) *bundle {
	t.Helper()
	bd := &bundle{clock: clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))}
	opts := storagetest.SmallOptions(t.TempDir())
	opts.Clock = bd.clock
	bd.store = storagetest.MustOpen(t, opts)
	bd.svc = bd.service()
	return bd
}

// service is a Service over the bundle's store, as the broker makes one.
func (bd *bundle) service() *dlq.Service {
	return dlq.New(dlq.Config{
		Store:           bd.store,
		Clock:           bd.clock,
		Names:           dlq.Names{RetryPrefix: "%RETRY%", Attempts: "ATTEMPTS", OrderSeq: "ORDER_SEQ"},
		InvalidArgument: errInvalid,
		MessageNotFound: errNotFound,
		StoreError:      func(err error) error { return err },
		Group: func(_ context.Context, name string) error {
			if name != "g" {
				return fmt.Errorf("%w: %s", errNoGroup, name)
			}
			return nil
		},
		Topic: func(_ context.Context, name string) error {
			if name != "orders" {
				return fmt.Errorf("%w: %s", errNoTopic, name)
			}
			return nil
		},
		Gate: bd.gate.RLocker(),
		Copy: func(m *message.Message, topic string, drop ...string) *message.Message {
			out := &message.Message{Topic: topic, Body: m.Body, BornTimestamp: m.BornTimestamp, ReconsumeTimes: m.ReconsumeTimes}
			for k, v := range m.Properties {
				if !slices.Contains(drop, k) {
					out.SetProperty(k, v)
				}
			}
			return out
		},
		Reserved: func(name string) bool { return name != "user" },
		NoteCarried: func(m *message.Message) {
			bd.mu.Lock()
			bd.carried = append(bd.carried, string(m.Body))
			bd.mu.Unlock()
		},
	})
}

// put stores msgs and waits for their dispatch.
func (bd *bundle) put(t *testing.T, msgs ...*message.Message) {
	t.Helper()
	require.NoError(t, bd.store.PutClass(storage.ClassSend, msgs, make([]storage.PutResult, len(msgs))))
	require.NoError(t, bd.store.AwaitDispatch(context.Background()))
}

// letter is a dead letter of g as the failure path writes it.
func letter(i int, original string) *message.Message {
	m := &message.Message{Topic: dlq.Topic("g"), Body: fmt.Appendf(nil, "body %d", i), ReconsumeTimes: 3}
	m.SetProperty(message.PropertyRetryTopic, original)
	m.SetProperty("ATTEMPTS", `[{"at":"2026-12-06T09:00:00Z","outcome":"nack","reason":"boom"}]`)
	m.SetProperty("ORDER_SEQ", "7")
	m.SetProperty(dlq.PropReason, fmt.Sprint("boom ", i))
	m.SetProperty("user", "v")
	return m
}

// Follow applies what rmq_sys_DLQ holds, then only what came since; a
// record that does not decode is skipped; a second Service following the
// same records makes the same table.
func TestServiceFollow(t *testing.T) {
	bd := setup(t)
	ctx := context.Background()
	status := func(id, st string, at time.Time) *message.Message {
		m, err := dlq.StatusMessage([]dlq.StatusRecord{{Group: "g", MessageID: id, Status: st, At: at}}, at)
		require.NoError(t, err)
		return m
	}
	at := bd.clock.Now().UTC()
	bd.put(t, status("A", dlq.Resent, at), status("B", dlq.Discarded, at))
	require.NoError(t, bd.svc.Follow(ctx))
	require.Equal(t, 2, bd.svc.Table().Len())
	bd.put(t, &message.Message{Topic: dlq.StatusTopic, Body: []byte("not json")}, status("A", dlq.Discarded, at.Add(time.Second)))
	// Follow goes on from where it stopped: change B's status behind its
	// back, which B's record, were it applied again, would undo.
	bd.svc.Table().Apply(dlq.StatusRecord{Group: "g", MessageID: "B", Status: dlq.Resent, At: at})
	require.NoError(t, bd.svc.Follow(ctx))
	require.Equal(t, dlq.Discarded, bd.svc.Table().Status("g", "A"))
	require.Equal(t, dlq.Resent, bd.svc.Table().Status("g", "B"), "the records before were not applied again")
	require.Equal(t, dlq.Dead, bd.svc.Table().Status("g", "C"))

	again := bd.service()
	require.NoError(t, again.Follow(ctx))
	for _, id := range []string{"A", "B"} {
		want, _ := bd.svc.Table().Get("g", id)
		if id == "B" {
			want = dlq.StatusRecord{Group: "g", MessageID: "B", Status: dlq.Discarded, At: at}
		}
		got, ok := again.Table().Get("g", id)
		require.True(t, ok)
		require.Equal(t, want.Status, got.Status, id)
		require.True(t, want.At.Equal(got.At), id)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	bd.put(t, status("C", dlq.Resent, at))
	require.ErrorIs(t, bd.svc.Follow(cctx), context.Canceled)
	require.NoError(t, bd.svc.Follow(ctx))
	require.Equal(t, dlq.Resent, bd.svc.Table().Status("g", "C"))
}

// The requests over the store: a listing's view, a resend's copy on the
// retry topic (under the topic gate), what it skips, a discard.
func TestServiceRequests(t *testing.T) {
	bd := setup(t)
	ctx := context.Background()
	bd.put(t, letter(0, "orders"), letter(1, "orders"), letter(2, "gone"))

	_, _, err := bd.svc.List(ctx, "nope", dlq.Filter{}, "", 10)
	require.ErrorIs(t, err, errNoGroup)
	all, next, err := bd.svc.List(ctx, "g", dlq.Filter{}, "", 10)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, all, 3)
	d := all[0]
	require.Equal(t, "orders", d.OriginalTopic)
	require.Equal(t, "boom 0", d.Reason)
	require.Equal(t, dlq.Dead, d.Status)
	require.Len(t, d.Attempts, 1)
	require.True(t, d.FirstFailedAt.Equal(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)))
	require.Equal(t, map[string]string{"user": "v"}, d.Properties)
	require.Nil(t, d.Body)
	one, err := bd.svc.Get(ctx, "g", d.MessageID)
	require.NoError(t, err)
	require.Equal(t, "body 0", string(one.Body))
	_, err = bd.svc.Get(ctx, "g", "nope")
	require.ErrorIs(t, err, errInvalid)

	// A resend waits for the topic gate.
	bd.gate.Lock()
	done := make(chan error, 1)
	var rr dlq.ResendResult
	go func() {
		var err error
		rr, err = bd.svc.Resend(ctx, "g", []string{d.MessageID}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("resent under a held gate: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	bd.gate.Unlock()
	require.NoError(t, <-done)
	require.Equal(t, dlq.ResendResult{Resent: []string{d.MessageID}}, rr)
	require.NoError(t, bd.store.AwaitDispatch(ctx))
	res, err := bd.store.ReadQueue("%RETRY%g", 0, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 1)
	c := res.Messages[0]
	require.Zero(t, c.ReconsumeTimes)
	require.Equal(t, map[string]string{message.PropertyRetryTopic: "orders", "user": "v"}, c.Properties)

	_, err = bd.svc.Resend(ctx, "g", []string{all[2].MessageID}, nil)
	require.ErrorIs(t, err, errNoTopic)
	rr, err = bd.svc.Resend(ctx, "g", nil, &dlq.Filter{OriginalTopic: "orders"})
	require.NoError(t, err)
	require.Equal(t, dlq.ResendResult{Resent: []string{all[1].MessageID}}, rr, "only the dead one")
	require.NoError(t, bd.svc.Discard(ctx, "g", all[2].MessageID))
	rr, err = bd.svc.Resend(ctx, "g", []string{all[2].MessageID, d.MessageID}, nil)
	require.NoError(t, err)
	require.Equal(t, dlq.ResendResult{Skipped: []string{all[2].MessageID, d.MessageID}}, rr)

	changes, end, err := bd.svc.StatusChanges(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, int64(3), end)
	require.Len(t, changes, 3)
	require.Equal(t, dlq.Discarded, changes[2].Status)
	arrivals, end, err := bd.svc.Arrivals(ctx, "g", 1, 10)
	require.NoError(t, err)
	require.Equal(t, int64(3), end)
	require.Equal(t, all[1].MessageID, arrivals[0].MessageID)
	require.Equal(t, dlq.Resent, arrivals[0].Status)
}

// Carry copies the letters still dead below the cut, tells the trace of
// each, and from then on a listing and a lookup find the copies under the
// first ids.
func TestServiceCarry(t *testing.T) {
	bd := setup(t)
	ctx := context.Background()
	bd.put(t, letter(0, "orders"), letter(1, "orders"), letter(2, "orders"))
	all, _, err := bd.svc.List(ctx, "g", dlq.Filter{}, "", 10)
	require.NoError(t, err)
	require.NoError(t, bd.svc.Discard(ctx, "g", all[1].MessageID))
	last, err := bd.svc.Lookup(ctx, "g", all[2].MessageID)
	require.NoError(t, err)
	require.NoError(t, bd.svc.Carry(last.PhysicalOffset))
	require.NoError(t, bd.store.AwaitDispatch(ctx))
	require.Equal(t, []string{"body 0"}, bd.carried, "the discarded one and the one above the cut stay")

	after, _, err := bd.svc.List(ctx, "g", dlq.Filter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, after, 2)
	require.Equal(t, all[2].MessageID, after[0].MessageID, "the letter above the cut where it was")
	require.Equal(t, all[0].MessageID, after[1].MessageID, "the carried copy under its first id")
	require.True(t, after[1].DeadAt.Equal(all[0].DeadAt))
	got, err := bd.svc.Get(ctx, "g", all[0].MessageID)
	require.NoError(t, err)
	require.Equal(t, "body 0", string(got.Body))
	_, err = bd.svc.Get(ctx, "g", all[1].MessageID)
	require.ErrorIs(t, err, errNotFound, "the discarded letter below the cut is gone")
}
