package consume

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/filter"
	"github.com/mqgate/mqgate/server/broker/instance"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// testService is a Service with only what the views and the map of pop
// states use: the retry family's names.
func testService() *Service {
	return New(Config{Retries: retry.New(retry.Config{Names: retry.Names{RetryPrefix: "%RETRY%"}})})
}

func tagged(tag string, props map[string]string, phys int64) *message.Message {
	m := &message.Message{Properties: map[string]string{message.PropertyTags: tag}, PhysicalOffset: phys}
	for k, v := range props {
		m.Properties[k] = v
	}
	return m
}

// TestViewOf: a queue of the topic is read as it is, orderly when the
// group is; the retry view reads the group's retry queue 0 by the topic's
// tag hash, applies the pull's tag filter and the topic's retry floor in
// memory, and is never orderly; a group without retryMaxTimes gets 16.
func TestViewOf(t *testing.T) {
	s := testService()
	g := registry.GroupConfig{Name: "g", Orderly: true}
	v := s.ViewOf(g, "t", 2, nil, 0)
	require.Equal(t, offset.Key{Group: "g", Topic: "t", QueueID: 2}, v.Key)
	require.Equal(t, "t", v.StoreTopic)
	require.EqualValues(t, 2, v.StoreQueue)
	require.True(t, v.Orderly)
	require.False(t, v.InPlace)
	require.Equal(t, 16, v.MaxRetry)
	require.Nil(t, v.Match)
	require.Nil(t, v.Accept)

	onlyA := func(c int64) bool { return c == message.TagsCode("a") }
	r := s.ViewOf(g, "t", RetryQueueID, onlyA, 100)
	require.Equal(t, offset.Key{Group: "g", Topic: "t", QueueID: RetryQueueID}, r.Key)
	require.Equal(t, "%RETRY%g", r.StoreTopic)
	require.EqualValues(t, 0, r.StoreQueue)
	require.False(t, r.Orderly)
	require.True(t, r.Match(message.TagsCode("t")))
	require.False(t, r.Match(message.TagsCode("other")))
	require.True(t, r.Accept(tagged("a", nil, 100)))
	require.False(t, r.Accept(tagged("a", nil, 99)), "below the retry floor: a deleted incarnation's")
	require.False(t, r.Accept(tagged("b", nil, 100)), "the pull's tag filter")
	require.Nil(t, s.ViewOf(g, "t", RetryQueueID, nil, 0).Accept)
}

// TestViewForInstanceAndSQL: an instance's view keys its progress by the
// instance, retries in place, and of the retry queue takes only the copies
// naming the instance; an SQL filter is added to the in-memory filter.
func TestViewForInstanceAndSQL(t *testing.T) {
	s := testService()
	g := registry.GroupConfig{Name: "g", RetryMaxTimes: 3}
	require.Equal(t, s.ViewOf(g, "t", 0, nil, 0), s.ViewOf(g, "t", 0, nil, 0).ForInstance(""))

	v := s.ViewOf(g, "t", 0, nil, 0).ForInstance("c1")
	require.Equal(t, instance.Key("g", "c1"), v.Key.Group)
	require.True(t, v.InPlace)
	require.Nil(t, v.Accept)

	r := s.ViewOf(g, "t", RetryQueueID, nil, 0).ForInstance("c1")
	require.True(t, r.Accept(tagged("t", map[string]string{instance.Prop: "c1"}, 0)))
	require.False(t, r.Accept(tagged("t", map[string]string{instance.Prop: "c2"}, 0)))

	sql, err := filter.Compile("n > 1")
	require.NoError(t, err)
	q := r.WithSQL(sql)
	require.True(t, q.Accept(tagged("t", map[string]string{instance.Prop: "c1", "n": "2"}, 0)))
	require.False(t, q.Accept(tagged("t", map[string]string{instance.Prop: "c1", "n": "1"}, 0)))
	require.False(t, q.Accept(tagged("t", map[string]string{instance.Prop: "c2", "n": "2"}, 0)))
	require.Equal(t, r.Key, r.WithSQL(nil).Key)
	plain := s.ViewOf(g, "t", 0, nil, 0).WithSQL(sql)
	require.False(t, plain.Accept(tagged("x", map[string]string{"n": "0"}, 0)))
}

// TestPopStates: a pop state is made once per key, an instance's knows its
// instance, and DropWhere takes the matching ones out of the map.
func TestPopStates(t *testing.T) {
	s := testService()
	require.Nil(t, s.Existing("g", "t"))
	ps := s.PopState("g", "t")
	require.Same(t, ps, s.PopState("g", "t"))
	require.Same(t, ps, s.Existing("g", "t"))
	require.Empty(t, ps.Instance())
	inst := s.PopState(instance.Key("g", "c1"), "t")
	require.Equal(t, "c1", inst.Instance())
	s.PopState("h", "t")
	require.Len(t, s.States(), 3)

	dropped := s.DropWhere(func(k Key) bool { return instance.Base(k.Group) == "g" })
	require.Len(t, dropped, 2)
	require.ElementsMatch(t, []Key{{Group: "h", Topic: "t"}}, keys(s.States()))
	require.NotSame(t, ps, s.PopState("g", "t"), "made anew after the drop")
}

func keys[V any](m map[Key]V) []Key {
	var out []Key
	for k := range m {
		out = append(out, k)
	}
	return out
}
