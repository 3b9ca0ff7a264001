package index

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Index is the on-disk hash index by key. One goroutine calls Add; Lookup,
// MaxPhysicalOffset, Flush and DeleteBelow may run concurrently with it and
// with each other.
type Index struct {
	opts Options
	fs   vfs.FS
	log  zerolog.Logger

	flushMu sync.Mutex // serialises Flush and Close

	mu     sync.Mutex // guards everything below and the writer state of cur
	files  []*file    // oldest first; the last one is cur
	cur    *file
	closed bool
	// lastPhy is the phyOffset of the last Add (after Open: the recovered
	// MaxPhysicalOffset); completePhy the highest one whose keys are all
	// added (a later offset has been added since).
	lastPhy     int64
	completePhy int64

	failed atomic.Pointer[error] // sticky write failure (fsyncgate)
}

// Add indexes key for the message at phyOffset stored at storeTimestamp
// (unix ms). Calls come from one goroutine, with phyOffsets that never
// decrease; the keys of one message are added one after the other. Add does
// not allocate (except when it rolls to a new file or fails).
func (x *Index) Add(key []byte, phyOffset int64, storeTimestamp int64) error {
	if len(key) > MaxKeyLength {
		return fmt.Errorf("%w: %d bytes (max %d)", ErrKeyTooLong, len(key), MaxKeyLength)
	}
	if phyOffset < 0 || storeTimestamp < 0 {
		return fmt.Errorf("%w: offset %d, timestamp %d", ErrInvalidArgument, phyOffset, storeTimestamp)
	}
	hash := keyHash(key)

	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	if err := x.failure(); err != nil {
		return err
	}
	if phyOffset < x.lastPhy {
		return fmt.Errorf("%w: %d after %d", ErrOutOfOrder, phyOffset, x.lastPhy)
	}
	complete := x.completePhy
	if phyOffset > x.lastPhy {
		complete = x.lastPhy // the previous message's keys are all in
	}

	f := x.cur
	var diff int32
	ok := false
	if f != nil && !f.sealed && f.count < f.capacity {
		diff, ok = timeDiff(storeTimestamp, f.base)
	}
	if !ok {
		nf, err := x.roll(storeTimestamp, complete)
		if err != nil {
			return err
		}
		f = nf
		if diff, ok = timeDiff(storeTimestamp, f.base); !ok {
			// The clock went back more than 24.8 days behind the previous
			// file: keep the entry, with the oldest time the file can say.
			diff = math.MinInt32
			x.log.Warn().Int64("storeTimestamp", storeTimestamp).Int64("base", f.base).Msg("store timestamp far behind the previous index file; clamped")
		}
	}
	if !f.dirty {
		if err := x.markDirty(f); err != nil {
			return err
		}
	}

	i := f.count + 1
	slot := hash % f.slotCount
	prev := f.loadSlot(slot)
	if prev >= i { // a damaged slot of a file opened clean: start a new chain
		prev = 0
	}
	encodeEntry(f.entryBytes(i), entry{hash: hash, phy: phyOffset, diff: diff, prev: prev})
	f.count = i
	f.published.Store(i)
	f.storeSlot(slot, i)

	if prev == 0 {
		f.slotsUsed++
	}
	ts := f.base + int64(diff)
	if i == 1 {
		f.beginPhy, f.beginTS, f.endTS = phyOffset, ts, ts
	} else {
		f.beginTS, f.endTS = min(f.beginTS, ts), max(f.endTS, ts)
	}
	f.endPhy = phyOffset
	x.completePhy, x.lastPhy = complete, phyOffset
	return nil
}

// roll seals the current file and creates the next one. x.mu is held.
func (x *Index) roll(ts, complete int64) (*file, error) {
	old := x.cur
	base := ts
	if old != nil {
		if !old.sealed {
			if err := x.seal(old, complete); err != nil {
				return nil, err
			}
		}
		base = max(base, old.base+1)
	}
	g := nextGeometry(x.opts, old)
	f, err := createFile(x.fs, x.opts.Dir, base, g.slots, g.capacity, complete)
	if err != nil {
		return nil, fmt.Errorf("roll index file: %w", err)
	}
	x.files = append(x.files, f)
	x.cur = f
	x.log.Info().Str("file", filepath.Base(f.path)).Int64("indexedPhyOffset", complete).Msg("index file created")
	return f, nil
}

