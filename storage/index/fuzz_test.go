package index

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// noSyncFS skips fdatasync, directory fsync and msync: FuzzOpen is about
// decoding and recovery logic, and durability costs milliseconds per
// execution (which also makes the fuzzer's input minimisation crawl).
type noSyncFS struct{ vfs.FS }

func (n noSyncFS) Create(name string) (vfs.File, error) {
	f, err := n.FS.Create(name)
	return noSyncFile{f}, err
}

func (n noSyncFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := n.FS.OpenReadWrite(name)
	return noSyncFile{f}, err
}

func (noSyncFS) SyncDir(string) error { return nil }

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error { return nil }

func (f noSyncFile) Map(size int) (vfs.Mapping, error) {
	m, err := f.File.Map(size)
	return noSyncMapping{m}, err
}

type noSyncMapping struct{ vfs.Mapping }

func (noSyncMapping) Sync(int, int) error { return nil }

// FuzzDecodeHeader: decoding arbitrary bytes never panics, and a header
// that decodes re-encodes to the same bytes.
func FuzzDecodeHeader(f *testing.F) {
	for _, h := range []header{
		{slotCount: 1, capacity: 1, beginPhy: -1, endPhy: -1, indexedPhy: -1},
		{flags: FlagClean | FlagSealed, slotCount: 5_000_000, capacity: 20_000_000, generation: 9, baseTS: baseTS,
			beginTS: baseTS - 5, endTS: baseTS + 99, beginPhy: 100, endPhy: 5000, indexedPhy: 4000, slotsUsed: 3, entryCount: 7},
	} {
		var b [HeaderSize]byte
		h.encode(b[:])
		f.Add(b[:])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		var out [HeaderSize]byte
		h.encode(out[:])
		require.Equal(t, b[:HeaderSize], out[:])
		if len(b) >= EntrySize {
			e := decodeEntry(b[:EntrySize])
			var eb [EntrySize]byte
			encodeEntry(eb[:], e)
			require.Equal(t, b[:EntrySize], eb[:])
		}
	})
}

// fuzzSeedFile builds a real index file (3 slots, 5 entries) and returns
// its bytes; clean says whether it was closed or crashed.
func fuzzSeedFile(f *testing.F, clean bool) []byte {
	dir := f.TempDir()
	x, err := Open(Options{Dir: dir, SlotCount: 3, EntryCount: 5})
	require.NoError(f, err)
	for i := int64(0); i < 4; i++ {
		require.NoError(f, x.Add(testKey(int(i%3)), i*7, baseTS+i))
	}
	if clean {
		require.NoError(f, x.Close())
	} else {
		require.NoError(f, x.Flush())
		require.NoError(f, x.Add(testKey(9), 99, baseTS))
		crash(x)
	}
	b, err := os.ReadFile(filepath.Join(dir, fileName(baseTS)))
	require.NoError(f, err)
	return b
}

// FuzzOpen writes arbitrary bytes as an index file and opens it: Open,
// Lookup, Add and Close never panic or fault, whatever the header, slots
// and entries say. The input is compact — the two header copies and the
// bytes after the header region — so the fuzzer's inputs stay small. With
// fixCRC the header copies get valid checksums, so the fuzzer reaches the
// paths that trust a header (clean files whose slots and entries are
// garbage).
func FuzzOpen(f *testing.F) {
	split := func(b []byte) ([]byte, []byte, []byte) {
		return b[:HeaderSize], b[HeaderCopyOffset : HeaderCopyOffset+HeaderSize], b[HeaderRegionSize:]
	}
	for _, clean := range []bool{true, false} {
		a, b, body := split(fuzzSeedFile(f, clean))
		f.Add(a, b, body, false)
		f.Add(a, b, body, true)
		rng := rand.New(rand.NewPCG(1, 1))
		f.Add(a, b, garbage(rng, len(body)), true)
		f.Add(a, b, body[:len(body)-7], true)
		f.Add(a, []byte{}, body, false)
	}
	f.Add([]byte{}, []byte{}, []byte{}, false)
	f.Fuzz(func(t *testing.T, copyA, copyB, body []byte, fixCRC bool) {
		if len(body) > 1<<12 {
			return
		}
		data := make([]byte, HeaderRegionSize+len(body))
		copy(data[:HeaderSize], copyA)
		copy(data[HeaderCopyOffset:HeaderCopyOffset+HeaderSize], copyB)
		copy(data[HeaderRegionSize:], body)
		if fixCRC {
			for _, off := range []int{0, HeaderCopyOffset} {
				c := data[off : off+HeaderSize]
				binary.BigEndian.PutUint32(c[offHeaderCRC:], crc32.Checksum(c[:offHeaderCRC], castagnoli))
			}
		}
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, fileName(baseTS)), data, 0o644))
		x, err := Open(Options{Dir: dir, SlotCount: 3, EntryCount: 5, FS: noSyncFS{vfs.OS()}})
		require.NoError(t, err, "Open repairs or quarantines; only I/O fails")
		defer func() { require.NoError(t, x.Close()) }()
		for k := 0; k < 10; k++ {
			got, err := x.Lookup(testKey(k), 0, 0, 100)
			require.NoError(t, err)
			for i := 1; i < len(got); i++ {
				require.Less(t, got[i], got[i-1])
			}
		}
		next := max(x.MaxPhysicalOffset(), 0) + 1
		for k := 0; k < 7; k++ {
			require.NoError(t, x.Add(testKey(k), next+int64(k/2), baseTS+int64(k)))
		}
		got, err := x.Lookup(testKey(6), 0, 0, 100)
		require.NoError(t, err)
		require.NotEmpty(t, got)
		require.Equal(t, next+3, got[0])
	})
}
