package consumequeue

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTruncateFrom(t *testing.T) {
	t.Parallel()
	const n = 14
	forEachFileSize(t, func(t *testing.T, epf int) {
		for cut := int64(0); cut <= n; cut++ {
			t.Run(fmt.Sprintf("OK_Cut%d", cut), func(t *testing.T) {
				q, dir := setup(t, epf)
				putRange(t, q, 0, n)
				require.NoError(t, q.TruncateFrom(cut))
				requireRange(t, q, 0, cut)
				// Files wholly at or beyond the cut are gone.
				require.Len(t, dataFiles(t, dir), int((cut+int64(epf)-1)/int64(epf)))

				q = reopen(t, q, epf)
				requireRange(t, q, 0, cut)
				putRange(t, q, cut, n+2)
				q = reopen(t, q, epf)
				requireRange(t, q, 0, n+2)
			})
		}
	})
	t.Run("ErrGap", func(t *testing.T) {
		q, _ := setup(t, 3)
		putRange(t, q, 0, 4)
		require.ErrorIs(t, q.TruncateFrom(5), ErrGap)
		require.NoError(t, q.TruncateFrom(4), "truncating at MaxOffset is a no-op")
		require.ErrorIs(t, q.TruncateFrom(-1), ErrOffsetTooSmall)
		requireRange(t, q, 0, 4)
	})
}

func TestTruncateByPhysical(t *testing.T) {
	t.Parallel()
	const n = 12
	forEachFileSize(t, func(t *testing.T, epf int) {
		tests := []struct {
			name string
			end  int64
			want int64
		}{
			{"OK_AtAnEntry", entryFor(7).CommitLogOffset, 7},
			{"OK_BetweenEntries", entryFor(7).CommitLogOffset + 1, 8},
			{"OK_AtFirstEntry", entryFor(0).CommitLogOffset, 0},
			{"OK_Zero", 0, 0},
			{"OK_BeyondAll", entryFor(n).CommitLogOffset, n},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				q, _ := setup(t, epf)
				putRange(t, q, 0, n)
				got, err := q.TruncateByPhysical(tt.end)
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				requireRange(t, q, 0, tt.want)
				q = reopen(t, q, epf)
				requireRange(t, q, 0, tt.want)
			})
		}
	})
}

func TestDeleteBelowPhysical(t *testing.T) {
	t.Parallel()
	const n = 20
	forEachFileSize(t, func(t *testing.T, epf int) {
		for newMin := int64(0); newMin <= n; newMin++ {
			t.Run(fmt.Sprintf("OK_Min%d", newMin), func(t *testing.T) {
				q, dir := setup(t, epf)
				putRange(t, q, 0, n)
				got, err := q.DeleteBelowPhysical(entryFor(newMin).CommitLogOffset)
				require.NoError(t, err)
				require.Equal(t, newMin, got)
				requireRange(t, q, newMin, n)

				// Every file whose last entry is below the minimum is gone,
				// except the last file.
				lastFile := int64(n-1) / int64(epf) * int64(epf)
				firstKept := min(newMin/int64(epf)*int64(epf), lastFile)
				var want []int64
				for f := firstKept; f <= lastFile; f += int64(epf) {
					want = append(want, f)
				}
				require.Equal(t, fileNames(want...), dataFiles(t, dir))

				q = reopen(t, q, epf)
				requireRange(t, q, newMin, n)
				require.ErrorIs(t, q.Put(newMin-1, entryFor(newMin-1)), ErrOffsetTooSmall)
				putRange(t, q, n, n+3)
				q = reopen(t, q, epf)
				requireRange(t, q, newMin, n+3)
			})
		}
	})
	t.Run("OK_NeverLowersMin", func(t *testing.T) {
		q, _ := setup(t, 3)
		putRange(t, q, 0, 10)
		got, err := q.DeleteBelowPhysical(entryFor(6).CommitLogOffset)
		require.NoError(t, err)
		require.Equal(t, int64(6), got)
		got, err = q.DeleteBelowPhysical(entryFor(2).CommitLogOffset)
		require.NoError(t, err)
		require.Equal(t, int64(6), got)
		require.Equal(t, int64(6), q.MinOffset())
	})
	t.Run("OK_EverythingThenAppend", func(t *testing.T) {
		q, dir := setup(t, 3)
		putRange(t, q, 0, 9)
		got, err := q.DeleteBelowPhysical(1 << 40)
		require.NoError(t, err)
		require.Equal(t, int64(9), got)
		requireRange(t, q, 9, 9)
		require.Equal(t, fileNames(6), dataFiles(t, dir), "the last file stays")
		q = reopen(t, q, 3)
		requireRange(t, q, 9, 9)
		putRange(t, q, 9, 11)
		q = reopen(t, q, 3)
		requireRange(t, q, 9, 11)
	})
}

func TestTruncateBelowMin(t *testing.T) {
	t.Parallel()
	forEachFileSize(t, func(t *testing.T, epf int) {
		q, dir := setup(t, epf)
		putRange(t, q, 0, 20)
		_, err := q.DeleteBelowPhysical(entryFor(12).CommitLogOffset)
		require.NoError(t, err)

		// The CommitLog lost everything from entry 5 on: the queue empties
		// and its minimum follows the cut down.
		got, err := q.TruncateByPhysical(entryFor(5).CommitLogOffset)
		require.NoError(t, err)
		require.Equal(t, int64(12), got, "only [min, max) is searched")
		require.NoError(t, q.TruncateFrom(5))
		requireRange(t, q, 5, 5)
		require.LessOrEqual(t, len(dataFiles(t, dir)), 1)

		q = reopen(t, q, epf)
		requireRange(t, q, 5, 5)
		putRange(t, q, 5, 9)
		q = reopen(t, q, epf)
		requireRange(t, q, 5, 9)
	})
}