// seal makes f durable and final: msync slots and entries, then a header
// with FlagClean|FlagSealed. x.mu is held.
func (x *Index) seal(f *file, complete int64) error {
	if err := f.syncData(f.count); err != nil {
		return x.fail(err)
	}
	f.hdrMu.Lock()
	err := f.writeHeader(f.state(FlagClean|FlagSealed, complete))
	f.hdrMu.Unlock()
	if err != nil {
		return x.fail(err)
	}
	f.sealed = true
	f.dirty = false
	return nil
}

// markDirty makes a header without FlagClean durable before the first
// write into f. x.mu is held.
func (x *Index) markDirty(f *file) error {
	f.hdrMu.Lock()
	h := f.hdr
	h.flags &^= FlagClean
	err := f.writeHeader(h)
	f.hdrMu.Unlock()
	if err != nil {
		return x.fail(err)
	}
	f.dirty = true
	return nil
}

// fail records the first write failure and returns err wrapped in
// ErrFailed.
func (x *Index) fail(err error) error {
	wrapped := fmt.Errorf("%w: %w", ErrFailed, err)
	x.failed.CompareAndSwap(nil, &wrapped)
	x.log.Error().Err(err).Msg("index write failed; refusing writes until reopened")
	return wrapped
}

func (x *Index) failure() error {
	if p := x.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// view is what Lookup needs of one file, captured under x.mu.
type view struct {
	f              *file
	count          uint32
	beginTS, endTS int64
}

// Lookup returns up to maxResults candidate phyOffsets whose key hash matches
// key's and whose store timestamp is within [begin, end] (unix ms,
// inclusive; end 0 = no upper bound), newest (highest) first, without
// duplicates. maxResults <= 0 means DefaultLookupMax. Candidates may belong to
// other keys with the same hash: the caller checks the message. Lookup runs
// concurrently with Add and DeleteBelow.
func (x *Index) Lookup(key []byte, begin, end int64, maxResults int) ([]int64, error) {
	if len(key) > MaxKeyLength {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", ErrKeyTooLong, len(key), MaxKeyLength)
	}
	if maxResults <= 0 {
		maxResults = DefaultLookupMax
	}
	if end == 0 {
		end = math.MaxInt64
	}
	if end < begin {
		return nil, nil
	}
	hash := keyHash(key)

	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil, ErrClosed
	}
	views := make([]view, len(x.files))
	for i, f := range x.files {
		f.refs.Add(1)
		views[i] = view{f: f, count: f.count, beginTS: f.beginTS, endTS: f.endTS}
	}
	x.mu.Unlock()
	defer func() {
		for _, v := range views {
			_ = v.f.release()
		}
	}()

	out := make([]int64, 0, min(maxResults, 16))
	for i := len(views) - 1; i >= 0 && len(out) < maxResults; i-- {
		v := views[i]
		if v.count == 0 || v.beginTS > end || v.endTS < begin {
			continue
		}
		out = x.walk(v.f, hash, begin, end, maxResults, out)
	}
	return out, nil
}

// walk follows hash's chain in f, appending matches to out. Every link is
// checked (within the published entries, strictly decreasing), so damaged
// data ends the chain instead of looping or faulting.
func (x *Index) walk(f *file, hash uint32, begin, end int64, maxResults int, out []int64) []int64 {
	link := f.loadSlot(hash % f.slotCount)
	n := f.published.Load() // after the slot load: covers every entry it can name
	for link != 0 {
		if link > n {
			x.log.Warn().Str("file", filepath.Base(f.path)).Uint32("entry", link).Uint32("entries", n).Msg("index chain points past the last entry; chain ignored")
			return out
		}
		e := f.readEntry(link)
		if e.hash == hash {
			ts := f.base + int64(e.diff)
			if ts >= begin && ts <= end && (len(out) == 0 || e.phy < out[len(out)-1]) {
				out = append(out, e.phy)
				if len(out) == maxResults {
					return out
				}
			}
		}
		if e.prev >= link {
			x.log.Warn().Str("file", filepath.Base(f.path)).Uint32("entry", link).Uint32("prev", e.prev).Msg("index chain link does not go back; chain ended")
			return out
		}
		link = e.prev
	}
	return out
}

// Complete tells the index that every key of the message at phyOffset has
// been added — also when it had none — so the next Flush may claim it.
// Without it a Flush never claims the last message added (it cannot know
// that message is complete), and a store re-dispatching from the index's
// claim after a crash would re-read everything since the last keyed
// message. Calls come from the Add goroutine, with non-decreasing offsets.
func (x *Index) Complete(phyOffset int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed || phyOffset < x.lastPhy || phyOffset <= x.completePhy {
		return
	}
	x.lastPhy, x.completePhy = phyOffset, phyOffset
	if f := x.cur; f != nil && !f.sealed && !f.dirty && x.failure() == nil {
		// The header must lose FlagClean before it may claim more; a
		// failure is sticky (x.fail) and surfaces at the next Add or Flush.
		_ = x.markDirty(f)
	}
}

