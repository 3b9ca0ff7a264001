package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

var (
	errInvalid  = errors.New("invalid argument")
	errClientID = errors.New("client id required")
	errQuota    = errors.New("quota exceeded")
)

// fakeStore is the store of the family and of the progress ledger: it
// records the appended progress records and the snapshot file, answers
// the queue bounds it is given and serves retry copies from retries.
type fakeStore struct {
	mu      sync.Mutex
	records []offset.Record
	fail    error // of the appends
	max     map[string]int64
	meta    map[string][]byte
	metaErr error // of WriteMeta
	retries []*message.Message
}

func (s *fakeStore) PutClass(_ storage.Class, msgs []*message.Message, _ []storage.PutResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	rec, err := offset.DecodeRecord(msgs[len(msgs)-1].Body)
	if err != nil {
		return err
	}
	s.records = append(s.records, rec)
	return nil
}

func (s *fakeStore) MaxOffset(topic string, q int32) int64 {
	return s.max[fmt.Sprintf("%s/%d", topic, q)]
}
func (s *fakeStore) MinOffset(string, int32) int64 { return 1 }
func (s *fakeStore) SearchOffsetByTime(_ string, q int32, ts int64) (int64, error) {
	return int64(q)*100 + ts%100, nil
}

func (s *fakeStore) CountQueue(string, int32, int64, int64, func(int64) bool, int64) (int64, bool, error) {
	return 0, true, nil
}

func (s *fakeStore) ReadQueue(_ string, _ int32, from int64, max int, _ func(int64) bool) (storage.ReadResult, error) {
	res := storage.ReadResult{Next: from}
	for _, m := range s.retries {
		if m.QueueOffset >= from && len(res.Messages) < max {
			res.Messages = append(res.Messages, m)
			res.Next = m.QueueOffset + 1
		}
	}
	return res, nil
}

func (s *fakeStore) ReadMeta(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.meta[name]
	if !ok {
		return nil, os.ErrNotExist
	}
	return raw, nil
}

func (s *fakeStore) WriteMeta(name string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metaErr != nil {
		return s.metaErr
	}
	if s.meta == nil {
		s.meta = map[string][]byte{}
	}
	s.meta[name] = data
	return nil
}

// entries is every entry appended since the last call, one line each.
func (s *fakeStore) entries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []string{}
	for _, rec := range s.records {
		var line string
		for i, e := range rec.Entries {
			if i > 0 {
				line += " | "
			}
			line += fmt.Sprintf("%d %s/%s/%d gen=%d off=%d", e.Kind, e.Key.Group, e.Key.Topic, e.Key.QueueID, e.Generation, e.Offset)
		}
		out = append(out, line)
	}
	s.records = nil
	return out
}

// fakeBroker is the registry's word and the pop states' drops.
type fakeBroker struct {
	mu      sync.Mutex
	groups  map[string]registry.GroupConfig
	topics  map[string]registry.TopicConfig
	dropped []string // "pops <name>", "counts <name>"
}

func (b *fakeBroker) Group(name string) (registry.GroupConfig, bool) {
	g, ok := b.groups[name]
	return g, ok
}

func (b *fakeBroker) Lookup(_ context.Context, name string) (registry.GroupConfig, error) {
	g, ok := b.groups[name]
	if !ok {
		return g, fmt.Errorf("group not found: %s", name)
	}
	return g, nil
}

func (b *fakeBroker) Topic(name string) (registry.TopicConfig, bool) {
	t, ok := b.topics[name]
	return t, ok
}
func (b *fakeBroker) AwaitDispatch(context.Context) error { return nil }
func (b *fakeBroker) CatchUp(context.Context) error       { return nil }
func (b *fakeBroker) DropPopStates(name string)           { b.note("pops " + name) }
func (b *fakeBroker) ForgetDropped(name string)           { b.note("counts " + name) }

func (b *fakeBroker) note(s string) {
	b.mu.Lock()
	b.dropped = append(b.dropped, s)
	b.mu.Unlock()
}

