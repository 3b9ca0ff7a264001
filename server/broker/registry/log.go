package registry

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Topic and group definitions live in the CommitLog, like every other
// fact the broker must not lose: each change of the registry is first a
// record of the system topic rmq_sys_META (queue 0), appended through the
// group commit before the change is visible; config/topics.json,
// config/groups.json and config/receipt-keys.json are only snapshots of
// the registry, each saying up to which queue offset of rmq_sys_META it is
// complete. At start the snapshots are read (a missing or unreadable one
// counts as empty, offset 0) and the records from the lower of their
// offsets on are applied in order; a record holds the whole new state of
// one topic, tombstone, group or key, so applying records again over a
// newer snapshot reaches the same state. Losing the files loses nothing;
// losing both the files and the records is what retention would do, so
// before retention deletes a segment that holds meta records the whole
// registry is appended again (Carry), in the same way dead letters and
// timers are carried.

// appendLog appends bodies to rmq_sys_META in a write class (a change is
// a system record; the copy retention carries is a reclaim record), each
// born now; it returns the queue offset of the last one.
func (s *Service) appendLog(class storage.Class, bodies [][]byte) (int64, error) {
	now := s.cfg.Clock.Now().UnixMilli()
	msgs := make([]*message.Message, len(bodies))
	for i, body := range bodies {
		msgs[i] = &message.Message{Topic: Topic, Body: body, BornTimestamp: now}
	}
	res := make([]storage.PutResult, len(msgs))
	if err := s.cfg.Store.PutClass(class, msgs, res); err != nil {
		return 0, s.cfg.StoreError(err)
	}
	return res[len(res)-1].QueueOffset, nil
}

// commitLocked makes recs durable as one rmq_sys_META message, applies
// them, and rewrites the snapshots; the caller holds s.mu. A failed
// snapshot write is only logged: the records are the truth, and the next
// change or start rewrites the snapshots.
func (s *Service) commitLocked(recs ...Record) error {
	body, err := EncodeBody(recs...)
	if err != nil {
		return err
	}
	last, err := s.appendLog(storage.ClassSystem, [][]byte{body})
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if err := s.state.Apply(rec); err != nil {
			return err
		}
	}
	s.covered = last + 1
	s.saveSnapshotsLocked()
	return nil
}

// save writes snapshot file name (encoded by snapshot.go).
func (s *Service) save(name string, data []byte, err error) error {
	if err != nil {
		return err
	}
	return s.cfg.Store.WriteMeta(name, data)
}

// saveSnapshotsLocked writes the three snapshot files; the caller holds
// s.mu.
func (s *Service) saveSnapshotsLocked() {
	st := s.state
	topics, terr := st.EncodeTopics(s.covered)
	groups, gerr := st.EncodeGroups(s.covered)
	keys, kerr := st.EncodeReceiptKeys(s.covered)
	errs := errors.Join(
		s.save(TopicsFile, topics, terr),
		s.save(GroupsFile, groups, gerr),
		s.save(ReceiptKeysFile, keys, kerr),
	)
	if errs != nil {
		s.cfg.Log.Warn().Err(errs).Msg("writing the registry snapshots failed; the CommitLog has every change")
	}
}

// readSnapshot reads snapshot file name and decodes it with decode,
// returning what decoded and the meta offset it covers: 0 when the file
// is missing, unreadable (logged; what decoded of it is kept) or of
// version 1 (read, but not trusted to cover any record).
func readSnapshot[T any](s *Service, name string, decode func([]byte) (T, int64, error)) (T, int64) {
	var v T
	b, err := s.cfg.Store.ReadMeta(name)
	if errors.Is(err, os.ErrNotExist) {
		return v, 0
	}
	if err == nil {
		var at int64
		if v, at, err = decode(b); err == nil {
			return v, at
		}
	}
	s.cfg.Log.Warn().Err(err).Str("file", name).Msg("registry snapshot unreadable; rebuilding it from the CommitLog")
	return v, 0
}

