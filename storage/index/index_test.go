package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// geometries are the tiny file shapes every behaviour test runs over:
// one slot (every key collides), a few slots, and entry capacities that
// roll every one or few entries.
var geometries = []struct{ slots, entries int }{
	{1, 1}, {1, 7}, {7, 3}, {7, 64}, {64, 1000},
}

func forGeometries(t *testing.T, fn func(t *testing.T, opts Options)) {
	for _, g := range geometries {
		t.Run(fmt.Sprintf("slots=%d/entries=%d", g.slots, g.entries), func(t *testing.T) {
			t.Parallel()
			fn(t, Options{Dir: t.TempDir(), SlotCount: g.slots, EntryCount: g.entries})
		})
	}
}

func TestAddLookup(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		x := mustOpen(t, Options{Dir: t.TempDir(), SlotCount: 64, EntryCount: 64})
		require.Equal(t, int64(-1), x.MaxPhysicalOffset())
		require.NoError(t, x.Add([]byte("a"), 100, baseTS))
		require.NoError(t, x.Add([]byte("b"), 100, baseTS))
		require.NoError(t, x.Add([]byte("a"), 250, baseTS+1))
		require.Equal(t, int64(250), x.MaxPhysicalOffset())

		got, err := x.Lookup([]byte("a"), 0, 0, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{250, 100}, got)
		got, err = x.Lookup([]byte("b"), 0, 0, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{100}, got)
		got, err = x.Lookup([]byte("missing"), 0, 0, 10)
		require.NoError(t, err)
		require.Empty(t, got)
		got, err = x.Lookup([]byte("a"), 0, 0, 1)
		require.NoError(t, err)
		require.Equal(t, []int64{250}, got, "max limits to the newest")
	})
	t.Run("ErrEmptyIndex", func(t *testing.T) {
		t.Parallel()
		x := mustOpen(t, Options{Dir: t.TempDir(), SlotCount: 8, EntryCount: 8})
		got, err := x.Lookup([]byte("a"), 0, 0, 10)
		require.NoError(t, err)
		require.Empty(t, got)
		require.NoError(t, x.Flush())
		require.Empty(t, indexFiles(t, x.opts.Dir), "no file until the first Add")
	})
}

// TestCollisionsAndRolls adds many keys over tiny slot tables (forced
// collisions) and tiny files (chains across many files); every lookup must
// equal the model, before and after a clean reopen.
func TestCollisionsAndRolls(t *testing.T) {
	t.Parallel()
	forGeometries(t, func(t *testing.T, opts Options) {
		x := mustOpen(t, opts)
		var m model
		rng := rand.New(rand.NewPCG(1, 2))
		phy := int64(0)
		for msg := 0; msg < 300; msg++ {
			phy += 1 + rng.Int64N(500)
			for k := 0; k < 1+rng.IntN(3); k++ {
				m.add(t, x, testKey(rng.IntN(40)), phy, baseTS+int64(msg))
			}
		}
		m.checkExact(t, x)
		require.Equal(t, phy, x.MaxPhysicalOffset())
		if opts.EntryCount < 300 {
			require.Greater(t, len(x.files), 1)
		}

		require.NoError(t, x.Close())
		x = mustOpen(t, opts)
		require.Equal(t, phy, x.MaxPhysicalOffset(), "a clean close keeps the last message")
		m.checkExact(t, x)
		m.add(t, x, testKey(1), phy, baseTS+999) // another key of the last message
		m.add(t, x, testKey(2), phy+1, baseTS+1000)
		m.checkExact(t, x)
	})
}

func TestLookupLimitAcrossFiles(t *testing.T) {
	t.Parallel()
	x := mustOpen(t, Options{Dir: t.TempDir(), SlotCount: 3, EntryCount: 2})
	for i := int64(0); i < 10; i++ {
		require.NoError(t, x.Add([]byte("k"), i*10, baseTS+i))
		require.NoError(t, x.Add([]byte("other"), i*10, baseTS+i))
	}
	require.Len(t, x.files, 10)
	for max := 1; max <= 12; max++ {
		got, err := x.Lookup([]byte("k"), 0, 0, max)
		require.NoError(t, err)
		want := []int64{90, 80, 70, 60, 50, 40, 30, 20, 10, 0}
		require.Equal(t, want[:min(max, 10)], got)
	}
	got, err := x.Lookup([]byte("k"), 0, 0, 0)
	require.NoError(t, err)
	require.Len(t, got, 10, "max <= 0 means DefaultLookupMax")
}