// progressBroker is what the ledger's rows need of the broker: an
// instance's views (its retry view in place, over the group's retry
// topic), nothing in flight, nothing dropped.
type progressBroker struct{ progress.Broker }

func (progressBroker) View(group, topic string, q int32) progress.View {
	v := progress.View{Key: offset.Key{Group: group, Topic: topic, QueueID: q}, StoreTopic: topic, StoreQueue: q, InPlace: true}
	if q == progress.RetryQueueID {
		v.StoreTopic, v.StoreQueue = "%RETRY%"+Base(group), 0
		v.CountRetries = func(int64, int64) (int64, bool, error) { return 0, true, nil }
	}
	return v
}
func (progressBroker) InFlight(string, string) func(int32) int { return nil }
func (progressBroker) Dropped(offset.Key) int64                { return 0 }

type bundle struct {
	store  *fakeStore
	broker *fakeBroker
	ledger *progress.Ledger
	s      *Service
	now    time.Time
	mu     sync.Mutex
}

func (bd *bundle) clock() time.Time {
	bd.mu.Lock()
	defer bd.mu.Unlock()
	return bd.now
}

func (bd *bundle) advance(d time.Duration) {
	bd.mu.Lock()
	bd.now = bd.now.Add(d)
	bd.mu.Unlock()
}

// setup is a service over a fake store whose group fan (idle 1 h,
// ConsumeFrom "") and last (ConsumeFrom "last") subscribe to news (3
// queues); other has 1 queue. Two entries make a record at most.
func setup(t *testing.T, maxPerGroup int) *bundle {
	t.Helper()
	bd := &bundle{
		store: &fakeStore{max: map[string]int64{"news/0": 10, "news/1": 20, "news/2": 30, "%RETRY%fan/0": 7, "other/0": 5}},
		broker: &fakeBroker{
			groups: map[string]registry.GroupConfig{
				"fan":  {Name: "fan", ConsumeMode: Broadcasting, InstanceIdle: time.Hour, Subscriptions: []registry.Subscription{{Topic: "news"}}},
				"last": {Name: "last", ConsumeMode: Broadcasting, ConsumeFrom: "last", Subscriptions: []registry.Subscription{{Topic: "news"}}},
			},
			topics: map[string]registry.TopicConfig{"news": {Name: "news", Queues: 3}, "other": {Name: "other", Queues: 1}},
		},
		now: goldenAt,
	}
	bd.ledger = progress.NewLedger(offset.NewTable(), progress.Config{
		Store: bd.store, Topic: "rmq_sys_OFFSET", Now: bd.clock,
		StoreErr: func(err error) error { return fmt.Errorf("mapped: %w", err) }, InvalidArgument: errInvalid, MaxBatch: 2,
		Broker: progressBroker{},
	})
	bd.s = NewService(Config{
		Store: bd.store, Ledger: bd.ledger, Now: bd.clock, Log: zerolog.Nop(),
		StoreErr:        func(err error) error { return fmt.Errorf("mapped: %w", err) },
		InvalidArgument: errInvalid, ClientIDRequired: errClientID,
		CheckClientID: func(field, id string) error {
			if id == "a b" {
				return fmt.Errorf("%w: %s must be printable ASCII without spaces", errInvalid, field)
			}
			return nil
		},
		MaxPerGroup: maxPerGroup,
		Quota:       func(limit, have int) error { return fmt.Errorf("%w: %d of %d", errQuota, have+1, limit) },
		MaxBatch:    2,
		RetryTopic:  func(group string) string { return "%RETRY%" + group },
		Broker:      bd.broker,
	})
	return bd
}

func (bd *bundle) enter(t *testing.T, group, client string, topics ...string) {
	t.Helper()
	var ts []registry.TopicConfig
	for _, name := range topics {
		ts = append(ts, bd.broker.topics[name])
	}
	leave, err := bd.s.Enter(bd.broker.groups[group], client, ts...)
	require.NoError(t, err)
	leave()
}

