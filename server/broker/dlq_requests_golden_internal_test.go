package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The dead-letter family's requests, pinned as the facade answers them:
// every refusal's sentinel and text, a resend by ids and by filter with
// what it skips, the resend pacer's chunks on the broker's clock, a
// discard, the projection feed. Written against the code before the
// requests moved to server/broker/dlq (server/broker/dlq/doc.go); they
// use the facade's exported methods only (and the store, to write dead
// letters as the failure path does and read the records back).

// TestGoldenDLQRequestErrors: the refusals of a listing, a get, a resend
// and a discard.
func TestGoldenDLQRequestErrors(t *testing.T) {
	b, _ := goldenDLQBroker(t)
	ctx := context.Background()
	dead, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 3)
	// A message of the original topic is no dead letter of g.
	sent, err := b.Send(ctx, "orders", []SendMessage{{Body: []byte("live")}})
	require.NoError(t, err)
	tooMany := make([]string, 10001)
	for i := range tooMany {
		tooMany[i] = dead[0].MessageID
	}
	for _, c := range []struct {
		name string
		err  error
		is   error
		text string
	}{
		{"list of an unknown group", func() error { _, _, err := b.ListDeadLetters(ctx, "nope", DLQFilter{}, "", 10); return err }(),
			ErrGroupNotFound, "group not found: nope"},
		{"list of a bad group", func() error { _, _, err := b.ListDeadLetters(ctx, "%DLQ%g", DLQFilter{}, "", 10); return err }(),
			ErrReservedName, ""},
		{"get of an unknown group", func() error { _, err := b.GetDeadLetter(ctx, "nope", dead[0].MessageID); return err }(),
			ErrGroupNotFound, "group not found: nope"},
		{"get of a bad id", func() error { _, err := b.GetDeadLetter(ctx, "g", "nope"); return err }(),
			ErrInvalidArgument, "invalid argument: "},
		{"get of an unknown id", func() error { _, err := b.GetDeadLetter(ctx, "g", "7F00000100001F900000000000ABCDEF"); return err }(),
			ErrMessageNotFound, "message not found: 7F00000100001F900000000000ABCDEF is not a dead letter of g"},
		{"get of a live message", func() error { _, err := b.GetDeadLetter(ctx, "g", sent[0].MessageID); return err }(),
			ErrMessageNotFound, "message not found: " + sent[0].MessageID + " is not a dead letter of g"},
		{"get under another group", func() error {
			_, _, err := b.PutGroup(ctx, GroupConfig{Name: "h"})
			require.NoError(t, err)
			_, err = b.GetDeadLetter(ctx, "h", dead[0].MessageID)
			return err
		}(), ErrMessageNotFound, "message not found: " + dead[0].MessageID + " is not a dead letter of h"},
		{"resend of too many ids", func() error { _, err := b.ResendDeadLetters(ctx, "g", tooMany, nil); return err }(),
			ErrInvalidArgument, "invalid argument: at most 10000 ids per resend"},
		{"resend of nothing", func() error { _, err := b.ResendDeadLetters(ctx, "g", nil, nil); return err }(),
			ErrInvalidArgument, "invalid argument: name messageIds or a filter"},
		{"resend of an unknown id", func() error {
			_, err := b.ResendDeadLetters(ctx, "g", []string{dead[0].MessageID, "7F00000100001F900000000000ABCDEF"}, nil)
			return err
		}(), ErrMessageNotFound, "message not found: 7F00000100001F900000000000ABCDEF is not a dead letter of g"},
		{"resend by filter of an unknown group", func() error { _, err := b.ResendDeadLetters(ctx, "nope", nil, &DLQFilter{}); return err }(),
			ErrGroupNotFound, "group not found: nope"},
		{"discard of a bad id", func() error { return b.DiscardDeadLetter(ctx, "g", "nope") }(),
			ErrInvalidArgument, "invalid argument: "},
		{"discard of an unknown id", func() error { return b.DiscardDeadLetter(ctx, "g", "7F00000100001F900000000000ABCDEF") }(),
			ErrMessageNotFound, "message not found: 7F00000100001F900000000000ABCDEF is not a dead letter of g"},
	} {
		require.ErrorIs(t, c.err, c.is, c.name)
		if c.text != "" && !strings.HasPrefix(c.err.Error(), c.text) {
			t.Errorf("%s: %q, want %q", c.name, c.err.Error(), c.text)
		}
		if strings.HasSuffix(c.text, ": ") && c.err.Error() == c.text {
			t.Errorf("%s: %q says nothing after the sentinel", c.name, c.err.Error())
		}
	}
	require.Empty(t, dlqRecords(t, b), "no refused request wrote a status")

	// A letter whose original topic is gone: the resend fails at it and
	// writes nothing of its chunk.
	gone := goldenDeadLetter(7)
	gone.SetProperty(message.PropertyRetryTopic, "gone")
	require.NoError(t, b.store.PutClass(storage.ClassSend, []*message.Message{gone}, make([]storage.PutResult, 1)))
	all, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, all, 4)
	_, err = b.ResendDeadLetters(ctx, "g", []string{dead[0].MessageID, all[3].MessageID}, nil)
	require.ErrorIs(t, err, ErrTopicNotFound)
	require.Equal(t, "resend "+all[3].MessageID+": topic not found: gone", err.Error())
	require.Empty(t, dlqRecords(t, b))
	res, err := b.store.ReadQueue("%RETRY%g", 0, 0, 10, nil)
	require.NoError(t, err)
	require.Empty(t, res.Messages, "no copy of the failed chunk")

	// Closed: a resend and a discard are refused before anything else.
	require.NoError(t, b.Close(ctx))
	_, err = b.ResendDeadLetters(ctx, "g", nil, nil)
	require.ErrorIs(t, err, ErrShuttingDown)
	require.ErrorIs(t, b.DiscardDeadLetter(ctx, "g", "nope"), ErrShuttingDown)
}

