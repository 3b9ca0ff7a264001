package lease

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/offset"
)

func TestPopStateCursor(t *testing.T) {
	ps := NewPopState("c1")
	require.Equal(t, "c1", ps.Instance())
	require.Equal(t, 0, ps.Round())
	require.Equal(t, 1, ps.Round())
	require.Nil(t, ps.Cursor(0))
	asked := 0
	c := ps.OpenCursor(0, func() int64 { asked++; return 7 })
	require.Same(t, c, ps.OpenCursor(0, func() int64 { asked++; return 9 }))
	require.Equal(t, 1, asked, "the committed offset is asked once, when the cursor is made")
	require.Equal(t, int64(7), c.Next())
	c.Rewind(9)
	require.Equal(t, int64(7), c.Next(), "never forward")
	c.Rewind(3)
	require.Equal(t, int64(3), c.Next())

	l := &Lease{epoch: 1}
	put(c, 3, l)
	require.Equal(t, 1, c.InFlight())
	require.False(t, c.RemoveIf(3, &Lease{epoch: 1}), "another lease on the offset stays")
	require.True(t, c.RemoveIf(3, l))
	require.Nil(t, c.Lease(3))
}

func TestPopStateKeys(t *testing.T) {
	ps := NewPopState("")
	c := ps.OpenCursor(0, func() int64 { return 0 })
	c.hold("k", 0)
	c.Defer("k", 2)
	c.Defer("k", 1)
	c.Defer("k", 2)
	require.True(t, c.KeyBusy("k"))
	wake := ps.WakeChan()
	ps.Release(c, "k", 5) // not the offset holding it
	require.True(t, c.KeyBusy("k"))
	ps.Release(c, "k", 0)
	require.False(t, c.KeyBusy("k"))
	select {
	case <-wake:
	default:
		t.Fatal("a release with a deferred message wakes the long polls")
	}
	for key, offs := range c.Deferred() {
		require.Equal(t, "k", key)
		require.Equal(t, []int64{2, 1}, offs, "in the order deferred, once each")
		require.Equal(t, int64(2), c.TakeDeferred(key, offs))
	}
	for _, offs := range c.Deferred() {
		require.Equal(t, int64(1), c.TakeDeferred("k", offs))
	}
	n := 0
	for range c.Deferred() {
		n++
	}
	require.Zero(t, n)
}

func TestPopStateExpire(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	ps := NewPopState("")
	c := ps.OpenCursor(0, func() int64 { return 0 })
	put(c, 0, &Lease{deadline: now.Add(-time.Second)})                 // run out: sent back
	put(c, 1, &Lease{deadline: now.Add(-time.Second), key: "k"})       // run out, ordered: retried in place
	put(c, 2, &Lease{deadline: now.Add(-time.Second), settling: true}) // being acked
	put(c, 3, &Lease{deadline: now.Add(time.Minute), key: "j"})        // acked meanwhile: taken out, key freed
	c.hold("j", 3)
	put(c, 4, &Lease{deadline: now.Add(2 * time.Second)})
	put(c, 5, &Lease{deadline: now.Add(time.Second)})
	back, retry, next := ps.Expire(c, now, func(off int64) bool { return off == 3 }, false)
	require.Len(t, back, 1)
	require.Equal(t, int64(0), back[0].Off)
	require.True(t, back[0].Lease.SendingBack())
	require.Len(t, retry, 1)
	require.Equal(t, int64(1), retry[0].Off)
	require.False(t, retry[0].Lease.SendingBack(), "the caller decides")
	require.Equal(t, now.Add(time.Second), next)
	require.Nil(t, c.Lease(3))
	require.False(t, c.KeyBusy("j"))
	require.Equal(t, 5, c.InFlight())

	back, retry, _ = ps.Expire(c, now, func(int64) bool { return false }, true)
	require.Empty(t, back, "sending back already")
	require.Len(t, retry, 1, "still up to the caller")
}

