package index

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Open opens (creating Dir if needed) and recovers the index in opts.Dir;
// see "Recovery" in the package documentation. Damaged files are rebuilt or
// quarantined and logged; Open fails only on bad Options or I/O errors.
// Afterwards MaxPhysicalOffset says from where the store must re-add.
func Open(opts Options) (*Index, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	x := &Index{
		opts:        opts,
		fs:          opts.FS,
		log:         opts.Logger.With().Str("component", "index").Logger(),
		lastPhy:     -1,
		completePhy: -1,
	}
	if err := vfs.MkdirAllSync(x.fs, opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create index dir: %w", err)
	}
	if err := x.recover(); err != nil {
		for _, f := range x.files {
			_ = f.release()
		}
		return nil, err
	}
	return x, nil
}

// candidate is a file found by Open, before it is accepted.
type candidate struct {
	path  string
	base  int64
	size  int64
	fh    vfs.File
	hdr   header
	hdrOK bool
}

// geometry is a (slotCount, entryCapacity) pair.
type geometry struct{ slots, capacity uint32 }

// recover lists, checks and maps the files; see the package documentation.
func (x *Index) recover() error {
	cands, err := x.listFiles()
	defer func() {
		for _, c := range cands {
			if c.fh != nil {
				_ = c.fh.Close()
			}
		}
	}()
	if err != nil {
		return err
	}
	geometries := growthGeometries(x.opts)
	for _, c := range cands {
		if c.hdrOK {
			geometries = append(geometries, geometry{c.hdr.slotCount, c.hdr.capacity})
		}
	}

	prevEnd, prevComplete := int64(-1), int64(-1)
	for i, c := range cands {
		last := i == len(cands)-1
		g, ok := geometry{c.hdr.slotCount, c.hdr.capacity}, c.hdrOK
		reason := ""
		switch {
		case !ok:
			if g, ok = guessGeometry(geometries, c.size); !ok {
				reason = "no valid header and no known geometry matches its size"
			}
		case c.size < fileSize(g.slots, g.capacity):
			reason = fmt.Sprintf("%d bytes, header says %d", c.size, fileSize(g.slots, g.capacity))
		case c.hdr.entryCount > 0 && c.hdr.beginPhy < prevEnd:
			reason = fmt.Sprintf("begins at offset %d, below the previous file's end %d", c.hdr.beginPhy, prevEnd)
		}
		if reason != "" {
			return x.quarantine(cands[i:], reason)
		}
		if c.hdrOK && c.hdr.entryCount == 0 && !last {
			// An empty file with a newer one after it: left by a roll that
			// failed after its rename. It holds nothing.
			if err := x.fs.Remove(c.path); err != nil {
				return fmt.Errorf("remove empty %s: %w", c.path, err)
			}
			x.log.Info().Str("file", filepath.Base(c.path)).Msg("removed empty index file left by a failed roll")
			continue
		}

		f := newFile(c.path, c.base, g.slots, g.capacity)
		if err := f.mapFile(c.fh); err != nil {
			return err
		}
		x.files = append(x.files, f)

		var res rebuildResult
		switch {
		case c.hdrOK && c.hdr.clean():
			f.setHeader(c.hdr)
			f.sealed = c.hdr.sealed() || !last
			res = rebuildResult{count: c.hdr.entryCount, complete: c.hdr.indexedPhy}
		case c.hdrOK:
			f.hdr = c.hdr // keeps the generation
			res = x.rebuild(f, c.hdr.entryCount, &c.hdr, prevEnd, prevComplete, true)
		default:
			res = x.rebuild(f, f.capacity, nil, prevEnd, prevComplete, last)
			// A file is created by its first Add, so an older file without
			// a header that holds no entry was zeroed: keep the index a
			// prefix, so the store re-adds everything after it.
			if res.count == 0 {
				res.last = true
			}
		}
		if res.rebuilt {
			x.log.Warn().Str("file", filepath.Base(f.path)).Bool("headerValid", c.hdrOK).
				Uint32("entries", res.count).Int64("indexedPhyOffset", res.complete).Str("stop", res.stop).
				Msg("index file rebuilt from its entries")
			if err := x.finishRebuild(f, res, !res.last); err != nil {
				return err
			}
		}
		if f.count > 0 {
			prevEnd = f.endPhy
		}
		prevComplete = res.complete
		x.cur = f
		x.lastPhy, x.completePhy = res.complete, res.complete
		if res.last && !last {
			return x.quarantine(cands[i+1:], "an older file had to be rebuilt up to its last valid entry")
		}
	}
	return nil
}

