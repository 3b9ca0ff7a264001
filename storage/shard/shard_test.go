package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

func openSingle(t testing.TB, dir string) *Shard {
	t.Helper()
	s, err := Open(Options{ID: 1, Peers: []uint64{1}, Log: testLogOptions(dir), Ticks: make(chan time.Time)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.Equal(t, "leader", s.Status().Role, "a single voter leads at once")
	return s
}

// readAll reads every message of every queue the tests write.
func readAll(t *testing.T, st *storage.Store) map[message.ID]*message.Message {
	t.Helper()
	require.NoError(t, st.AwaitDispatch(context.Background()))
	out := map[message.ID]*message.Message{}
	for _, topic := range topics {
		for q := int32(0); q < 3; q++ {
			for off := st.MinOffset(topic, q); off < st.MaxOffset(topic, q); {
				r, err := st.ReadQueue(topic, q, off, 64, nil)
				require.NoError(t, err)
				for _, m := range r.Messages {
					out[message.NewID(m.StoreHost, m.PhysicalOffset)] = m
				}
				require.Greater(t, r.Next, off)
				off = r.Next
			}
		}
	}
	return out
}

// TestSingleVoterPuts: one voter end to end — concurrent Puts through
// the log return once committed with the store's results, every message
// is read back through ReadQueue with those ids and queue offsets, and
// the frames were written once (the CommitLog holds exactly the
// committed entries). Reopened from its files, it leads again with the
// same messages and continues their offsets.
func TestSingleVoterPuts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openSingle(t, dir)

	type acked struct {
		res         storage.PutResult
		topic, body string
	}
	var mu sync.Mutex
	var all []acked
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 40; k++ {
				ms := batch(fmt.Sprintf("w%d-k%d", w, k), 1+k%3)
				res := make([]storage.PutResult, len(ms))
				if err := s.Put(context.Background(), storage.ClassSend, ms, res); err != nil {
					t.Errorf("put: %v", err)
					return
				}
				mu.Lock()
				for i := range ms {
					all = append(all, acked{res[i], ms[i].Topic, string(ms[i].Body)})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	st := s.Store()
	check := func(st *storage.Store) {
		got := readAll(t, st)
		require.Len(t, got, len(all))
		for _, a := range all {
			m, ok := got[a.res.ID]
			require.True(t, ok, "message %v read back", a.res.ID)
			require.Equal(t, a.body, string(m.Body))
			require.Equal(t, a.res.QueueOffset, m.QueueOffset)
		}
	}
	check(st)
	status := s.Status()
	require.Equal(t, st.WriteOffset(), status.CommitOffset, "the log holds the committed entries and nothing else")
	t.Logf("%d messages in %d proposals, %d Readies, %d entries persisted", len(all), status.Proposals, status.Readies, status.Entries)
	require.Less(t, status.Readies, 2*status.Proposals+4, "group commit: a Ready carries several proposals")
	ls := s.log.Stats()
	require.Equal(t, status.Proposals, ls.Verified, "every entry's frames verified in place")
	require.Zero(t, ls.Appended, "no frame written twice")

	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Put(context.Background(), storage.ClassSend, batch("late", 1), make([]storage.PutResult, 1)), ErrStopped)

	s = openSingle(t, dir)
	check(s.Store())
	ms := batch("after", 1)
	res := make([]storage.PutResult, 1)
	require.NoError(t, s.Put(context.Background(), storage.ClassSend, ms, res))
	var before int64 = -1
	for _, a := range all {
		if a.res.QueueID == res[0].QueueID && ms[0].Topic == a.topic {
			before = max(before, a.res.QueueOffset)
		}
	}
	require.Equal(t, before+1, res[0].QueueOffset, "queue offsets continue after the restart")
}

// TestPutRefusals: a Put the store refuses writes nothing and leaves no
// frames behind (the next Put lands where it would have); a cancelled
// context before the loop takes the Put is not a success.
func TestPutRefusals(t *testing.T) {
	t.Parallel()
	s := openSingle(t, t.TempDir())
	st := s.Store()
	bad := batch("bad", 2)
	bad[1].Topic = "no spaces allowed"
	err := s.Put(context.Background(), storage.ClassSend, bad, make([]storage.PutResult, 2))
	require.ErrorIs(t, err, storage.ErrInvalidMessage)
	require.Equal(t, int64(0), st.WriteOffset(), "nothing written")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.Put(ctx, storage.ClassSend, batch("cancelled", 1), make([]storage.PutResult, 1))
	if err != nil {
		require.True(t, errors.Is(err, context.Canceled) || errors.Is(err, ErrUnknownOutcome), "%v", err)
	}
}
