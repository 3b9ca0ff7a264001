package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
)

// openUnfollowed opens a broker in dir whose trace follower does not run:
// the test runs its passes (followTrace) itself.
func openUnfollowed(t *testing.T, dir string) *Broker {
	t.Helper()
	b, err := Open(context.Background(), Options{DataDir: dir, AutoCreate: true, MaxMessageSize: 64 << 10, NoMessageTrace: true,
		DelayLevels: []time.Duration{10 * time.Millisecond}, Storage: storage.Options{SegmentSize: 1 << 20}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	return b
}

func traceKinds(t *testing.T, b *Broker, id string) []string {
	t.Helper()
	tr, err := b.Trace(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, e := range tr.Events {
		out = append(out, e.Type)
	}
	return out
}

// The follower resumes where its last record says; records traced twice
// (a crash between a trace record and the next one naming the position)
// are listed once.
func TestTraceFollowerResumesAndDeduplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	b := openUnfollowed(t, dir)
	res, err := b.Send(ctx, "t", []SendMessage{{Body: []byte("a")}})
	require.NoError(t, err)
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "t", MaxMessages: 1, Wait: time.Second, Invisible: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	_, err = b.Ack(ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)
	require.NoError(t, b.awaitDispatch(ctx))
	require.Equal(t, []string{"stored"}, traceKinds(t, b, res[0].MessageID), "nothing followed yet")

	more, err := b.followTrace()
	require.NoError(t, err)
	require.False(t, more)
	want := []string{"stored", "delivered", "acked"}
	require.Equal(t, want, traceKinds(t, b, res[0].MessageID))
	leaseTop, offsetTop := b.store.MaxOffset(leaseTopic, 0), b.store.MaxOffset(offsetTopic, 0)
	require.Equal(t, leaseTop, b.trace.leaseNext)
	require.Equal(t, offsetTop, b.trace.offsetNext)
	records := b.store.MaxOffset(traceTopic, 0)

	// Traced again from the start: the same events, once.
	b.trace.leaseNext, b.trace.offsetNext = 0, 0
	_, err = b.followTrace()
	require.NoError(t, err)
	require.Greater(t, b.store.MaxOffset(traceTopic, 0), records, "the records were written again")
	require.Equal(t, want, traceKinds(t, b, res[0].MessageID))

	// A pass with nothing new writes nothing.
	records = b.store.MaxOffset(traceTopic, 0)
	_, err = b.followTrace()
	require.NoError(t, err)
	require.Equal(t, records, b.store.MaxOffset(traceTopic, 0))

	require.NoError(t, b.Close(ctx))
	b = openUnfollowed(t, dir)
	require.Equal(t, leaseTop, b.trace.leaseNext, "resumed from the last record")
	require.Equal(t, offsetTop, b.trace.offsetNext)
	require.Equal(t, want, traceKinds(t, b, res[0].MessageID))
}

// Push outcomes wait in a bounded buffer: past it they are dropped and
// counted; an undecodable receipt is passed over.
func TestTracePushBufferIsBounded(t *testing.T) {
	t.Parallel()
	b := openUnfollowed(t, t.TempDir())
	b.trace.off = false // the test is the follower
	for i := 0; i < traceMaxPending+3; i++ {
		b.TracePushed("g", "not-a-receipt", 200, "ok")
	}
	require.Len(t, b.trace.pending, traceMaxPending)
	require.EqualValues(t, 3, b.TraceStats().Dropped)
	records := b.store.MaxOffset(traceTopic, 0)
	_, err := b.followTrace()
	require.NoError(t, err)
	require.Empty(t, b.trace.pending)
	require.Equal(t, records, b.store.MaxOffset(traceTopic, 0), "nothing to trace of a bad receipt")
}
