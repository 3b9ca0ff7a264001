package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/mqgate/mqgate/server/broker/receipt"
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

// metaTopic carries registry changes.
const metaTopic = systemPrefix + "META"

// Kinds of meta records.
const (
	metaTopicPut     = "topic"         // Topic is the topic's configuration
	metaTopicDeleted = "topic-deleted" // Name was deleted, with Tomb
	metaTombstone    = "tombstone"     // Name's tombstone is Tomb (nil: dropped)
	metaGroupPut     = "group"         // Group is the group's configuration
	metaGroupDeleted = "group-deleted" // Name was deleted
	// metaReceiptKey: Key is a receipt key (package receipt, receiptkeys.go).
	metaReceiptKey = receipt.MetaKind
)

// metaRecord is one registry change. The body of an rmq_sys_META message
// is a JSON array of them, applied in order.
type metaRecord struct {
	Kind  string          `json:"kind"`
	Name  string          `json:"name,omitempty"`
	Topic *TopicConfig    `json:"topic,omitempty"`
	Group *GroupConfig    `json:"group,omitempty"`
	Tomb  *topicTombstone `json:"tomb,omitempty"`
	Key   *receipt.Key    `json:"key,omitempty"`
}

// maxMetaRecordBytes bounds the body of one rmq_sys_META message written by
// carryMeta (one change is always one message, however large).
const maxMetaRecordBytes = 1 << 20

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

// apply changes the registry's tables by one record; the caller holds r.mu
// or owns r alone.
func (r *registry) apply(rec metaRecord) error {
	switch rec.Kind {
	case metaTopicPut:
		if rec.Topic == nil {
			return fmt.Errorf("meta record %s without a topic", rec.Kind)
		}
		r.topics = withEntry(r.topics, rec.Topic.Name, rec.Topic)
	case metaTopicDeleted:
		r.topics = withEntry[TopicConfig](r.topics, rec.Name, nil)
		r.tombs = withEntry(r.tombs, rec.Name, rec.Tomb)
	case metaTombstone:
		r.tombs = withEntry(r.tombs, rec.Name, rec.Tomb)
	case metaGroupPut:
		if rec.Group == nil {
			return fmt.Errorf("meta record %s without a group", rec.Kind)
		}
		r.groups = withEntry(r.groups, rec.Group.Name, rec.Group)
	case metaGroupDeleted:
		r.groups = withEntry[GroupConfig](r.groups, rec.Name, nil)
	case metaReceiptKey:
		if rec.Key == nil {
			return fmt.Errorf("meta record %s without a key", rec.Kind)
		}
		ring, err := r.ring.Load().WithKey(*rec.Key)
		if err != nil {
			return err
		}
		r.ring.Store(ring)
	default:
		return fmt.Errorf("unknown meta record kind %q", rec.Kind)
	}
	return nil
}

// withEntry is a copy of m with k set to *v (nil: removed): readers of the
// old map are never disturbed.
func withEntry[V any](m map[string]V, k string, v *V) map[string]V {
	next := make(map[string]V, len(m)+1)
	for key, val := range m {
		next[key] = val
	}
	if v == nil {
		delete(next, k)
	} else {
		next[k] = *v
	}
	return next
}

// commitLocked makes recs durable as one rmq_sys_META message, applies
// them, and rewrites the snapshots; the caller holds r.mu. A failed
// snapshot write is only logged: the records are the truth, and the next
// change or start rewrites the snapshots.
func (r *registry) commitLocked(recs ...metaRecord) error {
	body, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	last, err := r.log(storage.ClassSystem, [][]byte{body})
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := r.apply(rec); err != nil {
			return err
		}
	}
	r.covered = last + 1
	r.saveSnapshotsLocked()
	return nil
}

// snapshotVersion marks the snapshot format of topics.json and groups.json
// (version 1 files were bare maps, without the meta offset).
const snapshotVersion = 2

// topicsSnapshot is config/topics.json.
type topicsSnapshot struct {
	Version int `json:"version"`
	// MetaOffset: the snapshot holds every rmq_sys_META record below it.
	MetaOffset int64                 `json:"metaOffset"`
	Topics     map[string]topicEntry `json:"topics"`
}

// receiptKeysSnapshot is config/receipt-keys.json (receiptkeys.go).
type receiptKeysSnapshot struct {
	Version    int           `json:"version"`
	MetaOffset int64         `json:"metaOffset"`
	Keys       []receipt.Key `json:"keys"`
}

// groupsSnapshot is config/groups.json.
type groupsSnapshot struct {
	Version    int                    `json:"version"`
	MetaOffset int64                  `json:"metaOffset"`
	Groups     map[string]GroupConfig `json:"groups"`
}

// saveSnapshotsLocked writes both snapshot files; the caller holds r.mu.
func (r *registry) saveSnapshotsLocked() {
	entries := make(map[string]topicEntry, len(r.topics)+len(r.tombs))
	for name, t := range r.topics {
		entries[name] = topicEntry{TopicConfig: t}
	}
	for name, tomb := range r.tombs {
		e := entries[name]
		if e.Name == "" {
			e.Name = name
		}
		e.Deleted = &tomb
		entries[name] = e
	}
	keys := r.ring.Load().Keys()
	errs := errors.Join(
		r.save(topicsFile, topicsSnapshot{Version: snapshotVersion, MetaOffset: r.covered, Topics: entries}),
		r.save(groupsFile, groupsSnapshot{Version: snapshotVersion, MetaOffset: r.covered, Groups: r.groups}),
		r.save(receiptKeysFile, receiptKeysSnapshot{Version: snapshotVersion, MetaOffset: r.covered, Keys: keys}),
	)
	if errs != nil {
		r.logger.Warn().Err(errs).Msg("writing the registry snapshots failed; the CommitLog has every change")
	}
}

