package txn_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The Service over a real store, with the broker's part played by the
// test: a set of live topics, a topic gate, a fake clock. The broker's
// own tests (server/broker/txn_*_test.go) drive it through the facade.

var errInvalid = errors.New("invalid argument")

type bundle struct {
	store *storage.Store
	clock *clockwork.FakeClock
	gate  sync.RWMutex
	mu    sync.Mutex
	gone  map[string]bool // deleted topics
	svc   *txn.Service
	done  context.CancelFunc
	once  sync.Once
}

// close closes the service (its last snapshot), then the store.
func (bd *bundle) close(t *testing.T) {
	t.Helper()
	bd.once.Do(func() {
		if err := bd.svc.Close(); err != nil {
			t.Error(err)
		}
		bd.done()
		if err := bd.store.Close(); err != nil {
			t.Error(err)
		}
	})
}

func setup(t *testing.T, dir string) *bundle {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	bd := &bundle{clock: clockwork.NewFakeClockAt(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)), gone: map[string]bool{}}
	opts := storagetest.SmallOptions(dir)
	opts.Clock = bd.clock
	bd.store = storagetest.MustOpen(t, opts)
	closing := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	bd.done = func() {
		close(closing)
		cancel()
	}
	bd.svc = txn.New(txn.Config{
		Store: bd.store, Clock: bd.clock, MaxChecks: 2, CheckInterval: time.Minute,
		Names: txn.Names{
			Topic: func(string) error { return nil },
			Group: func(g string) error {
				if g == "bad" {
					return errInvalid
				}
				return nil
			},
			MaxQueueID: storage.MaxQueueID,
		},
		InvalidArgument: errInvalid,
		StoreError:      func(err error) error { return err },
		AwaitDispatch:   bd.store.AwaitDispatch,
		Gate:            bd.gate.RLocker(),
		TopicGone: func(topic string, _ int64) bool {
			bd.mu.Lock()
			defer bd.mu.Unlock()
			return bd.gone[topic]
		},
		Closing:    closing,
		Background: ctx,
	})
	if err := bd.svc.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bd.close(t) })
	return bd
}

// send stores a half message as a transactional send does and returns
// its transaction id.
func (bd *bundle) send(t *testing.T, topic, body string, checkAfterMs int64) string {
	t.Helper()
	m := &message.Message{Topic: topic, QueueID: 1, Body: []byte(body), BornTimestamp: bd.clock.Now().UnixMilli()}
	txn.AsHalf(m, "pg", checkAfterMs)
	res := storagetest.MustPut(t, bd.store, m)
	return res.ID.String()
}

func TestServiceCommitRollbackDescribe(t *testing.T) {
	t.Parallel()
	bd := setup(t, "")
	ctx := context.Background()
	a, r := bd.send(t, "orders", "a", 0), bd.send(t, "orders", "r", 0)

	v, err := bd.svc.Describe(ctx, a)
	if err != nil || v.State != txn.Pending || v.Topic != "orders" || v.QueueID != 1 || v.ProducerGroup != "pg" ||
		!v.NextCheckAt.Equal(bd.clock.Now().Add(txn.DefaultCheckAfter)) {
		t.Fatalf("pending: %+v %v", v, err)
	}
	v, err = bd.svc.Commit(ctx, a)
	if err != nil || v.State != txn.Committed || v.QueueOffset != 0 {
		t.Fatalf("commit: %+v %v", v, err)
	}
	m, err := bd.store.FindByUniqKey("orders", txn.Key(a))
	if err != nil || string(m.Body) != "a" || m.Property(txn.PropID) != a || m.Property(txn.PropGroup) != "" {
		t.Fatalf("committed message: %v %v", m, err)
	}
	if again, err := bd.svc.Commit(ctx, a); err != nil || again != v {
		t.Fatalf("commit again: %+v %v", again, err)
	}
	var fin *txn.FinishedError
	if _, err := bd.svc.Rollback(ctx, a); !errors.As(err, &fin) || !errors.Is(err, txn.ErrFinished) || fin.Transaction != v {
		t.Fatalf("rollback of a committed one: %v", err)
	}

	v, err = bd.svc.Rollback(ctx, r)
	if err != nil || v.State != txn.RolledBack || v.Reason != txn.ReasonProducer {
		t.Fatalf("rollback: %+v %v", v, err)
	}
	if _, err := bd.svc.Commit(ctx, r); !errors.As(err, &fin) || fin.Transaction.State != txn.RolledBack {
		t.Fatalf("commit of a rolled-back one: %v", err)
	}
	if _, err := bd.svc.Describe(ctx, "nope"); !errors.Is(err, errInvalid) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := bd.svc.Describe(ctx, "7F00000100001F900000000000000100"); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if st := bd.svc.Status(); st != (txn.Stats{Committed: 1, RolledBack: 1}) {
		t.Fatalf("status: %+v", st)
	}
}

