package index

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readHeaders decodes both header copies of the file at path.
func readHeaders(t testing.TB, path string) (a, b header, errA, errB error) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	a, errA = decodeHeader(data[:HeaderSize])
	b, errB = decodeHeader(data[HeaderCopyOffset : HeaderCopyOffset+HeaderSize])
	return
}

// patch overwrites bytes of the file at path.
func patch(t testing.TB, path string, off int64, p []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(p, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func garbage(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// fill adds msgs messages of 1..3 keys each, flushing after message
// flushAt (-1: never), and returns the last offset.
func fill(t testing.TB, x *Index, m *model, rng *rand.Rand, phy int64, msgs, flushAt int) int64 {
	t.Helper()
	for i := 0; i < msgs; i++ {
		phy += 1 + rng.Int64N(300)
		for k := 0; k < 1+rng.IntN(3); k++ {
			m.add(t, x, testKey(rng.IntN(25)), phy, baseTS+phy/10)
		}
		if i == flushAt {
			require.NoError(t, x.Flush())
		}
	}
	return phy
}

// TestCrashWithoutFlush writes entries after the last Flush, kills the
// index, damages what a crash may damage (slots, entries past the durable
// header) and reopens: no garbage, nothing at or below MaxPhysicalOffset
// lost, and after the store re-adds everything above it, exact results.
func TestCrashWithoutFlush(t *testing.T) {
	t.Parallel()
	damages := map[string]func(t *testing.T, rng *rand.Rand, f *file, h header){
		"None": func(*testing.T, *rand.Rand, *file, header) {},
		"ZeroSlots": func(t *testing.T, _ *rand.Rand, f *file, _ header) {
			patch(t, f.path, HeaderRegionSize, make([]byte, f.entriesOff-HeaderRegionSize))
		},
		"GarbageSlots": func(t *testing.T, rng *rand.Rand, f *file, _ header) {
			patch(t, f.path, HeaderRegionSize, garbage(rng, f.entriesOff-HeaderRegionSize))
		},
		"ZeroTail": func(t *testing.T, _ *rand.Rand, f *file, h header) {
			from := f.entriesEnd(h.entryCount)
			patch(t, f.path, int64(from), make([]byte, int(fileSize(f.slotCount, f.capacity))-from))
		},
		"GarbageTail": func(t *testing.T, rng *rand.Rand, f *file, h header) {
			from := f.entriesEnd(h.entryCount)
			patch(t, f.path, int64(from), garbage(rng, int(fileSize(f.slotCount, f.capacity))-from))
		},
		"GarbageTailAndSlots": func(t *testing.T, rng *rand.Rand, f *file, h header) {
			from := f.entriesEnd(h.entryCount)
			patch(t, f.path, int64(from), garbage(rng, int(fileSize(f.slotCount, f.capacity))-from))
			patch(t, f.path, HeaderRegionSize, garbage(rng, f.entriesOff-HeaderRegionSize))
		},
	}
	for name, damage := range damages {
		for _, g := range []struct{ slots, entries int }{{1, 50}, {7, 40}, {64, 1000}} {
			t.Run(fmt.Sprintf("%s/slots=%d/entries=%d", name, g.slots, g.entries), func(t *testing.T) {
				t.Parallel()
				opts := Options{Dir: t.TempDir(), SlotCount: g.slots, EntryCount: g.entries}
				rng := rand.New(rand.NewPCG(uint64(len(name)), uint64(g.slots)))
				x := mustOpen(t, opts)
				var m model
				phy := fill(t, x, &m, rng, 0, 30, 29)
				flushed := x.completePhy
				phy = fill(t, x, &m, rng, phy, 30, -1)
				last := x.cur
				crash(x)

				h, _, errA, _ := readHeaders(t, last.path)
				require.NoError(t, errA)
				require.False(t, h.clean())
				damage(t, rng, last, h)

				x = mustOpen(t, opts)
				require.GreaterOrEqual(t, x.MaxPhysicalOffset(), flushed)
				require.Less(t, x.MaxPhysicalOffset(), phy, "unflushed messages are not claimed")
				m.checkRecovered(t, x)
				m.readdAbove(t, x)
				m.checkExact(t, x)
				fill(t, x, &m, rng, phy, 20, -1)
				m.checkExact(t, x)

				require.NoError(t, x.Close())
				x = mustOpen(t, opts)
				m.checkExact(t, x)
			})
		}
	}
}

// TestCrashMidMessage: a Flush between two keys of one message does not
// claim that message; after a crash it is re-added without duplicates.
func TestCrashMidMessage(t *testing.T) {
	t.Parallel()
	opts := Options{Dir: t.TempDir(), SlotCount: 8, EntryCount: 100}
	x := mustOpen(t, opts)
	var m model
	m.add(t, x, []byte("a"), 10, baseTS)
	m.add(t, x, []byte("b"), 10, baseTS)
	m.add(t, x, []byte("a"), 20, baseTS)
	require.NoError(t, x.Flush()) // message 20 may still get key c
	m.add(t, x, []byte("c"), 20, baseTS)
	crash(x)

	x = mustOpen(t, opts)
	require.Equal(t, int64(10), x.MaxPhysicalOffset())
	m.checkRecovered(t, x)
	m.readdAbove(t, x)
	m.checkExact(t, x)
	require.Equal(t, uint32(4), x.cur.count, "the partial message was dropped, then re-added: not duplicated")
}

// TestCrashImages is a crash-image sweep: random workloads on a file system
// that records what fdatasync/msync made durable; at a random point the
// process "loses power", every sector written since its last sync keeps
// its new bytes, reverts, or (sometimes) turns to garbage, and the index is
// reopened. Several rounds per image chain recoveries (entries dropped by
// one recovery are overwritten by the next run).
func TestCrashImages(t *testing.T) {
	t.Parallel()
	iterations := 60
	if testing.Short() {
		iterations = 10
	}
	for it := 0; it < iterations; it++ {
		t.Run(fmt.Sprint(it), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(it), 99))
			g := geometries[rng.IntN(len(geometries))]
			fs := newCrashFS()
			opts := Options{Dir: t.TempDir(), SlotCount: g.slots, EntryCount: g.entries, FS: fs}
			var m model
			phy := int64(0)
			for round := 0; round < 4; round++ {
				x := mustOpen(t, opts)
				m.checkRecovered(t, x)
				m.readdAbove(t, x)
				m.checkExact(t, x)
				floor := int64(-1)
				for op := 0; op < 40; op++ {
					phy = fill(t, x, &m, rng, phy, 1, -1)
					if rng.IntN(8) == 0 {
						require.NoError(t, x.Flush())
						floor = x.completePhy
					}
				}
				if rng.IntN(4) == 0 {
					require.NoError(t, x.Close())
					floor = phy
				} else {
					crash(x)
				}
				withGarbage := rng.IntN(3) == 0
				fs.image(t, opts.Dir, rng, withGarbage)

				x = mustOpen(t, opts)
				if !withGarbage {
					require.GreaterOrEqual(t, x.MaxPhysicalOffset(), floor, "a flushed message was lost")
				}
				m.checkRecovered(t, x)
				crash(x) // what recovery wrote must be durable: reopen once more
				fs.image(t, opts.Dir, rng, false)
			}
		})
	}
}

