package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// memStore is a Store in memory: the files, and rmq_sys_META as a list of
// records at queue offsets 0, 1, ... (CommitLog offset 100 × the queue
// offset); failPut makes the next append fail.
type memStore struct {
	mu      sync.Mutex
	files   map[string][]byte
	log     []*message.Message
	min     int64
	failPut error
}

func newMemStore() *memStore { return &memStore{files: map[string][]byte{}} }

func (m *memStore) ReadMeta(name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[name]
	if !ok {
		return nil, os.ErrNotExist
	}
	return b, nil
}

func (m *memStore) WriteMeta(name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[name] = data
	return nil
}

func (m *memStore) PutClass(_ storage.Class, ms []*message.Message, res []storage.PutResult) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.failPut; err != nil {
		m.failPut = nil
		return err
	}
	for i, msg := range ms {
		c := *msg
		c.QueueOffset, c.PhysicalOffset = int64(len(m.log)), 100*int64(len(m.log))
		m.log = append(m.log, &c)
		res[i].QueueOffset = c.QueueOffset
	}
	return nil
}

func (m *memStore) MinOffset(string, int32) int64 { m.mu.Lock(); defer m.mu.Unlock(); return m.min }
func (m *memStore) MaxOffset(string, int32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.log))
}

func (m *memStore) ReadQueue(_ string, _ int32, from int64, max int, _ func(int64) bool) (storage.ReadResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	end := min(from+int64(max), int64(len(m.log)))
	return storage.ReadResult{Messages: m.log[from:end], Next: end}, nil
}

func (m *memStore) scan(_ context.Context, from int64, fn func(int64, []byte)) (int64, error) {
	end := m.MaxOffset(Topic, 0)
	for i := from; i < end; i++ {
		fn(i, m.log[i].Body)
	}
	return end, nil
}

var (
	errInvalid  = errors.New("invalid argument")
	errNoTopic  = errors.New("topic not found")
	errNoGroup  = errors.New("group not found")
	errStore    = errors.New("store error")
	testStartAt = time.UnixMilli(1_700_000_000_123)
)

func testConfig(m *memStore) Config {
	return Config{
		Store: m, Scan: m.scan, Clock: clockwork.NewFakeClockAt(testStartAt), Log: zerolog.Nop(),
		StoreError:      func(err error) error { return fmt.Errorf("%w: %w", errStore, err) },
		InvalidArgument: errInvalid, TopicNotFound: errNoTopic, GroupNotFound: errNoGroup,
		DefaultQueues: 4, MaxInvisible: time.Hour,
		CheckGroup:    func(g GroupConfig) (GroupConfig, error) { return g, nil },
		AwaitDispatch: func(context.Context) error { return nil },
	}
}

func openTest(t *testing.T, cfg Config) *Service {
	t.Helper()
	s, err := Open(context.Background(), cfg)
	require.NoError(t, err)
	return s
}

func TestServiceRequests(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	s := openTest(t, testConfig(m))

	got, created, err := s.PutTopic(TopicConfig{Name: "t"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, TopicConfig{Name: "t", Queues: 4, Perm: "rw", CreatedAt: testStartAt.UTC()}, got)
	_, _, err = s.PutTopic(TopicConfig{Name: "t", Queues: 2})
	require.ErrorIs(t, err, errInvalid)
	require.ErrorIs(t, err, ErrQueueShrink)
	require.EqualError(t, err, "invalid argument: a topic's queue count cannot shrink (4 -> 2)")
	_, err = s.GetTopic("nope")
	require.EqualError(t, err, "topic not found: nope")
	_, err = s.GetTopic("")
	require.EqualError(t, err, "invalid name: topic name is empty")

	g, created, err := s.PutGroup(ctx, GroupConfig{Name: "g"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, GroupConfig{Name: "g", ConsumeMode: Clustering, RetryMaxTimes: 16, CreatedAt: testStartAt.UTC()}, g)
	_, err = s.PatchGroup(ctx, "g", func(g GroupConfig) (GroupConfig, error) { g.Invisible = 2 * time.Hour; return g, nil })
	require.EqualError(t, err, "invalid argument: invisibility must be 0..1h0m0s")
	require.Len(t, m.log, 2, "a refusal writes nothing")

	// A failed append changes nothing and comes as the store's error.
	m.failPut = errors.New("disk")
	_, _, err = s.PutTopic(TopicConfig{Name: "u"})
	require.ErrorIs(t, err, errStore)
	_, ok := s.Topic("u")
	require.False(t, ok)

	// The snapshots cover every record.
	require.Contains(t, string(m.files[TopicsFile]), `"metaOffset": 2,`)
	require.Contains(t, string(m.files[GroupsFile]), `"metaOffset": 2,`)
}

func TestServiceDeleteGroupDropsOutsideTheLock(t *testing.T) {
	m := newMemStore()
	cfg := testConfig(m)
	var s *Service
	var dropped []string
	cfg.DropGroup = func(name string) {
		// Outside the registry lock: a read does not deadlock.
		_, ok := s.Group(name)
		require.False(t, ok)
		dropped = append(dropped, name)
	}
	s = openTest(t, cfg)
	_, _, err := s.PutGroup(context.Background(), GroupConfig{Name: "g"})
	require.NoError(t, err)
	require.EqualError(t, s.DeleteGroup("nope"), "group not found: nope")
	require.NoError(t, s.DeleteGroup("g"))
	require.Equal(t, []string{"g"}, dropped)
	// Created again in the millisecond of its deletion: after it.
	g, _, err := s.PutGroup(context.Background(), GroupConfig{Name: "g"})
	require.NoError(t, err)
	require.Equal(t, testStartAt.UTC().Add(time.Millisecond), g.CreatedAt)
}

func TestServiceMeetUnderTheLockAndUndo(t *testing.T) {
	m := newMemStore()
	cfg := testConfig(m)
	var s *Service
	undone := 0
	cfg.Meet = func(old GroupConfig, exists bool, g GroupConfig, topics map[string]TopicConfig) (func(), error) {
		require.False(t, s.mu.TryLock(), "under the registry lock")
		require.Contains(t, topics, "t")
		if g.RetryMaxTimes == 2 {
			return nil, errors.New("meet refused")
		}
		return func() { undone++ }, nil
	}
	s = openTest(t, cfg)
	_, _, err := s.PutTopic(TopicConfig{Name: "t"})
	require.NoError(t, err)
	_, _, err = s.PutGroup(context.Background(), GroupConfig{Name: "g"})
	require.NoError(t, err)
	_, _, err = s.PutGroup(context.Background(), GroupConfig{Name: "h", RetryMaxTimes: 2})
	require.EqualError(t, err, "meet refused")
	m.failPut = errors.New("disk")
	_, _, err = s.PutGroup(context.Background(), GroupConfig{Name: "i"})
	require.ErrorIs(t, err, errStore)
	require.Equal(t, 1, undone, "the start offsets of a group whose record failed are taken back")
	require.Equal(t, []string{"g"}, names(s.ListGroups()))
}

func names(gs []GroupConfig) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Name)
	}
	return out
}

