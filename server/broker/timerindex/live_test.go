package timerindex

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The live set against a map: adds (single and in dense runs, so chunks
// turn into bitmaps and back), removes, floor raises, next, clone and the
// checkpoint encoding.
//
// Quick: 30 checks; LONG=1: 300.
func TestLiveSetModel(t *testing.T) {
	modelChecks(t, 30, 300)
	rapid.Check(t, func(t *rapid.T) {
		s := newLiveSet(rapid.Int64Range(0, 3*chunkSize).Draw(t, "floor"))
		model := map[int64]bool{}
		floor := s.floor
		seqGen := rapid.Int64Range(0, 4*chunkSize)
		check := func() {
			require.Equal(t, int64(len(model)), s.total)
			var want []int64
			for seq := range model {
				want = append(want, seq)
			}
			slices.Sort(want)
			var got []int64
			for seq, ok := s.next(0); ok; seq, ok = s.next(seq + 1) {
				got = append(got, seq)
			}
			require.Equal(t, want, got)
		}
		for range rapid.IntRange(1, 40).Draw(t, "steps") {
			switch rapid.IntRange(0, 6).Draw(t, "op") {
			case 0, 1:
				seq := seqGen.Draw(t, "seq")
				require.Equal(t, seq >= floor && !model[seq], s.add(seq))
				if seq >= floor {
					model[seq] = true
				}
			case 2: // a dense run: more than an array holds
				from := seqGen.Draw(t, "from")
				for seq := from; seq < from+arrayMax+rapid.Int64Range(0, 200).Draw(t, "extra"); seq++ {
					s.add(seq)
					if seq >= floor {
						model[seq] = true
					}
				}
			case 3:
				seq := seqGen.Draw(t, "seq")
				require.Equal(t, model[seq], s.remove(seq))
				delete(model, seq)
			case 4: // remove most of a chunk: a bitmap turns back into an array
				from := seqGen.Draw(t, "from")
				for seq := from; seq < from+arrayMax; seq++ {
					require.Equal(t, model[seq], s.remove(seq))
					delete(model, seq)
				}
			case 5:
				to := floor + rapid.Int64Range(0, chunkSize+10).Draw(t, "raise")
				var lost int64
				for seq := range model {
					if seq < to {
						lost++
						delete(model, seq)
					}
				}
				require.Equal(t, lost, s.raiseFloor(to))
				floor = max(floor, to)
			case 6:
				seq := seqGen.Draw(t, "seq")
				require.Equal(t, model[seq], s.contains(seq))
			}
			check()
		}
		c := s.clone()
		d, rest, err := decodeLiveSet(s.encode(nil))
		require.NoError(t, err)
		require.Empty(t, rest)
		for _, other := range []*liveSet{c, d} {
			require.Equal(t, s.total, other.total)
			require.Equal(t, s.floor, other.floor)
			for seq := range model {
				require.True(t, other.contains(seq))
			}
		}
		if len(model) > 0 { // the clone is independent
			for seq := range model {
				c.remove(seq)
				require.True(t, s.contains(seq))
				break
			}
		}
	})
}

// A dense set costs a bit per seq, a sparse one two bytes per member
// (four with the arrays' growth slack).
func TestLiveSetMemory(t *testing.T) {
	dense := newLiveSet(0)
	for seq := int64(0); seq < 1_000_000; seq++ {
		dense.add(seq)
	}
	require.Less(t, dense.bytes(), int64(1_000_000/8+20*chunkSize/8))
	sparse := newLiveSet(0)
	for seq := int64(0); seq < 100_000_000; seq += 100 {
		sparse.add(seq)
	}
	require.Less(t, sparse.bytes(), int64(1_000_000*4+1600*64))
}
