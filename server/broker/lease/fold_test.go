package lease

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFold(t *testing.T) {
	k := Key{Group: "g", Topic: "t"}
	f := NewFold()
	rec := func(items ...Item) Record {
		return Record{Entries: []Entry{{Key: k, Items: items}}}
	}
	deadline := func() int64 { fl, _ := f.Get(At{k, 1}); return fl.Item.Deadline }
	state := func() State { fl, _ := f.Get(At{k, 1}); return fl.Item.State }
	f.Apply(rec(Item{Offset: 1, Epoch: 5, Deadline: 10, State: Held}))
	require.Equal(t, uint64(5), f.Top())
	f.Apply(rec(Item{Offset: 1, Epoch: 4, Deadline: 99, State: Held}))
	require.Equal(t, int64(10), deadline(), "an older epoch never wins")
	f.Apply(rec(Item{Offset: 1, Epoch: 5, Deadline: 20, State: Held}))
	require.Equal(t, int64(20), deadline(), "of one epoch the later record wins")
	f.Apply(rec(Item{Offset: 1, Epoch: 5, State: Released}))
	require.Equal(t, Released, state())
	require.Empty(t, f.Unreleased())
	f.Apply(rec(Item{Offset: 1, Epoch: 6, Deadline: 30, State: Held}))
	require.Equal(t, Held, state(), "a newer lease after a release")
	f.Raise(3)
	require.Equal(t, uint64(6), f.Top(), "Raise never lowers")
	f.Raise(9)
	require.Equal(t, uint64(9), f.Top())
}

func TestFoldUnreleasedAndPrune(t *testing.T) {
	f := NewFold()
	f.Apply(Record{Entries: []Entry{
		{Key: Key{Group: "b", Topic: "t"}, Items: []Item{{Offset: 2, Epoch: 1, State: Held}, {Offset: 1, Epoch: 2, State: Waiting}}},
		{Key: Key{Group: "a", Topic: "t", QueueID: 1}, Items: []Item{{Offset: 9, Epoch: 3, State: Held}}},
		{Key: Key{Group: "a", Topic: "t", QueueID: RetryQueueID}, Items: []Item{{Offset: 5, Epoch: 4, State: Held}, {Offset: 4, Epoch: 5, State: Released}}},
	}})
	require.Equal(t, []At{
		{Key{Group: "a", Topic: "t", QueueID: RetryQueueID}, 5},
		{Key{Group: "a", Topic: "t", QueueID: 1}, 9},
		{Key{Group: "b", Topic: "t"}, 1},
		{Key{Group: "b", Topic: "t"}, 2},
	}, f.Unreleased(), "by group, topic, queue, then offset; releases left out")
	require.Equal(t, 5, f.Len())
	require.Len(t, f.Record().Entries, 5, "an entry per offset, releases included")

	f.Prune(func(k At, _ Folded) bool { return k.Key.Group == "b" })
	require.Equal(t, 2, f.Len(), "the release and what is owed no more are dropped")
	require.Equal(t, uint64(5), f.Top(), "pruning keeps the highest epoch seen")
	rec := f.Record()
	again := NewFold()
	again.Apply(rec)
	require.Equal(t, f.live, again.live, "a fold's record folds into the same fold")
}
