package broker

import (
	"time"

	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
)

// Durable leases (RocketMQ 5's POP checkpoints). A lease lives in the pop
// state's memory (pop.go), and every change of one is also a record of
// the system topic rmq_sys_LEASE: one record per pull naming every lease
// it granted, one per lease change (changeInvisibleTime), one per batch of
// ordered messages failed in place (orderly.go). The change is made under
// the pop state's lock and the record appended after it, before the
// answer: in sync flush mode a pull answers only once its leases are on
// disk (the append shares the group commit with the sends and acks of the
// moment), in async mode once they are in the mapping. Acks, nacks and
// expiries need no lease record: they end the lease with a progress record
// (rmq_sys_OFFSET) that marks its offset done.
//
// config/leases.snapshot holds every live lease and the rmq_sys_LEASE
// queue offset it covers, written with the offsets snapshot (so a replay
// reads a SnapshotInterval's worth of records, and retention keeps the
// records from that offset on: retention.go's Keep floor). At open the
// snapshot and the records after it are folded (the newest epoch of each
// offset wins; of one epoch, the later record), and every lease that is
// neither released nor done for its group (acknowledged, failed, below a
// reset, of a deleted group or topic) goes back into its cursor with its
// epoch and deadline: its receipt acks ok, the message is not offered to
// anyone else before the deadline, and a lease that ran out meanwhile is
// an expired lease like any other (the retry path). The epoch counter
// starts above every epoch seen, so a new lease never reuses an old
// receipt's epoch.
//
// The lease log and the pop states are package lease (imported as
// leaselog: the broker's alias of its lease type is named lease;
// server/broker/lease/doc.go): the records' and the snapshot's codecs,
// the fold, the notes and their writes, the snapshot workers and file,
// the follower's and the replicated leader's fold under its lock, which
// folded leases are still owed, and the pop states with their cursors and
// leases (a lease as a record's item, a pull's grants undone, the
// cursors' leases for a leader's snapshot). What needs the broker's map
// of pop states, its registry, progress table, views or store stays here:
// the notes of a pull's grants (noteGrants), the walk over every pop
// state for a leader's snapshot (liveLeases), where a folded lease is read
// and whether it is still owed (owedView), the install of the owed leases
// into the cursors at Promote (installLeases: an orderly lease reads its
// message's sharding key) and the end of a sent-back lease (sentBack).

// newLeaseLog is the lease log over b's store (Open makes it before the
// recovery, which folds the records: leaselog.Log.Open).
func (b *Broker) newLeaseLog() *leaselog.Log {
	return leaselog.New(leaselog.Config{
		Store:      b.store,
		Clock:      b.clock,
		Log:        b.log,
		StoreError: mapStoreErr,
		Generation: func(key offset.Key) uint32 {
			_, gen, _ := b.progress.Get(key)
			return gen
		},
		OffsetMessage: progressMessage,
		Owed:          b.owedPlace,
		Epoch:         b.epoch.Load,
		Live:          b.liveLeases,
	})
}

// leaseTopic carries lease records; leasesSnapshot is the snapshot file of
// the live leases (config/).
const (
	leaseTopic     = leaselog.Topic
	leasesSnapshot = leaselog.SnapshotFile
)

// The lease records name the retry view by the broker's queue id.
var _ = [1]struct{}{}[retryQueueID-leaselog.RetryQueueID]

// leaseNotes gathers the lease changes made under one pop state's lock (or
// by one ack-side request) into one record (package lease's Notes).
type leaseNotes = leaselog.Notes

// noteLease notes l's current state in n.
func (b *Broker) noteLease(n *leaseNotes, key offset.Key, off int64, l *lease) {
	b.leases.Note(n, key, l.Client, l.Item(off))
}

// noteReleased notes in n that the lease of epoch on off is given up
// (visible again).
func (b *Broker) noteReleased(n *leaseNotes, key offset.Key, off int64, epoch uint64) {
	b.leases.NoteReleased(n, key, off, epoch)
}

// noteGrants notes the leases of msgs, just granted on key's queue; the
// caller holds ps's lock.
func (b *Broker) noteGrants(ps *popState, key offset.Key, msgs []ReceivedMessage) {
	if len(msgs) == 0 {
		return
	}
	c := ps.Cursor(key.QueueID)
	if c == nil {
		return
	}
	for _, m := range msgs {
		if l := c.Lease(m.QueueOffset); l != nil {
			b.noteLease(ps.Notes(), key, m.QueueOffset, l)
		}
	}
}

// leaseStages collects the lease records a request appended under pop
// state locks, to wait for their flush once the locks are released
// (package lease's Stages).
type leaseStages struct{ leaselog.Stages }

// stage appends n's changes (and resets n); the caller holds the lock of
// the pop state they were made under.
func (s *leaseStages) stage(b *Broker, n *leaseNotes) { s.Stage(b.leases, n) }

// wait returns once every staged record is flushed (sync mode), or the
// first error.
func (s *leaseStages) wait() error { return s.Wait() }