func TestEnter(t *testing.T) {
	bd := setup(t, 2)
	fan := bd.broker.groups["fan"]
	_, err := bd.s.Enter(fan, "")
	require.ErrorIs(t, err, errClientID)
	require.EqualError(t, err, "client id required: group fan is broadcasting: every consumer instance names itself with X-Mqgate-Client-Id")
	_, err = bd.s.Enter(fan, "a b")
	require.EqualError(t, err, "invalid argument: X-Mqgate-Client-Id must be printable ASCII without spaces")

	bd.enter(t, "fan", "a", "news")
	require.Equal(t, []string{
		"2 fan@a/news/-1 gen=1700000000 off=7 | 2 fan@a/news/0 gen=1700000000 off=1",
		"2 fan@a/news/1 gen=1700000000 off=1 | 2 fan@a/news/2 gen=1700000000 off=1",
	}, bd.store.entries(), "the retry view at the retry topic's end, the queues at their first offsets; MaxBatch entries a record")
	bd.advance(time.Second)
	bd.enter(t, "fan", "a", "news")
	require.Empty(t, bd.store.entries(), "a topic met writes nothing")
	bd.enter(t, "fan", "a", "news", "other")
	require.Equal(t, []string{"2 fan@a/other/-1 gen=1700000001 off=7 | 2 fan@a/other/0 gen=1700000001 off=1"}, bd.store.entries())
	bd.enter(t, "last", "a", "news")
	require.Equal(t, []string{
		"2 last@a/news/-1 gen=1700000001 off=0 | 2 last@a/news/0 gen=1700000001 off=10",
		"2 last@a/news/1 gen=1700000001 off=20 | 2 last@a/news/2 gen=1700000001 off=30",
	}, bd.store.entries())

	bd.enter(t, "fan", "b")
	_, err = bd.s.Enter(fan, "c", bd.broker.topics["news"])
	require.ErrorIs(t, err, errQuota)
	require.EqualError(t, err, "quota exceeded: 3 of 2")
	require.Empty(t, bd.store.entries(), "refused before anything is written")
	require.Equal(t, []string{"a", "b"}, bd.s.Clients("fan"))

	bad := fan
	bad.ConsumeFrom = "yesterday"
	_, err = bd.s.Enter(bad, "b", bd.broker.topics["news"])
	require.ErrorIs(t, err, errInvalid)
	require.Contains(t, err.Error(), "invalid argument: consumeFrom: parsing time")

	bd.store.fail = errors.New("disk full")
	_, err = bd.s.Enter(fan, "b", bd.broker.topics["news"])
	require.EqualError(t, err, "mapped: disk full")
	bd.store.fail = nil
	bd.enter(t, "fan", "b", "news")
	require.Len(t, bd.store.entries(), 2, "a failed write leaves the topic unmet")

	require.True(t, bd.s.Known("fan@a"))
	require.True(t, bd.s.Known("fan"))
	require.False(t, bd.s.Known("fan@zz"))
	require.False(t, bd.s.HasOwnOffsets("fan"), "no offsets of its own")
}

func TestSweep(t *testing.T) {
	bd := setup(t, 0)
	bd.enter(t, "fan", "a", "news")
	bd.enter(t, "last", "x", "news")
	bd.store.entries()
	leave, err := bd.s.Enter(bd.broker.groups["fan"], "busy")
	require.NoError(t, err)

	require.Zero(t, bd.s.Sweep(goldenAt.Add(time.Hour-time.Millisecond)))
	bd.store.fail = errors.New("disk full")
	require.Zero(t, bd.s.Sweep(goldenAt.Add(time.Hour)), "the forget record not written: not forgotten")
	require.Equal(t, []string{"a", "busy"}, bd.s.Clients("fan"))
	bd.store.fail = nil
	require.Equal(t, 1, bd.s.Sweep(goldenAt.Add(time.Hour)), "the next pass tries again")
	require.Equal(t, []string{"5 fan@a//0 gen=0 off=0"}, bd.store.entries())
	require.Equal(t, []string{"pops fan@a", "pops fan@a", "counts fan@a"}, bd.broker.dropped)
	require.Equal(t, []string{"busy"}, bd.s.Clients("fan"), "a request under way keeps its instance")
	require.False(t, bd.s.Known("fan@a"))
	require.Equal(t, 1, bd.s.Sweep(goldenAt.Add(24*time.Hour)), "last's default idle: a day")
	leave()
	require.Equal(t, 1, bd.s.Sweep(goldenAt.Add(time.Hour)), "seen at its end (the clock's now)")
}