// Files reports how many index files there are (0 until the first key is
// added: an index of messages without keys has none to lose).
func (x *Index) Files() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.files)
}

// MaxPhysicalOffset returns the highest phyOffset whose keys are all
// indexed, -1 when nothing is. Right after Open it is what recovery could
// prove durable (the store re-adds every message above it); afterwards it is
// the phyOffset of the last Add, the dispatcher adding all keys of a message
// before it moves on.
func (x *Index) MaxPhysicalOffset() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.lastPhy
}

// Flush puts every entry added before the call on disk: msync of slots and
// entries, then the header (entry count, statistics and indexedPhyOffset),
// so the header never claims more than is on disk. The message added last
// may still be missing keys (Flush can run between two Adds of one
// message), so the header claims only the offsets below it: after a crash,
// MaxPhysicalOffset is at least the second-to-last offset added before the
// Flush, and the store re-adds the rest. Flush is a no-op when nothing
// changed, and safe to call concurrently with Add.
func (x *Index) Flush() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()

	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return ErrClosed
	}
	if err := x.failure(); err != nil {
		x.mu.Unlock()
		return err
	}
	f := x.cur
	if f == nil || !f.dirty || f.sealed {
		x.mu.Unlock()
		return nil
	}
	f.refs.Add(1)
	h := f.state(0, x.completePhy)
	x.mu.Unlock()
	defer func() { _ = f.release() }()

	f.hdrMu.Lock()
	last := f.hdr
	f.hdrMu.Unlock()
	if last.sealed() || (last.entryCount == h.entryCount && last.indexedPhy == h.indexedPhy && !last.clean()) {
		return nil
	}
	if err := f.syncData(h.entryCount); err != nil {
		return x.fail(err)
	}
	f.hdrMu.Lock()
	defer f.hdrMu.Unlock()
	if f.hdr.sealed() { // a roll sealed it meanwhile, with a newer state
		return nil
	}
	if err := f.writeHeader(h); err != nil {
		return x.fail(err)
	}
	return nil
}

// DeleteBelow deletes whole files whose entries all have phyOffset below
// minPhy (retention after CommitLog segments went), oldest first, never the
// newest file. It returns the number of files deleted. Lookups in progress
// keep their files mapped until they finish.
func (x *Index) DeleteBelow(minPhy int64) (int, error) {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return 0, ErrClosed
	}
	k := 0
	for k < len(x.files)-1 && x.files[k].endPhy < minPhy {
		k++
	}
	victims := append([]*file(nil), x.files[:k]...)
	x.files = append([]*file(nil), x.files[k:]...)
	x.mu.Unlock()
	if k == 0 {
		return 0, nil
	}

	var errs []error
	for _, f := range victims {
		if err := x.fs.Remove(f.path); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", f.path, err))
		}
		if err := f.release(); err != nil {
			errs = append(errs, err)
		}
		x.log.Info().Str("file", filepath.Base(f.path)).Int64("endPhyOffset", f.endPhy).Int64("minPhyOffset", minPhy).Msg("index file deleted")
	}
	if err := x.fs.SyncDir(x.opts.Dir); err != nil {
		errs = append(errs, fmt.Errorf("sync dir %s: %w", x.opts.Dir, err))
	}
	return k, errors.Join(errs...)
}

// Close flushes the current file, marks it clean (its slot table matches its
// entries, and every key added so far counts as indexed) and unmaps every
// file once no Lookup uses it. It is idempotent; later calls return nil.
func (x *Index) Close() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()

	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return nil
	}
	x.closed = true
	files, f, complete := x.files, x.cur, x.lastPhy
	x.files, x.cur = nil, nil
	x.mu.Unlock()

	var errs []error
	if f != nil && f.dirty && !f.sealed && x.failure() == nil {
		if err := f.syncData(f.count); err != nil {
			errs = append(errs, x.fail(err))
		} else {
			f.hdrMu.Lock()
			if err := f.writeHeader(f.state(FlagClean, complete)); err != nil {
				errs = append(errs, x.fail(err))
			}
			f.hdrMu.Unlock()
		}
	}
	for _, f := range files {
		if err := f.release(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
