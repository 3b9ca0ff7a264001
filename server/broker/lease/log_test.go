package lease_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// The lease log over a real store, with the broker's part played by the
// test: the progress generations, which folded leases are still owed,
// the epoch counter and the leases of the cursors. The broker's own tests
// (server/broker/lease_*_test.go, replica_internal_test.go) drive it
// through the facade.

var errMapped = errors.New("mapped store error")

// replicated is a store that says it is a replica of a shard.
type replicated struct{ *storage.Store }

func (replicated) Replicated() bool { return true }

type bundle struct {
	store  *storage.Store
	clock  *clockwork.FakeClock
	mu     sync.Mutex
	gens   map[offset.Key]uint32
	notOwd map[string]bool // groups whose leases are owed no more
	epoch  uint64
	live   lease.Record
	log    *lease.Log
}

func setup(t *testing.T) *bundle {
	t.Helper()
	bd := &bundle{clock: clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_123)), gens: map[offset.Key]uint32{}, notOwd: map[string]bool{}}
	opts := storagetest.SmallOptions(t.TempDir())
	opts.Clock = bd.clock
	bd.store = storagetest.MustOpen(t, opts)
	bd.log = bd.open(bd.store)
	return bd
}

// open is a Log over st, as the broker makes one.
func (bd *bundle) open(st lease.Store) *lease.Log {
	return lease.New(lease.Config{
		Store: st,
		Clock: bd.clock,
		StoreError: func(err error) error {
			if err == nil {
				return nil
			}
			return errors.Join(errMapped, err)
		},
		Generation: func(k offset.Key) uint32 {
			bd.mu.Lock()
			defer bd.mu.Unlock()
			return bd.gens[k]
		},
		Owed: func(k lease.At, _ lease.Folded) (lease.Place, bool) {
			bd.mu.Lock()
			defer bd.mu.Unlock()
			return lease.Place{Topic: k.Key.Topic, Queue: k.Key.QueueID, Orderly: k.Key.Group == "o"}, !bd.notOwd[k.Key.Group]
		},
		Epoch: func() uint64 { return bd.epoch },
		Live:  func() lease.Record { return bd.live },
	})
}

// records is rmq_sys_LEASE as stored, decoded.
func (bd *bundle) records(t *testing.T) []lease.Record {
	t.Helper()
	require.NoError(t, bd.store.AwaitDispatch(context.Background()))
	res, err := bd.store.ReadQueue(lease.Topic, 0, 0, 100, nil)
	require.NoError(t, err)
	var out []lease.Record
	for _, m := range res.Messages {
		rec, err := lease.DecodeRecord(m.Body)
		require.NoError(t, err)
		out = append(out, rec)
	}
	return out
}

// put appends rec to rmq_sys_LEASE as another broker would have.
func (bd *bundle) put(t *testing.T, rec lease.Record) {
	t.Helper()
	body, err := lease.EncodeRecord(rec)
	require.NoError(t, err)
	m := &message.Message{Topic: lease.Topic, Body: body, BornTimestamp: 1}
	require.NoError(t, bd.store.PutClass(storage.ClassSystem, []*message.Message{m}, make([]storage.PutResult, 1)))
	require.NoError(t, bd.store.AwaitDispatch(context.Background()))
}

// send stores n messages on topic's queue 0 (so leases on them are not
// lost with the log's tail).
func (bd *bundle) send(t *testing.T, topic string, n int) {
	t.Helper()
	ms := make([]*message.Message, n)
	for i := range ms {
		ms[i] = &message.Message{Topic: topic, Body: []byte("m")}
	}
	require.NoError(t, bd.store.PutClass(storage.ClassSend, ms, make([]storage.PutResult, n)))
	require.NoError(t, bd.store.AwaitDispatch(context.Background()))
}

func held(off int64, epoch uint64) lease.Item {
	return lease.Item{Offset: off, Epoch: epoch, Deadline: 1_700_000_030_123, State: lease.Held}
}

func entry(group string, client string, items ...lease.Item) lease.Entry {
	return lease.Entry{Key: lease.Key{Group: group, Topic: "t"}, At: 1_700_000_000_123, Client: client, Items: items}
}

// TestNotesAndStages: notes of one key and client share an entry (with
// the key's generation and the time noted); a staged record is one
// rmq_sys_LEASE message, born now; empty notes write nothing.
func TestNotesAndStages(t *testing.T) {
	bd := setup(t)
	k := offset.Key{Group: "g", Topic: "t"}
	bd.gens[k] = 3
	var n lease.Notes
	require.True(t, n.Empty())
	bd.log.Note(&n, k, "c1", held(1, 10))
	bd.log.Note(&n, k, "c1", held(2, 11))
	bd.clock.Advance(time.Second)
	bd.log.NoteReleased(&n, k, 3, 9)
	require.Equal(t, lease.Record{Entries: []lease.Entry{
		{Key: lease.Key{Group: "g", Topic: "t"}, Generation: 3, At: 1_700_000_000_123, Client: "c1", Items: []lease.Item{held(1, 10), held(2, 11)}},
		{Key: lease.Key{Group: "g", Topic: "t"}, Generation: 3, At: 1_700_000_001_123, Items: []lease.Item{{Offset: 3, Epoch: 9, State: lease.Released}}},
	}}, n.Record())

	var s lease.Stages
	want := n.Record()
	s.Stage(bd.log, &n)
	require.True(t, n.Empty(), "staging resets the notes")
	s.Stage(bd.log, &n)
	s.Stage(bd.log, nil)
	require.NoError(t, s.Wait())
	require.Equal(t, []lease.Record{want}, bd.records(t), "one record; empty notes none")
	res, err := bd.store.ReadQueue(lease.Topic, 0, 0, 1, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1_700_000_001_123), res.Messages[0].BornTimestamp)
}