// TestPopStateApply: a record's item enters a cursor as a new lease (one
// delivery, its key held) or changes the lease in flight on its offset:
// held under a new epoch is a delivery more (offered again), under the
// same epoch an extension; a release of the epoch in flight takes it out
// of flight, frees its key and moves the cursor back to it.
func TestPopStateApply(t *testing.T) {
	ps := NewPopState("")
	c := ps.OpenCursor(0, func() int64 { return 0 })
	c.SetNext(5)
	at := time.UnixMilli(1_000_000)
	l := ps.Apply(c, HeldItem(2, 7, at.Add(time.Microsecond), 0), "a", "")
	require.Same(t, l, c.Lease(2))
	require.Equal(t, &Lease{epoch: 7, deadline: at.Add(time.Millisecond), client: "a", deliveries: 1}, l, "the record's deadline, rounded up")
	w := ps.Apply(c, WaitingItem(3, 8, time.UnixMilli(1_000_500), 2), "a", "k")
	require.True(t, c.KeyBusy("k"), "a new lease holds its key")
	require.Equal(t, &Lease{epoch: 8, deadline: time.UnixMilli(1_000_500), client: "a", deliveries: 1, key: "k", failures: 2, waiting: true, retryAt: time.UnixMilli(1_000_500)}, w)
	again := ps.Apply(c, HeldItem(3, 9, at.Add(time.Second), 2), "b", "ignored")
	require.Same(t, w, again, "offered again: the lease in flight")
	require.Equal(t, &Lease{epoch: 9, deadline: at.Add(time.Second), client: "b", deliveries: 2, key: "k", failures: 2}, again)
	ps.Apply(c, HeldItem(3, 9, at.Add(time.Minute), 2), "b", "")
	require.Equal(t, &Lease{epoch: 9, deadline: at.Add(time.Minute), client: "b", deliveries: 2, key: "k", failures: 2}, again, "extended: no delivery more")
	require.Nil(t, ps.Apply(c, Item{Offset: 3, Epoch: 8, State: Released}, "", ""))
	require.Same(t, again, c.Lease(3), "a release of an older epoch changes nothing")
	require.Equal(t, int64(5), c.Next(), "the cursor's position is its own")

	var rec Record
	ps.AppendLive(&rec, "g", "t", func(offset.Key) uint32 { return 3 }, 42)
	key := Key{Group: "g", Topic: "t", QueueID: 0}

	require.Len(t, rec.Entries, 2, "one entry per queue and client")
	byClient := map[string]Entry{}
	for _, e := range rec.Entries {
		byClient[e.Client] = e
	}
	require.Equal(t, Entry{Key: key, Generation: 3, At: 42, Client: "a", Items: []Item{{Offset: 2, Epoch: 7, Deadline: 1_000_001, State: Held}}}, byClient["a"])
	require.Equal(t, Entry{Key: key, Generation: 3, At: 42, Client: "b", Items: []Item{{Offset: 3, Epoch: 9, Deadline: 1_060_000, Failures: 2, State: Held}}}, byClient["b"])

	wake := ps.WakeChan()
	c.Defer("k", 4)
	require.Nil(t, ps.Apply(c, Item{Offset: 3, Epoch: 9, State: Released}, "", ""))
	require.Nil(t, c.Lease(3), "released: out of flight")
	require.False(t, c.KeyBusy("k"), "its key freed")
	require.Equal(t, int64(3), c.Next(), "visible again")
	select {
	case <-wake:
	default:
		t.Fatal("the long polls are woken for the key's deferred message")
	}

	ps.Notes().rec.Entries = rec.Entries
	require.NotNil(t, ps.TakeNotes())
	require.Nil(t, ps.TakeNotes())
	ps.Skip(offset.Entry{Kind: offset.KindAck})
	require.Len(t, ps.TakeSkips().Entries, 1)
	require.Empty(t, ps.TakeSkips().Entries)
	ps.Drop()
	require.Nil(t, ps.Cursor(0))
}

func TestLeaseItem(t *testing.T) {
	d := time.UnixMilli(1000).Add(time.Microsecond)
	l := &Lease{epoch: 3, deadline: d, failures: 70000}
	require.Equal(t, Item{Offset: 9, Epoch: 3, Deadline: 1001, Failures: 1<<16 - 1, State: Held}, l.Item(9))
	l.waiting, l.retryAt = true, time.UnixMilli(2000)
	require.Equal(t, Item{Offset: 9, Epoch: 3, Deadline: 2000, Failures: 1<<16 - 1, State: Waiting}, l.Item(9))
	c := NewPopState("").OpenCursor(0, func() int64 { return 0 })
	r := NewPopState("").Apply(c, l.Item(9), "c", "")
	require.Equal(t, &Lease{epoch: 3, deadline: time.UnixMilli(2000), client: "c", deliveries: 1, failures: 1<<16 - 1, waiting: true, retryAt: time.UnixMilli(2000)}, r, "a folded lease installed")
	require.Equal(t, Item{Offset: 9, Epoch: 3, Deadline: 1000, State: Held}, HeldItem(9, 3, time.UnixMilli(1000), -1))
}

// put puts l in flight on off, as a record's apply would (a test's
// shortcut past PopState.Apply).
func put(c *Cursor, off int64, l *Lease) { c.inflight[off] = l }
