package instance

import (
	"sort"
	"time"
)

// Instance is one known consumer instance.
type Instance struct {
	// LastSeen is when its last request ended, or started while one is
	// under way.
	LastSeen time.Time
	// Active counts its requests under way (long polls included).
	Active int
	// Met holds the topics whose start offsets it has.
	Met map[string]bool
}

// New is an instance that has met no topic yet, last seen at seen.
func New(seen time.Time) *Instance {
	return &Instance{LastSeen: seen, Met: map[string]bool{}}
}

// ForgetAt is when in is forgotten if it stays idle, with its group's idle
// time (zero while a request is under way).
func (in *Instance) ForgetAt(idle time.Duration) time.Time {
	if in.Active > 0 {
		return time.Time{}
	}
	return in.LastSeen.Add(idle)
}

// Set is the known consumer instances of the broadcasting groups, and
// whether their last-seen times changed since the last snapshot. It has
// no lock: the broker's instances lock guards it. The zero Set is empty.
type Set struct {
	groups map[string]map[string]*Instance // group → client id → instance
	dirty  bool
}

// Get is client's instance of group, or nil.
func (s *Set) Get(group, client string) *Instance {
	return s.groups[group][client]
}

// Count is how many instances group has.
func (s *Set) Count(group string) int { return len(s.groups[group]) }

// Room reports whether group may get one more instance under limit (0:
// unlimited), and how many it has.
func (s *Set) Room(group string, limit int) (have int, ok bool) {
	have = s.Count(group)
	return have, limit <= 0 || have < limit
}

// Add makes in client's instance of group.
func (s *Set) Add(group, client string, in *Instance) {
	if s.groups == nil {
		s.groups = make(map[string]map[string]*Instance)
	}
	if s.groups[group] == nil {
		s.groups[group] = make(map[string]*Instance)
	}
	s.groups[group][client] = in
	s.dirty = true
}

// Remove forgets client's instance of group.
func (s *Set) Remove(group, client string) {
	delete(s.groups[group], client)
	if len(s.groups[group]) == 0 {
		delete(s.groups, group)
	}
	s.dirty = true
}

// DropGroup forgets every instance of group (a deleted group).
func (s *Set) DropGroup(group string) {
	if len(s.groups[group]) > 0 {
		delete(s.groups, group)
		s.dirty = true
	}
}

// Clients lists the client ids of group's instances, sorted.
func (s *Set) Clients(group string) []string {
	out := make([]string, 0, len(s.groups[group]))
	for c := range s.groups[group] {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// Enter counts a request of in as under way from now.
func (s *Set) Enter(in *Instance, now time.Time) {
	in.Active++
	in.LastSeen = now
	s.dirty = true
}

// Leave ends a request of in at now. It does not mark the set changed:
// the snapshot keeps the time its last change saw until the next one.
func (s *Set) Leave(in *Instance, now time.Time) {
	in.Active--
	in.LastSeen = now
}

// Touch notes a request at now of the named instances of group (the ones
// receipts name); unknown ones are not registered by it.
func (s *Set) Touch(group string, clients map[string]struct{}, now time.Time) {
	for c := range clients {
		if in := s.Get(group, c); in != nil {
			in.LastSeen = now
			s.dirty = true
		}
	}
}

// Ref names one instance a decision is about.
type Ref struct {
	Group, Client string
	// LastSeen is the instance's last-seen time; Idle its group's idle time.
	LastSeen time.Time
	Idle     time.Duration
}

// Idle lists the instances to forget at now, by group and client id: those
// with no request under way, last seen at least their group's idle time
// (idle of the group's name) before now.
func (s *Set) Idle(now time.Time, idle func(group string) time.Duration) []Ref {
	var out []Ref
	for group, clients := range s.groups {
		d := idle(group)
		for client, in := range clients {
			if in.Active > 0 || now.Sub(in.LastSeen) < d {
				continue
			}
			out = append(out, Ref{Group: group, Client: client, LastSeen: in.LastSeen, Idle: d})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Group < b.Group || (a.Group == b.Group && a.Client < b.Client)
	})
	return out
}

// Restore notes a progress key of progress group name in topic, as the
// broker rebuilds the set from its progress at open (each registered
// instance has some): an instance's key registers the instance when it is
// new, last seen at its time in seen (LastSeen of the snapshot) when that
// is before now, else at now; the instance has met topic. A group's own
// key changes nothing.
func (s *Set) Restore(name, topic string, seen map[string]time.Time, now time.Time) {
	group, client := Split(name)
	if client == "" {
		return
	}
	in := s.Get(group, client)
	if in == nil {
		in = New(now)
		if at, ok := seen[name]; ok && at.Before(now) {
			in.LastSeen = at
		}
		s.Add(group, client, in)
	}
	in.Met[topic] = true
}
