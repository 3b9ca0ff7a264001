package broker

import (
	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage/offset"
)

// Durable leases (RocketMQ 5's POP checkpoints). A lease lives in the pop
// state's memory (package lease's PopState), and every change of one is also a record of
// the system topic rmq_sys_LEASE: one record per pull naming every lease
// it granted, one per lease change (changeInvisibleTime), one per batch of
// ordered messages failed in place (package consume). The change is made under
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
// leases (a lease as a record's item, a record's item applied to a
// cursor, the cursors' leases for a leader's snapshot). What needs the map of pop
// states, the registry, the progress table, the views or the store is
// package consume's (server/broker/consume/doc.go): the notes of a pull's
// grants, the walk over every pop state for a leader's snapshot
// (Config.Live), where a folded lease is read and whether it is still
// owed (Config.Owed), the install of the owed leases into the cursors at
// Promote, the end of a sent-back lease, and the notes and stages of the
// receipt loop. What stays here: the log's Config, the snapshot's file
// under the follower's lock.

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
		Owed: func(k leaselog.At, f leaselog.Folded) (leaselog.Place, bool) {
			return b.consume.OwedPlace(k, f)
		},
		Epoch: b.epoch.Load,
		Live:  func() leaselog.Record { return b.consume.Live() },
	})
}

// leaseTopic carries lease records; leasesSnapshot is the snapshot file of
// the live leases (config/).
const (
	leaseTopic     = leaselog.Topic
	leasesSnapshot = leaselog.SnapshotFile
)

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
