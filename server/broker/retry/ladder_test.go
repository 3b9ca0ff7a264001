package retry

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLadderLevelRuns: the runs of a level follow the scheduler's offset
// (pops off the front) and new entries (pushes at the back), and the
// counts per destination stay exact across runs split by a pop.
func TestLadderLevelRuns(t *testing.T) {
	t.Parallel()
	lv := ladderLevel{head: 10, next: 10, counts: map[int32]int64{}}
	for _, d := range []int32{1, 1, 2, 1, droppedDest, 2, 2} {
		lv.push(d, 1)
	}
	require.EqualValues(t, 17, lv.next)
	require.Len(t, lv.runs, 5)
	require.Equal(t, map[int32]int64{1: 3, 2: 3}, lv.counts)

	lv.popTo(11) // half of the first run
	require.Equal(t, map[int32]int64{1: 2, 2: 3}, lv.counts)
	lv.popTo(15) // through the dropped entry
	require.Equal(t, map[int32]int64{1: 0, 2: 2}, lv.counts)
	require.EqualValues(t, 15, lv.head)
	lv.popTo(40) // the scheduler is past everything read
	require.Equal(t, map[int32]int64{1: 0, 2: 0}, lv.counts)
	require.EqualValues(t, 40, lv.head)
	require.EqualValues(t, 40, lv.next)
	lv.push(3, 2)
	require.EqualValues(t, 2, lv.counts[3])
	lv.popTo(41)
	require.EqualValues(t, 1, lv.counts[3])
}
