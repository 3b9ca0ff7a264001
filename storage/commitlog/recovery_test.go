package commitlog

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// damage is one way to tear the last record on disk. rel is the frame's
// position in its segment file, size its frame size.
type damage struct {
	name string
	// zeroOnly: the damaged bytes end up all zero, so nothing is left to
	// copy out (the tail looks like it was never written).
	zeroOnly bool
	apply    func(t *testing.T, path string, rel, size int64)
}

func xorByte(at int64, mask byte) func(t *testing.T, path string, rel, size int64) {
	return func(t *testing.T, path string, rel, size int64) {
		mutateFile(t, path, func(b []byte) { b[rel+at] ^= mask })
	}
}

var damages = []damage{
	{name: "TruncateInHeader", apply: func(t *testing.T, path string, rel, size int64) {
		require.NoError(t, os.Truncate(path, rel+7))
	}},
	{name: "TruncateInPayload", apply: func(t *testing.T, path string, rel, size int64) {
		require.NoError(t, os.Truncate(path, rel+HeaderSize+size/3))
	}},
	{name: "ZeroHeader", apply: func(t *testing.T, path string, rel, size int64) {
		mutateFile(t, path, func(b []byte) { clear(b[rel : rel+HeaderSize]) })
	}},
	{name: "ZeroWholeFrame", zeroOnly: true, apply: func(t *testing.T, path string, rel, size int64) {
		mutateFile(t, path, func(b []byte) { clear(b[rel : rel+size]) })
	}},
	{name: "ZeroPayloadSector", apply: func(t *testing.T, path string, rel, size int64) {
		mutateFile(t, path, func(b []byte) { clear(b[rel+HeaderSize+1 : rel+size-1]) })
	}},
	{name: "GarbleSize", apply: xorByte(sizeFieldOffset+3, 0x5a)},
	{name: "GarbleSizeHigh", apply: xorByte(sizeFieldOffset, 0x80)},
	{name: "GarbleMagic", apply: xorByte(magicFieldOffset+1, 0xff)},
	{name: "FlipCRCBit", apply: xorByte(crcFieldOffset+2, 0x01)},
	{name: "GarbleStoredOffset", apply: xorByte(offsetFieldOffset+7, 0x08)},
	{name: "FlipPayloadBit", apply: func(t *testing.T, path string, rel, size int64) {
		mutateFile(t, path, func(b []byte) { b[rel+HeaderSize+(size-HeaderSize)/2] ^= 0x10 })
	}},
	{name: "FlipLastByte", apply: func(t *testing.T, path string, rel, size int64) {
		mutateFile(t, path, func(b []byte) { b[rel+size-1] ^= 0x01 })
	}},
}