// load builds the registry from its snapshots and the meta records after
// them, then rewrites the snapshots when they were missing or behind.
// Open calls it before the Service is shared.
func (s *Service) load(ctx context.Context) error {
	st := s.state
	topics, topicsAt := readSnapshot(s, TopicsFile, DecodeTopics)
	st.InstallTopics(topics)
	groups, groupsAt := readSnapshot(s, GroupsFile, DecodeGroups)
	st.InstallGroups(groups)
	keys, keysAt := readSnapshot(s, ReceiptKeysFile, DecodeReceiptKeys)
	for _, k := range keys {
		if err := st.InstallKey(k); err != nil {
			s.cfg.Log.Warn().Err(err).Msg("skipping a receipt key of the snapshot; the CommitLog has it")
			keysAt = 0
		}
	}
	from := min(topicsAt, groupsAt, keysAt)

	applied := 0
	end, err := s.cfg.Scan(ctx, from, func(_ int64, body []byte) {
		s.applyBody(body)
		applied++
	})
	if err != nil {
		return fmt.Errorf("replay %s: %w", Topic, err)
	}
	s.covered = end
	upgraded := end == 0 && !st.Empty()
	if upgraded {
		// A data dir from before the registry was in the CommitLog: put
		// it there now, so the files are snapshots from here on.
		if err := s.carryLocked(storage.ClassSystem); err != nil {
			return err
		}
	}
	if upgraded || applied > 0 || topicsAt != end || groupsAt != end || keysAt != end {
		s.saveSnapshotsLocked()
	}
	s.cfg.Log.Info().Int("topics", len(st.Topics())).Int("groups", len(st.Groups())).Int("metaRecords", applied).
		Int64("fromMetaOffset", from).Msg("registry recovered")
	return nil
}

// Follow applies the meta records after the registry's position (a
// follower's: server/broker's follow.go) with the code Open uses, and
// rewrites the snapshots when it applied any.
func (s *Service) Follow(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	applied := 0
	end, err := s.cfg.Scan(ctx, s.covered, func(_ int64, body []byte) {
		s.applyBody(body)
		applied++
	})
	if err != nil {
		return fmt.Errorf("follow %s: %w", Topic, err)
	}
	if applied > 0 {
		s.covered = end
		s.saveSnapshotsLocked()
	}
	return nil
}

// applyBody applies one rmq_sys_META message's records, skipping (with an
// error logged) what does not decode or apply.
func (s *Service) applyBody(body []byte) {
	recs, err := DecodeBody(body)
	if err != nil {
		s.cfg.Log.Error().Err(err).Msg("skipping an undecodable meta record")
		return
	}
	for _, rec := range recs {
		if err := s.state.Apply(rec); err != nil {
			s.cfg.Log.Error().Err(err).Msg("skipping a meta record")
		}
	}
}

// carryLocked appends the whole registry as meta records (a topic, group,
// tombstone or key each, in messages of at most MaxCarryBytes); the
// caller holds s.mu or owns s alone.
func (s *Service) carryLocked(class storage.Class) error {
	recs := s.state.Records()
	if len(recs) == 0 {
		return nil
	}
	bodies, err := CarryBodies(recs)
	if err != nil {
		return err
	}
	for start := 0; start < len(bodies); start += 64 {
		last, err := s.appendLog(class, bodies[start:min(start+64, len(bodies))])
		if err != nil {
			return err
		}
		s.covered = last + 1
	}
	return nil
}

// Carry runs before retention deletes the CommitLog below cut: when a
// meta record lies there, the whole registry is appended again (as
// reclaim records) and the snapshots rewritten.
func (s *Service) Carry(cut int64) error {
	st := s.cfg.Store
	min := st.MinOffset(Topic, 0)
	if min >= st.MaxOffset(Topic, 0) {
		return nil
	}
	res, err := st.ReadQueue(Topic, 0, min, 1, nil)
	if err != nil {
		return s.cfg.StoreError(err)
	}
	if len(res.Messages) == 0 || res.Messages[0].PhysicalOffset >= cut {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.carryLocked(storage.ClassReclaim); err != nil {
		return err
	}
	s.saveSnapshotsLocked()
	s.cfg.Log.Info().Int64("below", cut).Msg("registry carried past retention")
	return nil
}
