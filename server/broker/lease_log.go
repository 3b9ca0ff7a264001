package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

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
	live map[leaseAt]foldedLease // nil: not leading a replicated store
	next int64                   // the next rmq_sys_LEASE queue offset to fold
	top  uint64                  // the highest epoch folded
}

// leaseRecovery describes the restore at open.
type leaseRecovery struct {
	Records  int // lease records replayed after the snapshot
	Leases   int // leases put back into their cursors
	Expired  int // of them, already over (taken by the retry path)
	FromSnap int // leases the snapshot held
}

// leaseTopic carries lease records.
const leaseTopic = systemPrefix + "LEASE"

// leasesSnapshot is the snapshot file of the live leases (config/).
const leasesSnapshot = "leases.snapshot"

// leaseState is what a lease item says of its offset. Part of the on-disk
// format.
type leaseState uint8

const (
	// leaseHeld: leased until the deadline.
	leaseHeld leaseState = 1
	// leaseWaiting: an ordered message failed in place, offered again at
	// the deadline (orderly.go).
	leaseWaiting leaseState = 2
	// leaseReleased: made visible again (a lease changed to 0); no lease.
	leaseReleased leaseState = 3
)

// leaseItem is the state of one leased offset.
type leaseItem struct {
	Offset   int64
	Epoch    uint64
	Deadline int64 // Unix ms, rounded up
	Failures uint16
	State    leaseState
}

// leaseEntry is the lease items of one queue of one group, held by one
// client.
type leaseEntry struct {
	Key        offset.Key // QueueID retryQueueID for the retry view
	Generation uint32     // the key's progress generation when written
	At         int64      // Unix ms when written
	Client     string
	Items      []leaseItem
}

// leaseRecord is the body of one rmq_sys_LEASE message.
type leaseRecord struct{ Entries []leaseEntry }

const (
	leaseRecordVersion = 1
	leaseItemSize      = 8 + 8 + 8 + 2 + 1
	leaseEntryMin      = 1 + 1 + 4 + 4 + 8 + 1 + 4
	leaseSnapMagic     = 0x4D514C53 // "MQLS"
	leaseSnapVersion   = 1
	leaseSnapHeader    = 4 + 2 + 4 + 8 + 8
)

var errBadLeaseRecord = errors.New("broker: malformed lease record")

// encodeLeaseRecord encodes r (format in doc.go).
func encodeLeaseRecord(r leaseRecord) ([]byte, error) {
	size := 1 + 4
	for _, e := range r.Entries {
		if len(e.Key.Group) > 255 || len(e.Key.Topic) > 255 || len(e.Client) > 255 {
			return nil, fmt.Errorf("%w: name too long", errBadLeaseRecord)
		}
		size += leaseEntryMin + len(e.Key.Group) + len(e.Key.Topic) + len(e.Client) + leaseItemSize*len(e.Items)
	}
	return appendLeaseRecord(make([]byte, 0, size), r), nil
}

func appendLeaseRecord(b []byte, r leaseRecord) []byte {
	b = append(b, leaseRecordVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Entries)))
	for _, e := range r.Entries {
		b = append(b, byte(len(e.Key.Group)))
		b = append(b, e.Key.Group...)
		b = append(b, byte(len(e.Key.Topic)))
		b = append(b, e.Key.Topic...)
		b = binary.BigEndian.AppendUint32(b, uint32(e.Key.QueueID))
		b = binary.BigEndian.AppendUint32(b, e.Generation)
		b = binary.BigEndian.AppendUint64(b, uint64(e.At))
		b = append(b, byte(len(e.Client)))
		b = append(b, e.Client...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.Items)))
		for _, it := range e.Items {
			b = binary.BigEndian.AppendUint64(b, uint64(it.Offset))
			b = binary.BigEndian.AppendUint64(b, it.Epoch)
			b = binary.BigEndian.AppendUint64(b, uint64(it.Deadline))
			b = binary.BigEndian.AppendUint16(b, it.Failures)
			b = append(b, byte(it.State))
		}
	}
	return b
}

// leaseReader reads big-endian fields, remembering the first overrun.
type leaseReader struct {
	b   []byte
	bad bool
}

