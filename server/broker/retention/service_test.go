package retention_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/retention"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The Service over a real store, with the broker's part played by the
// test: the registry's topics and groups, a progress table, a broadcasting
// group's instances, the carries that record their calls. The broker's
// own tests (server/broker/retention_*_test.go, disk_test.go,
// replica_internal_test.go) drive it through the facade.

type bundle struct {
	store     *storage.Store
	clock     *clockwork.FakeClock
	topics    []registry.TopicConfig
	groups    []registry.GroupConfig
	progress  *offset.Table
	instances map[string][]string
	kept      []retention.QueueOffset
	carryErr  error

	mu     sync.Mutex
	calls  []string       // the carries, in their order
	metric map[string]int // CountDropped
	svc    *retention.Service
}

func setup(t *testing.T) *bundle {
	t.Helper()
	bd := &bundle{
		clock:     clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_123)),
		progress:  offset.NewTable(),
		instances: map[string][]string{},
		metric:    map[string]int{},
	}
	opts := storagetest.SmallOptions(t.TempDir())
	opts.Clock = bd.clock
	opts.FileReservedTime = 72 * time.Hour
	bd.store = storagetest.MustOpen(t, opts)
	carry := func(name string) func(int64) error {
		return func(int64) error {
			bd.mu.Lock()
			defer bd.mu.Unlock()
			bd.calls = append(bd.calls, name)
			if name == "timer" {
				return bd.carryErr
			}
			return nil
		}
	}
	bd.svc = retention.New(retention.Config{
		Store:        bd.store,
		Now:          bd.clock.Now,
		StoreError:   func(err error) error { return err },
		RetryPrefix:  "%RETRY%",
		Kept:         func() []retention.QueueOffset { return bd.kept },
		Topics:       func() []registry.TopicConfig { return bd.topics },
		Groups:       func() []registry.GroupConfig { return bd.groups },
		ProgressKeys: bd.progress.Keys,
		Committed: func(k offset.Key) int64 {
			c, _, _ := bd.progress.Get(k)
			return c
		},
		AckedAbove: bd.progress.AckedAbove,
		PopStates:  func(func(group, topic string)) {},
		Instances:  func(g string) []string { return bd.instances[g] },
		View: func(g registry.GroupConfig, topic string, queue int32, client string) progress.View {
			v := progress.View{Key: offset.Key{Group: g.Name, Topic: topic, QueueID: queue}, StoreTopic: topic, StoreQueue: queue}
			if queue == progress.RetryQueueID {
				code := message.TagsCode(topic)
				v.StoreTopic, v.StoreQueue = "%RETRY%"+g.Name, 0
				v.Match = func(c int64) bool { return c == code }
			}
			if client != "" {
				v.Key.Group = instance.Key(g.Name, client)
			}
			return v
		},
		CountDropped: func(group string, n int) {
			bd.mu.Lock()
			defer bd.mu.Unlock()
			bd.metric[group] += n
		},
		Carry:       []func(int64) error{carry("dlq"), carry("timer"), carry("txn")},
		CarryTraces: carry("trace"),
	})
	return bd
}

// put stores n messages on topic/queue (retries of retryTopic when set)
// and returns their CommitLog offsets.
func (bd *bundle) put(t *testing.T, topic string, queue int32, n int, retryTopic string) []int64 {
	t.Helper()
	ms := make([]*message.Message, n)
	for i := range ms {
		ms[i] = &message.Message{Topic: topic, QueueID: queue, Body: []byte("m"), BornTimestamp: bd.clock.Now().UnixMilli()}
		if retryTopic != "" {
			ms[i].SetProperty(message.PropertyRetryTopic, retryTopic)
		}
	}
	res := make([]storage.PutResult, n)
	require.NoError(t, bd.store.PutClass(storage.ClassSend, ms, res))
	require.NoError(t, bd.store.AwaitDispatch(context.Background()))
	out := make([]int64, n)
	for i, r := range res {
		out[i] = r.PhysicalOffset
	}
	return out
}

