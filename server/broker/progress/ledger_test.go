package progress

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

var errInvalid = errors.New("invalid argument")

// fakeStore records the appends and answers the queue bounds it is given.
type fakeStore struct {
	mu      sync.Mutex
	puts    [][]*message.Message
	fail    error
	max     map[string]int64 // "topic/queue"
	byTime  int64
	onPut   func()
	classes []storage.Class
}

func (s *fakeStore) PutClass(class storage.Class, msgs []*message.Message, _ []storage.PutResult) error {
	if s.onPut != nil {
		s.onPut()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.puts = append(s.puts, msgs)
	s.classes = append(s.classes, class)
	return nil
}

func (s *fakeStore) MaxOffset(topic string, q int32) int64 {
	return s.max[fmt.Sprintf("%s/%d", topic, q)]
}
func (s *fakeStore) MinOffset(string, int32) int64 { return 0 }
func (s *fakeStore) SearchOffsetByTime(string, int32, int64) (int64, error) {
	return s.byTime, nil
}

func (s *fakeStore) CountQueue(string, int32, int64, int64, func(int64) bool, int64) (int64, bool, error) {
	return 0, true, nil
}

func (s *fakeStore) ReadQueue(string, int32, int64, int, func(int64) bool) (storage.ReadResult, error) {
	return storage.ReadResult{}, nil
}

func newTestLedger(store *fakeStore, maxBatch int) *Ledger {
	return NewLedger(offset.NewTable(), Config{
		Store: store, Topic: "rmq_sys_OFFSET",
		Now:             func() time.Time { return time.UnixMilli(1_700_000_000_123) },
		StoreErr:        func(err error) error { return fmt.Errorf("mapped: %w", err) },
		InvalidArgument: errInvalid,
		MaxBatch:        maxBatch,
	})
}

// decoded is every record the store was given, decoded.
func decoded(t *testing.T, s *fakeStore) []offset.Record {
	t.Helper()
	var out []offset.Record
	for _, put := range s.puts {
		m := put[len(put)-1]
		require.Equal(t, "rmq_sys_OFFSET", m.Topic)
		require.Equal(t, int64(1_700_000_000_123), m.BornTimestamp)
		rec, err := offset.DecodeRecord(m.Body)
		require.NoError(t, err)
		out = append(out, rec)
	}
	return out
}

func TestPersistAppliesAfterTheAppend(t *testing.T) {
	t.Parallel()
	store := &fakeStore{}
	l := newTestLedger(store, 1024)
	key := offset.Key{Group: "g", Topic: "t", QueueID: 0}
	store.onPut = func() {
		_, _, known := l.Table().Get(key)
		require.False(t, known, "applied before its append")
	}
	require.NoError(t, l.Commit(key, 5))
	committed, gen, _ := l.Table().Get(key)
	require.Equal(t, int64(5), committed)
	require.Equal(t, uint32(1), gen)
	require.Equal(t, storage.ClassSystem, store.classes[0])

	store.onPut = nil
	require.NoError(t, l.Persist(offset.Record{Entries: []offset.Entry{l.AckEntry(key, 5)}}, nil))
	committed, _, _ = l.Table().Get(key)
	require.Equal(t, int64(6), committed)
	require.NoError(t, l.Commit(key, 2)) // a reset: the next generation
	require.NoError(t, l.Advance(key, 4))
	committed, gen, _ = l.Table().Get(key)
	require.Equal(t, int64(4), committed)
	require.Equal(t, uint32(2), gen)
	require.Equal(t, []offset.Record{
		{Entries: []offset.Entry{{Kind: offset.KindCommit, Key: key, Generation: 1, Offset: 5}}},
		{Entries: []offset.Entry{{Kind: offset.KindAck, Key: key, Generation: 1, Offsets: []int64{5}}}},
		{Entries: []offset.Entry{{Kind: offset.KindCommit, Key: key, Generation: 2, Offset: 2}}},
		{Entries: []offset.Entry{{Kind: offset.KindAdvance, Key: key, Offset: 4}}},
	}, decoded(t, store))

	// The messages written with a record come first, in one batch.
	extra := &message.Message{Topic: "%RETRY%g"}
	require.NoError(t, l.Persist(offset.Record{Entries: []offset.Entry{l.AckEntry(key, 4)}}, []*message.Message{extra}))
	require.Len(t, store.puts[4], 2)
	require.Same(t, extra, store.puts[4][0])
	require.NoError(t, l.Persist(offset.Record{}, nil)) // nothing: no append
	require.Len(t, store.puts, 5)
}

func TestPersistFailureAppliesNothing(t *testing.T) {
	t.Parallel()
	store := &fakeStore{fail: storage.ErrDiskFull}
	l := newTestLedger(store, 1024)
	key := offset.Key{Group: "g", Topic: "t", QueueID: 0}
	err := l.Commit(key, 5)
	require.ErrorIs(t, err, storage.ErrDiskFull)
	require.EqualError(t, err, "mapped: "+storage.ErrDiskFull.Error())
	_, _, known := l.Table().Get(key)
	require.False(t, known)
}

// TestAwaitAppliedWaitsForPersists: AwaitApplied does not return while a
// progress record is between its append and its apply (Persist holds the
// ledger's lock shared across both), and returns once it is applied.
func TestAwaitAppliedWaitsForPersists(t *testing.T) {
	t.Parallel()
	l := newTestLedger(&fakeStore{}, 1024)
	l.mu.RLock() // a persist in flight
	done := make(chan struct{})
	go func() {
		l.AwaitApplied()
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("AwaitApplied returned while a record was appended but not applied")
	case <-time.After(100 * time.Millisecond):
	}
	l.mu.RUnlock() // applied
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitApplied did not return after the record was applied")
	}
}