func (r *leaseReader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *leaseReader) u8() uint8 {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *leaseReader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *leaseReader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *leaseReader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// decodeLeaseRecord decodes a record body. It never panics, allocates no
// more than the input justifies, and refuses anything encodeLeaseRecord
// would not produce.
func decodeLeaseRecord(b []byte) (leaseRecord, error) {
	r := &leaseReader{b: b}
	if v := r.u8(); r.bad || v != leaseRecordVersion {
		return leaseRecord{}, fmt.Errorf("%w: version", errBadLeaseRecord)
	}
	n := r.u32()
	if r.bad || uint64(n) > uint64(len(r.b)/leaseEntryMin) {
		return leaseRecord{}, fmt.Errorf("%w: entry count %d", errBadLeaseRecord, n)
	}
	rec := leaseRecord{Entries: make([]leaseEntry, 0, n)}
	for i := uint32(0); i < n; i++ {
		var e leaseEntry
		e.Key.Group = string(r.take(int(r.u8())))
		e.Key.Topic = string(r.take(int(r.u8())))
		e.Key.QueueID = int32(r.u32())
		e.Generation = r.u32()
		e.At = int64(r.u64())
		e.Client = string(r.take(int(r.u8())))
		m := r.u32()
		if r.bad || e.Key.QueueID < retryQueueID || e.Key.Group == "" || e.Key.Topic == "" ||
			uint64(m) > uint64(len(r.b)/leaseItemSize) {
			return leaseRecord{}, fmt.Errorf("%w: entry %d", errBadLeaseRecord, i)
		}
		e.Items = make([]leaseItem, m)
		for j := range e.Items {
			it := &e.Items[j]
			it.Offset = int64(r.u64())
			it.Epoch = r.u64()
			it.Deadline = int64(r.u64())
			it.Failures = r.u16()
			it.State = leaseState(r.u8())
			if r.bad || it.Offset < 0 || it.State < leaseHeld || it.State > leaseReleased {
				return leaseRecord{}, fmt.Errorf("%w: entry %d item %d", errBadLeaseRecord, i, j)
			}
		}
		rec.Entries = append(rec.Entries, e)
	}
	if len(r.b) != 0 {
		return leaseRecord{}, fmt.Errorf("%w: %d trailing bytes", errBadLeaseRecord, len(r.b))
	}
	return rec, nil
}

var leaseCRC = crc32.MakeTable(crc32.Castagnoli)

// encodeLeaseSnapshot is the snapshot file: magic, version, the CRC-32C of
// what follows it, the rmq_sys_LEASE offset covered, the epoch counter,
// and the live leases as one lease record body.
func encodeLeaseSnapshot(sysOffset int64, epoch uint64, r leaseRecord) ([]byte, error) {
	body, err := encodeLeaseRecord(r)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 10, leaseSnapHeader+len(body))
	binary.BigEndian.PutUint32(out[0:], leaseSnapMagic)
	binary.BigEndian.PutUint16(out[4:], leaseSnapVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(sysOffset))
	out = binary.BigEndian.AppendUint64(out, epoch)
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[6:], crc32.Checksum(out[10:], leaseCRC))
	return out, nil
}

// decodeLeaseSnapshot parses a snapshot file (errBadLeaseRecord when
// damaged).
func decodeLeaseSnapshot(b []byte) (sysOffset int64, epoch uint64, r leaseRecord, err error) {
	if len(b) < leaseSnapHeader || binary.BigEndian.Uint32(b) != leaseSnapMagic ||
		binary.BigEndian.Uint16(b[4:]) != leaseSnapVersion ||
		binary.BigEndian.Uint32(b[6:]) != crc32.Checksum(b[10:], leaseCRC) {
		return 0, 0, leaseRecord{}, fmt.Errorf("%w: snapshot header or checksum", errBadLeaseRecord)
	}
	sysOffset, epoch = int64(binary.BigEndian.Uint64(b[10:])), binary.BigEndian.Uint64(b[18:])
	if sysOffset < 0 {
		return 0, 0, leaseRecord{}, fmt.Errorf("%w: snapshot offset %d", errBadLeaseRecord, sysOffset)
	}
	r, err = decodeLeaseRecord(b[leaseSnapHeader:])
	return sysOffset, epoch, r, err
}

// unixMilliCeil is t in Unix milliseconds, rounded up: a restored lease
// never ends earlier than the one granted.
func unixMilliCeil(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / int64(time.Millisecond)
	if ns%int64(time.Millisecond) > 0 {
		ms++
	}
	return ms
}

// leaseNotes gathers the lease changes made under one pop state's lock (or
// by one ack-side request) into one record.
type leaseNotes struct{ rec leaseRecord }

func (n *leaseNotes) empty() bool { return n == nil || len(n.rec.Entries) == 0 }