// commit raises key's committed offset.
func (bd *bundle) commit(k offset.Key, off int64) {
	bd.progress.Apply(offset.Record{Entries: []offset.Entry{{Kind: offset.KindAdvance, Key: k, Offset: off}}})
}

// cuts reads rmq_sys_CUT's records.
func (bd *bundle) cuts(t *testing.T) []retention.Record {
	t.Helper()
	require.NoError(t, bd.store.AwaitDispatch(context.Background()))
	var out []retention.Record
	_, err := storage.Replay(context.Background(), bd.store, retention.Topic, 0, func(m *message.Message) {
		rec, err := retention.Decode(m.Body)
		require.NoError(t, err)
		out = append(out, rec)
	})
	require.NoError(t, err)
	return out
}

func TestBeforeDeleteCarriesThenCutsThenCounts(t *testing.T) {
	bd := setup(t)
	bd.topics = []registry.TopicConfig{{Name: "a", Queues: 1}, {Name: "idle", Queues: 1}}
	bd.groups = []registry.GroupConfig{{Name: "g", Subscriptions: []registry.Subscription{{Topic: "a"}}}}
	bd.put(t, "a", 0, 5, "")
	bd.put(t, "idle", 0, 2, "")
	bd.put(t, "%RETRY%g", 0, 2, "a")
	bd.put(t, "%RETRY%g", 0, 1, "other")
	cut := bd.put(t, "a", 0, 1, "")[0] // a/0 offsets 0..4 and the retries lie below
	k := offset.Key{Group: "g", Topic: "a", QueueID: 0}
	bd.commit(k, 1)
	bd.progress.Apply(offset.Record{Entries: []offset.Entry{{Kind: offset.KindAck, Key: k, Offsets: []int64{3}}}})

	bd.clock.Advance(time.Second)
	require.NoError(t, bd.svc.BeforeDelete(cut, storage.DeletePressure))
	require.Equal(t, []string{"dlq", "timer", "txn", "trace"}, bd.calls)
	require.Equal(t, []retention.Record{{Cut: cut, Reason: "disk-pressure", At: 1_700_000_001_123}}, bd.cuts(t))
	require.Equal(t, int64(3), bd.svc.Dropped(k), "offsets 1, 2 and 4: 3 was acked")
	retryKey := offset.Key{Group: "g", Topic: "a", QueueID: progress.RetryQueueID}
	require.Equal(t, int64(2), bd.svc.Dropped(retryKey), "a's retries only")
	require.Equal(t, map[string]int{"g": 5}, bd.metric)

	bd.svc.Forget("g")
	require.Zero(t, bd.svc.Dropped(k))
	require.Zero(t, bd.svc.Dropped(retryKey))
}

func TestBeforeDeleteStopsAtAFailedCarry(t *testing.T) {
	bd := setup(t)
	bd.carryErr = errors.New("disk full")
	err := bd.svc.BeforeDelete(100, storage.DeleteExpired)
	require.ErrorIs(t, err, bd.carryErr)
	require.Equal(t, []string{"dlq", "timer", "txn"}, bd.calls, "every carry runs; the traces and the cut wait for the next pass")
	require.Empty(t, bd.cuts(t))
}