func TestLookupTimeRange(t *testing.T) {
	t.Parallel()
	forGeometries(t, func(t *testing.T, opts Options) {
		x := mustOpen(t, opts)
		var m model
		rng := rand.New(rand.NewPCG(3, 4))
		for i := int64(0); i < 200; i++ {
			// Store timestamps mostly rise, sometimes step back (NTP).
			ts := baseTS + i*1000 - rng.Int64N(3000)
			m.add(t, x, testKey(int(i%5)), i*100, ts)
		}
		ranges := [][2]int64{
			{0, 0}, {baseTS, 0}, {baseTS + 50_000, 0}, {0, baseTS + 10_000},
			{baseTS + 20_000, baseTS + 20_000}, {baseTS + 20_000, baseTS + 60_000},
			{baseTS + 1_000_000, 0}, {baseTS + 5000, baseTS + 4000},
		}
		for i := 0; i < 30; i++ {
			b := baseTS + rng.Int64N(210_000) - 5000
			ranges = append(ranges, [2]int64{b, b + rng.Int64N(20_000)})
		}
		for _, r := range ranges {
			for k := 0; k < 5; k++ {
				got, err := x.Lookup(testKey(k), r[0], r[1], 1000)
				require.NoError(t, err)
				want := m.expected(testKey(k), r[0], r[1], 0)
				if r[1] != 0 && r[1] < r[0] {
					want = nil
				}
				require.Equal(t, nonNil(want), nonNil(got), "key %d range %v", k, r)
			}
		}
		// Inclusive bounds, exactly.
		a := m.adds[77]
		got, err := x.Lookup(a.key, a.ts, a.ts, 10)
		require.NoError(t, err)
		require.Contains(t, got, a.phy)
	})
}

// TestDedup: a key listed twice in one message, and one message whose keys
// straddle a file roll, give each offset once.
func TestDedup(t *testing.T) {
	t.Parallel()
	forGeometries(t, func(t *testing.T, opts Options) {
		x := mustOpen(t, opts)
		for i := int64(0); i < 20; i++ {
			for r := 0; r < 3; r++ {
				require.NoError(t, x.Add([]byte("dup"), i, baseTS+i))
			}
		}
		got, err := x.Lookup([]byte("dup"), 0, 0, 100)
		require.NoError(t, err)
		require.Equal(t, []int64{19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, got)
		got, err = x.Lookup([]byte("dup"), 0, 0, 3)
		require.NoError(t, err)
		require.Equal(t, []int64{19, 18, 17}, got)
	})
}

func TestTimestampRolls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	x := mustOpen(t, Options{Dir: dir, SlotCount: 16, EntryCount: 100})
	const day = int64(24 * 3600 * 1000)
	var m model
	m.add(t, x, []byte("a"), 1, baseTS)
	m.add(t, x, []byte("a"), 2, baseTS+20*day) // fits int32 ms
	require.Len(t, x.files, 1)
	m.add(t, x, []byte("a"), 3, baseTS+30*day) // does not: new file
	require.Len(t, x.files, 2)
	m.add(t, x, []byte("a"), 4, baseTS+29*day) // clock back, still in range
	require.Len(t, x.files, 2)
	m.add(t, x, []byte("a"), 5, baseTS) // clock back 30 days: new file, clamped
	require.Len(t, x.files, 3)
	m.add(t, x, []byte("b"), 6, 0)
	names := indexFiles(t, dir)
	require.Equal(t, []string{fileName(baseTS), fileName(baseTS + 30*day), fileName(baseTS + 30*day + 1), fileName(baseTS + 30*day + 2)}, names)

	got, err := x.Lookup([]byte("a"), baseTS+25*day, baseTS+35*day, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{4, 3}, got)
	got, err = x.Lookup([]byte("a"), baseTS+day, baseTS+21*day, 10)
	require.NoError(t, err)
	// 5 was stored at baseTS but clamped to its file's base - 2^31 ms
	// (about baseTS+5.1 days): only a clock step back of more than 24.8
	// days costs time precision, never the entry.
	require.Equal(t, []int64{5, 2}, got)
	got, err = x.Lookup([]byte("a"), 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 4, 3, 2, 1}, got)
}