// TestGoldenDLQResend: by ids and by filter, what a resend skips, a
// discard after a resend, the results and the statuses.
func TestGoldenDLQResend(t *testing.T) {
	b, fc := goldenDLQBroker(t)
	ctx := context.Background()
	dead, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	require.Len(t, dead, 3)

	// By id. The same id twice in one request is resent once, then
	// skipped: one copy, one status record.
	rr, err := b.ResendDeadLetters(ctx, "g", []string{dead[0].MessageID, dead[0].MessageID}, nil)
	require.NoError(t, err)
	require.Equal(t, ResendResult{Resent: []string{dead[0].MessageID}, Skipped: []string{dead[0].MessageID}}, rr)
	rr, err = b.ResendDeadLetters(ctx, "g", []string{dead[0].MessageID}, nil)
	require.NoError(t, err)
	require.Equal(t, ResendResult{Skipped: []string{dead[0].MessageID}}, rr)
	// By filter: dead ones only, whatever status the filter names.
	fc.Advance(time.Second)
	rr, err = b.ResendDeadLetters(ctx, "g", nil, &DLQFilter{ReasonContains: "BOOM", Status: DLQResent})
	require.NoError(t, err)
	require.Equal(t, ResendResult{Resent: []string{dead[1].MessageID, dead[2].MessageID}}, rr)
	rr, err = b.ResendDeadLetters(ctx, "g", nil, &DLQFilter{})
	require.NoError(t, err)
	require.Equal(t, ResendResult{}, rr, "nothing dead is left")
	// A discard does not look at the status.
	fc.Advance(time.Second)
	require.NoError(t, b.DiscardDeadLetter(ctx, "g", dead[1].MessageID))
	// A discarded letter is skipped by a resend by id.
	rr, err = b.ResendDeadLetters(ctx, "g", []string{dead[1].MessageID}, nil)
	require.NoError(t, err)
	require.Equal(t, ResendResult{Skipped: []string{dead[1].MessageID}}, rr)

	var bodies []string
	for _, m := range dlqRecords(t, b) {
		bodies = append(bodies, string(m.Body))
	}
	at := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	require.Equal(t, []string{
		`[{"group":"g","messageId":"` + dead[0].MessageID + `","status":"resent","at":"` + at(1_700_000_000_123) + `"}]`,
		`[{"group":"g","messageId":"` + dead[1].MessageID + `","status":"resent","at":"` + at(1_700_000_001_123) + `"},` +
			`{"group":"g","messageId":"` + dead[2].MessageID + `","status":"resent","at":"` + at(1_700_000_001_123) + `"}]`,
		`[{"group":"g","messageId":"` + dead[1].MessageID + `","status":"discarded","at":"` + at(1_700_000_002_123) + `"}]`,
	}, bodies)
	got, err := b.GetDeadLetter(ctx, "g", dead[1].MessageID)
	require.NoError(t, err)
	require.Equal(t, DLQDiscarded, got.Status)
	require.True(t, got.StatusAt.Equal(time.UnixMilli(1_700_000_002_123)))
	listed, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{Status: DLQResent}, "", 10)
	require.NoError(t, err)
	require.Len(t, listed, 2)
	require.Equal(t, dead[0].MessageID, listed[0].MessageID)
	require.Equal(t, dead[2].MessageID, listed[1].MessageID)
	res, err := b.store.ReadQueue("%RETRY%g", 0, 0, 10, nil)
	require.NoError(t, err)
	require.Len(t, res.Messages, 3, "one copy per letter resent, the one named twice too")
}

