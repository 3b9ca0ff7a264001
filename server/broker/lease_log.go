package broker

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage"
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
// The record and snapshot codecs and the fold are package lease (imported
// as leaselog: the pop state's lease type has the package's name); what
// needs the broker is here: the notes taken under the pop states' locks
// and their writes, the snapshot workers, and which folded leases are
// still owed and their install into the cursors.

// leaseLogState is the broker's side of the lease records.
type leaseLogState struct {
	// snapFrom is the lease-record queue offset the last leases snapshot
	// covers (-1: none written since open); retention keeps the lease
	// records from keepFrom on.
	snapFrom atomic.Int64
	keepFrom atomic.Int64
	// recovered is what the last open restored (tests, the log).
	recovered leaseRecovery
	// committed is a replicated leader's fold of the committed lease
	// records, which its snapshots are written from (its pop states hold
	// grants whose records may never be committed).
	committed committedLeases
}

// committedLeases is the fold a leader of a replicated store keeps of
// the lease records once committed (dispatched): the follower's fold,
// kept on at Promote, caught up and pruned at every snapshot.
type committedLeases struct {
	mu   sync.Mutex
	fold *leaselog.Fold // nil: not leading a replicated store
	next int64          // the next rmq_sys_LEASE queue offset to fold
}

// leaseRecovery describes the restore at open.
type leaseRecovery struct {
	Records  int // lease records replayed after the snapshot
	Leases   int // leases put back into their cursors
	Expired  int // of them, already over (taken by the retry path)
	FromSnap int // leases the snapshot held
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
// by one ack-side request) into one record.
type leaseNotes struct{ rec leaselog.Record }

func (n *leaseNotes) empty() bool { return n == nil || len(n.rec.Entries) == 0 }

func (n *leaseNotes) add(b *Broker, key offset.Key, client string, it leaselog.Item) {
	if k := len(n.rec.Entries); k > 0 {
		if e := &n.rec.Entries[k-1]; e.Key == leaselog.Key(key) && e.Client == client {
			e.Items = append(e.Items, it)
			return
		}
	}
	_, gen, _ := b.progress.Get(key)
	n.rec.Entries = append(n.rec.Entries, leaselog.Entry{Key: leaselog.Key(key), Generation: gen, At: b.clock.Now().UnixMilli(), Client: client, Items: []leaselog.Item{it}})
}

// itemOf is the record of l, the lease on off: held until its deadline,
// or waiting until its retry time.
func itemOf(off int64, l *lease) leaselog.Item {
	it := leaselog.Item{Offset: off, Epoch: l.epoch, Deadline: leaselog.MilliCeil(l.deadline), Failures: uint16(min(l.failures, 1<<16-1)), State: leaselog.Held}
	if l.waiting {
		it.Deadline, it.State = leaselog.MilliCeil(l.retryAt), leaselog.Waiting
	}
	return it
}

// lease notes l's current state.
func (n *leaseNotes) lease(b *Broker, key offset.Key, off int64, l *lease) {
	n.add(b, key, l.client, itemOf(off, l))
}

// released notes that the lease of epoch on off is given up (visible again).
func (n *leaseNotes) released(b *Broker, key offset.Key, off int64, epoch uint64) {
	n.add(b, key, "", leaselog.Item{Offset: off, Epoch: epoch, State: leaselog.Released})
}

// noteGrants notes the leases of msgs, just granted on key's queue; the
// caller holds ps.mu.
func (b *Broker) noteGrants(ps *popState, key offset.Key, msgs []ReceivedMessage) {
	if len(msgs) == 0 {
		return
	}
	c := ps.queues[key.QueueID]
	if c == nil {
		return
	}
	for _, m := range msgs {
		if l := c.inflight[m.QueueOffset]; l != nil {
			ps.notes.lease(b, key, m.QueueOffset, l)
		}
	}
}

// takeNotes hands over the lease changes noted under ps.mu (held by the
// caller), to be appended before the lock is released.
func (ps *popState) takeNotes() *leaseNotes {
	if ps.notes.empty() {
		return nil
	}
	n := ps.notes
	ps.notes = leaseNotes{}
	return &n
}

// leaseStages collects the lease records a request appended under pop
// state locks (stage), to wait for their flush once the locks are released
// (wait): the log then holds lease changes in the order they were made,
// the order a follower folds them in, while no lock is held across a flush.
type leaseStages struct {
	waits []func() error
	err   error
}

// stage appends n's changes (and resets n); the caller holds the lock of
// the pop state they were made under.
func (s *leaseStages) stage(b *Broker, n *leaseNotes) {
	if n.empty() {
		return
	}
	w, err := b.appendLeasesStaged(n)
	*n = leaseNotes{}
	if err != nil {
		s.err = errors.Join(s.err, err)
		return
	}
	s.waits = append(s.waits, w)
}

// wait returns once every staged record is flushed (sync mode), or the
// first error.
func (s *leaseStages) wait() error {
	if s.err != nil {
		return s.err
	}
	for _, w := range s.waits {
		if err := w(); err != nil {
			return err
		}
	}
	return nil
}

func (b *Broker) appendLeasesStaged(n *leaseNotes) (func() error, error) {
	m, err := b.leaseMessage(n)
	if err != nil {
		return nil, err
	}
	w, err := b.store.PutClassStaged(storage.ClassSystem, []*message.Message{m}, make([]storage.PutResult, 1))
	if err != nil {
		return nil, mapStoreErr(err)
	}
	return func() error { return mapStoreErr(w()) }, nil
}

// leaseMessage is n's changes as one rmq_sys_LEASE message.
func (b *Broker) leaseMessage(n *leaseNotes) (*message.Message, error) {
	body, err := leaselog.EncodeRecord(n.rec)
	if err != nil {
		return nil, err
	}
	return &message.Message{Topic: leaseTopic, Body: body, BornTimestamp: b.clock.Now().UnixMilli()}, nil
}

// writeGrants appends a pull's grants as one rmq_sys_LEASE record, and in
// the same batch the offsets its filters passed over (markSkipped) as one
// rmq_sys_OFFSET record, without waiting for the flush
// (Store.PutClassNoWait): once it returns the records outlive a crash of
// the process, and a crash of the machine once the next flush lands (the
// next ack's or send's, at the latest commitlog.LazyFlushDelay later;
// always before any later reply that waited for a flush). A grant lost
// that way only delivers its message again at once, as before leases were
// records, and a skip is derived again by the next pull past it; waiting
// would cost every pull a flush (ARCHITECTURE.md, pull). The skips are
// applied before they are appended, so an offsets snapshot taken between
// the two only covers less than it holds (replay is idempotent).
func (b *Broker) writeGrants(n *leaseNotes, skips offset.Record) error {
	var msgs []*message.Message
	if !n.empty() {
		m, err := b.leaseMessage(n)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	if len(skips.Entries) > 0 {
		m, err := progressMessage(skips, b.clock.Now().UnixMilli())
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	return mapStoreErr(b.store.PutClassNoWait(storage.ClassSystem, msgs, make([]storage.PutResult, len(msgs))))
}

// grantsFailedLocked undoes the leases a pull granted when their record could
// not be written (the pull then fails; the caller holds ps.mu): no client holds their receipts, so
// they are made visible again as a lease changed to 0 would be.
func (b *Broker) grantsFailedLocked(ps *popState, n *leaseNotes) {
	now := b.clock.Now()
	for _, e := range n.rec.Entries {
		c := ps.queues[e.Key.QueueID]
		if c == nil {
			continue
		}
		for _, it := range e.Items {
			l := c.inflight[it.Offset]
			if it.State != leaselog.Held || l == nil || l.epoch != it.Epoch || l.settling || l.sendingBack {
				continue
			}
			if l.key != "" || l.failures > 0 {
				l.waiting, l.retryAt = true, now // retried in place: keeps its key and failures
				continue
			}
			delete(c.inflight, it.Offset)
			if it.Offset < c.next {
				c.next = it.Offset
			}
		}
	}
}

// snapshotLeases writes config/leases.snapshot when lease records were
// written since the last one. Every change is made in memory before its
// record is appended, so the pop states read after the queue's end hold
// every record below it; replaying records the snapshot already reflects
// again changes nothing (newest epoch wins).
func (b *Broker) snapshotLeases() error {
	if b.follow.on.Load() {
		return b.snapshotFoldedLeases()
	}
	if b.store.Replicated() {
		return b.snapshotCommittedLeases()
	}
	from := b.store.MaxOffset(leaseTopic, 0)
	if from == b.leases.snapFrom.Load() {
		return nil
	}
	epoch := b.epoch.Load()
	b.popsMu.Lock()
	states := make(map[popKey]*popState, len(b.pops))
	for k, ps := range b.pops {
		states[k] = ps
	}
	b.popsMu.Unlock()
	var rec leaselog.Record
	at := b.clock.Now().UnixMilli()
	for k, ps := range states {
		ps.mu.Lock()
		for qid, c := range ps.queues {
			if len(c.inflight) == 0 {
				continue
			}
			key := offset.Key{Group: k.group, Topic: k.topic, QueueID: qid}
			_, gen, _ := b.progress.Get(key)
			byClient := map[string]int{}
			for off, l := range c.inflight {
				i, ok := byClient[l.client]
				if !ok {
					i = len(rec.Entries)
					byClient[l.client] = i
					rec.Entries = append(rec.Entries, leaselog.Entry{Key: leaselog.Key(key), Generation: gen, At: at, Client: l.client})
				}
				rec.Entries[i].Items = append(rec.Entries[i].Items, itemOf(off, l))
			}
		}
		ps.mu.Unlock()
	}
	return b.writeLeaseSnapshot(from, epoch, rec)
}

// writeLeaseSnapshot writes config/leases.snapshot: rec, covering the
// lease records below queue offset from, epochs up to epoch.
func (b *Broker) writeLeaseSnapshot(from int64, epoch uint64, rec leaselog.Record) error {
	snap, err := leaselog.EncodeSnapshot(from, epoch, rec)
	if err != nil {
		return err
	}
	if err := b.store.WriteMeta(leasesSnapshot, snap); err != nil {
		return err
	}
	b.leases.snapFrom.Store(from)
	b.leases.keepFrom.Store(from)
	return nil
}

// restoreLeases, at open, folds the leases snapshot and the lease
// records after it into the follower's fold (follow.go); Promote puts
// the leases that survived into their cursors (installLeases) and raises
// the epoch counter above every epoch on record.
func (b *Broker) restoreLeases(ctx context.Context) error {
	start := b.clock.Now()
	f := &b.follow
	var from int64
	if raw, err := b.store.ReadMeta(leasesSnapshot); err == nil {
		off, epoch, rec, derr := leaselog.DecodeSnapshot(raw)
		if derr != nil {
			b.log.Warn().Err(derr).Msg("lease snapshot unreadable; replaying every retained lease record")
		} else {
			from = off
			f.fold.Apply(rec)
			f.fold.Raise(epoch)
			b.leases.recovered.FromSnap = f.fold.Len()
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// After an async-mode crash the queue may end below the snapshot's
	// offset: the records written from its new end on must be replayed
	// next time, so the next snapshot is written whatever it finds.
	from = min(from, b.store.MaxOffset(leaseTopic, 0))
	b.leases.snapFrom.Store(-1)
	replayed := 0
	next, err := b.replayQueue(ctx, leaseTopic, from, func(m *message.Message) {
		if b.foldLeaseRecord(m) {
			replayed++
		}
	})
	f.leases = next
	if err != nil {
		return err
	}
	b.leases.keepFrom.Store(from)
	b.leases.recovered.Records = replayed
	b.log.Info().Int("records", replayed).Int("folded", f.fold.Len()).Dur("took", b.clock.Since(start)).
		Msg("lease records folded")
	return nil
}

// installLeases puts every folded lease still owed into its cursor, in
// offset order (an orderly key is held by its first restored lease).
func (b *Broker) installLeases(fold *leaselog.Fold, now time.Time) (restored, expired int) {
	for _, o := range b.owedLeases(fold) {
		k, f, v := o.at, o.lease, o.view
		key := offset.Key(k.Key)
		deadline := time.UnixMilli(f.Item.Deadline)
		l := &lease{epoch: f.Item.Epoch, deadline: deadline, client: f.Client, deliveries: 1, failures: int32(f.Item.Failures)}
		if f.Item.State == leaselog.Waiting {
			l.waiting, l.retryAt = true, deadline
		}
		ps := b.popState(key.Group, key.Topic)
		c := b.cursor(ps, key)
		if v.orderly {
			res, err := b.store.ReadQueue(v.storeTopic, v.storeQueue, k.Off, 1, nil)
			if err != nil || len(res.Messages) == 0 || res.Messages[0].QueueOffset != k.Off {
				continue
			}
			if l.key = orderKey(v, res.Messages[0]); l.key != "" {
				if c.keyBusy(l.key) {
					continue // read again and deferred behind the key's earlier lease
				}
				c.hold(l.key, k.Off)
			}
		}
		c.inflight[k.Off] = l
		restored++
		if !l.waiting && !now.Before(deadline) {
			expired++
		}
	}
	return restored, expired
}

// owedLease is a folded lease still owed to its holder, with the view its
// offset is read through.
type owedLease struct {
	at    leaselog.At
	lease leaselog.Folded
	view  queueView
}

// owedLeases is every folded lease still owed — neither released nor done
// for its group (acknowledged, failed, skipped, below a reset, of a deleted
// group or topic, deleted by retention or lost with the log's tail) — in
// offset order per key.
func (b *Broker) owedLeases(fold *leaselog.Fold) []owedLease {
	var owed []owedLease
	for _, k := range fold.Unreleased() {
		f, _ := fold.Get(k)
		v, ok := b.owedView(k, f)
		if !ok {
			continue
		}
		if k.Off >= b.store.MaxOffset(v.storeTopic, v.storeQueue) {
			continue // lost with the log's tail
		}
		owed = append(owed, owedLease{at: k, lease: f, view: v})
	}
	return owed
}

// owed reports whether a folded lease may still be owed (owedView).
func (b *Broker) owed(k leaselog.At, f leaselog.Folded) bool {
	_, ok := b.owedView(k, f)
	return ok
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
				held.mu.Unlock()
			}
			held, heldGroup, heldTopic = b.existingPopState(it.view.key.Group, it.view.key.Topic), it.view.key.Group, it.view.key.Topic
			if held == nil {
				continue
			}
			held.mu.Lock()
		}
		if c := held.queues[it.view.key.QueueID]; c != nil && c.inflight[it.offset] == it.lease {
			delete(c.inflight, it.offset)
		}
	}
	if held != nil {
		held.mu.Unlock()
	}
}

// snapshotFoldedLeases is a follower's snapshotLeases: the fold, at the
// position Follow applied.
func (b *Broker) snapshotFoldedLeases() error {
	f := &b.follow
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on.Load() {
		return nil // promoted meanwhile: the next pass writes the cursors'
	}
	from := f.leases
	if from == b.leases.snapFrom.Load() {
		return nil
	}
	f.fold.Prune(b.owed)
	return b.writeLeaseSnapshot(from, f.fold.Top(), f.fold.Record())
}

// snapshotCommittedLeases is snapshotLeases on a leader of a replicated
// store: it folds the lease records committed since the last one into
// the committed fold and writes the fold, never its pop states (a grant
// is made in memory before its record is committed, and a deposed leader's
// tail is cut).
func (b *Broker) snapshotCommittedLeases() error {
	c := &b.leases.committed
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fold == nil {
		return nil // not promoted yet, or closing
	}
	// Not the closing context: Close snapshots after cancelling it. The
	// records are local and a snapshot interval's worth.
	next, err := b.replayQueue(context.Background(), leaseTopic, c.next, func(m *message.Message) {
		if rec, err := leaselog.DecodeRecord(m.Body); err == nil {
			c.fold.Apply(rec)
		}
	})
	c.next = next
	if err != nil {
		return err
	}
	if next == b.leases.snapFrom.Load() {
		return nil
	}
	c.fold.Prune(b.owed)
	return b.writeLeaseSnapshot(next, c.fold.Top(), c.fold.Record())
}
