package index

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestProperty drives the index with random operations — messages of one
// to three keys with wandering timestamps (clock steps back, 30-day gaps),
// lookups with random ranges and limits, Flush, clean reopen, crash with a
// random crash image, DeleteBelow — over tiny geometries, against a model
// that remembers every Add.
func TestProperty(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	var runs atomic.Int64
	keys := make([][]byte, 8)
	for i := range keys {
		keys[i] = testKey(i)
	}
	rapid.Check(t, func(rt *rapid.T) {
		fs := newCrashFS()
		opts := Options{
			Dir:        filepath.Join(root, fmt.Sprint(runs.Add(1))),
			SlotCount:  rapid.SampledFrom([]int{1, 3, 7, 64}).Draw(rt, "slots"),
			EntryCount: rapid.SampledFrom([]int{1, 2, 5, 16, 200}).Draw(rt, "entries"),
			FS:         fs,
		}
		x, err := Open(opts)
		require.NoError(rt, err)
		defer func() { _ = x.Close() }()
		var m model
		phy, ts := int64(-1), baseTS
		delFloor := int64(-1) // the largest DeleteBelow argument so far

		// check compares a lookup with the model. Below delFloor, files
		// may be gone; at or above it nothing may be missing.
		check := func(rt *rapid.T, key []byte, begin, end int64, limit int) {
			got, err := x.Lookup(key, begin, end, limit)
			require.NoError(rt, err)
			want := m.expected(key, begin, end, 0)
			for i, p := range got {
				require.Contains(rt, want, p, "garbage candidate")
				if i > 0 {
					require.Less(rt, p, got[i-1], "not newest first: %v", got)
				}
			}
			if delFloor < 0 {
				require.Equal(rt, nonNil(want[:min(limit, len(want))]), nonNil(got))
				return
			}
			for _, p := range want {
				if p >= delFloor && (len(got) < limit || p >= got[len(got)-1]) {
					require.Contains(rt, got, p, "lost offset %d (want %v, got %v)", p, want, got)
				}
			}
		}
		checkAll := func(rt *rapid.T) {
			for _, k := range keys {
				check(rt, k, 0, 0, 1<<20)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"message": func(rt *rapid.T) {
				phy += rapid.Int64Range(1, 1000).Draw(rt, "gap")
				switch rapid.IntRange(0, 20).Draw(rt, "clock") {
				case 0:
					ts += 30 * 24 * 3600 * 1000
				case 1, 2:
					ts -= rapid.Int64Range(0, 10_000).Draw(rt, "back")
				default:
					ts += rapid.Int64Range(0, 5000).Draw(rt, "tick")
				}
				n := rapid.IntRange(1, 3).Draw(rt, "keys")
				for i := 0; i < n; i++ {
					m.add(rt, x, rapid.SampledFrom(keys).Draw(rt, "key"), phy, ts)
				}
			},
			"lookup": func(rt *rapid.T) {
				key := rapid.SampledFrom(keys).Draw(rt, "key")
				begin := rapid.Int64Range(0, ts+10_000).Draw(rt, "begin")
				end := rapid.SampledFrom([]int64{0, begin, begin + 5000, ts + 1}).Draw(rt, "end")
				if len(m.adds) > 0 && rapid.Bool().Draw(rt, "exact") { // bounds on real timestamps
					a := rapid.SampledFrom(m.adds).Draw(rt, "a")
					b := rapid.SampledFrom(m.adds).Draw(rt, "b")
					begin, end = min(a.ts, b.ts), max(a.ts, b.ts)
					key = rapid.SampledFrom([][]byte{key, a.key, b.key}).Draw(rt, "key")
				}
				check(rt, key, begin, end, rapid.IntRange(1, 20).Draw(rt, "max"))
			},
			"flush": func(rt *rapid.T) {
				require.NoError(rt, x.Flush())
			},
			"reopen": func(rt *rapid.T) {
				require.NoError(rt, x.Close())
				x, err = Open(opts)
				require.NoError(rt, err)
				require.Equal(rt, phy, x.MaxPhysicalOffset(), "a clean reopen claims every message")
				checkAll(rt)
			},
			"crash": func(rt *rapid.T) {
				crash(x)
				if rapid.Bool().Draw(rt, "image") {
					fs.image(rt, opts.Dir, rand.New(rand.NewPCG(uint64(phy), 7)), false)
				}
				x, err = Open(opts)
				require.NoError(rt, err)
				require.LessOrEqual(rt, x.MaxPhysicalOffset(), phy)
				for _, k := range keys { // nothing at or below MaxPhysicalOffset lost
					got, err := x.Lookup(k, 0, 0, 1<<20)
					require.NoError(rt, err)
					for _, p := range m.expected(k, 0, 0, max(delFloor, 0)) {
						if p <= x.MaxPhysicalOffset() {
							require.Contains(rt, got, p)
						}
					}
				}
				m.readdAbove(rt, x)
				checkAll(rt)
			},
			"deleteBelow": func(rt *rapid.T) {
				minPhy := rapid.Int64Range(0, max(phy, 0)+1).Draw(rt, "minPhy")
				_, err := x.DeleteBelow(minPhy)
				require.NoError(rt, err)
				delFloor = max(delFloor, minPhy)
				checkAll(rt)
			},
		})
	})
}
