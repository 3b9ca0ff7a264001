package registry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxQueues bounds one topic's queue count.
const MaxQueues = 1024

// Clustering is the default ConsumeMode: each message goes to one
// consumer of the group.
const Clustering = "clustering"

// The topic and group requests: each validates and fills in defaults
// (with the name rules, names.go, and the other families' checks of a
// group, Config.CheckGroup), then changes the registry (change.go).

// PutTopic creates or replaces a topic (idempotent): every field left zero
// takes its default, so a replace that omits queues asks for the default
// count, which fails when the topic has more (a queue count cannot
// shrink).
func (s *Service) PutTopic(t TopicConfig) (TopicConfig, bool, error) {
	defaulted := t.Queues == 0
	t, err := s.normalizeTopic(t)
	if err != nil {
		return t, false, err
	}
	out, created, err := s.SetTopic(t, false)
	var shrink *shrinkError
	if errors.As(err, &shrink) && defaulted {
		shrink.defaulted = true
	}
	return out, created, err
}

// PatchTopic changes an existing topic: patch gets the current
// configuration and returns the new one, which is validated like a
// PutTopic. It runs under the registry lock, so concurrent patches never
// lose each other's changes.
func (s *Service) PatchTopic(name string, patch func(TopicConfig) (TopicConfig, error)) (TopicConfig, error) {
	if err := ValidateTopicName(name); err != nil {
		return TopicConfig{}, err
	}
	return s.updateTopic(name, func(old TopicConfig) (TopicConfig, error) {
		t, err := patch(old)
		if err != nil {
			return old, err
		}
		t.Name = name
		return s.normalizeTopic(t)
	})
}

// normalizeTopic validates t and fills in its defaults.
func (s *Service) normalizeTopic(t TopicConfig) (TopicConfig, error) {
	if err := ValidateTopicName(t.Name); err != nil {
		return t, err
	}
	if t.Queues == 0 {
		t.Queues = s.cfg.DefaultQueues
	}
	if t.Queues < 1 || t.Queues > MaxQueues {
		return t, fmt.Errorf("%w: queues must be 1..%d", s.cfg.InvalidArgument, MaxQueues)
	}
	if t.RetentionHours < 0 {
		return t, fmt.Errorf("%w: retentionHours must be >= 0", s.cfg.InvalidArgument)
	}
	switch t.Perm {
	case "":
		t.Perm = "rw"
	case "rw", "r", "w":
	default:
		return t, fmt.Errorf("%w: perm must be rw, r or w", s.cfg.InvalidArgument)
	}
	t.CreatedAt = time.Time{}
	return t, nil
}

// GetTopic returns a topic's configuration.
func (s *Service) GetTopic(name string) (TopicConfig, error) {
	if err := ValidateTopicName(name); err != nil {
		return TopicConfig{}, err
	}
	t, ok := s.Topic(name)
	if !ok {
		return t, fmt.Errorf("%w: %s", s.cfg.TopicNotFound, name)
	}
	return t, nil
}

// PutGroup creates or replaces a consumer group (idempotent). The topics
// it subscribes to for the first time get their start offsets by its
// ConsumeFrom (Config.Meet).
func (s *Service) PutGroup(ctx context.Context, g GroupConfig) (GroupConfig, bool, error) {
	g, err := s.normalizeGroup(g)
	if err != nil {
		return g, false, err
	}
	if g.ConsumeFrom != "" {
		// The backlog a start skips includes what was sent just before.
		if err := s.cfg.AwaitDispatch(ctx); err != nil {
			return g, false, err
		}
	}
	return s.SetGroup(g, false)
}

// PatchGroup changes an existing group: patch gets the current
// configuration and returns the new one, which is validated like a
// PutGroup, under the registry lock (see PatchTopic).
func (s *Service) PatchGroup(ctx context.Context, name string, patch func(GroupConfig) (GroupConfig, error)) (GroupConfig, error) {
	if err := ValidateGroupName(name); err != nil {
		return GroupConfig{}, err
	}
	if err := s.cfg.AwaitDispatch(ctx); err != nil { // as PutGroup
		return GroupConfig{}, err
	}
	return s.updateGroup(name, func(old GroupConfig) (GroupConfig, error) {
		g, err := patch(old)
		if err != nil {
			return old, err
		}
		g.Name = name
		return s.normalizeGroup(g)
	})
}

// normalizeGroup validates g and fills in its defaults: the registry's
// own fields first, then the other families' (Config.CheckGroup).
func (s *Service) normalizeGroup(g GroupConfig) (GroupConfig, error) {
	if err := ValidateGroupName(g.Name); err != nil {
		return g, err
	}
	switch g.ConsumeMode {
	case "":
		g.ConsumeMode = Clustering
	case Clustering, Broadcasting:
	default:
		return g, fmt.Errorf("%w: consumeMode must be clustering or broadcasting", s.cfg.InvalidArgument)
	}
	if g.RetryMaxTimes == 0 {
		g.RetryMaxTimes = 16
	}
	if g.RetryMaxTimes < 0 || g.RetryMaxTimes > 64 {
		return g, fmt.Errorf("%w: retryMaxTimes must be 1..64", s.cfg.InvalidArgument)
	}
	if g.Invisible < 0 || g.Invisible > s.cfg.MaxInvisible {
		return g, fmt.Errorf("%w: invisibility must be 0..%v", s.cfg.InvalidArgument, s.cfg.MaxInvisible)
	}
	g, err := s.cfg.CheckGroup(g)
	if err != nil {
		return g, err
	}
	g.CreatedAt = time.Time{}
	return g, nil
}

// GetGroup returns a group's configuration.
func (s *Service) GetGroup(name string) (GroupConfig, error) {
	if err := ValidateGroupName(name); err != nil {
		return GroupConfig{}, err
	}
	g, ok := s.Group(name)
	if !ok {
		return g, fmt.Errorf("%w: %s", s.cfg.GroupNotFound, name)
	}
	return g, nil
}

// DeleteGroup removes a group: its record, then what the broker holds of
// it (Config.DropGroup: its pop states, instances and progress).
func (s *Service) DeleteGroup(name string) error {
	if err := ValidateGroupName(name); err != nil {
		return err
	}
	ok, err := s.deleteGroup(name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", s.cfg.GroupNotFound, name)
	}
	if s.cfg.DropGroup != nil {
		s.cfg.DropGroup(name)
	}
	return nil
}