func TestSnapshotFile(t *testing.T) {
	bd := setup(t, 0)
	bd.enter(t, "fan", "a", "news")
	bd.metaErrWrite(t)
	require.NoError(t, bd.s.WriteSnapshot())
	require.Equal(t, `{"version":1,"instances":[{"group":"fan","client":"a","lastSeenMs":1700000000123}]}`, string(bd.store.meta[SnapshotFile]))
	delete(bd.store.meta, SnapshotFile)
	require.NoError(t, bd.s.WriteSnapshot())
	require.NotContains(t, bd.store.meta, SnapshotFile, "unchanged: not written")

	// A service opened over the same table and file.
	bd.advance(time.Minute)
	bd.store.meta[SnapshotFile] = []byte(`{"version":1,"instances":[{"group":"fan","client":"a","lastSeenMs":1700000000000}]}`)
	again := NewService(bd.s.cfg)
	again.Open()
	got, err := again.Instances(context.Background(), "fan")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, time.UnixMilli(1_700_000_000_000).UTC(), got[0].LastSeen)
	require.Equal(t, time.UnixMilli(1_700_000_000_000).Add(time.Hour).UTC(), got[0].ForgetAt)
	require.Len(t, got[0].Queues, 3, "news's queues; no retries, so not its retry view")

	bd.store.meta[SnapshotFile] = []byte("garbage")
	damaged := NewService(bd.s.cfg)
	damaged.Open()
	got, err = damaged.Instances(context.Background(), "fan")
	require.NoError(t, err)
	require.Equal(t, bd.clock().UTC(), got[0].LastSeen, "a damaged file: seen at the open")
	_, err = damaged.Instances(context.Background(), "nope")
	require.EqualError(t, err, "group not found: nope")
}

// metaErrWrite: a snapshot that fails to write is written by the next.
func (bd *bundle) metaErrWrite(t *testing.T) {
	t.Helper()
	bd.store.metaErr = errors.New("read-only")
	require.EqualError(t, bd.s.WriteSnapshot(), "read-only")
	bd.store.metaErr = nil
}

func TestResetCommits(t *testing.T) {
	bd := setup(t, 0)
	fan := bd.broker.groups["fan"]
	var got []string
	commit := func(c string) error { got = append(got, "as "+c); return nil }
	require.NoError(t, bd.s.ResetCommits(registry.GroupConfig{Name: "g"}, "", commit))
	require.NoError(t, bd.s.ResetCommits(fan, "", commit))
	require.Equal(t, []string{"as ", "as "}, got, "not broadcasting; no instances: the group's")
	got = nil
	bd.enter(t, "fan", "b", "news")
	bd.enter(t, "fan", "a", "news")
	require.NoError(t, bd.s.ResetCommits(fan, "", commit))
	require.Equal(t, []string{"as a", "as b"}, got, "every instance; the group has no offsets of its own")
	got = nil
	require.NoError(t, bd.s.ResetCommits(fan, "b", commit))
	require.Equal(t, []string{"as "}, got, "the instance the request names, as it names it")
	got = nil
	require.NoError(t, bd.ledger.Commit(offset.Key{Group: "fan", Topic: "news", QueueID: 0}, 3))
	require.NoError(t, bd.s.ResetCommits(fan, "", commit))
	require.Equal(t, []string{"as ", "as a", "as b"}, got, "with offsets of its own, the group's too")
	got = nil
	require.EqualError(t, bd.s.ResetCommits(fan, "", func(c string) error {
		got = append(got, "as "+c)
		return errors.New("refused")
	}), "refused")
	require.Equal(t, []string{"as "}, got, "the first error ends it")
}