func TestHeaderGarbling(t *testing.T) {
	t.Parallel()
	// setup builds 4 closed files of 5 entries (the last one not full).
	setup := func(t *testing.T) (Options, *model, []string) {
		opts := Options{Dir: t.TempDir(), SlotCount: 3, EntryCount: 5}
		x := mustOpen(t, opts)
		var m model
		for i := int64(1); i <= 18; i++ {
			m.add(t, x, testKey(int(i%4)), i*10, baseTS+i)
		}
		require.NoError(t, x.Close())
		names := indexFiles(t, opts.Dir)
		require.Len(t, names, 4)
		for i := range names {
			names[i] = filepath.Join(opts.Dir, names[i])
		}
		return opts, &m, names
	}
	rng := rand.New(rand.NewPCG(5, 6))

	t.Run("CopyA", func(t *testing.T) {
		opts, m, paths := setup(t)
		for _, p := range paths {
			patch(t, p, 10, garbage(rng, 20))
		}
		x := mustOpen(t, opts)
		require.Equal(t, int64(180), x.MaxPhysicalOffset())
		m.checkExact(t, x)
	})
	t.Run("CopyB", func(t *testing.T) {
		opts, m, paths := setup(t)
		for _, p := range paths {
			patch(t, p, HeaderCopyOffset+HeaderSize-1, []byte{0xff})
		}
		x := mustOpen(t, opts)
		require.Equal(t, int64(180), x.MaxPhysicalOffset())
		m.checkExact(t, x)
	})
	t.Run("BothCopiesOfAnOlderFile", func(t *testing.T) {
		opts, m, paths := setup(t)
		patch(t, paths[1], 0, garbage(rng, HeaderRegionSize))
		x := mustOpen(t, opts)
		require.Equal(t, int64(180), x.MaxPhysicalOffset(), "rebuilt from its entries, newer files kept")
		m.checkExact(t, x)
		require.NoError(t, x.Close())
		a, b, errA, errB := readHeaders(t, paths[1])
		require.NoError(t, errA)
		require.NoError(t, errB)
		require.Equal(t, a, b)
		require.True(t, a.sealed() && a.clean())
		require.Equal(t, uint32(5), a.entryCount)
	})
	t.Run("BothCopiesOfTheNewestFile", func(t *testing.T) {
		opts, m, paths := setup(t)
		patch(t, paths[3], 0, garbage(rng, HeaderRegionSize))
		x := mustOpen(t, opts)
		require.Equal(t, int64(170), x.MaxPhysicalOffset(), "its last message counts as incomplete")
		m.checkRecovered(t, x)
		m.readdAbove(t, x)
		m.checkExact(t, x)
	})
	t.Run("OlderFileScanHitsGarbage", func(t *testing.T) {
		opts, m, paths := setup(t)
		patch(t, paths[1], 0, garbage(rng, HeaderRegionSize))
		patch(t, paths[1], HeaderRegionSize+3*SlotSize+2*EntrySize, garbage(rng, EntrySize)) // entry 3 of 60..100
		x := mustOpen(t, opts)
		require.Equal(t, int64(60), x.MaxPhysicalOffset(), "entries 1-2 survive; 70 may have lost keys; newer files quarantined")
		require.Len(t, indexFiles(t, opts.Dir), 2)
		m.checkRecovered(t, x)
		m.readdAbove(t, x)
		m.checkExact(t, x)
	})
	t.Run("GeometryFromAnotherHeader", func(t *testing.T) {
		opts, m, paths := setup(t)
		opts.SlotCount, opts.EntryCount = 11, 13 // Options no longer describe the files
		for _, p := range paths[:3] {
			patch(t, p, 0, garbage(rng, HeaderRegionSize))
		}
		x := mustOpen(t, opts)
		require.Equal(t, int64(180), x.MaxPhysicalOffset(), "geometry taken from file 3's header")
		m.checkExact(t, x)
	})
	t.Run("QuarantineUnknownGeometry", func(t *testing.T) {
		opts, m, paths := setup(t)
		opts.SlotCount, opts.EntryCount = 11, 13
		for _, p := range paths {
			patch(t, p, 0, garbage(rng, HeaderRegionSize))
		}
		x := mustOpen(t, opts)
		require.Equal(t, int64(-1), x.MaxPhysicalOffset())
		ents, err := os.ReadDir(opts.Dir)
		require.NoError(t, err)
		var broken []string
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".broken") {
				broken = append(broken, e.Name())
			}
		}
		require.Len(t, broken, 4)
		require.Empty(t, indexFiles(t, opts.Dir))
		m.readdAbove(t, x)
		m.checkExact(t, x)
	})
	t.Run("TruncatedFile", func(t *testing.T) {
		opts, m, paths := setup(t)
		require.NoError(t, os.Truncate(paths[2], HeaderRegionSize+10))
		x := mustOpen(t, opts)
		require.Equal(t, int64(100), x.MaxPhysicalOffset())
		m.readdAbove(t, x)
		m.checkExact(t, x)
	})
	t.Run("OlderFileNotClean", func(t *testing.T) {
		opts, m, paths := setup(t)
		a, _, err, _ := readHeaders(t, paths[1])
		require.NoError(t, err)
		a.flags = 0
		a.generation++
		var buf [HeaderSize]byte
		a.encode(buf[:])
		patch(t, paths[1], 0, buf[:])
		x := mustOpen(t, opts)
		require.Equal(t, a.indexedPhy, x.MaxPhysicalOffset(), "file 1 becomes the newest; 2 and 3 quarantined")
		require.Len(t, indexFiles(t, opts.Dir), 2)
		m.checkRecovered(t, x)
		m.readdAbove(t, x)
		m.checkExact(t, x)
	})
	t.Run("NewestGenerationWins", func(t *testing.T) {
		opts, m, paths := setup(t)
		a, b, errA, errB := readHeaders(t, paths[3])
		require.NoError(t, errA)
		require.NoError(t, errB)
		// Copy B claims one entry less at an older generation: A wins.
		b.entryCount--
		b.generation--
		var buf [HeaderSize]byte
		b.encode(buf[:])
		patch(t, paths[3], HeaderCopyOffset, buf[:])
		x := mustOpen(t, opts)
		require.Equal(t, a.entryCount, x.cur.count)
		m.checkExact(t, x)
	})
}

func TestOpenHousekeeping(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Dir: dir, SlotCount: 4, EntryCount: 4}
	x := mustOpen(t, opts)
	var m model
	for i := int64(0); i < 6; i++ {
		m.add(t, x, []byte("k"), i, baseTS)
	}
	require.NoError(t, x.Close())
	for _, name := range []string{"LOCK", "notes.txt", "00000000000000000001.broken", "123"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644))
	}
	tmp := filepath.Join(dir, fileName(baseTS+100)+".tmp")
	require.NoError(t, os.WriteFile(tmp, []byte("half-made"), 0o644))

	x = mustOpen(t, opts)
	_, err := os.Stat(tmp)
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(filepath.Join(dir, "LOCK"))
	require.NoError(t, err, "foreign files are left alone")
	m.checkExact(t, x)
	require.Equal(t, int64(5), x.MaxPhysicalOffset())
}
