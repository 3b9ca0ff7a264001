package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// Crash points and the crash images they enumerate (FaultFS records them;
// crashfs.go).

// CrashPoint is the state a power loss at one moment could leave: the
// durable content of every file and directory, and what was pending.
type CrashPoint struct {
	// N is how many operations were recorded before the point.
	N int
	// Event is the operation the capture hook was called for (zero for
	// Snapshot).
	Event Event
	// Label is what SetLabel's function returned when the point was taken.
	Label any

	files   map[int]*pointFile
	dirs    map[int]map[string]int // durable entries
	pending []dirOp
	runs    []run // pending writes, by file then offset
}

type pointFile struct {
	dur     []byte
	curSize int64 // -1: unchanged
}

// run is a pending write: sectors of one file whose current bytes differ
// from the durable ones.
type run struct {
	file int
	off  int64
	data []byte
}

func (c *FaultFS) snapshotLocked() *CrashPoint {
	p := &CrashPoint{N: c.ops, files: map[int]*pointFile{}, dirs: map[int]map[string]int{}}
	if c.label != nil {
		p.Label = c.label()
	}
	for _, op := range c.pending {
		p.pending = append(p.pending, dirOp{muts: slices.Clone(op.muts)})
	}
	paths := map[int]string{}
	var walk func(n *node, path string)
	walk = func(n *node, path string) {
		paths[n.id] = path
		if n.dir {
			names := make([]string, 0, len(n.kids))
			for k := range n.kids {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				walk(c.nodes[k2id(n.kids, k)], filepath.Join(path, k))
			}
		}
	}
	walk(c.nodes[0], c.root)
	for _, n := range c.nodes {
		if n.dir {
			p.dirs[n.id] = maps(n.durKids)
			continue
		}
		pf := &pointFile{dur: n.dur, curSize: -1}
		p.files[n.id] = pf
		var cur []byte
		switch path, linked := paths[n.id]; {
		case n.gone && !linked:
			cur = n.final
		case linked && (n.dirty || n.mapped > 0):
			b, err := c.fs.ReadFile(path)
			if err != nil {
				continue
			}
			cur = b
		default:
			continue
		}
		if cur == nil {
			continue
		}
		if int64(len(cur)) != int64(len(n.dur)) {
			pf.curSize = int64(len(cur))
		}
		p.runs = append(p.runs, diffRuns(n.id, n.dur, cur)...)
	}
	return p
}

func k2id(m map[string]int, k string) int { return m[k] }

// diffRuns returns the sector runs where cur differs from dur (dur is
// zero beyond its end).
func diffRuns(id int, dur, cur []byte) []run {
	var out []run
	var open *run
	for off := 0; off < len(cur); off += SectorSize {
		end := min(off+SectorSize, len(cur))
		var old []byte
		if off < len(dur) {
			old = dur[off:min(end, len(dur))]
		}
		same := bytes.Equal(cur[off:off+len(old)], old) && allZeros(cur[off+len(old):end])
		if same {
			open = nil
			continue
		}
		if open == nil {
			out = append(out, run{file: id, off: int64(off)})
			open = &out[len(out)-1]
		}
		open.data = append(open.data, cur[off:end]...)
	}
	return out
}

func allZeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// Pending reports how many namespace operations and pending sector runs
// the point holds.
func (p *CrashPoint) Pending() (dirOps, runs int) { return len(p.pending), len(p.runs) }

// Image is one crash image of a CrashPoint.
type Image struct {
	// Name says how it was made ("none", "all", "dirs=2", "prefix=3",
	// "torn=1@512", "random-7", …).
	Name   string
	dirOps int     // pending namespace operations applied (a prefix)
	apply  []int64 // per run: bytes applied from its start (0: none)
	sizes  bool    // pending size changes applied
}

