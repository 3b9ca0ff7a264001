package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

// registry holds topic and group configuration (RocketMQ's topics.json and
// subscriptionGroup.json). Each change rewrites its file atomically before
// it is visible, so a created topic survives any crash.
type registry struct {
	files  metaFiles
	mu     sync.RWMutex
	topics map[string]TopicConfig
	groups map[string]GroupConfig
}

const (
	topicsFile = "topics.json"
	groupsFile = "groups.json"
)

// metaFiles is the part of the store that keeps small metadata files.
type metaFiles interface {
	ReadMeta(name string) ([]byte, error)
	WriteMeta(name string, data []byte) error
}

func openRegistry(files metaFiles) (*registry, error) {
	r := &registry{files: files, topics: map[string]TopicConfig{}, groups: map[string]GroupConfig{}}
	if err := readJSON(files, topicsFile, &r.topics); err != nil {
		return nil, err
	}
	if err := readJSON(files, groupsFile, &r.groups); err != nil {
		return nil, err
	}
	return r, nil
}

func readJSON(files metaFiles, name string, v any) error {
	b, err := files.ReadMeta(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	return nil
}

func (r *registry) save(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return r.files.WriteMeta(name, b)
}

func (r *registry) topic(name string) (TopicConfig, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.topics[name]
	return t, ok
}

func (r *registry) group(name string) (GroupConfig, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	g, ok := r.groups[name]
	return g, ok
}

// putTopic stores t; create reports whether it was new. ifAbsent leaves an
// existing topic untouched (auto-create racing an explicit PUT).
func (r *registry) putTopic(t TopicConfig, ifAbsent bool) (TopicConfig, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.topics[t.Name]
	if exists && ifAbsent {
		return old, false, nil
	}
	if !exists {
		t.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
		return t, true, r.storeTopicLocked(t)
	}
	t, err := r.replaceTopicLocked(old, t)
	return t, false, err
}

// updateTopic replaces an existing topic with fn's answer, under the lock.
func (r *registry) updateTopic(name string, fn func(TopicConfig) (TopicConfig, error)) (TopicConfig, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.topics[name]
	if !exists {
		return TopicConfig{}, fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	t, err := fn(old)
	if err != nil {
		return old, err
	}
	return r.replaceTopicLocked(old, t)
}

// replaceTopicLocked stores t in place of old; the caller holds r.mu.
func (r *registry) replaceTopicLocked(old, t TopicConfig) (TopicConfig, error) {
	t.Name, t.CreatedAt = old.Name, old.CreatedAt
	if t.Queues < old.Queues {
		return old, &shrinkError{from: old.Queues, to: t.Queues}
	}
	if t == old {
		return old, nil
	}
	if err := r.storeTopicLocked(t); err != nil {
		return old, err
	}
	return t, nil
}

// storeTopicLocked saves the topic table with t in it, then publishes it;
// the caller holds r.mu.
func (r *registry) storeTopicLocked(t TopicConfig) error {
	next := make(map[string]TopicConfig, len(r.topics)+1)
	for k, v := range r.topics {
		next[k] = v
	}
	next[t.Name] = t
	if err := r.save(topicsFile, next); err != nil {
		return err
	}
	r.topics = next
	return nil
}

// shrinkError refuses to lower a topic's queue count (queue ids are
// spread over by sharding keys and offsets; RocketMQ refuses it too).
type shrinkError struct {
	from, to int
	// defaulted: the count was left out of a full replace and took the
	// default.
	defaulted bool
}

func (e *shrinkError) Error() string {
	if e.defaulted {
		return fmt.Sprintf("%v: PUT replaces the whole topic: queues defaults to %d when omitted and a topic's queue count cannot shrink (%d -> %d)",
			ErrInvalidArgument, e.to, e.from, e.to)
	}
	return fmt.Sprintf("%v: a topic's queue count cannot shrink (%d -> %d)", ErrInvalidArgument, e.from, e.to)
}

// Is classifies the error as ErrInvalidArgument and ErrQueueShrink.
func (e *shrinkError) Is(target error) bool {
	return target == ErrInvalidArgument || target == ErrQueueShrink
}

func (r *registry) deleteTopic(name string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.topics[name]; !ok {
		return false, nil
	}
	next := make(map[string]TopicConfig, len(r.topics))
	for k, v := range r.topics {
		if k != name {
			next[k] = v
		}
	}
	if err := r.save(topicsFile, next); err != nil {
		return false, err
	}
	r.topics = next
	return true, nil
}

func (r *registry) putGroup(g GroupConfig, ifAbsent bool) (GroupConfig, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.groups[g.Name]
	if exists && ifAbsent {
		return old, false, nil
	}
	if exists {
		g.CreatedAt = old.CreatedAt
	} else {
		g.CreatedAt = time.Now().UTC().Truncate(time.Millisecond)
	}
	if err := r.storeGroupLocked(g); err != nil {
		return old, false, err
	}
	return g, !exists, nil
}

// updateGroup replaces an existing group with fn's answer, under the lock.
func (r *registry) updateGroup(name string, fn func(GroupConfig) (GroupConfig, error)) (GroupConfig, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.groups[name]
	if !exists {
		return GroupConfig{}, fmt.Errorf("%w: %s", ErrGroupNotFound, name)
	}
	g, err := fn(old)
	if err != nil {
		return old, err
	}
	g.Name, g.CreatedAt = old.Name, old.CreatedAt
	if err := r.storeGroupLocked(g); err != nil {
		return old, err
	}
	return g, nil
}

// storeGroupLocked saves the group table with g in it, then publishes it;
// the caller holds r.mu.
func (r *registry) storeGroupLocked(g GroupConfig) error {
	next := make(map[string]GroupConfig, len(r.groups)+1)
	for k, v := range r.groups {
		next[k] = v
	}
	next[g.Name] = g
	if err := r.save(groupsFile, next); err != nil {
		return err
	}
	r.groups = next
	return nil
}

func (r *registry) deleteGroup(name string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.groups[name]; !ok {
		return false, nil
	}
	next := make(map[string]GroupConfig, len(r.groups))
	for k, v := range r.groups {
		if k != name {
			next[k] = v
		}
	}
	if err := r.save(groupsFile, next); err != nil {
		return false, err
	}
	r.groups = next
	return true, nil
}

func (r *registry) listTopics() []TopicConfig {
	r.mu.RLock()
	out := make([]TopicConfig, 0, len(r.topics))
	for _, t := range r.topics {
		out = append(out, t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (r *registry) listGroups() []GroupConfig {
	r.mu.RLock()
	out := make([]GroupConfig, 0, len(r.groups))
	for _, g := range r.groups {
		out = append(out, g)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