func TestServiceQuotasAndConcurrentPatches(t *testing.T) {
	m := newMemStore()
	cfg := testConfig(m)
	cfg.Quotas = Quotas{MaxGroups: 5}
	s := openTest(t, cfg)
	_, _, err := s.PutTopic(TopicConfig{Name: "t", Queues: 1})
	require.NoError(t, err)
	const n = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := s.PatchTopic("t", func(c TopicConfig) (TopicConfig, error) { c.RetentionHours++; return c, nil })
			require.NoError(t, err)
		}()
		go func() {
			defer wg.Done()
			_, _, err := s.PutGroup(context.Background(), GroupConfig{Name: fmt.Sprintf("g%d", i)})
			if err != nil {
				var q *QuotaError
				require.ErrorAs(t, err, &q)
				require.ErrorIs(t, err, ErrQuotaExceeded)
				require.Equal(t, QuotaError{Quota: "groups", Limit: 5, Unit: "groups", Flag: "--max-groups", Have: 5, Want: 6}, *q)
				mu.Lock()
				refused++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, n-5, refused)
	topic, _ := s.Topic("t")
	require.Equal(t, n, topic.RetentionHours)
	require.Len(t, s.ListGroups(), 5)
	require.Len(t, m.log, 1+n+5)
}

func TestServiceFollowOpenAndCarry(t *testing.T) {
	m := newMemStore()
	leader := openTest(t, testConfig(m))
	require.NoError(t, leader.EnsureReceiptKey(false, 1, zerolog.Nop()))
	id, err := leader.RotateReceiptKey()
	require.NoError(t, err)
	require.Equal(t, 2, id)

	// A follower on the same log (its own files) applies what the leader
	// wrote.
	f := &memStore{files: map[string][]byte{}}
	fcfg := testConfig(m)
	fcfg.Store = f
	follower := openTest(t, fcfg)
	_, _, err = leader.PutTopic(TopicConfig{Name: "t"})
	require.NoError(t, err)
	require.NoError(t, leader.SetTombstone("gone", &Tombstone{DeletedAt: testStartAt.UTC(), CommitLogOffset: 7}))
	require.NoError(t, follower.Follow(context.Background()))
	for _, s := range []*Service{leader, follower} {
		_, ok := s.Topic("t")
		require.True(t, ok)
		_, ok = s.Tombstone("gone")
		require.True(t, ok)
		require.Len(t, s.Ring().Keys(), 2)
	}
	require.Contains(t, string(f.files[TopicsFile]), `"metaOffset": 4,`)

	// Retention's carry: nothing while the first record is at or above
	// the cut; the whole registry when it is below.
	require.NoError(t, leader.Carry(0))
	require.Len(t, m.log, 4)
	require.NoError(t, leader.Carry(1))
	require.Len(t, m.log, 5)
	// Retention deletes the records below the carry: a registry opened
	// from what is left (no files) is whole.
	reopened := openTest(t, testConfig(&memStore{files: map[string][]byte{}, log: m.log[4:]}))
	_, ok := reopened.Topic("t")
	require.True(t, ok)
	_, ok = reopened.Tombstone("gone")
	require.True(t, ok)
	require.Len(t, reopened.Ring().Keys(), 2)

	// A legacy receipt.key is adopted as key 1.
	legacy := newMemStore()
	legacy.files[LegacyKeyFile] = []byte("0123456789abcdef0123456789abcdef")
	s := openTest(t, testConfig(legacy))
	require.NoError(t, s.EnsureReceiptKey(true, 5, zerolog.Nop()))
	keys := s.Ring().Keys()
	require.Len(t, keys, 1)
	require.Equal(t, "0123456789abcdef0123456789abcdef", string(keys[0].Secret))
	require.NoError(t, s.EnsureReceiptKey(true, 6, zerolog.Nop()), "a ring that has a key gets none")
	require.Len(t, legacy.log, 1)
}