func TestFloors(t *testing.T) {
	bd := setup(t)
	bd.topics = []registry.TopicConfig{{Name: "short", Queues: 1, RetentionHours: 1}, {Name: "long", Queues: 1, RetentionHours: 100}, {Name: "plain", Queues: 1}}
	bd.groups = []registry.GroupConfig{{Name: "g", Subscriptions: []registry.Subscription{{Topic: "short"}, {Topic: "plain"}}}}
	short := bd.put(t, "short", 0, 3, "")
	long := bd.put(t, "long", 0, 2, "")
	plain := bd.put(t, "plain", 0, 2, "")
	kept := bd.put(t, "rmq_sys_OFFSET", 0, 2, "")
	bd.kept = []retention.QueueOffset{{Topic: "rmq_sys_OFFSET", Queue: 0, Offset: 1}}
	bd.commit(offset.Key{Group: "g", Topic: "plain", QueueID: 0}, 1)

	f, err := bd.svc.Floors(bd.clock.Now())
	require.NoError(t, err)
	require.Equal(t, storage.RetentionFloors{Keep: kept[1], Unconsumed: short[0], Retained: long[0]}, f)

	bd.clock.Advance(2 * time.Hour)
	f, err = bd.svc.Floors(bd.clock.Now())
	require.NoError(t, err)
	require.Equal(t, int64(3), bd.store.MinOffset("short", 0), "expired logically")
	require.Equal(t, int64(3), bd.svc.Dropped(offset.Key{Group: "g", Topic: "short", QueueID: 0}))
	require.Equal(t, storage.RetentionFloors{Keep: kept[1], Unconsumed: long[0], Retained: long[0]}, f,
		"long, which nobody consumes, comes before plain's committed offset")
	require.Less(t, long[0], plain[1])
	require.Equal(t, map[string]int{"g": 3}, bd.metric)
}

func TestPositionsOfABroadcastingGroup(t *testing.T) {
	bd := setup(t)
	bd.topics = []registry.TopicConfig{{Name: "t", Queues: 1}}
	bd.groups = []registry.GroupConfig{{Name: "fan", ConsumeMode: instance.Broadcasting, Subscriptions: []registry.Subscription{{Topic: "t"}}}}
	bd.put(t, "t", 0, 5, "")
	bd.put(t, "t", 3, 1, "") // a queue the topic does not configure
	bd.instances["fan"] = []string{"x", "y"}
	bd.commit(offset.Key{Group: "fan@x", Topic: "t", QueueID: 0}, 4)
	bd.commit(offset.Key{Group: "fan@y", Topic: "t", QueueID: 0}, 2)
	positions := bd.svc.Positions()
	var got []string
	for _, p := range positions[retention.Queue{Topic: "t", Queue: 0}] {
		got = append(got, p.View.Key.Group)
	}
	require.Equal(t, []string{"fan@y", "fan@x"}, got, "lowest first; not the group, which has no offsets of its own")
	require.Len(t, positions[retention.Queue{Topic: "t", Queue: 3}], 2)

	bd.commit(offset.Key{Group: "fan", Topic: "t", QueueID: 0}, 1)
	require.Equal(t, "fan", bd.svc.Positions()[retention.Queue{Topic: "t", Queue: 0}][0].View.Key.Group)
}

func TestApplySkipsAnUndecodableCut(t *testing.T) {
	bd := setup(t)
	big := strings.Repeat("x", 12<<10)
	var offs []int64
	for i := 0; i < 12; i++ {
		res := make([]storage.PutResult, 1)
		require.NoError(t, bd.store.PutClass(storage.ClassSend, []*message.Message{{Topic: "filler", Body: []byte(big)}}, res))
		offs = append(offs, res[0].PhysicalOffset)
	}
	bad := &message.Message{Topic: retention.Topic, Body: []byte("not json")}
	good := &message.Message{Topic: retention.Topic, Body: []byte(`{"cut":` + strconv.FormatInt(offs[8], 10) + `,"reason":"expired","at":1}`)}
	require.NoError(t, bd.store.PutClass(storage.ClassSystem, []*message.Message{bad, good}, make([]storage.PutResult, 2)))
	require.NoError(t, bd.store.AwaitDispatch(context.Background()))
	next, err := bd.svc.Apply(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), next)
	require.Positive(t, bd.store.Stats().CommitLogMin)
	require.LessOrEqual(t, bd.store.Stats().CommitLogMin, offs[8])
	next, err = bd.svc.Apply(context.Background(), next)
	require.NoError(t, err)
	require.Equal(t, int64(2), next, "nothing more")
}
