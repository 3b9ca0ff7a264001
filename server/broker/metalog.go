package broker

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Topic and group definitions live in the CommitLog, like every other
// fact the broker must not lose: each change of the registry is first a
// record of the system topic rmq_sys_META (queue 0), appended through the
// group commit before the change is visible; config/topics.json and
// config/groups.json are only snapshots of the registry, each saying up to
// which queue offset of rmq_sys_META it is complete. At start the
// snapshots are read (a missing or unreadable one counts as empty, offset
// 0) and the records from the lower of their offsets on are applied in
// order; a record holds the whole new state of one topic, tombstone or
// group, so applying records again over a newer snapshot reaches the same
// state. Losing the files loses nothing; losing both the files and the
// records is what retention would do, so before retention deletes a
// segment that holds meta records the whole registry is appended again
// (carryMeta), in the same way dead letters and timers are carried.

// metaTopic carries registry changes (package registry: the records, their
// apply, the snapshot files' codec).
const metaTopic = registry.Topic

// metaLog appends registry changes to the CommitLog in a write class (a
// change is a system record; the copy retention carries is a reclaim
// record); it returns the queue offset of the message holding the last one.
type metaLog func(class storage.Class, bodies [][]byte) (last int64, err error)

// appendMeta builds the metaLog of the broker's store.
func (b *Broker) appendMeta(class storage.Class, bodies [][]byte) (int64, error) {
	now := b.clock.Now().UnixMilli()
	msgs := make([]*message.Message, len(bodies))
	for i, body := range bodies {
		msgs[i] = &message.Message{Topic: metaTopic, Body: body, BornTimestamp: now}
	}
	res := make([]storage.PutResult, len(msgs))
	if err := b.store.PutClass(class, msgs, res); err != nil {
		return 0, mapStoreErr(err)
	}
	return res[len(res)-1].QueueOffset, nil
}

// commitLocked makes recs durable as one rmq_sys_META message, applies
// them, and rewrites the snapshots; the caller holds r.mu. A failed
// snapshot write is only logged: the records are the truth, and the next
// change or start rewrites the snapshots.
func (r *registrar) commitLocked(recs ...registry.Record) error {
	body, err := registry.EncodeBody(recs...)
	if err != nil {
		return err
	}
	last, err := r.log(storage.ClassSystem, [][]byte{body})
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := r.state.Apply(rec); err != nil {
			return err
		}
	}
	r.covered = last + 1
	r.saveSnapshotsLocked()
	return nil
}

// saveSnapshotsLocked writes the three snapshot files; the caller holds
// r.mu.
func (r *registrar) saveSnapshotsLocked() {
	st := r.state
	topics, terr := st.EncodeTopics(r.covered)
	groups, gerr := st.EncodeGroups(r.covered)
	keys, kerr := st.EncodeReceiptKeys(r.covered)
	errs := errors.Join(
		r.save(registry.TopicsFile, topics, terr),
		r.save(registry.GroupsFile, groups, gerr),
		r.save(registry.ReceiptKeysFile, keys, kerr),
	)
	if errs != nil {
		r.logger.Warn().Err(errs).Msg("writing the registry snapshots failed; the CommitLog has every change")
	}
}

// readSnapshot reads snapshot file name and decodes it with decode,
// returning what decoded and the meta offset it covers: 0 when the file
// is missing, unreadable (logged; what decoded of it is kept) or of
// version 1 (read, but not trusted to cover any record).
func readSnapshot[T any](r *registrar, name string, decode func([]byte) (T, int64, error)) (T, int64) {
	var v T
	b, err := r.files.ReadMeta(name)
	if errors.Is(err, os.ErrNotExist) {
		return v, 0
	}
	if err == nil {
		var at int64
		if v, at, err = decode(b); err == nil {
			return v, at
		}
	}
	r.logger.Warn().Err(err).Str("file", name).Msg("registry snapshot unreadable; rebuilding it from the CommitLog")
	return v, 0
}

// metaScan replays rmq_sys_META from a queue offset to its end.
type metaScan func(from int64, fn func(queueOffset int64, body []byte)) (end int64, err error)