// grantsFailedLocked undoes the leases a pull granted when their record could
// not be written (the pull then fails; the caller holds ps's lock): no client holds their receipts, so
// they are made visible again as a lease changed to 0 would be (package
// lease's PopState.GrantsFailed).
func (b *Broker) grantsFailedLocked(ps *popState, n *leaseNotes) {
	ps.GrantsFailed(n, b.clock.Now())
}

// snapshotLeases writes config/leases.snapshot (package lease's
// Log.Snapshot). A follower's is written from its fold at the position
// Follow folded, under the follower's lock, as when the fold was the
// follower's.
func (b *Broker) snapshotLeases() error {
	if b.follow.on.Load() {
		b.follow.mu.Lock()
		defer b.follow.mu.Unlock()
	}
	return b.leases.Snapshot()
}

// liveLeases is every lease in the cursors as one record: a leader's
// leases snapshot when its store is not replicated (leaselog.Config.Live).
func (b *Broker) liveLeases() leaselog.Record {
	states := b.popStates()
	var rec leaselog.Record
	at := b.clock.Now().UnixMilli()
	gen := func(key offset.Key) uint32 {
		_, gen, _ := b.progress.Get(key)
		return gen
	}
	for k, ps := range states {
		ps.Lock()
		ps.AppendLive(&rec, k.group, k.topic, gen, at)
		ps.Unlock()
	}
	return rec
}

// installLeases puts every folded lease still owed (package lease's
// Log.Owed) into its cursor, in offset order (an orderly key is held by
// its first restored lease).
func (b *Broker) installLeases(owed []leaselog.Owed, now time.Time) (restored, expired int) {
	for _, o := range owed {
		k, p := o.At, o.Place
		key := offset.Key(k.Key)
		l := leaselog.Restored(o.Lease)
		ps := b.popState(key.Group, key.Topic)
		c := b.cursor(ps, key)
		if p.Orderly {
			res, err := b.store.ReadQueue(p.Topic, p.Queue, k.Off, 1, nil)
			if err != nil || len(res.Messages) == 0 || res.Messages[0].QueueOffset != k.Off {
				continue
			}
			if l.Key = res.Messages[0].Property(message.PropertyShardingKey); l.Key != "" { // orderKey of an orderly view
				if c.KeyBusy(l.Key) {
					continue // read again and deferred behind the key's earlier lease
				}
				c.Hold(l.Key, k.Off)
			}
		}
		c.Put(k.Off, l)
		restored++
		if !l.Waiting && !now.Before(l.Deadline) {
			expired++
		}
	}
	return restored, expired
}

// owedPlace is where a folded lease's offset is read, and false when the
// lease is owed no more (owedView; leaselog.Config.Owed).
func (b *Broker) owedPlace(k leaselog.At, f leaselog.Folded) (leaselog.Place, bool) {
	v, ok := b.owedView(k, f)
	return leaselog.Place{Topic: v.storeTopic, Queue: v.storeQueue, Orderly: v.orderly}, ok
}

// owedView is the view a folded lease's offset is read through, and false
// when the lease is owed no more: its group or topic is gone (or it is a
// deleted namesake's), it is done for its group (acked, failed, skipped),
// before a reset, or retention deleted its message.
func (b *Broker) owedView(k leaselog.At, f leaselog.Folded) (queueView, bool) {
	key := offset.Key(k.Key)
	group, client := splitInstance(key.Group) // a broadcasting group's instance (broadcast.go)
	g, ok := b.registry.Group(group)
	if !ok || f.At < g.CreatedAt.UnixMilli() {
		return queueView{}, false // the group is gone (or this is a deleted namesake's lease)
	}
	if t, ok := b.registry.Topic(key.Topic); !ok || f.At < t.CreatedAt.UnixMilli() {
		return queueView{}, false
	}
	if _, gen, _ := b.progress.Get(key); gen != f.Gen || b.progress.IsAcked(key, k.Off) {
		return queueView{}, false // done (acked, failed, skipped), or before a reset
	}
	v := viewOf(g, key.Topic, key.QueueID, nil, b.retryFloor(key.Topic)).forInstance(client)
	if k.Off < b.store.MinOffset(v.storeTopic, v.storeQueue) {
		return queueView{}, false // deleted by retention
	}
	return v, true
}

// sentBack takes the leases of failed deliveries out of flight once their
// send-back is written (or failed: offerAgain then offers them again).
// Until then they stay in flight, marked sendingBack, so that a pull does
// not lease the same copy again (a restored lease lies at or above its
// cursor, which a pull re-reads).
func (b *Broker) sentBack(items []sendBack) {
	var held *popState
	heldGroup, heldTopic := "", ""
	for _, it := range items {
		if it.lease == nil {
			continue
		}
		// The item's own progress group: group's, or an instance's.
		if held == nil || heldTopic != it.view.key.Topic || heldGroup != it.view.key.Group {
			if held != nil {
				held.Unlock()
			}
			held, heldGroup, heldTopic = b.existingPopState(it.view.key.Group, it.view.key.Topic), it.view.key.Group, it.view.key.Topic
			if held == nil {
				continue
			}
			held.Lock()
		}
		if c := held.Cursor(it.view.key.QueueID); c != nil {
			c.RemoveIf(it.offset, it.lease)
		}
	}
	if held != nil {
		held.Unlock()
	}
}