// TestLockHoldsOffPersists: a snapshot's Lock keeps an append from its
// write until Unlock.
func TestLockHoldsOffPersists(t *testing.T) {
	t.Parallel()
	store := &fakeStore{}
	l := newTestLedger(store, 1024)
	l.Lock()
	done := make(chan error)
	go func() { done <- l.Commit(offset.Key{Group: "g", Topic: "t"}, 1) }()
	select {
	case <-done:
		t.Fatal("an append ran under the snapshot's lock")
	case <-time.After(100 * time.Millisecond):
	}
	require.Empty(t, store.puts)
	l.Unlock()
	require.NoError(t, <-done)
}

func TestMeetTopics(t *testing.T) {
	t.Parallel()
	topics := map[string]registry.TopicConfig{"a": {Name: "a", Queues: 3}, "b": {Name: "b", Queues: 1}}
	sub := func(names ...string) []registry.Subscription {
		var out []registry.Subscription
		for _, n := range names {
			out = append(out, registry.Subscription{Topic: n})
		}
		return out
	}
	t.Run("First", func(t *testing.T) {
		store := &fakeStore{}
		l := newTestLedger(store, 1024)
		undo, err := l.MeetTopics(registry.GroupConfig{}, false, registry.GroupConfig{Name: "g", Subscriptions: sub("a")}, topics)
		require.NoError(t, err)
		require.Nil(t, undo)
		require.Empty(t, store.puts)
	})
	t.Run("LastInBatches", func(t *testing.T) {
		store := &fakeStore{max: map[string]int64{"a/0": 7, "a/2": 9, "b/0": 4}}
		l := newTestLedger(store, 2)
		known := offset.Key{Group: "g", Topic: "a", QueueID: 1}
		l.Table().Apply(offset.Record{Entries: []offset.Entry{{Kind: offset.KindCommit, Key: known, Generation: 3, Offset: 1}}})
		g := registry.GroupConfig{Name: "g", ConsumeFrom: ConsumeFromLast, Subscriptions: sub("a", "b", "a", "later")}
		undo, err := l.MeetTopics(registry.GroupConfig{}, false, g, topics)
		require.NoError(t, err)
		require.NotNil(t, undo)
		commit := func(topic string, q int32, off int64) offset.Entry {
			return offset.Entry{Kind: offset.KindCommit, Key: offset.Key{Group: "g", Topic: topic, QueueID: q}, Generation: 1, Offset: off}
		}
		require.Equal(t, []offset.Record{
			{Entries: []offset.Entry{commit("a", 0, 7), commit("a", 2, 9)}},
			{Entries: []offset.Entry{commit("b", 0, 4)}},
		}, decoded(t, store))
		undo()
		require.Empty(t, l.Table().Keys())
	})
	t.Run("TimeOnlyNewSubscriptions", func(t *testing.T) {
		store := &fakeStore{byTime: 3}
		l := newTestLedger(store, 1024)
		old := registry.GroupConfig{Name: "g", Subscriptions: sub("a")}
		g := registry.GroupConfig{Name: "g", ConsumeFrom: "2024-01-02T03:04:05Z", Subscriptions: sub("a", "b")}
		undo, err := l.MeetTopics(old, true, g, topics)
		require.NoError(t, err)
		require.Nil(t, undo)
		require.Equal(t, []offset.Record{{Entries: []offset.Entry{
			{Kind: offset.KindCommit, Key: offset.Key{Group: "g", Topic: "b"}, Generation: 1, Offset: 3},
		}}}, decoded(t, store))
	})
	t.Run("ErrInvalidArgument", func(t *testing.T) {
		l := newTestLedger(&fakeStore{}, 1024)
		_, err := l.MeetTopics(registry.GroupConfig{}, false, registry.GroupConfig{Name: "g", ConsumeFrom: "soon", Subscriptions: sub("a")}, topics)
		require.ErrorIs(t, err, errInvalid)
	})
	t.Run("FailureUndoes", func(t *testing.T) {
		store := &fakeStore{fail: storage.ErrDiskFull}
		l := newTestLedger(store, 1024)
		l.Table().Apply(offset.Record{Entries: []offset.Entry{{Kind: offset.KindAck, Key: offset.Key{Group: "g", Topic: "b"}, Generation: 0, Offsets: []int64{0}}}})
		_, err := l.MeetTopics(registry.GroupConfig{}, false, registry.GroupConfig{Name: "g", ConsumeFrom: ConsumeFromLast, Subscriptions: sub("a")}, topics)
		require.ErrorIs(t, err, storage.ErrDiskFull)
		require.Empty(t, l.Table().Keys())
	})
}

