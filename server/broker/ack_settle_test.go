package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// TestRepeatedAckWaitsForTheFirst: on a replicated store whose commit
// point the test holds still, an ack waits for its record's commit; a
// second ack of the same receipt meanwhile must not answer ok before the
// first one is committed. The replica is then fenced (it stopped
// leading): the first ack's outcome is unknown, and the second one fails
// too — an ok there would be an acknowledgement the next leader does not
// hold, and the message would be delivered again after it.
func TestRepeatedAckWaitsForTheFirst(t *testing.T) {
	ctx := context.Background()
	opts := brokertest.Options(t.TempDir())
	so, err := broker.StorageOptions(opts)
	require.NoError(t, err)
	so.Replicated, so.HoldDispatch = true, true
	st, err := storage.Open(so)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	opts.Store, opts.NoPromote = st, true
	b := brokertest.Open(t, opts)

	held := storagetest.FollowWrites(t, st) // the commit point follows the log, except while held
	require.NoError(t, b.Follow(ctx))
	st.Unfence()
	require.NoError(t, b.Promote(ctx))

	_, err = b.Send(ctx, "orders", []broker.SendMessage{{Body: []byte("once")}})
	require.NoError(t, err)
	pulled, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "orders", MaxMessages: 1, Invisible: time.Minute, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, pulled, 1)
	receipt := pulled[0].Receipt

	type answer struct {
		res []broker.ReceiptResult
		err error
	}
	ack := func() <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, err := b.Ack(ctx, "g", []string{receipt})
			ch <- answer{res, err}
		}()
		return ch
	}
	held.Store(true)
	before := st.WriteOffset()
	first := ack()
	require.Eventually(t, func() bool { return st.WriteOffset() > before }, 5*time.Second, time.Millisecond, "the first ack's record is appended")
	second := ack()
	select {
	case a := <-second:
		t.Fatalf("the repeated ack answered %+v, %v before the first ack was committed", a.res, a.err)
	case a := <-first:
		t.Fatalf("the ack answered %+v, %v before its record was committed", a.res, a.err)
	case <-time.After(200 * time.Millisecond):
	}
	st.Fence()
	a1, a2 := <-first, <-second
	require.ErrorIs(t, a1.err, broker.ErrOutcomeUnknown, "%+v", a1.res)
	require.Error(t, a2.err, "the repeated ack: %+v", a2.res)
}
