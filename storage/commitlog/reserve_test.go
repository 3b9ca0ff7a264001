package commitlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// TestReserveKeptForUseReserveAppends: on a file system that can no
// longer allocate (ENOSPC injected into every fallocate), KeepReserve
// appends are refused with ErrNoSpace, whole and without writing a byte,
// as soon as they need a block that is not allocated, while UseReserve
// appends go on: past the active segment's allocated blocks they roll
// early into the next segment, whose first Reserve bytes were allocated
// when it was created, and they are refused only once those are used.
// Everything accepted survives a reopen; once space returns, KeepReserve
// appends resume.
func TestReserveKeptForUseReserveAppends(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) { testReserveKept(t, mode) })
	}
}

func testReserveKept(t *testing.T, mode FlushMode) {
	{
		const seg, reserve, n = 8 << 20, 256 << 10, 16000
		var full atomic.Bool
		opts := testOptions(t, seg, mode)
		opts.Reserve = reserve
		opts.FS = vfs.NewErrorFS(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
			if op == vfs.OpPreallocate && full.Load() {
				return fmt.Errorf("fallocate %s: %w", path, syscall.ENOSPC)
			}
			return nil
		}))
		l := mustOpen(t, opts)
		var w written
		add := func(u Use, n int) error {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(len(w.payloads) + i)
			}
			res, err := l.AppendUse(u, bytesPayload(p))
			if err == nil {
				w.payloads, w.results = append(w.payloads, p), append(w.results, res)
			}
			return err
		}
		require.NoError(t, add(KeepReserve, n))
		// The next segment and its reserve exist before a KeepReserve
		// append is accepted.
		room, _ := l.Room()
		require.GreaterOrEqual(t, room, int64(reserve))

		full.Store(true)
		var err error
		for range seg {
			if err = add(KeepReserve, n); err != nil {
				break
			}
		}
		require.ErrorIs(t, err, ErrNoSpace)
		require.ErrorIs(t, err, syscall.ENOSPC)
		before := l.Written()
		require.ErrorIs(t, add(KeepReserve, n), ErrNoSpace)
		require.Equal(t, before, l.Written(), "a refused append writes nothing")
		_, noSpace := l.Room()
		require.True(t, noSpace[KeepReserve])
		require.False(t, noSpace[UseReserve])

		// The broker's own records go on in the reserve.
		used := 0
		for range seg {
			if err = add(UseReserve, n); err != nil {
				break
			}
			used += n + HeaderSize
		}
		require.ErrorIs(t, err, ErrNoSpace)
		require.GreaterOrEqual(t, used, reserve-2*(n+HeaderSize), "UseReserve appends had the reserve")
		require.Len(t, l.Segments(), 2, "they rolled early into the reserved segment")
		first := w.results[len(w.results)-used/(n+HeaderSize)]
		require.Equal(t, int64(seg), first.Offset, "the first of them started the next segment")
		require.Less(t, before, int64(seg)/2, "it left the first segment early: only its first window was allocated")
		_, noSpace = l.Room()
		require.True(t, noSpace[UseReserve])
		require.NoError(t, l.Err(), "a full disk never kills the write path")
		requireLogHolds(t, l, w)

		full.Store(false)
		require.NoError(t, add(KeepReserve, n), "appends resume once space returns")
		require.NoError(t, l.Close())
		opts.FS = nil
		requireLogHolds(t, mustOpen(t, opts), w)
	}
}

// TestSegmentsAllocateAhead: a new log's segment files are sparse with
// only a window ahead of the write position allocated, plus the reserve
// of the next segment; the window grows as data arrives and the logical
// size stays SegmentSize.
func TestSegmentsAllocateAhead(t *testing.T) {
	t.Parallel()
	const seg = 256 << 20
	opts := testOptions(t, seg, FlushSync)
	l := mustOpen(t, opts)
	_, err := l.AppendUse(KeepReserve, bytesPayload([]byte("hello")))
	require.NoError(t, err)
	alloc := func(name string) (size, blocks int64) {
		st, err := os.Stat(filepath.Join(opts.Dir, name))
		require.NoError(t, err)
		return st.Size(), st.Sys().(*syscall.Stat_t).Blocks * 512
	}
	size, blocks := alloc(segmentName(0))
	require.Equal(t, int64(seg), size)
	require.Equal(t, aheadMin, blocks, "the active segment has the first window allocated")
	size, blocks = alloc(segmentName(seg))
	require.Equal(t, int64(seg), size)
	require.Equal(t, DefaultReserve, blocks, "the next segment has its reserve allocated")

	// 40 MiB more: the window has grown ahead of the write position.
	big := make([]byte, 1<<20)
	for range 40 {
		_, err := l.Append(bytesPayload(big))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, blocks = alloc(segmentName(0))
		return blocks >= l.Written()+aheadFor(l.Written())/2
	}, 5e9, 1e6, "allocated %d at %d", blocks, l.Written())
	require.Less(t, blocks, int64(seg), "never the whole segment at once")
}

// TestNextSegmentPreparedBeforeTheRoll: one segment past the active one
// is prepared (its reserve allocated) while the active one fills; the one
// after it only once the active segment is nearly full, so that a
// producer's append rolling into the reserved segment finds the following
// one ready.
func TestNextSegmentPreparedBeforeTheRoll(t *testing.T) {
	t.Parallel()
	const seg = 8 << 20
	opts := testOptions(t, seg, FlushAsync)
	opts.Reserve = 1 << 20
	l := mustOpen(t, opts)
	exists := func(base int64) bool {
		_, err := os.Stat(filepath.Join(opts.Dir, segmentName(base)))
		return err == nil
	}
	p := bytesPayload(make([]byte, 64<<10))
	_, err := l.AppendUse(KeepReserve, p)
	require.NoError(t, err)
	require.True(t, exists(seg), "the reserved segment")
	require.Never(t, func() bool { return exists(2 * seg) }, 100*1e6, 10*1e6, "only one segment past the active one")
	for l.Written() < seg/2+64<<10 {
		_, err := l.AppendUse(KeepReserve, p)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return exists(2 * seg) }, 5e9, 1e6, "the following one is prepared before the roll")
}