func TestServiceChecksAndRollBack(t *testing.T) {
	t.Parallel()
	bd := setup(t, "")
	ctx := context.Background()
	id := bd.send(t, "orders", "c", 1000)
	if got, err := bd.svc.PullChecks(ctx, "pg", 8, 0); err != nil || len(got) != 0 {
		t.Fatalf("before its check: %v %v", got, err)
	}
	for n := 1; n <= 2; n++ {
		bd.clock.Advance(time.Minute)
		got, err := bd.svc.PullChecks(ctx, "pg", 8, 0)
		if err != nil || len(got) != 1 || got[0].View.ID != id || got[0].View.CheckTimes != n || string(got[0].Half.Body) != "c" {
			t.Fatalf("check %d: %+v %v", n, got, err)
		}
	}
	// The loop's pass ends it once its last check has gone unanswered.
	bd.clock.Advance(30 * time.Second)
	if next, err := bd.svc.RollBackExhausted(bd.clock.Now()); err != nil || !next.Equal(bd.clock.Now().Add(30*time.Second)) {
		t.Fatalf("pass before it is due: next %v, %v", next, err)
	}
	bd.clock.Advance(30 * time.Second)
	if next, err := bd.svc.RollBackExhausted(bd.clock.Now()); err != nil || !next.IsZero() {
		t.Fatalf("pass: next %v, %v", next, err)
	}
	v, err := bd.svc.Describe(ctx, id)
	if err != nil || v.State != txn.RolledBack || v.Reason != txn.ReasonMaxChecks || v.CheckTimes != 2 || !v.FinishedAt.Equal(bd.clock.Now()) {
		t.Fatalf("rolled back: %+v %v", v, err)
	}
	if st := bd.svc.Status(); st.MaxChecksRolledBack != 1 || st.ChecksHandedOut != 2 {
		t.Fatalf("status: %+v", st)
	}
}

func TestServiceTopicGoneAndRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	bd := setup(t, dir)
	gone, kept := bd.send(t, "gone", "g", 0), bd.send(t, "kept", "k", 0)
	bd.mu.Lock()
	bd.gone["gone"] = true
	bd.mu.Unlock()
	var fin *txn.FinishedError
	if _, err := bd.svc.Commit(ctx, gone); !errors.As(err, &fin) || fin.Transaction.Reason != txn.ReasonTopicDeleted {
		t.Fatalf("commit to a deleted topic: %v", err)
	}
	bd.close(t)

	bd = setup(t, dir)
	if rec := bd.svc.Recovered(); rec.Rebuilt || rec.Pending != 1 {
		t.Fatalf("recovered: %+v", rec)
	}
	if v, err := bd.svc.Describe(ctx, kept); err != nil || v.State != txn.Pending {
		t.Fatalf("kept: %+v %v", v, err)
	}
	if v, err := bd.svc.Describe(ctx, gone); err != nil || v.State != txn.RolledBack {
		t.Fatalf("gone: %+v %v", v, err)
	}
}
