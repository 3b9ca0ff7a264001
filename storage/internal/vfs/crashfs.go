package vfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// SectorSize is the unit a power loss is assumed to tear writes at: a
// sector either holds its old bytes or its new ones, except in the
// explicitly torn images, which also cut one sector in half.
const SectorSize = 512

// FaultFS is a recording file system for crash testing (in the spirit of
// ALICE and CrashMonkey): it wraps an FS and, for the files below a root
// directory, tracks what a power loss could leave on the device.
//
// The model, per file: its durable content is what the last barrier
// covered — File.Sync (fdatasync: the whole file and its size) and
// Mapping.Sync (msync of a range: those bytes, and the size) — and every
// byte that differs from it now (a WriteAt, a store through a mapping, a
// Truncate, Preallocate or PunchHole since) is pending. Per directory: its
// durable entries are those of its last SyncDir, and every Create, Rename,
// Remove, RemoveAll and MkdirAll since is a pending namespace operation
// (a rename is one atomic operation, also across directories). Nothing
// else is assumed: no ordering between files, between pages of one file,
// or between data and namespace.
//
// Snapshot (or the capture hook, SetCapture) takes a CrashPoint: the
// durable state then and the pending writes, at sector granularity. Its
// Images are the crash images a power loss at that point could leave:
// nothing pending reached the device, everything did, each prefix of the
// pending namespace operations, each prefix of the pending writes (in
// file, then offset order), torn writes (a pending run of sectors cut at a
// sector boundary, or in the middle of a sector) and seeded random
// subsets. Materialize writes one image as real files into a fresh
// directory, where recovery runs on them.
//
// Files outside the root pass through unrecorded (the directory lock, for
// instance, is not part of any image).
type FaultFS struct {
	fs   FS
	root string

	mu      sync.Mutex
	nodes   []*node
	pending []dirOp // namespace operations no SyncDir covers yet, oldest first
	ops     int
	counts  [opCount]int
	capture func(Event) bool
	label   func() any
	points  []*CrashPoint
}

const opCount = int(OpTruncate) + 1

// Event is one recorded operation, as the capture hook sees it.
type Event struct {
	N      int    // operations recorded before this one
	Op     Op     // what it is
	Path   string // the file or directory, relative to the root
	Before bool   // the hook runs before barriers and renames, and after every operation
}

// IsBarrier reports whether the operation makes something durable.
func (e Event) IsBarrier() bool {
	return e.Op == OpSync || e.Op == OpMsync || e.Op == OpSyncDir
}

type node struct {
	id      int
	dir     bool
	kids    map[string]int // directories: the current entries
	durKids map[string]int // directories: the durable entries
	dur     []byte         // files: the durable content (never modified in place)
	dirty   bool           // files: written since the last full Sync
	mapped  int            // files: live mappings
	final   []byte         // files: the content when it was unlinked
	gone    bool           // files: unlinked (final holds its last content)
}

type dirMut struct {
	dir    int
	name   string
	target int // -1: the entry is removed
}

type dirOp struct{ muts []dirMut }

// NewFaultFS wraps fs and records what happens below root, an existing
// directory whose current content counts as durable.
func NewFaultFS(fs FS, root string) (*FaultFS, error) {
	root = filepath.Clean(root)
	c := &FaultFS{fs: fs, root: root}
	rn := c.newNode(true)
	if err := c.scan(rn, root); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *FaultFS) newNode(dir bool) *node {
	n := &node{id: len(c.nodes), dir: dir}
	if dir {
		n.kids, n.durKids = map[string]int{}, map[string]int{}
	}
	c.nodes = append(c.nodes, n)
	return n
}

func (c *FaultFS) scan(d *node, path string) error {
	ents, err := c.fs.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(path, e.Name())
		if e.IsDir() {
			k := c.newNode(true)
			if err := c.scan(k, p); err != nil {
				return err
			}
			d.kids[e.Name()], d.durKids[e.Name()] = k.id, k.id
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		b, err := c.fs.ReadFile(p)
		if err != nil {
			return err
		}
		k := c.newNode(false)
		k.dur = b
		d.kids[e.Name()], d.durKids[e.Name()] = k.id, k.id
	}
	return nil
}

