package timerindex

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The buffer against a sorted slice: random inserts (chunks split), seeks,
// front drops and the drop below a seq after a checkpoint.
func TestMemtableModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var m memtable
		var model []item
		seq := int64(0)
		keyCmp := func(a, b item) int {
			switch {
			case a.key().Less(b.key()):
				return -1
			case b.key().Less(a.key()):
				return 1
			}
			return 0
		}
		for range rapid.IntRange(1, 30).Draw(t, "steps") {
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0, 1:
				for range rapid.IntRange(1, 700).Draw(t, "n") {
					it := item{due: rapid.Int64Range(0, 50).Draw(t, "due"), id: rapid.Int64Range(0, 9).Draw(t, "id"), seq: seq, topic: uint32(seq % 3)}
					seq++
					m.insert(it)
					model = append(model, it)
				}
				slices.SortFunc(model, keyCmp)
			case 2:
				after := Key{Due: rapid.Int64Range(-1, 51).Draw(t, "due"), ID: rapid.Int64Range(-1, 10).Draw(t, "id"), Seq: rapid.Int64Range(-1, seq).Draw(t, "seq")}
				it := &memIter{m: &m}
				it.ci, it.ij = m.seek(after)
				var got []item
				for e, ok := it.peek(); ok; e, ok = it.peek() {
					got = append(got, e)
					it.advance()
				}
				var want []item
				for _, e := range model {
					if after.Less(e.key()) {
						want = append(want, e)
					}
				}
				require.Equal(t, want, got)
			case 3:
				cut := rapid.Int64Range(0, seq).Draw(t, "dead below")
				m.dropFrontWhile(func(it item) bool { return it.seq < cut })
				for len(model) > 0 && model[0].seq < cut {
					model = model[1:]
				}
			case 4:
				cut := rapid.Int64Range(0, seq).Draw(t, "written below")
				m.dropSeqsBelow(cut)
				model = slices.DeleteFunc(model, func(it item) bool { return it.seq < cut })
			}
			require.Equal(t, len(model), m.len())
			if len(model) == 0 {
				require.Empty(t, m.sorted())
			} else {
				require.Equal(t, model, m.sorted())
			}
			for _, c := range m.chunks {
				require.NotEmpty(t, c)
				require.LessOrEqual(t, len(c), memChunk)
			}
		}
	})
}