// listFiles removes leftover *.tmp files and opens every index file, oldest
// first, reading its header copies.
func (x *Index) listFiles() ([]*candidate, error) {
	dir := x.opts.Dir
	ents, err := x.fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var cands []*candidate
	removed := false
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if stem, ok := strings.CutSuffix(name, ".tmp"); ok {
			if _, ok := parseFileName(stem); ok {
				if err := x.fs.Remove(filepath.Join(dir, name)); err != nil {
					return cands, fmt.Errorf("remove %s: %w", name, err)
				}
				x.log.Info().Str("file", name).Msg("removed unfinished index file")
				removed = true
			}
			continue
		}
		base, ok := parseFileName(name)
		if !ok {
			continue
		}
		c := &candidate{path: filepath.Join(dir, name), base: base}
		cands = append(cands, c)
		if err := x.readHeader(c); err != nil {
			return cands, err
		}
	}
	if removed {
		if err := x.fs.SyncDir(dir); err != nil {
			return cands, fmt.Errorf("sync dir %s: %w", dir, err)
		}
	}
	return cands, nil
}

// readHeader opens c and picks its best header copy: valid, naming the
// same base as the file name, highest generation.
func (x *Index) readHeader(c *candidate) error {
	fh, err := x.fs.OpenReadWrite(c.path)
	if err != nil {
		return fmt.Errorf("open %s: %w", c.path, err)
	}
	c.fh = fh
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("stat %s: %w", c.path, err)
	}
	c.size = st.Size()
	region := make([]byte, min(c.size, HeaderRegionSize))
	if n, err := fh.ReadAt(region, 0); err != nil && !(errors.Is(err, io.EOF) && n == len(region)) {
		return fmt.Errorf("read header of %s: %w", c.path, err)
	}
	for _, off := range [2]int{0, HeaderCopyOffset} {
		if off+HeaderSize > len(region) {
			continue
		}
		h, err := decodeHeader(region[off : off+HeaderSize])
		if err != nil || h.baseTS != c.base {
			x.log.Warn().Err(err).Str("file", filepath.Base(c.path)).Int("copyOffset", off).Msg("index header copy invalid")
			continue
		}
		if !c.hdrOK || h.generation > c.hdr.generation {
			c.hdr, c.hdrOK = h, true
		}
	}
	return nil
}

func guessGeometry(gs []geometry, size int64) (geometry, bool) {
	for _, g := range gs {
		if fileSize(g.slots, g.capacity) == size {
			return g, true
		}
	}
	return geometry{}, false
}

// rebuildResult says what rebuild kept.
type rebuildResult struct {
	count    uint32
	complete int64  // indexedPhyOffset of the rebuilt file
	stop     string // why the scan stopped
	// last is set when the file must be the newest one (its tail is not
	// trustworthy); rebuilt when its slot table was rebuilt.
	last    bool
	rebuilt bool
}