func TestCountRetries(t *testing.T) {
	bd := setup(t, 0)
	for i := range MaxRetryScan + 10 {
		m := &message.Message{QueueOffset: int64(i)}
		if i%2 == 0 {
			m.SetProperty(Prop, "a")
		}
		bd.store.retries = append(bd.store.retries, m)
	}
	v := RetryView{StoreTopic: "%RETRY%fan", Accept: func(m *message.Message) bool { return m.Property(Prop) == "a" }}
	n, complete, err := bd.s.CountRetries(v, 0, 100)
	require.NoError(t, err)
	require.True(t, complete)
	require.Equal(t, int64(50), n)
	n, complete, err = bd.s.CountRetries(v, 0, MaxRetryScan+10)
	require.NoError(t, err)
	require.False(t, complete, "past the bound: a lower bound")
	require.Equal(t, int64(MaxRetryScan/2), n)
	n, complete, err = bd.s.CountRetries(RetryView{}, 10, 20)
	require.NoError(t, err)
	require.True(t, complete)
	require.Equal(t, int64(10), n, "no filter: every copy")
}

func TestReadStart(t *testing.T) {
	bd := setup(t, 0)
	ctx := context.Background()
	news := bd.broker.topics["news"]
	from, leave, err := bd.s.ReadStart(ctx, bd.broker.groups["last"], "", news, 1, -1)
	require.NoError(t, err)
	leave()
	require.Equal(t, int64(1), from, "the group's: no offset, the queue's first")
	require.Empty(t, bd.store.entries(), "the group reads: nothing registered")
	from, leave, err = bd.s.ReadStart(ctx, bd.broker.groups["last"], "a", news, 1, -1)
	require.NoError(t, err)
	require.Equal(t, int64(20), from, "the instance's start at last")
	require.Equal(t, []string{"a"}, bd.s.Clients("last"))
	got, err := bd.s.Instances(ctx, "last")
	require.NoError(t, err)
	require.Equal(t, 1, got[0].Active, "under way until leave")
	leave()
	from, leave, err = bd.s.ReadStart(ctx, bd.broker.groups["last"], "a", news, 1, 4)
	require.NoError(t, err)
	leave()
	require.Equal(t, int64(4), from, "a given offset")
	_, _, err = bd.s.ReadStart(ctx, bd.broker.groups["last"], "a b", news, 1, -1)
	require.ErrorIs(t, err, errInvalid)
}

// Requests, settlements, queries, snapshots and sweeps of many instances
// at once (run under -race): the set stays consistent and every
// instance ends with no request under way.
func TestConcurrent(t *testing.T) {
	bd := setup(t, 0)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				client := fmt.Sprintf("c%d", (w+i)%6)
				leave, err := bd.s.Enter(bd.broker.groups["fan"], client, bd.broker.topics["news"])
				if err != nil {
					t.Error(err)
					return
				}
				bd.s.Touch("fan", map[string]struct{}{client: {}})
				_, _ = bd.s.Instances(ctx, "fan")
				_ = bd.s.WriteSnapshot()
				bd.s.Sweep(goldenAt.Add(2 * time.Hour))
				leave()
			}
		}()
	}
	wg.Wait()
	got, err := bd.s.Instances(ctx, "fan")
	require.NoError(t, err)
	for _, ip := range got {
		require.Zero(t, ip.Active, ip.ClientID)
	}
}

func (s *fakeStore) PutClassNoWait(c storage.Class, msgs []*message.Message, res []storage.PutResult) error {
	return s.PutClass(c, msgs, res)
}