func TestNormalizeConsumeFrom(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"": "", "first": "", "last": "last", "2024-01-02T03:04:05.5+02:00": "2024-01-02T01:04:05.5Z"} {
		got, err := NormalizeConsumeFrom(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := NormalizeConsumeFrom("Last")
	require.EqualError(t, err, `consumeFrom "Last" must be "first", "last" or an RFC 3339 time`)
}

// FuzzNormalizeConsumeFrom: a client's ConsumeFrom never panics, and what
// it accepts is normal (accepted again unchanged).
func FuzzNormalizeConsumeFrom(f *testing.F) {
	for _, s := range []string{"", "first", "last", "Last", "2024-01-02T03:04:05.5+02:00", "2026-13-01T00:00:00Z", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := NormalizeConsumeFrom(v)
		if err != nil {
			return
		}
		again, err := NormalizeConsumeFrom(n)
		if err != nil || again != n {
			t.Fatalf("%q normalised to %q, then %q, %v", v, n, again, err)
		}
	})
}

func (s *fakeStore) ReadMeta(string) ([]byte, error) { return nil, os.ErrNotExist }
func (s *fakeStore) WriteMeta(string, []byte) error  { return nil }

func (s *fakeStore) PutClassNoWait(c storage.Class, msgs []*message.Message, res []storage.PutResult) error {
	return s.PutClass(c, msgs, res)
}
