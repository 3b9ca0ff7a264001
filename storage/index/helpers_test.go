package index

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// testingT is what the helpers need of *testing.T and *rapid.T.
type testingT interface {
	require.TestingT
	Helper()
}

type cleanupT interface {
	testingT
	Cleanup(func())
}

// baseTS is a realistic store timestamp (2024-06-10, unix ms).
const baseTS = int64(1_718_000_000_000)

func testKey(i int) []byte { return []byte(fmt.Sprintf("topic\x00\x00key-%d", i)) }

// mustOpen opens an index in dir with tiny files and closes it at the end
// of the test (Close is idempotent, so tests may close it themselves).
func mustOpen(t cleanupT, opts Options) *Index {
	t.Helper()
	x, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// crash simulates kill -9: the mappings go away without a flush or a header
// write. The page cache keeps every write, as it does for a killed process.
func crash(x *Index) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	x.closed = true
	for _, f := range x.files {
		_ = f.release()
	}
	x.files, x.cur = nil, nil
}

// add is one Add call the model remembers.
type add struct {
	key []byte
	phy int64
	ts  int64
}

// model is the reference: every Add ever made (as the CommitLog would hold
// the messages), in order.
type model struct{ adds []add }

func (m *model) add(t testingT, x *Index, key []byte, phy, ts int64) {
	t.Helper()
	require.NoError(t, x.Add(key, phy, ts))
	m.adds = append(m.adds, add{key: key, phy: phy, ts: ts})
}

// keys are the distinct keys added.
func (m *model) keys() [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	for _, a := range m.adds {
		if !seen[string(a.key)] {
			seen[string(a.key)] = true
			out = append(out, a.key)
		}
	}
	return out
}

// expected is what Lookup(key, begin, end, unlimited) must return: the
// distinct offsets of every add whose key hash equals key's, in [begin,
// end], newest first.
func (m *model) expected(key []byte, begin, end int64, above int64) []int64 {
	h := keyHash(key)
	set := map[int64]bool{}
	for _, a := range m.adds {
		if keyHash(a.key) == h && a.ts >= begin && (end == 0 || a.ts <= end) && a.phy >= above {
			set[a.phy] = true
		}
	}
	out := make([]int64, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] > out[j] })
	return out
}

// readdAbove re-adds every add above the index's MaxPhysicalOffset, as the
// store does after Open.
func (m *model) readdAbove(t testingT, x *Index) {
	t.Helper()
	floor := x.MaxPhysicalOffset()
	for _, a := range m.adds {
		if a.phy > floor {
			require.NoError(t, x.Add(a.key, a.phy, a.ts))
		}
	}
}

// checkExact asserts that every key's lookup equals the model.
func (m *model) checkExact(t testingT, x *Index) {
	t.Helper()
	for _, k := range m.keys() {
		got, err := x.Lookup(k, 0, 0, 1<<30)
		require.NoError(t, err)
		require.Equal(t, m.expected(k, 0, 0, 0), nonNil(got), "key %q", k)
	}
}

// checkRecovered asserts the crash rule right after Open: no candidate
// that was never added under the key's hash, nothing duplicated, newest
// first, and every add at or below MaxPhysicalOffset present.
func (m *model) checkRecovered(t testingT, x *Index) {
	t.Helper()
	floor := x.MaxPhysicalOffset()
	for _, k := range m.keys() {
		got, err := x.Lookup(k, 0, 0, 1<<30)
		require.NoError(t, err)
		all := m.expected(k, 0, 0, 0)
		for i, p := range got {
			require.Contains(t, all, p, "key %q: garbage candidate %d", k, p)
			if i > 0 {
				require.Less(t, p, got[i-1], "key %q: not strictly newest first: %v", k, got)
			}
		}
		for _, p := range all {
			if p <= floor {
				require.Contains(t, got, p, "key %q: offset %d <= MaxPhysicalOffset %d lost", k, p, floor)
			}
		}
	}
}

func nonNil(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

// indexFiles lists the index file names in dir.
func indexFiles(t testingT, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if _, ok := parseFileName(e.Name()); ok {
			out = append(out, e.Name())
		}
	}
	return out
}

// crashFS records, per file, the bytes a power failure cannot take back:
// what fdatasync and msync covered. Crash images mix that with the page
// cache, sector by sector.
type crashFS struct {
	vfs.FS
	mu      sync.Mutex
	durable map[string][]byte
}

func newCrashFS() *crashFS { return &crashFS{FS: vfs.OS(), durable: map[string][]byte{}} }

func (c *crashFS) Create(name string) (vfs.File, error) {
	f, err := c.FS.Create(name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.durable[name] = nil
	c.mu.Unlock()
	return crashFile{File: f, fs: c}, nil
}

func (c *crashFS) OpenReadWrite(name string) (vfs.File, error) {
	f, err := c.FS.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return crashFile{File: f, fs: c}, nil
}

func (c *crashFS) Rename(from, to string) error {
	if err := c.FS.Rename(from, to); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.durable[to] = c.durable[from]
	delete(c.durable, from)
	return nil
}

func (c *crashFS) Remove(name string) error {
	if err := c.FS.Remove(name); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.durable, name)
	return nil
}

type crashFile struct {
	vfs.File
	fs *crashFS
}

func (f crashFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.durable[f.Name()] = b
	return nil
}

func (f crashFile) Map(size int) (vfs.Mapping, error) {
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	return crashMapping{Mapping: m, name: f.Name(), fs: f.fs}, nil
}

type crashMapping struct {
	vfs.Mapping
	name string
	fs   *crashFS
}

// Sync records the pages msync wrote: whole pages, as the kernel does.
func (m crashMapping) Sync(from, to int) error {
	if err := m.Mapping.Sync(from, to); err != nil {
		return err
	}
	b := m.Bytes()
	const page = 4096
	from -= from % page
	to = min(len(b), (to+page-1)/page*page)
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	d := m.fs.durable[m.name]
	if len(d) < len(b) {
		d = append(d, make([]byte, len(b)-len(d))...)
	}
	copy(d[from:to], b[from:to])
	m.fs.durable[m.name] = d
	return nil
}

// image rewrites every index file in dir as a power failure might leave
// it: each 512-byte sector that differs from its durable content keeps the
// new bytes, goes back to the durable ones, or (with garbage) becomes
// random bytes.
func (c *crashFS) image(t testingT, dir string, rng *rand.Rand, garbage bool) (changed int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range indexFiles(t, dir) {
		path := filepath.Join(dir, name)
		cur, err := os.ReadFile(path)
		require.NoError(t, err)
		dur, ok := c.durable[path]
		if !ok {
			continue
		}
		dur = slices.Clone(dur)
		if len(dur) < len(cur) {
			dur = append(dur, make([]byte, len(cur)-len(dur))...)
		}
		img := slices.Clone(cur)
		for off := 0; off < len(cur); off += 512 {
			end := min(off+512, len(cur))
			if slices.Equal(cur[off:end], dur[off:end]) {
				continue
			}
			switch r := rng.IntN(10); {
			case r < 4:
			case r < 9 || !garbage:
				copy(img[off:end], dur[off:end])
				changed++
			default:
				for i := off; i < end; i++ {
					img[i] = byte(rng.Uint32())
				}
				changed++
			}
		}
		require.NoError(t, os.WriteFile(path, img, 0o644))
		c.durable[path] = img
	}
	return changed
}
