package pgmirror

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/mqgate/mqgate/storage/offset"
)

// TestProgressMatchesOffsetTable checks that the mirror's state machine
// agrees with the broker's (offset.Table) on any record sequence, and that
// it survives a save/restore through what the consumer_offsets row holds
// (committed, generation, acked_above) at any point.
func TestProgressMatchesOffsetTable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		keys := []offset.Key{{Group: "g", Topic: "a", QueueID: 0}, {Group: "g", Topic: "a", QueueID: -1}, {Group: "h", Topic: "b", QueueID: 3}}
		want := offset.NewTable()
		got := progressTable{}
		touched := map[offset.Key]struct{}{}
		forgot := map[string]bool{}
		n := rapid.IntRange(1, 60).Draw(t, "records")
		for i := 0; i < n; i++ {
			var rec offset.Record
			for j, m := 0, rapid.IntRange(1, 3).Draw(t, "entries"); j < m; j++ {
				k := keys[rapid.IntRange(0, len(keys)-1).Draw(t, "key")]
				_, gen, _ := want.Get(k)
				e := offset.Entry{Key: k, Generation: gen}
				switch kind := rapid.IntRange(0, 9).Draw(t, "kind"); {
				case kind == 0:
					e.Kind = offset.KindCommit
					e.Generation = gen + uint32(rapid.IntRange(0, 2).Draw(t, "genStep"))
					e.Offset = int64(rapid.IntRange(0, 40).Draw(t, "commit"))
				case kind == 1:
					e.Kind = offset.KindAdvance
					e.Offset = int64(rapid.IntRange(0, 40).Draw(t, "advance"))
				case kind == 3 && rapid.Bool().Draw(t, "forget"):
					e = offset.Entry{Kind: offset.KindForget, Key: offset.Key{Group: k.Group}} // the group was deleted
				default:
					e.Kind = offset.KindAck
					if kind == 2 {
						e.Kind = offset.KindFailed
					}
					if rapid.IntRange(0, 9).Draw(t, "stale") == 0 && gen > 0 {
						e.Generation = gen - 1
					}
					e.Offsets = rapid.SliceOfN(rapid.Int64Range(0, 40), 1, 5).Draw(t, "acks")
				}
				rec.Entries = append(rec.Entries, e)
			}
			want.Apply(rec)
			got.apply(rec, touched, forgot)
			if rapid.IntRange(0, 4).Draw(t, "restore") == 0 {
				got = restore(got) // as after a reload from PostgreSQL
			}
		}
		for _, k := range want.Keys() {
			committed, gen, _ := want.Get(k)
			s := got[k]
			require.NotNil(t, s, "key %v", k)
			require.Equal(t, committed, s.committed, "committed of %v", k)
			require.Equal(t, gen, s.generation, "generation of %v", k)
			require.Equal(t, want.AckedAbove(k), s.ackedAbove(), "acked of %v", k)
			_, ok := touched[k]
			require.True(t, ok, "key %v never written", k)
		}
		require.Len(t, got, len(want.Keys()))
	})
}

// restore round-trips a table through its row representation.
func restore(t progressTable) progressTable {
	out := progressTable{}
	for k, s := range t {
		r := &queueState{committed: s.committed, generation: s.generation, exact: s.exact}
		for _, off := range s.ackedAbove() {
			if r.acked == nil {
				r.acked = map[int64]struct{}{}
			}
			r.acked[off] = struct{}{}
		}
		out[k] = r
	}
	return out
}

func TestQueueStateLoose(t *testing.T) {
	key := offset.Key{Group: "g", Topic: "t"}
	t.Run("AdoptsAckGeneration", func(t *testing.T) {
		s := &queueState{committed: 10}
		require.True(t, s.apply(offset.Entry{Kind: offset.KindAck, Key: key, Generation: 7, Offsets: []int64{10, 11}}))
		require.Equal(t, int64(12), s.committed)
		require.Equal(t, uint32(7), s.generation)
		require.False(t, s.exact)
	})
	t.Run("CommitMakesExact", func(t *testing.T) {
		s := &queueState{committed: 10, generation: 9}
		require.True(t, s.apply(offset.Entry{Kind: offset.KindCommit, Key: key, Generation: 3, Offset: 4}))
		require.True(t, s.exact)
		require.Equal(t, int64(4), s.committed)
		require.False(t, s.raise(100), "an exact key does not follow live progress")
	})
	t.Run("RaiseFollowsLive", func(t *testing.T) {
		s := &queueState{committed: 10, acked: map[int64]struct{}{12: {}, 30: {}}}
		require.True(t, s.raise(20))
		require.Equal(t, []int64{30}, s.ackedAbove())
		require.False(t, s.raise(15), "never backwards")
		require.Equal(t, int64(30), s.maxSeen())
	})
}
