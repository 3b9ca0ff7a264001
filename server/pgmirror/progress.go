package pgmirror

import (
	"context"
	"slices"
	"strings"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/storage/offset"
)

// queueState is the mirror's copy of one key's progress: the same state
// machine as offset.Table (TestProgressMatchesOffsetTable checks that they
// agree on any record sequence), kept here because the mirror must restore
// it from PostgreSQL rows, which offset.Table has no API for.
type queueState struct {
	committed  int64
	generation uint32
	acked      map[int64]struct{} // acknowledged offsets >= committed
	// exact is false after a re-seed from live progress (records lost to
	// retention): the generation and the acked set are unknown, so the
	// first record of the key adopts its generation, and the committed
	// offset follows the live one until an explicit commit.
	exact bool
}

// apply applies one record entry and reports whether the state changed.
func (s *queueState) apply(e offset.Entry) bool {
	switch e.Kind {
	case offset.KindAck, offset.KindFailed: // a failed delivery is done for the group too
		if e.Generation != s.generation {
			if s.exact {
				return false // an ack of an older generation, overtaken by a reset
			}
			s.generation = e.Generation
		}
		changed := false
		for _, off := range e.Offsets {
			if off < s.committed {
				continue
			}
			if _, ok := s.acked[off]; ok {
				continue
			}
			if s.acked == nil {
				s.acked = make(map[int64]struct{})
			}
			s.acked[off] = struct{}{}
			changed = true
		}
		for {
			if _, ok := s.acked[s.committed]; !ok {
				break
			}
			delete(s.acked, s.committed)
			s.committed++
		}
		return changed
	case offset.KindCommit:
		if e.Generation <= s.generation && s.exact {
			return false // already applied, or superseded
		}
		s.generation = e.Generation
		s.committed = e.Offset
		s.exact = true
		s.acked = nil // a commit replays everything from its offset
		return true
	case offset.KindAdvance:
		if e.Offset <= s.committed {
			return false
		}
		s.committed = e.Offset // retention moved the minimum; acks above stay
		for off := range s.acked {
			if off < s.committed {
				delete(s.acked, off)
			}
		}
		for {
			if _, ok := s.acked[s.committed]; !ok {
				break
			}
			delete(s.acked, s.committed)
			s.committed++
		}
		return true
	}
	return false
}

// raise moves a loose (inexact) key's committed offset up to live, the
// broker's current committed offset.
func (s *queueState) raise(live int64) bool {
	if s.exact || live <= s.committed {
		return false
	}
	s.committed = live
	for off := range s.acked {
		if off < live {
			delete(s.acked, off)
		}
	}
	return true
}

// ackedAbove lists the acknowledged offsets above committed, ascending
// (never nil: the column is NOT NULL).
func (s *queueState) ackedAbove() []int64 {
	out := make([]int64, 0, len(s.acked))
	for off := range s.acked {
		out = append(out, off)
	}
	slices.Sort(out)
	return out
}

// maxSeen is the highest acknowledged offset (committed-1 when none above
// committed is acknowledged).
func (s *queueState) maxSeen() int64 {
	top := s.committed - 1
	for off := range s.acked {
		top = max(top, off)
	}
	return top
}

// progressTable is the mirror's copy of every key's progress.
type progressTable map[offset.Key]*queueState

// apply applies a record and adds the keys it changed to touched. A
// forget entry (the group was deleted, or one of its consumer instances
// forgotten) drops the keys it ends and adds its name to forgot, so their
// rows go before any row of a group (or instance) re-created under the
// name is written.
func (t progressTable) apply(r offset.Record, touched map[offset.Key]struct{}, forgot map[string]bool) {
	for _, e := range r.Entries {
		if e.Kind == offset.KindForget {
			for k := range t {
				if offset.Forgets(e.Key.Group, k.Group) { // a group's with its instances', or one instance's
					delete(t, k)
					delete(touched, k)
				}
			}
			forgot[e.Key.Group] = true
			continue
		}
		s := t[e.Key]
		if s == nil {
			s = &queueState{exact: true}
			t[e.Key] = s
			touched[e.Key] = struct{}{} // a row for every key the broker knows
		}
		if s.apply(e) {
			touched[e.Key] = struct{}{}
		}
	}
}

// splitKeyGroup splits a progress key's group into the group and, for a
// broadcasting group's consumer instance ("<group>@<client id>"), its
// client id: the columns group_name and client_id.
func splitKeyGroup(name string) (group, client string) {
	group, client, _ = strings.Cut(name, offset.InstanceSep)
	return group, client
}

// instanceLister is a Source that lists a broadcasting group's consumer
// instances (the broker does): re-seeds then cover their rows too.
type instanceLister interface {
	Instances(ctx context.Context, group string) ([]broker.InstanceProgress, error)
}

// liveProgress is the live progress of a progress group: a group's own,
// or one consumer instance's (asked for with its client id).
func (m *Mirror) liveProgress(ctx context.Context, name string) ([]broker.QueueProgress, error) {
	group, client := splitKeyGroup(name)
	if client == "" {
		return m.src.Progress(broker.WithClient(ctx, ""), group)
	}
	return m.src.Progress(broker.WithClient(ctx, client), group)
}