// Images enumerates the crash images of the point: nothing pending, all
// of it, every prefix of the namespace operations (with and without the
// data), every prefix of the runs, each run torn (cut at its middle
// sector boundary, or half way into a sector) after the runs before it,
// and random subsets. When there are more than max, a deterministic
// sample (seeded) of max is returned, always with "none" and "all" first.
// Images that would be byte-identical are returned once.
func (p *CrashPoint) Images(max int, seed uint64) []Image {
	R, D := len(p.runs), len(p.pending)
	full := func(n int) []int64 {
		a := make([]int64, R)
		for i := 0; i < n; i++ {
			a[i] = int64(len(p.runs[i].data))
		}
		return a
	}
	var out []Image
	add := func(im Image) { out = append(out, im) }
	add(Image{Name: "none", apply: full(0)})
	add(Image{Name: "all", dirOps: D, apply: full(R), sizes: true})
	for k := 1; k < D; k++ {
		add(Image{Name: fmt.Sprintf("dirs=%d", k), dirOps: k, apply: full(R), sizes: true})
		add(Image{Name: fmt.Sprintf("dirs=%d,nodata", k), dirOps: k, apply: full(0)})
	}
	if D > 0 {
		add(Image{Name: "nodirs", apply: full(R), sizes: true})
		add(Image{Name: "dirs-only", dirOps: D, apply: full(0), sizes: true})
	}
	for n := 1; n < R; n++ {
		add(Image{Name: fmt.Sprintf("prefix=%d", n), dirOps: D, apply: full(n), sizes: true})
	}
	for i, r := range p.runs {
		l := int64(len(r.data))
		cuts := []int64{SectorSize / 2}
		if l > SectorSize {
			cuts = append(cuts, (l/SectorSize/2)*SectorSize, l-SectorSize/2)
		}
		for _, cut := range cuts {
			if cut <= 0 || cut >= l {
				continue
			}
			a := full(i)
			a[i] = cut
			add(Image{Name: fmt.Sprintf("torn=%d@%d", i, cut), dirOps: D, apply: a, sizes: true})
			b := full(R)
			b[i] = cut
			add(Image{Name: fmt.Sprintf("torn-rest=%d@%d", i, cut), dirOps: D, apply: b, sizes: true})
		}
	}
	rng := rand.New(rand.NewPCG(seed, uint64(p.N)))
	for j := 0; j < 8 && R+D > 0; j++ {
		a := make([]int64, R)
		for i, r := range p.runs {
			switch rng.IntN(3) {
			case 1:
				a[i] = int64(len(r.data))
			case 2:
				sectors := (int64(len(r.data)) + SectorSize - 1) / SectorSize
				a[i] = min(int64(len(r.data)), rng.Int64N(sectors+1)*SectorSize)
			}
		}
		add(Image{Name: fmt.Sprintf("random-%d", j), dirOps: rng.IntN(D + 1), apply: a, sizes: rng.IntN(2) == 0})
	}
	// Drop duplicates.
	seen := map[string]bool{}
	uniq := out[:0]
	for _, im := range out {
		k := p.imageKey(im)
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, im)
		}
	}
	out = uniq
	if max > 0 && len(out) > max {
		head, rest := out[:2], slices.Clone(out[2:])
		srng := rand.New(rand.NewPCG(seed^0x9E3779B97F4A7C15, uint64(p.N)))
		srng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		rest = rest[:max-2]
		out = append(slices.Clone(head), rest...)
	}
	return out
}

// imageKey identifies the bytes an image would hold: its applied dir ops
// that matter and the runs' applied lengths.
func (p *CrashPoint) imageKey(im Image) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%v|%v", im.dirOps, im.sizes, im.apply)
	return fmt.Sprintf("%x", h.Sum64())
}

// Materialize writes image im of the point into dir (which must exist and
// be empty), as real files.
func (p *CrashPoint) Materialize(im Image, dir string) error {
	dirs := make(map[int]map[string]int, len(p.dirs))
	for id, m := range p.dirs {
		dirs[id] = maps(m)
	}
	for _, op := range p.pending[:im.dirOps] {
		for _, m := range op.muts {
			if m.target < 0 {
				delete(dirs[m.dir], m.name)
			} else {
				dirs[m.dir][m.name] = m.target
			}
		}
	}
	content := map[int][]byte{}
	for id, f := range p.files {
		b := slices.Clone(f.dur)
		if im.sizes && f.curSize >= 0 {
			if f.curSize < int64(len(b)) {
				b = b[:f.curSize]
			} else {
				b = append(b, make([]byte, f.curSize-int64(len(b)))...)
			}
		}
		content[id] = b
	}
	for i, r := range p.runs {
		n := im.apply[i]
		if n <= 0 {
			continue
		}
		b := content[r.file]
		if end := r.off + n; end > int64(len(b)) {
			b = append(b, make([]byte, end-int64(len(b)))...)
		}
		copy(b[r.off:], r.data[:n])
		content[r.file] = b
	}
	var write func(id int, path string, depth int) error
	write = func(id int, path string, depth int) error {
		if depth > 64 {
			return errors.New("crashfs: directory cycle")
		}
		names := make([]string, 0, len(dirs[id]))
		for k := range dirs[id] {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			kid := dirs[id][name]
			p := filepath.Join(path, name)
			if _, isDir := dirs[kid]; isDir {
				if err := os.Mkdir(p, 0o755); err != nil {
					return err
				}
				if err := write(kid, p, depth+1); err != nil {
					return err
				}
				continue
			}
			if err := os.WriteFile(p, content[kid], 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	return write(0, dir, 0)
}