// TestGoldenDLQResendPacer: a resend writes 256 letters at a time and
// waits 50 ms of the broker's clock between chunks; cancelled in a pause,
// it answers what it resent so far with the context's error.
func TestGoldenDLQResendPacer(t *testing.T) {
	b, fc := goldenDLQBroker(t)
	ctx := context.Background()
	var letters []*message.Message
	for i := range 600 {
		letters = append(letters, goldenDeadLetter(10+i))
	}
	require.NoError(t, b.store.PutClass(storage.ClassSend, letters, make([]storage.PutResult, len(letters))))
	require.NoError(t, b.store.AwaitDispatch(ctx))

	// The broker's own waiters on the clock (its periodic services), so
	// that the resend's pause can be told from them.
	base := clockBlockers(fc)
	type answer struct {
		res ResendResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := b.ResendDeadLetters(ctx, "g", nil, &DLQFilter{})
		done <- answer{res, err}
	}()
	counts := func() []int {
		var out []int
		for _, m := range dlqRecords(t, b) {
			recs, err := dlq.DecodeStatuses(m.Body)
			require.NoError(t, err)
			out = append(out, len(recs))
		}
		return out
	}
	require.NoError(t, fc.BlockUntilContext(ctx, base+1))
	require.Equal(t, []int{256}, counts())
	fc.Advance(49 * time.Millisecond)
	select {
	case a := <-done:
		t.Fatalf("answered before its pause ended: %+v", a)
	default:
	}
	fc.Advance(time.Millisecond)
	require.Eventually(t, func() bool { return len(counts()) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, fc.BlockUntilContext(ctx, base+1))
	require.Equal(t, []int{256, 256}, counts())
	fc.Advance(50 * time.Millisecond)
	a := <-done
	require.NoError(t, a.err)
	require.Len(t, a.res.Resent, 603)
	require.Empty(t, a.res.Skipped)
	require.Equal(t, []int{256, 256, 91}, counts())

	// Cancelled in a pause.
	more := make([]*message.Message, 300)
	for i := range more {
		more[i] = goldenDeadLetter(1000 + i)
	}
	require.NoError(t, b.store.PutClass(storage.ClassSend, more, make([]storage.PutResult, len(more))))
	require.NoError(t, b.store.AwaitDispatch(ctx))
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		res, err := b.ResendDeadLetters(cctx, "g", nil, &DLQFilter{})
		done <- answer{res, err}
	}()
	require.NoError(t, fc.BlockUntilContext(ctx, base+1))
	cancel()
	a = <-done
	require.ErrorIs(t, a.err, context.Canceled)
	require.Len(t, a.res.Resent, 256)
	require.Equal(t, []int{256, 256, 91, 256}, counts())
}

// TestGoldenDLQFeed: the projection feed of dead letters and of their
// status changes, and its signal.
func TestGoldenDLQFeed(t *testing.T) {
	b, _ := goldenDLQBroker(t)
	ctx := context.Background()
	arrivals, next, err := b.DeadLetterArrivals(ctx, "g", 0, 2)
	require.NoError(t, err)
	require.Equal(t, int64(2), next)
	require.Len(t, arrivals, 2)
	listed, _, err := b.ListDeadLetters(ctx, "g", DLQFilter{}, "", 10)
	require.NoError(t, err)
	for i, d := range arrivals {
		require.Equal(t, listed[i], d, "an arrival is the listing's view, without a body")
		require.Nil(t, d.Body)
	}
	arrivals, next, err = b.DeadLetterArrivals(ctx, "g", 2, 10)
	require.NoError(t, err)
	require.Equal(t, int64(3), next)
	require.Len(t, arrivals, 1)
	require.Equal(t, "Boom 2", arrivals[0].Reason)
	arrivals, next, err = b.DeadLetterArrivals(ctx, "nope", 0, 10)
	require.NoError(t, err, "a group without dead letters has none")
	require.Empty(t, arrivals)
	require.Equal(t, int64(0), next)

	_, signal := b.ProjectionSignals()
	require.NoError(t, b.DiscardDeadLetter(ctx, "g", listed[2].MessageID))
	select {
	case <-signal:
	case <-time.After(10 * time.Second):
		t.Fatal("a discard did not signal")
	}
	changes, end, err := b.DeadLetterStatusChanges(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, int64(1), end)
	require.Len(t, changes, 1)
	require.Equal(t, DLQStatusChange{Group: "g", MessageID: listed[2].MessageID, Status: DLQDiscarded, At: goldenDLQAt.UTC()}, changes[0])
	arrivals, _, err = b.DeadLetterArrivals(ctx, "g", 2, 10)
	require.NoError(t, err)
	require.Equal(t, DLQDiscarded, arrivals[0].Status, "an arrival shows the status of the moment")
	changes, end, err = b.DeadLetterStatusChanges(ctx, 1, 10)
	require.NoError(t, err)
	require.Equal(t, int64(1), end)
	require.Empty(t, changes)
}

// clockBlockers counts the waiters on fc once they have settled: the
// highest n BlockUntilContext reaches within 50 ms.
func clockBlockers(fc *clockwork.FakeClock) int {
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := fc.BlockUntilContext(ctx, n+1)
		cancel()
		if err != nil {
			return n
		}
		n++
	}
}