// rebuild rebuilds f's slot table from entries 1..limit, checking each
// entry, and sets f's writer state. trusted is the header whose entry count
// limit comes from (nil when scanning a file without a valid header).
// trimTail (implied when an invalid entry ends the scan: the file then has
// to be the newest) drops trailing entries above the resulting
// indexedPhyOffset (a message whose keys may be incomplete).
func (x *Index) rebuild(f *file, limit uint32, trusted *header, prevEnd, prevComplete int64, trimTail bool) rebuildResult {
	clear(f.data[HeaderRegionSize:f.entriesOff])
	res := rebuildResult{stop: "entry count", rebuilt: true}
	minPhy := max(prevEnd, 0)
	var n uint32
	for i := uint32(1); i <= limit; i++ {
		e := f.readEntry(i)
		if e == (entry{}) {
			res.stop = "zero entry " + strconv.FormatUint(uint64(i), 10)
			break
		}
		slot := e.hash % f.slotCount
		if e.hash == 0 || e.phy < minPhy || e.prev != f.loadSlot(slot) {
			res.stop = "invalid entry " + strconv.FormatUint(uint64(i), 10)
			res.last = true
			break
		}
		f.storeSlot(slot, i)
		n, minPhy = i, e.phy
	}

	switch {
	case trusted != nil && n == limit:
		res.complete = trusted.indexedPhy
	default:
		// The last message in the file may have lost keys: count it out.
		res.complete = prevComplete
		if n > 0 {
			lastPhy := f.readEntry(n).phy
			for t := n - 1; t >= 1; t-- {
				if p := f.readEntry(t).phy; p < lastPhy {
					res.complete = p
					break
				}
			}
		}
		if trusted != nil {
			res.complete = min(res.complete, trusted.indexedPhy)
		}
	}
	if trimTail || res.last {
		res.last = true
		for n > 0 {
			e := f.readEntry(n)
			if e.phy <= res.complete {
				break
			}
			f.storeSlot(e.hash%f.slotCount, e.prev)
			n--
		}
	}

	f.count, f.slotsUsed = n, 0
	f.published.Store(n)
	f.beginPhy, f.endPhy, f.beginTS, f.endTS = -1, -1, 0, 0
	for i := uint32(1); i <= n; i++ {
		e := f.readEntry(i)
		ts := f.base + int64(e.diff)
		if e.prev == 0 {
			f.slotsUsed++
		}
		if i == 1 {
			f.beginPhy, f.beginTS, f.endTS = e.phy, ts, ts
		}
		f.beginTS, f.endTS, f.endPhy = min(f.beginTS, ts), max(f.endTS, ts), e.phy
	}
	res.count = n
	return res
}

// finishRebuild makes a rebuilt file durable: msync slots and entries, then
// a clean header (sealed unless it is to be appended to).
func (x *Index) finishRebuild(f *file, res rebuildResult, seal bool) error {
	if err := f.syncData(f.count); err != nil {
		return err
	}
	flags := FlagClean
	if seal {
		flags |= FlagSealed
	}
	f.hdrMu.Lock()
	defer f.hdrMu.Unlock()
	if err := f.writeHeader(f.state(flags, res.complete)); err != nil {
		return err
	}
	f.sealed, f.dirty = seal, false
	return nil
}

// quarantine renames cands to *.broken, so the index keeps a gap-free prefix
// of files; the store re-adds everything above MaxPhysicalOffset.
func (x *Index) quarantine(cands []*candidate, reason string) error {
	for i, c := range cands {
		if c.fh != nil {
			_ = c.fh.Close()
			c.fh = nil
		}
		if i == 1 {
			reason = "newer than " + filepath.Base(cands[0].path) + ", which was quarantined or cut short"
		}
		to := c.path + ".broken"
		for n := 1; ; n++ {
			if _, err := x.fs.Stat(to); errors.Is(err, os.ErrNotExist) {
				break
			}
			to = c.path + ".broken." + strconv.Itoa(n)
		}
		if err := x.fs.Rename(c.path, to); err != nil {
			return fmt.Errorf("quarantine %s: %w", c.path, err)
		}
		x.log.Error().Str("file", filepath.Base(c.path)).Str("movedTo", filepath.Base(to)).Str("reason", reason).
			Msg("index file quarantined; the store re-indexes from MaxPhysicalOffset")
	}
	if err := x.fs.SyncDir(x.opts.Dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", x.opts.Dir, err)
	}
	return nil
}