// load builds the registry from its snapshots and the meta records after
// them, then rewrites the snapshots when they were missing or behind.
func (r *registrar) load(scan metaScan) error {
	st := r.state
	topics, topicsAt := readSnapshot(r, registry.TopicsFile, registry.DecodeTopics)
	st.InstallTopics(topics)
	groups, groupsAt := readSnapshot(r, registry.GroupsFile, registry.DecodeGroups)
	st.InstallGroups(groups)
	keys, keysAt := readSnapshot(r, registry.ReceiptKeysFile, registry.DecodeReceiptKeys)
	for _, k := range keys {
		if err := st.InstallKey(k); err != nil {
			r.logger.Warn().Err(err).Msg("skipping a receipt key of the snapshot; the CommitLog has it")
			keysAt = 0
		}
	}
	from := min(topicsAt, groupsAt, keysAt)

	applied := 0
	end, err := scan(from, func(_ int64, body []byte) {
		r.applyBody(body)
		applied++
	})
	if err != nil {
		return fmt.Errorf("replay %s: %w", metaTopic, err)
	}
	r.covered = end
	upgraded := end == 0 && !st.Empty()
	if upgraded {
		// A data dir from before the registry was in the CommitLog: put
		// it there now, so the files are snapshots from here on.
		if err := r.carryLocked(storage.ClassSystem); err != nil {
			return err
		}
	}
	if upgraded || applied > 0 || topicsAt != end || groupsAt != end || keysAt != end {
		r.saveSnapshotsLocked()
	}
	r.logger.Info().Int("topics", len(st.Topics())).Int("groups", len(st.Groups())).Int("metaRecords", applied).
		Int64("fromMetaOffset", from).Msg("registry recovered")
	return nil
}

// follow applies the meta records after the registry's position (a
// follower's, follow.go) with the code load uses, and rewrites the
// snapshots when it applied any.
func (r *registrar) follow(scan metaScan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	applied := 0
	end, err := scan(r.covered, func(_ int64, body []byte) {
		r.applyBody(body)
		applied++
	})
	if err != nil {
		return fmt.Errorf("follow %s: %w", metaTopic, err)
	}
	if applied > 0 {
		r.covered = end
		r.saveSnapshotsLocked()
	}
	return nil
}

// applyBody applies one rmq_sys_META message's records, skipping (with an
// error logged) what does not decode or apply.
func (r *registrar) applyBody(body []byte) {
	recs, err := registry.DecodeBody(body)
	if err != nil {
		r.logger.Error().Err(err).Msg("skipping an undecodable meta record")
		return
	}
	for _, rec := range recs {
		if err := r.state.Apply(rec); err != nil {
			r.logger.Error().Err(err).Msg("skipping a meta record")
		}
	}
}

// carryLocked appends the whole registry as meta records (a topic, group,
// tombstone or key each, in messages of at most registry.MaxCarryBytes);
// the caller holds r.mu or owns r alone.
func (r *registrar) carryLocked(class storage.Class) error {
	recs := r.state.Records()
	if len(recs) == 0 {
		return nil
	}
	bodies, err := registry.CarryBodies(recs)
	if err != nil {
		return err
	}
	for start := 0; start < len(bodies); start += 64 {
		last, err := r.log(class, bodies[start:min(start+64, len(bodies))])
		if err != nil {
			return err
		}
		r.covered = last + 1
	}
	return nil
}

// carryMeta runs before retention deletes the CommitLog below cut: when a
// meta record lies there, the whole registry is appended again.
func (b *Broker) carryMeta(cut int64) error {
	min := b.store.MinOffset(metaTopic, 0)
	if min >= b.store.MaxOffset(metaTopic, 0) {
		return nil
	}
	res, err := b.store.ReadQueue(metaTopic, 0, min, 1, nil)
	if err != nil {
		return mapStoreErr(err)
	}
	if len(res.Messages) == 0 || res.Messages[0].PhysicalOffset >= cut {
		return nil
	}
	r := b.registry
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.carryLocked(storage.ClassReclaim); err != nil {
		return err
	}
	r.saveSnapshotsLocked()
	b.log.Info().Int64("below", cut).Msg("registry carried past retention")
	return nil
}

// scanMeta is the registry's metaScan over the broker's store.
func (b *Broker) scanMeta(ctx context.Context, from int64, fn func(int64, []byte)) (int64, error) {
	end := b.store.MaxOffset(metaTopic, 0)
	if from > end {
		from = end // a snapshot ahead of the log (it lost a tail): replay what there is
	}
	err := b.scanSystemQueue(ctx, metaTopic, from, func(m *message.Message) { fn(m.QueueOffset, m.Body) })
	return end, err
}
