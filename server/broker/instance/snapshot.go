package instance

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// SnapshotFile is the file of the instances' last-seen times, under the
// broker's config directory.
const SnapshotFile = "instances.snapshot"

// SnapshotVersion is the one version of SnapshotFile.
const SnapshotVersion = 1

// Snapshot is SnapshotFile: every known instance's last-seen time.
type Snapshot struct {
	Version   int    `json:"version"`
	Instances []Seen `json:"instances"`
}

// Seen is one instance's entry in Snapshot.
type Seen struct {
	Group      string `json:"group"`
	Client     string `json:"client"`
	LastSeenMs int64  `json:"lastSeenMs"`
}

// Snapshot is the set's snapshot, by group and client id, when it changed
// since the last one (changed false: nothing to write). It marks the set
// unchanged; MarkChanged undoes that when the snapshot was not written.
func (s *Set) Snapshot() (snap Snapshot, changed bool) {
	if !s.dirty {
		return Snapshot{}, false
	}
	snap = Snapshot{Version: SnapshotVersion, Instances: []Seen{}}
	for group, clients := range s.groups {
		for client, in := range clients {
			snap.Instances = append(snap.Instances, Seen{Group: group, Client: client, LastSeenMs: in.LastSeen.UnixMilli()})
		}
	}
	sort.Slice(snap.Instances, func(i, j int) bool {
		a, c := snap.Instances[i], snap.Instances[j]
		return a.Group < c.Group || (a.Group == c.Group && a.Client < c.Client)
	})
	s.dirty = false
	return snap, true
}

// MarkChanged marks the set changed since the last snapshot.
func (s *Set) MarkChanged() { s.dirty = true }

// EncodeSnapshot is the text of SnapshotFile.
func EncodeSnapshot(snap Snapshot) ([]byte, error) {
	return json.Marshal(snap)
}

// DecodeSnapshot decodes SnapshotFile. It refuses, whole, a file that is
// not one JSON object of SnapshotVersion with members of the right types,
// and one with an entry the broker never writes: an empty group or one
// holding Sep, an empty client id, an instance twice. Members it does not
// know are ignored.
func DecodeSnapshot(data []byte) (Snapshot, error) {
	var snap Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return Snapshot{}, fmt.Errorf("instances snapshot: %w", err)
	}
	if snap.Version != SnapshotVersion {
		return Snapshot{}, fmt.Errorf("instances snapshot: version %d", snap.Version)
	}
	seen := make(map[[2]string]struct{}, len(snap.Instances))
	for i, e := range snap.Instances {
		switch {
		case e.Group == "" || strings.Contains(e.Group, Sep):
			return Snapshot{}, fmt.Errorf("instances snapshot: instances[%d]: the group is empty or holds %q", i, Sep)
		case e.Client == "":
			return Snapshot{}, fmt.Errorf("instances snapshot: instances[%d]: the client id is empty", i)
		}
		k := [2]string{e.Group, e.Client}
		if _, dup := seen[k]; dup {
			return Snapshot{}, fmt.Errorf("instances snapshot: instances[%d]: the instance is listed twice", i)
		}
		seen[k] = struct{}{}
	}
	return snap, nil
}

// LastSeen is the snapshot's last-seen times by progress group (Key).
func (snap Snapshot) LastSeen() map[string]time.Time {
	out := make(map[string]time.Time, len(snap.Instances))
	for _, e := range snap.Instances {
		out[Key(e.Group, e.Client)] = time.UnixMilli(e.LastSeenMs)
	}
	return out
}