func (n *leaseNotes) add(b *Broker, key offset.Key, client string, it leaseItem) {
	if k := len(n.rec.Entries); k > 0 {
		if e := &n.rec.Entries[k-1]; e.Key == key && e.Client == client {
			e.Items = append(e.Items, it)
			return
		}
	}
	_, gen, _ := b.progress.Get(key)
	n.rec.Entries = append(n.rec.Entries, leaseEntry{Key: key, Generation: gen, At: b.clock.Now().UnixMilli(), Client: client, Items: []leaseItem{it}})
}

// itemOf is the record of l, the lease on off: held until its deadline,
// or waiting until its retry time.
func itemOf(off int64, l *lease) leaseItem {
	it := leaseItem{Offset: off, Epoch: l.epoch, Deadline: unixMilliCeil(l.deadline), Failures: uint16(min(l.failures, 1<<16-1)), State: leaseHeld}
	if l.waiting {
		it.Deadline, it.State = unixMilliCeil(l.retryAt), leaseWaiting
	}
	return it
}

// lease notes l's current state.
func (n *leaseNotes) lease(b *Broker, key offset.Key, off int64, l *lease) {
	n.add(b, key, l.client, itemOf(off, l))
}

// released notes that the lease of epoch on off is given up (visible again).
func (n *leaseNotes) released(b *Broker, key offset.Key, off int64, epoch uint64) {
	n.add(b, key, "", leaseItem{Offset: off, Epoch: epoch, State: leaseReleased})
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
	body, err := encodeLeaseRecord(n.rec)
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
			if it.State != leaseHeld || l == nil || l.epoch != it.Epoch || l.settling || l.sendingBack {
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
	var rec leaseRecord
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
					rec.Entries = append(rec.Entries, leaseEntry{Key: key, Generation: gen, At: at, Client: l.client})
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
func (b *Broker) writeLeaseSnapshot(from int64, epoch uint64, rec leaseRecord) error {
	snap, err := encodeLeaseSnapshot(from, epoch, rec)
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

// leaseAt is one offset of one key.
type leaseAt struct {
	key offset.Key
	off int64
}

// foldedLease is the newest known state of one leased offset.
type foldedLease struct {
	item   leaseItem
	gen    uint32
	at     int64
	client string
}

// foldLeases applies rec to live: the newest epoch of each offset wins; of
// one epoch, the later record. It returns the highest epoch in rec.
func foldLeases(live map[leaseAt]foldedLease, rec leaseRecord) uint64 {
	var top uint64
	for _, e := range rec.Entries {
		for _, it := range e.Items {
			top = max(top, it.Epoch)
			k := leaseAt{e.Key, it.Offset}
			if old, ok := live[k]; ok && old.item.Epoch > it.Epoch {
				continue
			}
			live[k] = foldedLease{item: it, gen: e.Generation, at: e.At, client: e.Client}
		}
	}
	return top
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
		off, epoch, rec, derr := decodeLeaseSnapshot(raw)
		if derr != nil {
			b.log.Warn().Err(derr).Msg("lease snapshot unreadable; replaying every retained lease record")
		} else {
			from, f.top = off, max(epoch, foldLeases(f.live, rec))
			b.leases.recovered.FromSnap = len(f.live)
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
	b.log.Info().Int("records", replayed).Int("folded", len(f.live)).Dur("took", b.clock.Since(start)).
		Msg("lease records folded")
	return nil
}

// installLeases puts every folded lease still owed into its cursor, in
// offset order (an orderly key is held by its first restored lease).
func (b *Broker) installLeases(live map[leaseAt]foldedLease, now time.Time) (restored, expired int) {
	for _, o := range b.owedLeases(live) {
		k, f, v := o.at, o.lease, o.view
		deadline := time.UnixMilli(f.item.Deadline)
		l := &lease{epoch: f.item.Epoch, deadline: deadline, client: f.client, deliveries: 1, failures: int32(f.item.Failures)}
		if f.item.State == leaseWaiting {
			l.waiting, l.retryAt = true, deadline
		}
		ps := b.popState(k.key.Group, k.key.Topic)
		c := b.cursor(ps, k.key)
		if v.orderly {
			res, err := b.store.ReadQueue(v.storeTopic, v.storeQueue, k.off, 1, nil)
			if err != nil || len(res.Messages) == 0 || res.Messages[0].QueueOffset != k.off {
				continue
			}
			if l.key = orderKey(v, res.Messages[0]); l.key != "" {
				if c.keyBusy(l.key) {
					continue // read again and deferred behind the key's earlier lease
				}
				c.hold(l.key, k.off)
			}
		}
		c.inflight[k.off] = l
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
	at    leaseAt
	lease foldedLease
	view  queueView
}

// owedLeases is every folded lease still owed — neither released nor done
// for its group (acknowledged, failed, skipped, below a reset, of a deleted
// group or topic, deleted by retention or lost with the log's tail) — in
// offset order per key.
func (b *Broker) owedLeases(live map[leaseAt]foldedLease) []owedLease {
	keys := make([]leaseAt, 0, len(live))
	for k, f := range live {
		if f.item.State != leaseReleased {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.key != b.key {
			if a.key.Group != b.key.Group {
				return a.key.Group < b.key.Group
			}
			if a.key.Topic != b.key.Topic {
				return a.key.Topic < b.key.Topic
			}
			return a.key.QueueID < b.key.QueueID
		}
		return a.off < b.off
	})
	var owed []owedLease
	for _, k := range keys {
		f := live[k]
		v, ok := b.owedView(k, f)
		if !ok {
			continue
		}
		if k.off >= b.store.MaxOffset(v.storeTopic, v.storeQueue) {
			continue // lost with the log's tail
		}
		owed = append(owed, owedLease{at: k, lease: f, view: v})
	}
	return owed
}

// owed reports whether a folded lease may still be owed (owedView).
func (b *Broker) owed(k leaseAt, f foldedLease) bool {
	_, ok := b.owedView(k, f)
	return ok
}

// owedView is the view a folded lease's offset is read through, and false
// when the lease is owed no more: its group or topic is gone (or it is a
// deleted namesake's), it is done for its group (acked, failed, skipped),
// before a reset, or retention deleted its message.
func (b *Broker) owedView(k leaseAt, f foldedLease) (queueView, bool) {
	group, client := splitInstance(k.key.Group) // a broadcasting group's instance (broadcast.go)
	g, ok := b.registry.group(group)
	if !ok || f.at < g.CreatedAt.UnixMilli() {
		return queueView{}, false // the group is gone (or this is a deleted namesake's lease)
	}
	if t, ok := b.registry.topic(k.key.Topic); !ok || f.at < t.CreatedAt.UnixMilli() {
		return queueView{}, false
	}
	if _, gen, _ := b.progress.Get(k.key); gen != f.gen || b.progress.IsAcked(k.key, k.off) {
		return queueView{}, false // done (acked, failed, skipped), or before a reset
	}
	v := viewOf(g, k.key.Topic, k.key.QueueID, nil, b.retryFloor(k.key.Topic)).forInstance(client)
	if k.off < b.store.MinOffset(v.storeTopic, v.storeQueue) {
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
	b.pruneFold(f.live)
	return b.writeLeaseSnapshot(from, f.top, foldRecord(f.live))
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
	if c.live == nil {
		return nil // not promoted yet, or closing
	}
	// Not the closing context: Close snapshots after cancelling it. The
	// records are local and a snapshot interval's worth.
	next, err := b.replayQueue(context.Background(), leaseTopic, c.next, func(m *message.Message) {
		if rec, err := decodeLeaseRecord(m.Body); err == nil {
			c.top = max(c.top, foldLeases(c.live, rec))
		}
	})
	c.next = next
	if err != nil {
		return err
	}
	if next == b.leases.snapFrom.Load() {
		return nil
	}
	b.pruneFold(c.live)
	return b.writeLeaseSnapshot(next, c.top, foldRecord(c.live))
}

// foldRecord is a fold as one lease record body (a snapshot's).
func foldRecord(live map[leaseAt]foldedLease) leaseRecord {
	var rec leaseRecord
	for k, fl := range live {
		rec.Entries = append(rec.Entries, leaseEntry{Key: k.key, Generation: fl.gen, At: fl.at, Client: fl.client,
			Items: []leaseItem{fl.item}})
	}
	return rec
}

// pruneFold drops from a fold the leases no open would put back
// (owedLeases' rules): released, of a group or topic gone, done for their
// group (acknowledged, failed, skipped, before a reset), or deleted by
// retention. So a fold, and the snapshot written from it, hold the live
// leases, not every lease ever granted.
func (b *Broker) pruneFold(live map[leaseAt]foldedLease) {
	for k, f := range live {
		if f.item.State == leaseReleased || !b.owed(k, f) {
			delete(live, k)
		}
	}
}