// readSnapshot reads one snapshot file into dst (a *topicsSnapshot or
// *groupsSnapshot) and returns its meta offset: 0 when the file is
// missing, unreadable (logged) or of version 1 (read, but not trusted to
// cover any record).
func (r *registry) readSnapshot(name string, dst any, legacy any) int64 {
	b, err := r.files.ReadMeta(name)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err == nil {
		var probe struct {
			Version json.RawMessage `json:"version"`
		}
		if json.Unmarshal(b, &probe) == nil && len(probe.Version) > 0 && probe.Version[0] >= '0' && probe.Version[0] <= '9' {
			if err = json.Unmarshal(b, dst); err == nil {
				switch s := dst.(type) {
				case *topicsSnapshot:
					return s.MetaOffset
				case *groupsSnapshot:
					return s.MetaOffset
				case *receiptKeysSnapshot:
					return s.MetaOffset
				}
			}
		} else if err = json.Unmarshal(b, legacy); err == nil {
			return 0
		}
	}
	r.logger.Warn().Err(err).Str("file", name).Msg("registry snapshot unreadable; rebuilding it from the CommitLog")
	return 0
}

// metaScan replays rmq_sys_META from a queue offset to its end.
type metaScan func(from int64, fn func(queueOffset int64, body []byte)) (end int64, err error)

// load builds the registry from its snapshots and the meta records after
// them, then rewrites the snapshots when they were missing or behind.
func (r *registry) load(scan metaScan) error {
	var topics topicsSnapshot
	var legacyTopics map[string]topicEntry
	topicsAt := r.readSnapshot(topicsFile, &topics, &legacyTopics)
	if topics.Topics == nil {
		topics.Topics = legacyTopics
	}
	for name, e := range topics.Topics {
		if e.Deleted != nil {
			r.tombs[name] = *e.Deleted
		}
		if e.Deleted == nil || e.Queues > 0 {
			r.topics[name] = e.TopicConfig
		}
	}
	var groups groupsSnapshot
	var legacyGroups map[string]GroupConfig
	groupsAt := r.readSnapshot(groupsFile, &groups, &legacyGroups)
	if groups.Groups == nil {
		groups.Groups = legacyGroups
	}
	for name, g := range groups.Groups {
		r.groups[name] = g
	}
	var keys receiptKeysSnapshot
	var noLegacyKeys []receipt.Key
	keysAt := r.readSnapshot(receiptKeysFile, &keys, &noLegacyKeys)
	for _, k := range keys.Keys {
		ring, err := r.ring.Load().WithKey(k)
		if err != nil {
			r.logger.Warn().Err(err).Msg("skipping a receipt key of the snapshot; the CommitLog has it")
			keysAt = 0
			continue
		}
		r.ring.Store(ring)
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
	upgraded := end == 0 && (len(r.topics) > 0 || len(r.groups) > 0 || len(r.tombs) > 0)
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
	r.logger.Info().Int("topics", len(r.topics)).Int("groups", len(r.groups)).Int("metaRecords", applied).
		Int64("fromMetaOffset", from).Msg("registry recovered")
	return nil
}

// follow applies the meta records after the registry's position (a
// follower's, follow.go) with the code load uses, and rewrites the
// snapshots when it applied any.
func (r *registry) follow(scan metaScan) error {
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
func (r *registry) applyBody(body []byte) {
	var recs []metaRecord
	if err := json.Unmarshal(body, &recs); err != nil {
		r.logger.Error().Err(err).Msg("skipping an undecodable meta record")
		return
	}
	for _, rec := range recs {
		if err := r.apply(rec); err != nil {
			r.logger.Error().Err(err).Msg("skipping a meta record")
		}
	}
}

// carryLocked appends the whole registry as meta records (a topic, group
// or tombstone each, in messages of at most maxMetaRecordBytes); the
// caller holds r.mu or owns r alone.
func (r *registry) carryLocked(class storage.Class) error {
	var recs []metaRecord
	for _, t := range r.topics {
		recs = append(recs, metaRecord{Kind: metaTopicPut, Topic: &t})
	}
	for name, tomb := range r.tombs {
		recs = append(recs, metaRecord{Kind: metaTombstone, Name: name, Tomb: &tomb})
	}
	for _, g := range r.groups {
		recs = append(recs, metaRecord{Kind: metaGroupPut, Group: &g})
	}
	for _, k := range r.ring.Load().Keys() {
		recs = append(recs, metaRecord{Kind: metaReceiptKey, Key: &k})
	}
	if len(recs) == 0 {
		return nil
	}
	var bodies [][]byte
	var chunk []json.RawMessage
	size := 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		b, err := json.Marshal(chunk)
		if err != nil {
			return err
		}
		bodies = append(bodies, b)
		chunk, size = nil, 0
		return nil
	}
	for _, rec := range recs {
		b, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if size+len(b) > maxMetaRecordBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = append(chunk, b)
		size += len(b) + 1
	}
	if err := flush(); err != nil {
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