func TestAddErrors(t *testing.T) {
	t.Parallel()
	x := mustOpen(t, Options{Dir: t.TempDir(), SlotCount: 8, EntryCount: 8})
	require.NoError(t, x.Add([]byte("a"), 10, baseTS))
	t.Run("ErrOutOfOrder", func(t *testing.T) {
		require.ErrorIs(t, x.Add([]byte("a"), 9, baseTS), ErrOutOfOrder)
		require.NoError(t, x.Add([]byte("b"), 10, baseTS), "equal offsets are other keys of one message")
	})
	t.Run("ErrInvalidArgument", func(t *testing.T) {
		require.ErrorIs(t, x.Add([]byte("a"), -1, baseTS), ErrInvalidArgument)
		require.ErrorIs(t, x.Add([]byte("a"), 11, -5), ErrInvalidArgument)
	})
	t.Run("ErrKeyTooLong", func(t *testing.T) {
		long := make([]byte, MaxKeyLength+1)
		require.ErrorIs(t, x.Add(long, 11, baseTS), ErrKeyTooLong)
		_, err := x.Lookup(long, 0, 0, 1)
		require.ErrorIs(t, err, ErrKeyTooLong)
		require.NoError(t, x.Add(long[:MaxKeyLength], 11, baseTS))
	})
	t.Run("ErrClosed", func(t *testing.T) {
		require.NoError(t, x.Close())
		require.NoError(t, x.Close(), "Close is idempotent")
		require.ErrorIs(t, x.Add([]byte("a"), 12, baseTS), ErrClosed)
		_, err := x.Lookup([]byte("a"), 0, 0, 1)
		require.ErrorIs(t, err, ErrClosed)
		require.ErrorIs(t, x.Flush(), ErrClosed)
		_, err = x.DeleteBelow(100)
		require.ErrorIs(t, err, ErrClosed)
		require.Equal(t, int64(11), x.MaxPhysicalOffset())
	})
}

func TestOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{},
		{Dir: "x", SlotCount: -1},
		{Dir: "x", EntryCount: MaxEntryCount + 1},
		{Dir: "x", SlotCount: MaxSlotCount + 1},
	} {
		_, err := Open(o)
		require.ErrorIs(t, err, ErrInvalidArgument, "%+v", o)
	}
	require.NoError(t, Options{Dir: "x"}.Validate())
	x := mustOpen(t, Options{Dir: filepath.Join(t.TempDir(), "a", "b"), SlotCount: 5, EntryCount: 5})
	require.NoError(t, x.Add([]byte("k"), 0, 0))
	st, err := os.Stat(x.files[0].path)
	require.NoError(t, err)
	require.Equal(t, fileSize(5, 5), st.Size())
	require.Equal(t, int64(HeaderRegionSize+5*4+5*20), st.Size())
}

