package offset

import (
	"sort"
	"strings"
	"sync"
)

// Key names one queue of one group, or of one consumer instance of a
// broadcasting group: Group is then "<group>@<client id>" (InstanceSep; a
// group name never holds it), with its own progress.
type Key struct {
	Group   string
	Topic   string
	QueueID int32
}

// State is the durable progress of one Key.
type State struct {
	// Committed is the lowest offset not acknowledged: everything below it
	// is done.
	Committed int64
	// Generation increases with every explicit commit (reset).
	Generation uint32
	// acked holds acknowledged offsets >= Committed; failed the most
	// recent offsets (at most maxFailedKept, also below Committed) that
	// were done by the failure path (KindFailed).
	acked  map[int64]struct{}
	failed map[int64]struct{}
}

// maxFailedKept bounds the failed offsets a key remembers.
const maxFailedKept = 1024

// Acked reports whether offset is acknowledged.
func (s *State) Acked(offset int64) bool {
	if offset < s.Committed {
		return true
	}
	_, ok := s.acked[offset]
	return ok
}

// Failed reports whether offset was done by the failure path (known for
// the most recent maxFailedKept failures).
func (s *State) Failed(offset int64) bool {
	_, ok := s.failed[offset]
	return ok
}

// AckedAbove is how many offsets above Committed are acknowledged.
func (s *State) AckedAbove() int { return len(s.acked) }

// Table is the progress of every known key. Safe for concurrent use.
type Table struct {
	mu     sync.RWMutex
	states map[Key]*State
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{states: make(map[Key]*State)} }

func (t *Table) state(k Key) *State {
	s := t.states[k]
	if s == nil {
		s = &State{}
		t.states[k] = s
	}
	return s
}

// Change reports a key whose committed offset moved.
type Change struct {
	Key       Key
	Committed int64
}

// Apply applies one decoded record and returns the keys whose committed
// offset changed.
func (t *Table) Apply(r Record) []Change {
	t.mu.Lock()
	defer t.mu.Unlock()
	var changes []Change
	for _, e := range r.Entries {
		if e.Kind == KindForget {
			t.forgetLocked(e.Key.Group)
			continue
		}
		s := t.state(e.Key)
		before := s.Committed
		switch e.Kind {
		case KindAck, KindFailed:
			if e.Generation != s.Generation {
				continue // acks of an older generation were overtaken by a reset
			}
			for _, off := range e.Offsets {
				if off < s.Committed {
					continue
				}
				if s.acked == nil {
					s.acked = make(map[int64]struct{})
				}
				s.acked[off] = struct{}{}
				if e.Kind == KindFailed {
					s.addFailed(off)
				}
			}
			s.advance()
		case KindCommit:
			if e.Generation <= s.Generation {
				continue // already applied, or superseded
			}
			s.Generation = e.Generation
			s.Committed = e.Offset
			s.acked, s.failed = nil, nil // everything from here on is to be consumed again
		case KindAdvance:
			if e.Offset <= s.Committed {
				continue
			}
			s.Committed = e.Offset
			s.prune()
			s.advance()
		}
		if s.Committed != before {
			changes = append(changes, Change{Key: e.Key, Committed: s.Committed})
		}
	}
	return changes
}

// advance moves Committed over contiguous acknowledged offsets.
func (s *State) advance() {
	for {
		if _, ok := s.acked[s.Committed]; !ok {
			break
		}
		delete(s.acked, s.Committed)
		s.Committed++
	}
}

// addFailed remembers a failed offset, forgetting the oldest beyond
// maxFailedKept.
func (s *State) addFailed(off int64) {
	if s.failed == nil {
		s.failed = make(map[int64]struct{})
	}
	s.failed[off] = struct{}{}
	if len(s.failed) <= maxFailedKept {
		return
	}
	oldest := off
	for o := range s.failed {
		oldest = min(oldest, o)
	}
	delete(s.failed, oldest)
}

// prune drops acknowledgements below Committed.
func (s *State) prune() {
	for off := range s.acked {
		if off < s.Committed {
			delete(s.acked, off)
		}
	}
}

// Get returns a copy of the state of k (zero when unknown).
func (t *Table) Get(k Key) (committed int64, generation uint32, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.states[k]
	if s == nil {
		return 0, 0, false
	}
	return s.Committed, s.Generation, true
}

// IsAcked reports whether offset of k is acknowledged.
func (t *Table) IsAcked(k Key, offset int64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.states[k]
	return s != nil && s.Acked(offset)
}

// IsFailed reports whether offset of k is done by the failure path (known
// only above the committed offset).
func (t *Table) IsFailed(k Key, offset int64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.states[k]
	return s != nil && s.Failed(offset)
}

// AckedAbove returns the acknowledged offsets of k above its committed
// offset, ascending.
func (t *Table) AckedAbove(k Key) []int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.states[k]
	if s == nil {
		return nil
	}
	out := make([]int64, 0, len(s.acked))
	for off := range s.acked {
		out = append(out, off)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Keys lists every key, sorted by group, topic, queue.
func (t *Table) Keys() []Key {
	t.mu.RLock()
	out := make([]Key, 0, len(t.states))
	for k := range t.states {
		out = append(out, k)
	}
	t.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.QueueID < b.QueueID
	})
	return out
}

// InstanceSep joins a broadcasting group's name and a consumer
// instance's client id into the Group of the instance's keys.
const InstanceSep = "@"

// Forgets reports whether a forget of name drops the keys of group: its
// own keys, and for a group (a name without InstanceSep) the keys of its
// consumer instances too; an instance's forget drops only the instance's.
func Forgets(name, group string) bool {
	if group == name {
		return true
	}
	return !strings.Contains(name, InstanceSep) && len(group) > len(name) &&
		strings.HasPrefix(group, name) && group[len(name):len(name)+len(InstanceSep)] == InstanceSep
}

// Forget drops every key of group (group deletion), with its instances'
// keys, or every key of one consumer instance ("<group>@<client id>").
func (t *Table) Forget(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetLocked(group)
}

func (t *Table) forgetLocked(group string) {
	for k := range t.states {
		if Forgets(group, k.Group) {
			delete(t.states, k)
		}
	}
}