func TestTornTail(t *testing.T) {
	t.Parallel()
	forEachConfig(t, func(t *testing.T, segSize int64, mode FlushMode) {
		for _, d := range damages {
			t.Run(d.name, func(t *testing.T) {
				t.Parallel()
				opts := testOptions(t, segSize, mode)
				l, err := Open(opts)
				require.NoError(t, err)
				rng := rand.New(rand.NewPCG(5, uint64(segSize)))
				w := appendRandom(t, l, rng, 12)
				lastPayload := randomPayload(rng, 50)
				last, err := l.Append(bytesPayload(lastPayload))
				require.NoError(t, err)
				path, base := segmentPath(t, l, last.Offset)
				require.NoError(t, l.Close())

				rel, size := last.Offset-base, int64(last.Size)
				d.apply(t, path, rel, size)

				opts.HighWater = last.Offset // everything before the damaged record was durable
				opts.RecoverFrom = w.results[0].Offset
				l2 := mustOpen(t, opts)
				rep := l2.Recovery()
				require.Equal(t, last.Offset, rep.End, rep.Reason)
				require.Equal(t, last.Offset, l2.Written())
				require.Equal(t, last.Offset, l2.Flushed())
				require.False(t, rep.Corrupt)
				requireLogHolds(t, l2, w)
				if d.zeroOnly {
					require.False(t, rep.Torn)
					require.Empty(t, brokenFiles(t, opts.Dir))
				} else {
					require.True(t, rep.Torn, rep.Reason)
					require.Equal(t, []string{filepath.Base(path) + brokenSuffix}, brokenFiles(t, opts.Dir))
					copied, err := os.ReadFile(filepath.Join(opts.Dir, rep.Quarantined[0]))
					require.NoError(t, err)
					require.NotEmpty(t, copied)
					require.LessOrEqual(t, int64(len(copied)), size)
					require.Equal(t, int64(len(copied)), rep.TruncatedBytes)
				}

				// The next append continues right there (or at the next
				// segment when the file was truncated too short).
				again, err := l2.Append(bytesPayload(lastPayload))
				require.NoError(t, err)
				if strings.HasPrefix(d.name, "Truncate") {
					require.Contains(t, []int64{last.Offset, rel + base + 7, base + rel + HeaderSize + size/3}, again.Offset)
				} else {
					require.Equal(t, last.Offset, again.Offset)
				}
				w.payloads = append(w.payloads, lastPayload)
				w.results = append(w.results, again)
				requireLogHolds(t, l2, w)
				more := appendRandom(t, l2, rng, 5)
				w.payloads = append(w.payloads, more.payloads...)
				w.results = append(w.results, more.results...)
				require.NoError(t, l2.Close())

				// A third open finds a clean log.
				opts.RecoverFrom, opts.HighWater = 0, l2.Written()
				l3 := mustOpen(t, opts)
				require.False(t, l3.Recovery().Torn, l3.Recovery().Reason)
				require.Equal(t, l2.Written(), l3.Written())
				requireLogHolds(t, l3, w)
			})
		}
	})
}

// TestCorruptionBelowHighWater garbles a record in the middle of the log
// whose data was durable: Open must refuse, with the offset, unless the
// operator allows it, and then nothing after it is deleted.
func TestCorruptionBelowHighWater(t *testing.T) {
	t.Parallel()
	forEachConfig(t, func(t *testing.T, segSize int64, mode FlushMode) {
		opts := testOptions(t, segSize, mode)
		l, err := Open(opts)
		require.NoError(t, err)
		w := appendRandom(t, l, rand.New(rand.NewPCG(6, uint64(segSize))), 30)
		victim := w.results[12]
		path, base := segmentPath(t, l, victim.Offset)
		end := l.Written()
		require.NoError(t, l.Close())
		mutateFile(t, path, func(b []byte) { b[victim.Offset-base+crcFieldOffset] ^= 0x40 })
		before := snapshotDir(t, opts.Dir)

		opts.HighWater = end
		_, err = Open(opts)
		require.ErrorIs(t, err, ErrCorrupt)
		require.Contains(t, err.Error(), strconv.FormatInt(victim.Offset, 10))
		require.Equal(t, before, snapshotDir(t, opts.Dir), "a refused Open changes nothing")

		opts.AllowCorrupt = true
		l2 := mustOpen(t, opts)
		rep := l2.Recovery()
		require.True(t, rep.Corrupt)
		require.True(t, rep.Torn)
		require.Equal(t, victim.Offset, l2.Written())
		requireLogHolds(t, l2, written{payloads: w.payloads[:12], results: w.results[:12]})

		// Every byte that was cut is in a .broken file.
		var quarantined int64
		for _, name := range rep.Quarantined {
			st, err := os.Stat(filepath.Join(opts.Dir, name))
			require.NoError(t, err)
			quarantined += st.Size()
		}
		require.Equal(t, rep.TruncatedBytes, quarantined)
		require.GreaterOrEqual(t, quarantined, end-victim.Offset-HeaderSize, "all data after the victim is kept somewhere")
	})
}