// TestAddAllocs: Add does not allocate (outside rolls).
func TestAddAllocs(t *testing.T) {
	x := mustOpen(t, Options{Dir: t.TempDir(), SlotCount: 1024, EntryCount: 100_000})
	key := []byte("topic\x00\x00order-42")
	require.NoError(t, x.Add(key, 0, baseTS)) // creates the file
	phy := int64(0)
	allocs := testing.AllocsPerRun(10_000, func() {
		phy++
		if err := x.Add(key, phy, baseTS+phy); err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
}

func TestDeleteBelow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	x := mustOpen(t, Options{Dir: dir, SlotCount: 4, EntryCount: 3})
	var m model
	for i := int64(0); i < 12; i++ { // 4 files: [0,10,20] [30,40,50] [60,70,80] [90,100,110]
		m.add(t, x, []byte("k"), i*10, baseTS+i)
	}
	require.Len(t, indexFiles(t, dir), 4)

	n, err := x.DeleteBelow(20) // first file ends at 20: kept
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = x.DeleteBelow(21)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = x.DeleteBelow(1 << 40) // never the newest
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Len(t, indexFiles(t, dir), 1)
	got, err := x.Lookup([]byte("k"), 0, 0, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{110, 100, 90}, got)

	require.NoError(t, x.Close())
	x = mustOpen(t, Options{Dir: dir, SlotCount: 4, EntryCount: 3})
	require.Equal(t, int64(110), x.MaxPhysicalOffset())
	got, err = x.Lookup([]byte("k"), 0, 0, 100)
	require.NoError(t, err)
	require.Equal(t, []int64{110, 100, 90}, got)
}

// TestDeleteBelowConcurrentLookup runs lookups while the writer adds, rolls
// and deletes files under it (run with -race): no fault, and every result
// is a newest-first subset of the model.
func TestDeleteBelowConcurrentLookup(t *testing.T) {
	t.Parallel()
	x := mustOpen(t, Options{Dir: t.TempDir(), SlotCount: 7, EntryCount: 16})
	const msgs, keys = 3000, 10
	phyOf := func(i int) int64 { return int64(i) * 8 }
	keyOf := func(i int) int { return (i * 7) % keys }

	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 8)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				k := (r + i) % keys
				got, err := x.Lookup(testKey(k), 0, 0, 1000)
				if err != nil {
					errc <- err
					return
				}
				for j, p := range got {
					if p%8 != 0 || keyOf(int(p/8)) != k || (j > 0 && p >= got[j-1]) {
						errc <- fmt.Errorf("key %d: bad result %v", k, got)
						return
					}
				}
			}
		}(r)
	}
	deleted := 0
	for i := 0; i < msgs; i++ {
		require.NoError(t, x.Add(testKey(keyOf(i)), phyOf(i), baseTS+int64(i)))
		if i%50 == 49 {
			n, err := x.DeleteBelow(phyOf(i - 100))
			require.NoError(t, err)
			deleted += n
		}
	}
	close(done)
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	require.Greater(t, deleted, 100)
}

// TestInjectedErrors: an msync failure makes the index refuse writes (a
// later flush must never claim the lost pages); a failed file creation does
// not.
func TestInjectedErrors(t *testing.T) {
	t.Parallel()
	t.Run("ErrFailedOnMsync", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		var failMsync bool
		var mu sync.Mutex
		fs := vfs.NewErrorFS(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
			mu.Lock()
			defer mu.Unlock()
			if op == vfs.OpMsync && failMsync {
				return vfs.ErrInjected
			}
			return nil
		}))
		opts := Options{Dir: dir, SlotCount: 8, EntryCount: 100, FS: fs}
		x := mustOpen(t, opts)
		var m model
		m.add(t, x, []byte("a"), 1, baseTS)
		m.add(t, x, []byte("a"), 2, baseTS)
		require.NoError(t, x.Flush())
		m.add(t, x, []byte("a"), 3, baseTS)
		mu.Lock()
		failMsync = true
		mu.Unlock()
		err := x.Flush()
		require.ErrorIs(t, err, ErrFailed)
		require.ErrorIs(t, err, vfs.ErrInjected)
		mu.Lock()
		failMsync = false
		mu.Unlock()
		require.ErrorIs(t, x.Flush(), ErrFailed, "sticky: no later flush succeeds")
		require.ErrorIs(t, x.Add([]byte("a"), 4, baseTS), ErrFailed)
		got, err := x.Lookup([]byte("a"), 0, 0, 10)
		require.NoError(t, err, "lookups keep working")
		require.Equal(t, []int64{3, 2, 1}, got)
		require.NoError(t, x.Close())

		x = mustOpen(t, opts)
		require.Equal(t, int64(1), x.MaxPhysicalOffset(), "only the flushed header counts; 2 may have had more keys")
		m.checkRecovered(t, x)
		m.readdAbove(t, x)
		m.checkExact(t, x)
	})
	t.Run("PreallocateFailureIsNotSticky", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		fail := 1
		var mu sync.Mutex
		fs := vfs.NewErrorFS(vfs.OS(), vfs.InjectorFunc(func(op vfs.Op, path string) error {
			mu.Lock()
			defer mu.Unlock()
			if op == vfs.OpPreallocate && fail > 0 {
				fail--
				return vfs.ErrInjected
			}
			return nil
		}))
		x := mustOpen(t, Options{Dir: dir, SlotCount: 8, EntryCount: 100, FS: fs})
		err := x.Add([]byte("a"), 1, baseTS)
		require.ErrorIs(t, err, vfs.ErrInjected)
		require.False(t, errors.Is(err, ErrFailed))
		require.Empty(t, indexFiles(t, dir))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, entries, "the .tmp file is removed")
		require.NoError(t, x.Add([]byte("a"), 1, baseTS))
		got, err := x.Lookup([]byte("a"), 0, 0, 10)
		require.NoError(t, err)
		require.Equal(t, []int64{1}, got)
	})
}

