package registry

import (
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/server/broker/receipt"
)

// State is the registry: the topics, the tombstones of deleted topic
// names, the groups and the receipt keyring, as the records make them,
// and (memory only) when this process last deleted each group.
//
// Its maps are replaced, never changed in place, so a reader may keep one
// it got (Topics, Tombstones, Groups) while the state changes. State has
// no lock of its own: the broker guards it (doc.go, "Locks"), except the
// ring, an atomic pointer Ring reads without any lock.
type State struct {
	topics map[string]TopicConfig
	tombs  map[string]Tombstone
	groups map[string]GroupConfig
	// goneAt is when this process last deleted each group (NoteGroupGone):
	// never in a record, never handed out (so changed in place).
	goneAt map[string]time.Time
	ring   atomic.Pointer[receipt.Ring]
}

// NewState is an empty registry.
func NewState() *State {
	return &State{topics: map[string]TopicConfig{}, tombs: map[string]Tombstone{}, groups: map[string]GroupConfig{}}
}

// Apply changes the state by one record, or refuses it (Record.Check, or
// a key the ring refuses) and changes nothing. It reads neither the clock
// nor a random source: a configuration's CreatedAt, a tombstone's
// DeletedAt and a key's secret travel inside the record, so every copy of
// the log makes the same State. A record holds the whole new state of one
// topic, tombstone, group or key, so applying it again changes nothing.
func (s *State) Apply(rec Record) error {
	if err := rec.Check(); err != nil {
		return err
	}
	switch rec.Kind {
	case KindTopic:
		s.topics = withEntry(s.topics, rec.Topic.Name, rec.Topic)
	case KindTopicDeleted:
		s.topics = withEntry[TopicConfig](s.topics, rec.Name, nil)
		s.tombs = withEntry(s.tombs, rec.Name, rec.Tomb)
	case KindTombstone:
		s.tombs = withEntry(s.tombs, rec.Name, rec.Tomb)
	case KindGroup:
		s.groups = withEntry(s.groups, rec.Group.Name, rec.Group)
	case KindGroupDeleted:
		s.groups = withEntry[GroupConfig](s.groups, rec.Name, nil)
	case KindReceiptKey:
		return s.addKey(*rec.Key)
	}
	return nil
}

// addKey adds k to the ring (receipt.Ring.WithKey), or refuses it.
func (s *State) addKey(k receipt.Key) error {
	ring, err := s.ring.Load().WithKey(k)
	if err != nil {
		return err
	}
	s.ring.Store(ring)
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

// Topic returns the configuration of topic name.
func (s *State) Topic(name string) (TopicConfig, bool) {
	t, ok := s.topics[name]
	return t, ok
}

// Group returns the configuration of group name.
func (s *State) Group(name string) (GroupConfig, bool) {
	g, ok := s.groups[name]
	return g, ok
}

// Tombstone returns the deletion record of topic name, if it was ever
// deleted (and the tombstone not dropped since).
func (s *State) Tombstone(name string) (Tombstone, bool) {
	t, ok := s.tombs[name]
	return t, ok
}

// Topics, Tombstones and Groups return the maps by name; the caller must
// not change them.
func (s *State) Topics() map[string]TopicConfig   { return s.topics }
func (s *State) Tombstones() map[string]Tombstone { return s.tombs }
func (s *State) Groups() map[string]GroupConfig   { return s.groups }

// Ring returns the receipt keyring (nil before the first key); it needs
// no lock.
func (s *State) Ring() *receipt.Ring { return s.ring.Load() }

// Empty reports whether the state holds no topic, tombstone or group.
func (s *State) Empty() bool {
	return len(s.topics) == 0 && len(s.tombs) == 0 && len(s.groups) == 0
}

// TopicCreatedAt is the CreatedAt of topic name created now: now, in UTC
// to the millisecond, or, when that is not after the deletion time of
// its tombstone, one millisecond after it — a name created again is
// younger than its deleted namesake even within one millisecond.
func (s *State) TopicCreatedAt(name string, now time.Time) time.Time {
	at := now.UTC().Truncate(time.Millisecond)
	if tomb, ok := s.tombs[name]; ok && !at.After(tomb.DeletedAt) {
		at = tomb.DeletedAt.Add(time.Millisecond)
	}
	return at
}

// GroupCreatedAt is the CreatedAt of group name created now: as
// TopicCreatedAt, after the group's deletion by this process
// (NoteGroupGone), so that the deleted namesake's leases, all stamped at
// or before its deletion, never pass for the new group's. After a restart
// the restart itself separates the two.
func (s *State) GroupCreatedAt(name string, now time.Time) time.Time {
	at := now.UTC().Truncate(time.Millisecond)
	if gone, ok := s.goneAt[name]; ok && !at.After(gone) {
		at = gone.Add(time.Millisecond)
	}
	return at
}

// NoteGroupGone remembers, in memory only, that group name was deleted at
// (in UTC to the millisecond), for GroupCreatedAt. The request that wrote
// the group-deleted record calls it; applying a record does not.
func (s *State) NoteGroupGone(name string, at time.Time) {
	if s.goneAt == nil {
		s.goneAt = map[string]time.Time{}
	}
	s.goneAt[name] = at.UTC().Truncate(time.Millisecond)
}

// Records is the whole state as records, which applied to an empty State
// make it again: a topic, a tombstone, a group or a key each (what a
// carry past retention appends).
func (s *State) Records() []Record {
	var recs []Record
	for _, t := range s.topics {
		recs = append(recs, Record{Kind: KindTopic, Topic: &t})
	}
	for name, tomb := range s.tombs {
		recs = append(recs, Record{Kind: KindTombstone, Name: name, Tomb: &tomb})
	}
	for _, g := range s.groups {
		recs = append(recs, Record{Kind: KindGroup, Group: &g})
	}
	for _, k := range s.ring.Load().Keys() {
		recs = append(recs, Record{Kind: KindReceiptKey, Key: &k})
	}
	return recs
}