// TestStaleFramesAfterAHoleAreNotResurrected: the kernel may persist a
// later page before an earlier one. Records after a zeroed frame look
// valid (right offset, right CRC) but must be cut off, or a later append
// plus a crash would bring them back.
func TestStaleFramesAfterAHoleAreNotResurrected(t *testing.T) {
	t.Parallel()
	for _, mode := range flushModes {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			opts := testOptions(t, 64<<10, mode)
			l, err := Open(opts)
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(7, 7))
			var w written
			for range 20 {
				p := randomPayload(rng, 300)
				r, err := l.Append(bytesPayload(p))
				require.NoError(t, err)
				w.payloads, w.results = append(w.payloads, p), append(w.results, r)
			}
			require.NoError(t, l.Close())
			hole := w.results[5]
			mutateFile(t, filepath.Join(opts.Dir, segmentName(0)), func(b []byte) { clear(b[hole.Offset : hole.Offset+int64(hole.Size)]) })

			l2, err := Open(opts)
			require.NoError(t, err)
			require.Equal(t, hole.Offset, l2.Written())
			require.True(t, l2.Recovery().Torn)
			// A shorter record at the hole: without zeroing, the old
			// records after it would still be valid frames.
			small, err := l2.Append(bytesPayload([]byte("short")))
			require.NoError(t, err)
			require.NoError(t, l2.Close())

			l3 := mustOpen(t, opts)
			require.Equal(t, small.end(), l3.Written())
			requireLogHolds(t, l3, written{
				payloads: append(w.payloads[:5:5], []byte("short")),
				results:  append(w.results[:5:5], small),
			})
		})
	}
}

// TestCrashImageRecovers copies the files of a log that was never closed
// (including the preallocated next segment) and opens the copy.
func TestCrashImageRecovers(t *testing.T) {
	t.Parallel()
	forEachConfig(t, func(t *testing.T, segSize int64, mode FlushMode) {
		opts := testOptions(t, segSize, mode)
		l := mustOpen(t, opts)
		w := appendRandom(t, l, rand.New(rand.NewPCG(8, uint64(segSize))), 25)
		require.NoError(t, l.Flush())
		image := t.TempDir()
		copyDir(t, opts.Dir, image)

		opts.Dir = image
		l2 := mustOpen(t, opts)
		rep := l2.Recovery()
		require.False(t, rep.Torn, rep.Reason)
		require.Empty(t, brokenFiles(t, image), "the unused preallocated segment is not data")
		require.Equal(t, l.Written(), l2.Written())
		requireLogHolds(t, l2, w)
	})
}

func TestRecoverFromIsOnlyAHint(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 1000, FlushSync)
	l, err := Open(opts)
	require.NoError(t, err)
	w := appendRandom(t, l, rand.New(rand.NewPCG(9, 9)), 20)
	end := l.Written()
	require.NoError(t, l.Close())

	for name, from := range map[string]int64{
		"NotAFrameStart": w.results[10].Offset + 3,
		"PastTheEnd":     end + 10_000,
	} {
		t.Run(name, func(t *testing.T) {
			o := opts
			o.RecoverFrom, o.HighWater = from, end
			l := mustOpen(t, o)
			require.Equal(t, end, l.Written())
			require.Equal(t, int64(20), l.Recovery().Records, "full scan")
			requireLogHolds(t, l, w)
			require.NoError(t, l.Close())
		})
	}
}

func TestLeftoverTmpRemoved(t *testing.T) {
	t.Parallel()
	opts := testOptions(t, 4096, FlushSync)
	l, err := Open(opts)
	require.NoError(t, err)
	w := appendRandom(t, l, rand.New(rand.NewPCG(10, 10)), 5)
	require.NoError(t, l.Close())
	tmp := filepath.Join(opts.Dir, segmentName(1<<20)+tmpSuffix)
	require.NoError(t, os.WriteFile(tmp, []byte("half-created"), 0o644))
	other := filepath.Join(opts.Dir, "unrelated.tmp")
	require.NoError(t, os.WriteFile(other, nil, 0o644))

	l2 := mustOpen(t, opts)
	requireLogHolds(t, l2, w)
	require.NoFileExists(t, tmp)
	require.FileExists(t, other, "only our own temporary files are removed")
}