// TestGrantsMessage: a pull's grants are one rmq_sys_LEASE record born
// on the clock; no grants, no record. (The pull appends it with its
// skips: package progress's Ledger.PersistNoWait and consume's tests.)
func TestGrantsMessage(t *testing.T) {
	bd := setup(t)
	k := offset.Key{Group: "g", Topic: "t"}
	var n lease.Notes
	m, err := bd.log.GrantsMessage(&n)
	require.NoError(t, err)
	require.Nil(t, m, "no grants, no record")
	m, err = bd.log.GrantsMessage(nil)
	require.NoError(t, err)
	require.Nil(t, m)

	bd.log.Note(&n, k, "c1", held(0, 1))
	m, err = bd.log.GrantsMessage(&n)
	require.NoError(t, err)
	require.Equal(t, lease.Topic, m.Topic)
	require.Equal(t, bd.clock.Now().UnixMilli(), m.BornTimestamp)
	rec, err := lease.DecodeRecord(m.Body)
	require.NoError(t, err)
	require.Equal(t, n.Record(), rec)

	require.NoError(t, bd.store.Close())
	var s lease.Stages
	s.Stage(bd.log, &n)
	require.ErrorIs(t, s.Wait(), errMapped, "the store's error, mapped")
}

// TestOpenFollowOwedLead: an open folds the snapshot and the records
// after it (a damaged snapshot: every record), Follow folds what came
// since, Owed leaves out what the broker owes no more and what was lost
// with the log's tail, in offset order; Lead ends the following.
func TestOpenFollowOwedLead(t *testing.T) {
	bd := setup(t)
	ctx := context.Background()
	bd.send(t, "t", 3)
	bd.put(t, lease.Record{Entries: []lease.Entry{entry("g", "c1", held(2, 5), held(1, 4))}})
	bd.put(t, lease.Record{Entries: []lease.Entry{entry("x", "c1", held(0, 6)), entry("g", "c1", held(7, 8))}})
	require.NoError(t, bd.log.Open(ctx))
	require.Equal(t, lease.Recovery{Records: 2}, bd.log.Recovered())
	require.Equal(t, int64(0), bd.log.KeepFrom())
	require.Equal(t, uint64(8), bd.log.Top())

	bd.put(t, lease.Record{Entries: []lease.Entry{entry("g", "", lease.Item{Offset: 2, Epoch: 5, State: lease.Released}), entry("o", "c2", held(0, 9))}})
	bd.put(t, lease.Record{Entries: []lease.Entry{{Key: lease.Key{Group: "g", Topic: "t"}}}})
	require.NoError(t, bd.log.Follow(ctx))
	require.Equal(t, uint64(9), bd.log.Top())
	bd.notOwd["x"] = true
	var ats []lease.At
	for _, o := range bd.log.Owed() {
		ats = append(ats, o.At)
		require.Equal(t, lease.Place{Topic: "t", Orderly: o.At.Key.Group == "o"}, o.Place)
	}
	require.Equal(t, []lease.At{{Key: lease.Key{Group: "g", Topic: "t"}, Off: 1}, {Key: lease.Key{Group: "o", Topic: "t"}, Off: 0}}, ats,
		"g@2 released, x owed no more, g@7 beyond the queue's end")

	bd.log.Lead(false, 2, 1)
	require.Equal(t, lease.Recovery{Records: 2, Leases: 2, Expired: 1}, bd.log.Recovered())
	require.Nil(t, bd.log.Owed(), "the fold is dropped on a store that is not replicated")
	require.Zero(t, bd.log.Top())
	bd.put(t, lease.Record{Entries: []lease.Entry{entry("g", "c1", held(1, 99))}})
	require.NoError(t, bd.log.Follow(ctx), "a leader folds nothing")
	bd.log.WithFold(func(f *lease.Fold) { require.Nil(t, f) })
}

