package trace

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The follower's tests run over a real store with the records the broker
// would write (a message, a lease record granting it, a progress record
// acknowledging it) and a broker of the simplest rules (testBroker); the
// broker's own tests (server/broker/trace_test.go,
// trace_golden_test.go) run the trace with the broker.

const testOffsetTopic = "rmq_sys_OFFSET"

// testBroker: every rmq_sys_ topic is bookkeeping, no topic was deleted,
// no transaction, no dead letter; no receipt decodes.
type testBroker struct{ store *storage.Store }

func (testBroker) Hidden(m *message.Message) bool { return strings.HasPrefix(m.Topic, "rmq_sys_") }
func (testBroker) MessageID(m *message.Message) string {
	return message.NewID(m.StoreHost, m.PhysicalOffset).String()
}
func (testBroker) ScheduleEntry(string) (int, int64, bool) { return 0, 0, false }
func (testBroker) DeadLetterStatus(string, string) (dlq.StatusRecord, bool) {
	return dlq.StatusRecord{}, false
}
func (testBroker) Receipt(string) (receipt.Receipt, error) {
	return receipt.Receipt{}, errors.New("no receipt")
}
func (b testBroker) AwaitDispatch(ctx context.Context) error {
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return b.store.AwaitDispatch(wait)
}
func (testBroker) StoreErr(err error) error { return err }

// newTestTracer is the trace of a broker over store with tracing off, as
// at the broker's open: the test runs the follower's passes (RunOnce).
func newTestTracer(t *testing.T, store *storage.Store) *Tracer {
	t.Helper()
	tr := New(Config{Store: store, Broker: testBroker{store}, Clock: clockwork.NewRealClock(), Logger: zerolog.Nop(), Off: true,
		Names:   Names{RetryPrefix: "%RETRY%", Attempts: "ATTEMPTS", OffsetTopic: testOffsetTopic},
		Closing: make(chan struct{}), ClosingCtx: context.Background()})
	require.NoError(t, tr.Resume())
	return tr
}

func put(t *testing.T, store *storage.Store, msgs ...*message.Message) {
	t.Helper()
	require.NoError(t, store.PutClass(storage.ClassSend, msgs, make([]storage.PutResult, len(msgs))))
	require.NoError(t, store.AwaitDispatch(context.Background()))
}

func kinds(t *testing.T, tr *Tracer, id message.ID) []string {
	t.Helper()
	got, err := tr.Query(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, e := range got.Events {
		out = append(out, e.Type)
	}
	return out
}

// The follower resumes where its last record says; records traced twice
// (a crash between a trace record and the next one naming the position)
// are listed once.
func TestFollowerResumesAndDeduplicates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := storagetest.MustOpen(t, storagetest.SmallOptions(dir))
	tr := newTestTracer(t, store)

	sent := &message.Message{Topic: "t", Body: []byte("a"), BornTimestamp: 1}
	put(t, store, sent)
	id := message.NewID(sent.StoreHost, sent.PhysicalOffset)
	now := time.Now().UnixMilli()
	grant, err := lease.EncodeRecord(lease.Record{Entries: []lease.Entry{{Key: lease.Key{Group: "g", Topic: "t"}, At: now, Client: "w1",
		Items: []lease.Item{{Offset: 0, Epoch: 7, Deadline: now + 60_000, State: lease.Held}}}}})
	require.NoError(t, err)
	ack, err := offset.EncodeRecord(offset.Record{Entries: []offset.Entry{{Kind: offset.KindAck, Key: offset.Key{Group: "g", Topic: "t"}, Offsets: []int64{0}}}})
	require.NoError(t, err)
	put(t, store, &message.Message{Topic: lease.Topic, Body: grant}, &message.Message{Topic: testOffsetTopic, Body: ack})
	require.Equal(t, []string{"stored"}, kinds(t, tr, id), "nothing followed yet")

	more, err := tr.RunOnce()
	require.NoError(t, err)
	require.False(t, more)
	want := []string{"stored", "delivered", "acked"}
	require.Equal(t, want, kinds(t, tr, id))
	leaseTop, offsetTop := store.MaxOffset(lease.Topic, 0), store.MaxOffset(testOffsetTopic, 0)
	require.Equal(t, leaseTop, tr.leaseNext)
	require.Equal(t, offsetTop, tr.offsetNext)
	require.Zero(t, tr.Stats().Lag)
	records := store.MaxOffset(Topic, 0)

	// Traced again from the start: the same events, once.
	tr.leaseNext, tr.offsetNext = 0, 0
	_, err = tr.RunOnce()
	require.NoError(t, err)
	require.Greater(t, store.MaxOffset(Topic, 0), records, "the records were written again")
	require.Equal(t, want, kinds(t, tr, id))

	// A pass with nothing new writes nothing.
	records = store.MaxOffset(Topic, 0)
	_, err = tr.RunOnce()
	require.NoError(t, err)
	require.Equal(t, records, store.MaxOffset(Topic, 0))

	// The broker opened again: resumed from the last record.
	tr = newTestTracer(t, store)
	require.Equal(t, leaseTop, tr.leaseNext, "resumed from the last record")
	require.Equal(t, offsetTop, tr.offsetNext)
	require.Equal(t, want, kinds(t, tr, id))
}

// Push outcomes wait in a bounded buffer: past it they are dropped and
// counted; an undecodable receipt is passed over.
func TestPushBufferIsBounded(t *testing.T) {
	t.Parallel()
	store := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	tr := newTestTracer(t, store)
	tr.off = false // the test is the follower
	for i := 0; i < maxPending+3; i++ {
		tr.Pushed("g", "not-a-receipt", 200, "ok")
	}
	require.Len(t, tr.pending, maxPending)
	require.EqualValues(t, 3, tr.Stats().Dropped)
	records := store.MaxOffset(Topic, 0)
	_, err := tr.RunOnce()
	require.NoError(t, err)
	require.Empty(t, tr.pending)
	require.Equal(t, records, store.MaxOffset(Topic, 0), "nothing to trace of a bad receipt")
}

// An id that names no message is ErrNoMessage.
func TestQueryOfNoMessage(t *testing.T) {
	t.Parallel()
	store := storagetest.MustOpen(t, storagetest.SmallOptions(t.TempDir()))
	tr := newTestTracer(t, store)
	m := &message.Message{Topic: "t", Body: []byte("a"), BornTimestamp: 1}
	put(t, store, m)
	absent := message.NewID(m.StoreHost, m.PhysicalOffset+1<<20)
	_, err := tr.Query(context.Background(), absent)
	require.ErrorIs(t, err, ErrNoMessage)
	require.Equal(t, ErrNoMessage.Error()+": "+absent.String(), err.Error())
}