func TestMissingSegments(t *testing.T) {
	t.Parallel()
	t.Run("EmptyDirWithCheckpointIsCorrupt", func(t *testing.T) {
		t.Parallel()
		opts := testOptions(t, 4096, FlushSync)
		opts.HighWater = 5000
		_, err := Open(opts)
		require.ErrorIs(t, err, ErrCorrupt)
		opts.AllowCorrupt = true
		l := mustOpen(t, opts)
		require.Equal(t, int64(5000), l.Written(), "offsets keep growing: no reuse of old offsets")
		r, err := l.Append(bytesPayload([]byte("x")))
		require.NoError(t, err)
		require.Equal(t, int64(5000), r.Offset)
	})
	t.Run("GapInTheMiddle", func(t *testing.T) {
		t.Parallel()
		opts := testOptions(t, 256, FlushSync)
		l, err := Open(opts)
		require.NoError(t, err)
		w := appendRandom(t, l, rand.New(rand.NewPCG(11, 11)), 20)
		end := l.Written()
		require.NoError(t, l.Close())
		require.NoError(t, os.Remove(filepath.Join(opts.Dir, segmentName(512))))

		o := opts
		o.HighWater = end
		_, err = Open(o)
		require.ErrorIs(t, err, ErrCorrupt)

		o.HighWater = 0 // nothing known durable: the log ends at the gap
		l2 := mustOpen(t, o)
		require.Equal(t, int64(512), l2.Written())
		require.NotEmpty(t, brokenFiles(t, opts.Dir))
		n := 0
		for n < len(w.results) && w.results[n].end() <= 512 {
			n++
		}
		requireLogHolds(t, l2, written{payloads: w.payloads[:n], results: w.results[:n]})
	})
}

// snapshotDir maps file names to contents.
func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	m := make(map[string][]byte)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if errors.Is(err, os.ErrNotExist) {
			continue // renamed by the preallocator meanwhile: any state is a valid crash image
		}
		require.NoError(t, err)
		m[e.Name()] = b
	}
	return m
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	for name, b := range snapshotDir(t, from) {
		require.NoError(t, os.WriteFile(filepath.Join(to, name), b, 0o644))
	}
}

// TestLostPagesAboveHighWater simulates a power loss that persisted a
// random subset of the 4 KiB pages written after the last flush (the
// kernel writes mmap pages back in any order). Recovery must keep every
// record below the high-water mark, return only records that were really
// written, and never a frame after a hole.
func TestLostPagesAboveHighWater(t *testing.T) {
	t.Parallel()
	const page = 4096
	for seed := range uint64(20) {
		t.Run("Seed"+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 16))
			segSize := []int64{4096, 3 * page, 64 << 10}[seed%3]
			opts := testOptions(t, segSize, FlushAsync)
			opts.FlushInterval = 1 << 40
			l := mustOpen(t, opts)
			durable := appendRandom(t, l, rng, 10+rng.IntN(20))
			require.NoError(t, l.Flush())
			hw := l.Flushed()
			volatile := appendRandom(t, l, rng, 10+rng.IntN(40))
			image := t.TempDir()
			copyDir(t, opts.Dir, image)

			lost := 0
			for _, s := range l.Segments() {
				path := filepath.Join(image, segmentName(s.Base))
				if _, err := os.Stat(path); err != nil {
					continue
				}
				mutateFile(t, path, func(b []byte) {
					for p := int64(0); p < int64(len(b)); p += page {
						if s.Base+p >= hw && rng.IntN(3) == 0 {
							clear(b[p:min(p+page, int64(len(b)))])
							lost++
						}
					}
				})
			}

			o := opts
			o.Dir, o.HighWater, o.RecoverFrom = image, hw, hw
			l2 := mustOpen(t, o)
			require.GreaterOrEqual(t, l2.Written(), hw)
			requireRecords(t, l2, durable)
			all := written{payloads: append(durable.payloads, volatile.payloads...), results: append(durable.results, volatile.results...)}
			n := len(durable.results)
			for n < len(all.results) && all.results[n].end() <= l2.Written() {
				n++
			}
			requireLogHolds(t, l2, written{payloads: all.payloads[:n], results: all.results[:n]})
			t.Logf("lost %d pages, kept %d of %d volatile records", lost, n-len(durable.results), len(volatile.results))
		})
	}
}