// TestSnapshots: a follower writes its pruned fold at the position it
// folded, once per new record; a leader of a store that is not
// replicated writes the broker's live leases and epoch counter at the
// queue's end; a replicated leader folds the records written since and
// writes its pruned fold; an open reads the snapshot back and replays
// only the records after it; a damaged one is replayed around.
func TestSnapshots(t *testing.T) {
	bd := setup(t)
	ctx := context.Background()
	bd.send(t, "t", 3)
	bd.put(t, lease.Record{Entries: []lease.Entry{entry("g", "c1", held(0, 5)), entry("x", "c1", held(1, 6))}})
	require.NoError(t, bd.log.Open(ctx))
	require.NoError(t, bd.log.Follow(ctx))
	bd.notOwd["x"] = true
	require.NoError(t, bd.log.Snapshot())
	require.Equal(t, int64(1), bd.log.KeepFrom())
	raw, err := bd.store.ReadMeta(lease.SnapshotFile)
	require.NoError(t, err)
	from, epoch, rec, err := lease.DecodeSnapshot(raw)
	require.NoError(t, err)
	require.Equal(t, int64(1), from)
	require.Equal(t, uint64(6), epoch, "the highest epoch folded, the pruned lease's included")
	require.Equal(t, []lease.Entry{{Key: lease.Key{Group: "g", Topic: "t"}, At: 1_700_000_000_123, Client: "c1", Items: []lease.Item{held(0, 5)}}}, rec.Entries)
	require.NoError(t, bd.store.WriteMeta(lease.SnapshotFile, []byte("x")))
	require.NoError(t, bd.log.Snapshot(), "nothing new: not written again")
	raw, err = bd.store.ReadMeta(lease.SnapshotFile)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), raw)

	// A leader of a store that is not replicated: the cursors' leases.
	bd.log.Lead(false, 1, 0)
	bd.live = lease.Record{Entries: []lease.Entry{entry("g", "c1", held(2, 40))}}
	bd.epoch = 41
	require.NoError(t, bd.log.Snapshot(), "the queue's end is the last snapshot's: not written")
	raw, err = bd.store.ReadMeta(lease.SnapshotFile)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), raw)
	bd.put(t, bd.live) // the grant's record
	require.NoError(t, bd.log.Snapshot())
	raw, err = bd.store.ReadMeta(lease.SnapshotFile)
	require.NoError(t, err)
	from, epoch, rec, err = lease.DecodeSnapshot(raw)
	require.NoError(t, err)
	require.Equal(t, int64(2), from)
	require.Equal(t, uint64(41), epoch)
	require.Equal(t, bd.live, rec)

	// Opened again: the snapshot and no record after it.
	again := bd.open(bd.store)
	require.NoError(t, again.Open(ctx))
	require.Equal(t, lease.Recovery{FromSnap: 1}, again.Recovered())
	require.Equal(t, uint64(41), again.Top(), "the snapshot's epoch counter")
	require.Equal(t, int64(2), again.KeepFrom())

	// A replicated leader: the records committed since, folded and pruned.
	rl := bd.open(replicated{bd.store})
	require.NoError(t, rl.Open(ctx))
	bd.put(t, lease.Record{Entries: []lease.Entry{entry("x", "c3", held(2, 50)), entry("g", "c3", held(1, 51))}})
	rl.Lead(true, 1, 0)
	require.NoError(t, rl.Snapshot())
	raw, err = bd.store.ReadMeta(lease.SnapshotFile)
	require.NoError(t, err)
	from, epoch, rec, err = lease.DecodeSnapshot(raw)
	require.NoError(t, err)
	require.Equal(t, int64(3), from)
	require.Equal(t, uint64(51), epoch)
	require.ElementsMatch(t, []lease.Entry{
		{Key: lease.Key{Group: "g", Topic: "t"}, At: 1_700_000_000_123, Client: "c1", Items: []lease.Item{held(2, 40)}},
		{Key: lease.Key{Group: "g", Topic: "t"}, At: 1_700_000_000_123, Client: "c3", Items: []lease.Item{held(1, 51)}},
	}, rec.Entries)

	// Damaged: every retained record replayed.
	require.NoError(t, bd.store.WriteMeta(lease.SnapshotFile, []byte("MQLS damaged")))
	damaged := bd.open(bd.store)
	require.NoError(t, damaged.Open(ctx))
	require.Equal(t, lease.Recovery{Records: 3}, damaged.Recovered())
	require.Equal(t, int64(0), damaged.KeepFrom())
}

// TestConcurrentUse: notes, stages, follows, snapshots and the takeover
// from several goroutines (go test -race).
func TestConcurrentUse(t *testing.T) {
	bd := setup(t)
	ctx := context.Background()
	require.NoError(t, bd.log.Open(ctx))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := offset.Key{Group: "g", Topic: "t", QueueID: int32(g)}
			for i := range 20 {
				var n lease.Notes
				bd.log.Note(&n, k, "c", held(int64(i), uint64(g*100+i)))
				var s lease.Stages
				s.Stage(bd.log, &n)
				if err := s.Wait(); err != nil {
					t.Error(err)
				}
				_ = bd.log.Follow(ctx)
				_ = bd.log.Snapshot()
				_ = bd.log.Owed()
			}
		}()
	}
	bd.log.Lead(false, 0, 0)
	wg.Wait()
	require.Len(t, bd.records(t), 80)
}