// TestRollFailures fails each step of creating the next file once: Add
// reports it, the index stays writable (nothing was lost that a later msync
// could claim), the retry succeeds and no .tmp file is left behind.
func TestRollFailures(t *testing.T) {
	t.Parallel()
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpPreallocate, vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir, vfs.OpOpen, vfs.OpMap} {
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			armed := false
			fs := vfs.NewErrorFS(vfs.OS(), vfs.InjectorFunc(func(o vfs.Op, path string) error {
				mu.Lock()
				defer mu.Unlock()
				if armed && o == op {
					armed = false
					return vfs.ErrInjected
				}
				return nil
			}))
			opts := Options{Dir: t.TempDir(), SlotCount: 3, EntryCount: 2, FS: fs}
			x := mustOpen(t, opts)
			var m model
			m.add(t, x, []byte("a"), 1, baseTS)
			m.add(t, x, []byte("b"), 2, baseTS)
			mu.Lock()
			armed = true
			mu.Unlock()
			err := x.Add([]byte("a"), 3, baseTS+1)
			require.ErrorIs(t, err, vfs.ErrInjected)
			require.NotErrorIs(t, err, ErrFailed)
			m.add(t, x, []byte("a"), 3, baseTS+1000) // another name than the failed attempt
			m.add(t, x, []byte("a"), 4, baseTS+2)
			m.checkExact(t, x)
			require.NoError(t, x.Close())
			ents, err := os.ReadDir(opts.Dir)
			require.NoError(t, err)
			for _, e := range ents {
				require.False(t, filepath.Ext(e.Name()) == ".tmp", e.Name())
			}
			require.Len(t, indexFiles(t, opts.Dir), 2, "no orphan of the failed attempt")
			x = mustOpen(t, opts)
			require.Equal(t, int64(4), x.MaxPhysicalOffset())
			m.checkExact(t, x)
		})
	}
}

// TestOpenSkipsOrphan: an empty file between two others (a roll that
// failed after its rename, then succeeded under another name) is removed,
// not taken for an unclean file that would cut the index short.
func TestOpenSkipsOrphan(t *testing.T) {
	t.Parallel()
	opts := Options{Dir: t.TempDir(), SlotCount: 3, EntryCount: 2}
	x := mustOpen(t, opts)
	var m model
	for i := int64(1); i <= 4; i++ {
		m.add(t, x, []byte("a"), i, baseTS+i*10)
	}
	require.NoError(t, x.Close())
	orphan, err := createFile(vfs.OS(), opts.Dir, baseTS+15, 3, 2, 2)
	require.NoError(t, err)
	require.NoError(t, orphan.release())
	require.Len(t, indexFiles(t, opts.Dir), 3)

	x = mustOpen(t, opts)
	require.Equal(t, int64(4), x.MaxPhysicalOffset())
	m.checkExact(t, x)
	require.Len(t, indexFiles(t, opts.Dir), 2)
}

// Complete lets a Flush claim the last message added, also one without
// keys, so after a crash the index claims it and nothing is re-added.
func TestCompleteLetsFlushClaimTheLastMessage(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SlotCount: 7, EntryCount: 16}
	x := mustOpen(t, opts)
	require.NoError(t, x.Add([]byte("k1"), 100, 1))
	require.NoError(t, x.Flush())
	x.Complete(100)
	x.Complete(200) // a message without keys
	require.NoError(t, x.Flush())
	crash(x)
	y := mustOpen(t, opts)
	require.Equal(t, int64(200), y.MaxPhysicalOffset(), "the flush claimed the completed messages")
	got, err := y.Lookup([]byte("k1"), 0, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{100}, got)
	require.NoError(t, y.Add([]byte("k2"), 300, 2), "entries can follow a header that claimed without a new entry")
	require.NoError(t, y.Close())
}