// SetCapture installs a hook called for every recorded operation (with
// the recorder's lock held: it must not use the file system); when it
// returns true a CrashPoint is taken there and kept (Points).
func (c *FaultFS) SetCapture(f func(Event) bool) {
	c.mu.Lock()
	c.capture = f
	c.mu.Unlock()
}

// SetLabel installs a function whose result is stored in every CrashPoint
// taken afterwards (the test's record of what was acknowledged). It runs
// with the recorder's lock held.
func (c *FaultFS) SetLabel(f func() any) {
	c.mu.Lock()
	c.label = f
	c.mu.Unlock()
}

// Points returns the CrashPoints the capture hook took, oldest first.
func (c *FaultFS) Points() []*CrashPoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.points)
}

// Ops returns how many operations were recorded, in all and per kind.
func (c *FaultFS) Ops() (int, map[Op]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[Op]int{}
	for i, n := range c.counts {
		if n > 0 {
			m[Op(i)] = n
		}
	}
	return c.ops, m
}

// Snapshot takes a CrashPoint now.
func (c *FaultFS) Snapshot() *CrashPoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

// rel returns name relative to the root, or false outside it.
func (c *FaultFS) rel(name string) (string, bool) {
	r, err := filepath.Rel(c.root, filepath.Clean(name))
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return r, true
}

