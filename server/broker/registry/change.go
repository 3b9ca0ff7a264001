package registry

import "fmt"

// The changes of the registry: each holds the registry lock from its
// checks across its record's write to its apply (commitLocked, log.go).
// They store what they are given; the requests (requests.go) validate
// and fill in defaults first.

// SetTopic stores t; created reports whether it was new. ifAbsent leaves
// an existing topic untouched (auto-create racing an explicit PUT).
func (s *Service) SetTopic(t TopicConfig, ifAbsent bool) (TopicConfig, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.state.Topic(t.Name)
	if exists && ifAbsent {
		return old, false, nil
	}
	if !exists {
		if err := s.checkTopicLocked(TopicConfig{}, false, t); err != nil {
			return t, false, err
		}
		t.CreatedAt = s.state.TopicCreatedAt(t.Name, s.cfg.Clock.Now())
		return t, true, s.storeTopicLocked(t)
	}
	t, err := s.replaceTopicLocked(old, t)
	return t, false, err
}

// updateTopic replaces an existing topic with fn's answer, under the lock.
func (s *Service) updateTopic(name string, fn func(TopicConfig) (TopicConfig, error)) (TopicConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.state.Topic(name)
	if !exists {
		return TopicConfig{}, fmt.Errorf("%w: %s", s.cfg.TopicNotFound, name)
	}
	t, err := fn(old)
	if err != nil {
		return old, err
	}
	return s.replaceTopicLocked(old, t)
}

// replaceTopicLocked stores t in place of old; the caller holds s.mu.
func (s *Service) replaceTopicLocked(old, t TopicConfig) (TopicConfig, error) {
	t.Name, t.CreatedAt = old.Name, old.CreatedAt
	if t.Queues < old.Queues {
		return old, &shrinkError{from: old.Queues, to: t.Queues, invalid: s.cfg.InvalidArgument}
	}
	if t == old {
		return old, nil
	}
	if err := s.checkTopicLocked(old, true, t); err != nil {
		return old, err
	}
	if err := s.storeTopicLocked(t); err != nil {
		return old, err
	}
	return t, nil
}

// storeTopicLocked records t, then publishes it; the caller holds s.mu.
func (s *Service) storeTopicLocked(t TopicConfig) error {
	return s.commitLocked(Record{Kind: KindTopic, Topic: &t})
}

// DeleteTopic removes a topic and records its tombstone, in one record;
// false: there was no such topic. The rest of a topic's deletion is the
// broker's (server/broker's topicdelete.go).
func (s *Service) DeleteTopic(name string, tomb Tombstone) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.state.Topic(name); !ok {
		return false, nil
	}
	if err := s.commitLocked(Record{Kind: KindTopicDeleted, Name: name, Tomb: &tomb}); err != nil {
		return false, err
	}
	return true, nil
}

// SetTombstone replaces (nil: drops) the tombstone of name.
func (s *Service) SetTombstone(name string, tomb *Tombstone) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitLocked(Record{Kind: KindTombstone, Name: name, Tomb: tomb})
}

// SetGroup stores g; created reports whether it was new. ifAbsent leaves
// an existing group untouched (a pull's auto-created group racing an
// explicit PUT). The topics g newly subscribes to get their start offsets
// first (Config.Meet).
func (s *Service) SetGroup(g GroupConfig, ifAbsent bool) (GroupConfig, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.state.Group(g.Name)
	if exists && ifAbsent {
		return old, false, nil
	}
	if exists {
		g.CreatedAt = old.CreatedAt
	} else {
		g.CreatedAt = s.state.GroupCreatedAt(g.Name, s.cfg.Clock.Now())
	}
	if err := s.checkGroupLocked(old, exists, g); err != nil {
		return old, false, err
	}
	if err := s.meetAndStoreLocked(old, exists, g); err != nil {
		return old, false, err
	}
	return g, !exists, nil
}

// updateGroup replaces an existing group with fn's answer, under the lock.
func (s *Service) updateGroup(name string, fn func(GroupConfig) (GroupConfig, error)) (GroupConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.state.Group(name)
	if !exists {
		return GroupConfig{}, fmt.Errorf("%w: %s", s.cfg.GroupNotFound, name)
	}
	g, err := fn(old)
	if err != nil {
		return old, err
	}
	g.Name, g.CreatedAt = old.Name, old.CreatedAt
	if err := s.checkGroupLocked(old, true, g); err != nil {
		return old, err
	}
	if err := s.meetAndStoreLocked(old, true, g); err != nil {
		return old, err
	}
	return g, nil
}

// meetAndStoreLocked writes the start offsets of the topics g newly
// subscribes to (Config.Meet), then stores g; the caller holds s.mu.
func (s *Service) meetAndStoreLocked(old GroupConfig, exists bool, g GroupConfig) error {
	var undo func()
	if s.cfg.Meet != nil {
		var err error
		if undo, err = s.cfg.Meet(old, exists, g, s.state.Topics()); err != nil {
			return err
		}
	}
	if err := s.commitLocked(Record{Kind: KindGroup, Group: &g}); err != nil {
		if undo != nil {
			undo()
		}
		return err
	}
	return nil
}

// deleteGroup removes a group (its record, and when this process deleted
// it, for State.GroupCreatedAt); false: there was no such group.
func (s *Service) deleteGroup(name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.state.Group(name); !ok {
		return false, nil
	}
	if err := s.commitLocked(Record{Kind: KindGroupDeleted, Name: name}); err != nil {
		return false, err
	}
	s.state.NoteGroupGone(name, s.cfg.Clock.Now())
	return true, nil
}