// lookup resolves rel in the current tree: the parent directory, the last
// component and the node (nil when missing). The parent is nil when a
// directory on the way is missing.
func (c *FaultFS) lookup(rel string) (parent *node, name string, n *node) {
	cur := c.nodes[0]
	if rel == "." {
		return nil, "", cur
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for i, p := range parts {
		id, ok := cur.kids[p]
		if i == len(parts)-1 {
			if ok {
				return cur, p, c.nodes[id]
			}
			return cur, p, nil
		}
		if !ok || !c.nodes[id].dir {
			return nil, p, nil
		}
		cur = c.nodes[id]
	}
	return nil, "", nil
}

// record counts an operation and runs the capture hook. Called with mu.
func (c *FaultFS) record(op Op, rel string, before bool) {
	if !before {
		c.ops++
		c.counts[op]++
	}
	ev := Event{N: c.ops, Op: op, Path: rel, Before: before}
	if c.capture != nil && c.capture(ev) {
		p := c.snapshotLocked()
		p.Event = ev
		c.points = append(c.points, p)
	}
}

func (c *FaultFS) recordBefore(op Op, name string) {
	rel, ok := c.rel(name)
	if !ok {
		return
	}
	c.mu.Lock()
	c.record(op, rel, true)
	c.mu.Unlock()
}

// stashFinal keeps the current content of n (and below it) before it is
// unlinked: a crash may bring the entry back.
func (c *FaultFS) stashFinal(n *node, path string) {
	if n.dir {
		for name, id := range n.kids {
			c.stashFinal(c.nodes[id], filepath.Join(path, name))
		}
		return
	}
	if n.gone {
		return
	}
	b, err := c.fs.ReadFile(path)
	if err != nil {
		b = n.dur
	}
	n.final, n.gone = b, true
}

func (c *FaultFS) createLocked(name string, rel string) *node {
	parent, base, n := c.lookup(rel)
	if parent == nil {
		return nil
	}
	if n != nil && !n.dir {
		n.dirty = true // O_TRUNC of the same file
		return n
	}
	n = c.newNode(false)
	parent.kids[base] = n.id
	c.pending = append(c.pending, dirOp{muts: []dirMut{{dir: parent.id, name: base, target: n.id}}})
	return n
}

// Create implements FS.
func (c *FaultFS) Create(name string) (File, error) { return c.CreatePerm(name, 0o644) }

// CreatePerm implements FS.
func (c *FaultFS) CreatePerm(name string, perm os.FileMode) (File, error) {
	f, err := c.fs.CreatePerm(name, perm)
	if err != nil {
		return nil, err
	}
	rel, ok := c.rel(name)
	if !ok {
		return f, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.createLocked(name, rel)
	c.record(OpCreate, rel, false)
	if n == nil {
		return f, nil
	}
	return &faultFile{File: f, c: c, n: n, rel: rel}, nil
}

// OpenReadWrite implements FS.
func (c *FaultFS) OpenReadWrite(name string) (File, error) {
	f, err := c.fs.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	rel, ok := c.rel(name)
	if !ok {
		return f, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, n := c.lookup(rel)
	if n == nil || n.dir {
		return f, nil
	}
	return &faultFile{File: f, c: c, n: n, rel: rel}, nil
}

// ReadFile implements FS.
func (c *FaultFS) ReadFile(name string) ([]byte, error) { return c.fs.ReadFile(name) }

// ReadDir implements FS.
func (c *FaultFS) ReadDir(dir string) ([]os.DirEntry, error) { return c.fs.ReadDir(dir) }

// Stat implements FS.
func (c *FaultFS) Stat(name string) (os.FileInfo, error) { return c.fs.Stat(name) }

// Rename implements FS.
func (c *FaultFS) Rename(oldname, newname string) error {
	orel, ok1 := c.rel(oldname)
	nrel, ok2 := c.rel(newname)
	if !ok1 || !ok2 {
		return c.fs.Rename(oldname, newname)
	}
	c.recordBefore(OpRename, oldname)
	c.mu.Lock()
	defer c.mu.Unlock()
	op, np := c.lookupBoth(orel, nrel)
	if op.n != nil && np.n != nil && np.n != op.n {
		c.stashFinal(np.n, newname)
	}
	if err := c.fs.Rename(oldname, newname); err != nil {
		if np.n != nil {
			np.n.gone, np.n.final = false, nil
		}
		return err
	}
	if op.n != nil && op.parent != nil && np.parent != nil {
		delete(op.parent.kids, op.name)
		np.parent.kids[np.name] = op.n.id
		c.pending = append(c.pending, dirOp{muts: []dirMut{
			{dir: op.parent.id, name: op.name, target: -1},
			{dir: np.parent.id, name: np.name, target: op.n.id},
		}})
	}
	c.record(OpRename, orel, false)
	return nil
}

type found struct {
	parent *node
	name   string
	n      *node
}

func (c *FaultFS) lookupBoth(a, b string) (found, found) {
	p1, n1, x1 := c.lookup(a)
	p2, n2, x2 := c.lookup(b)
	return found{p1, n1, x1}, found{p2, n2, x2}
}

// Remove implements FS.
func (c *FaultFS) Remove(name string) error { return c.remove(name, OpRemove, false) }

// RemoveAll implements FS.
func (c *FaultFS) RemoveAll(path string) error { return c.remove(path, OpRemove, true) }

func (c *FaultFS) remove(name string, op Op, all bool) error {
	rel, ok := c.rel(name)
	if !ok || rel == "." {
		if all {
			return c.fs.RemoveAll(name)
		}
		return c.fs.Remove(name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	parent, base, n := c.lookup(rel)
	if n != nil {
		c.stashFinal(n, name)
	}
	var err error
	if all {
		err = c.fs.RemoveAll(name)
	} else {
		err = c.fs.Remove(name)
	}
	if err != nil {
		if n != nil && !n.dir {
			n.gone, n.final = false, nil
		}
		return err
	}
	if n != nil && parent != nil {
		delete(parent.kids, base)
		c.pending = append(c.pending, dirOp{muts: []dirMut{{dir: parent.id, name: base, target: -1}}})
	}
	c.record(op, rel, false)
	return nil
}

// MkdirAll implements FS.
func (c *FaultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := c.fs.MkdirAll(dir, perm); err != nil {
		return err
	}
	rel, ok := c.rel(dir)
	if !ok || rel == "." {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.nodes[0]
	for _, p := range strings.Split(rel, string(filepath.Separator)) {
		if id, ok := cur.kids[p]; ok {
			cur = c.nodes[id]
			continue
		}
		k := c.newNode(true)
		cur.kids[p] = k.id
		c.pending = append(c.pending, dirOp{muts: []dirMut{{dir: cur.id, name: p, target: k.id}}})
		cur = k
	}
	c.record(OpMkdirAll, rel, false)
	return nil
}

// SyncDir implements FS: the directory's entries become durable.
func (c *FaultFS) SyncDir(dir string) error {
	c.recordBefore(OpSyncDir, dir)
	if err := c.fs.SyncDir(dir); err != nil {
		return err
	}
	rel, ok := c.rel(dir)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _, d := c.lookup(rel)
	if d != nil && d.dir {
		d.durKids = maps(d.kids)
		kept := c.pending[:0]
		for _, op := range c.pending {
			var muts []dirMut
			for _, m := range op.muts {
				if m.dir != d.id {
					muts = append(muts, m)
				}
			}
			if len(muts) > 0 {
				kept = append(kept, dirOp{muts: muts})
			}
		}
		c.pending = kept
	}
	c.record(OpSyncDir, rel, false)
	return nil
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

type faultFile struct {
	File
	c   *FaultFS
	n   *node
	rel string
}

func (f *faultFile) touch(op Op) {
	f.c.mu.Lock()
	f.n.dirty = true
	f.c.record(op, f.rel, false)
	f.c.mu.Unlock()
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.touch(OpWrite)
	return n, err
}

func (f *faultFile) Truncate(size int64) error {
	err := f.File.Truncate(size)
	f.touch(OpTruncate)
	return err
}

func (f *faultFile) Preallocate(size int64) error {
	err := f.File.Preallocate(size)
	f.touch(OpPreallocate)
	return err
}

func (f *faultFile) Allocate(off, n int64) (bool, error) {
	ok, err := f.File.Allocate(off, n)
	f.touch(OpPreallocate)
	return ok, err
}

func (f *faultFile) PunchHole(off, n int64) (bool, error) {
	ok, err := f.File.PunchHole(off, n)
	f.touch(OpPreallocate)
	return ok, err
}

// Sync makes the whole file durable (data and size).
func (f *faultFile) Sync() error {
	f.c.recordBefore(OpSync, f.Name())
	if err := f.File.Sync(); err != nil {
		return err
	}
	st, err := f.File.Stat()
	if err != nil {
		return err
	}
	b := make([]byte, st.Size())
	if _, err := f.File.ReadAt(b, 0); err != nil {
		return fmt.Errorf("crashfs: read back %s: %w", f.Name(), err)
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	f.n.dur = b
	if f.n.mapped == 0 {
		f.n.dirty = false
	}
	f.c.record(OpSync, f.rel, false)
	return nil
}

func (f *faultFile) Map(size int) (Mapping, error) {
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	f.n.mapped++
	f.n.dirty = true
	f.c.record(OpMap, f.rel, false)
	return &faultMapping{Mapping: m, c: f.c, n: f.n, rel: f.rel}, nil
}

type faultMapping struct {
	Mapping
	c    *FaultFS
	n    *node
	rel  string
	gone bool
}

// Sync makes [from, to) of the mapping durable (msync also writes back
// the size the mapping needs).
func (m *faultMapping) Sync(from, to int) error {
	m.c.recordBefore(OpMsync, filepath.Join(m.c.root, m.rel))
	if err := m.Mapping.Sync(from, to); err != nil {
		return err
	}
	b := m.Bytes()
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	d := slices.Clone(m.n.dur)
	if len(d) < len(b) {
		d = append(d, make([]byte, len(b)-len(d))...)
	}
	copy(d[from:to], b[from:to])
	m.n.dur = d
	m.c.record(OpMsync, m.rel, false)
	return nil
}

func (m *faultMapping) Unmap() error {
	err := m.Mapping.Unmap()
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if !m.gone {
		m.gone = true
		m.n.mapped--
	}
	m.c.record(OpUnmap, m.rel, false)
	return err
}
