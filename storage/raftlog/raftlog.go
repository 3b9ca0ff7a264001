package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Errors.
var (
	// ErrCorrupt: the Raft files are damaged where no scan can mend them
	// (an index entry at or below the commit point, the hard state, the
	// meta file). Such a replica must not vote: it is rebuilt from the
	// others.
	ErrCorrupt = errors.New("raftlog: damaged Raft files")
	// ErrCommitted is returned by Append for a conflicting entry at or
	// below the persisted commit point: Raft never asks for it, and it
	// is never done.
	ErrCommitted = errors.New("raftlog: refusing to truncate at or below the commit point")
	// ErrNotFrames is returned by Append for a normal entry whose data
	// is not a frame stream starting at the log's end.
	ErrNotFrames = errors.New("raftlog: entry data is not a frame stream at the log's end")
	// ErrSnapshotNeedsLog is returned by ApplySnapshot while the
	// CommitLog does not end where the snapshot says the log continues.
	ErrSnapshotNeedsLog = errors.New("raftlog: the CommitLog must first be brought to the snapshot's offset")
)

// File names under <data>/raft; part of the on-disk format (doc.go).
const (
	raftDirName  = "raft"
	indexDirName = "index"
	metaName     = "meta"
	hardName     = "hardstate"
	confsName    = "confs"
)

// DefaultIndexFileEntries is the number of entries per index file.
const DefaultIndexFileEntries = 1 << 16

// Options configure Open.
type Options struct {
	// Store are the options of the store whose CommitLog is the Raft log;
	// Open sets HoldDispatch and DispatchLimit itself. With
	// Store.Replicated the store's own writers append while the replica
	// leads (storage's replicate.go; package shard proposes their frames).
	Store storage.Options
	// IndexFileEntries is the number of entries per index file
	// (DefaultIndexFileEntries; tests use small ones).
	IndexFileEntries int
	Logger           zerolog.Logger
}

// Report says what Open found and mended.
type Report struct {
	Adopted        bool   // a store without Raft files: its log became the snapshot prefix
	Entries        uint64 // index entries loaded
	Repaired       uint64 // damaged index entries rebuilt from their neighbours
	CutEntries     uint64 // index entries past a torn tail or past the CommitLog's end, dropped
	TruncatedBytes int64  // CommitLog bytes past the last indexed entry, cut
}

// Storage is raft.Storage over a store's CommitLog. Append, SetHardState,
// SetCommit, Compact, CreateSnapshot and ApplySnapshot write; every
// method is safe for concurrent use. Append does not hold the state's
// lock while it waits for its flush: raft's reads (Term, Entries, …) and
// SetHardState and SetCommit go on meanwhile (a node loop with
// asynchronous storage writes appends in a goroutine of its own).
type Storage struct {
	store *storage.Store
	fs    vfs.FS
	dir   string // <data>/raft
	log   zerolog.Logger
	// behindLogged is when Snapshot last warned of a replica it cannot
	// bring past a retention cut (once a minute at most).
	behindLogged time.Time

	// wmu orders the writers of the index files and the CommitLog's
	// tail (Append, DropUnindexed, Compact, CreateSnapshot,
	// ApplySnapshot, Close); it is taken before mu and held by Append
	// through its flush, which mu is not.
	wmu   sync.Mutex
	mu    sync.Mutex
	meta  meta
	ents  []entry // ents[k] has index meta.compact.index+1+k
	confs map[uint64]confEntry
	hard  hardState
	hasHS bool
	// hsFile is the open hard-state file; hsDurable the slot holding
	// the last synced hard state (the other one is written next).
	hsFile    vfs.File
	hsDurable int
	index     indexFiles
	report    Report
	closed    bool
	verify    []byte // Append's buffer for comparing a pre-written tail
	stats     Stats
}

var _ raft.Storage = (*Storage)(nil)

// Open opens the store of opts.Store with its dispatcher held at the
// Raft commit point and loads the Raft files beside it, creating them
// for a store that has none (its log, if any, becomes the prefix covered
// by the first snapshot: doc.go, "Adopting a store"). It checks the
// index against the CommitLog and mends what a crash can leave
// (doc.go, "Recovery").
func Open(opts Options) (_ *Storage, err error) {
	fs := opts.Store.FS
	if fs == nil {
		fs = vfs.OS()
	}
	per := opts.IndexFileEntries
	if per <= 0 || per > math.MaxUint32 {
		per = DefaultIndexFileEntries
	}
	dir := filepath.Join(opts.Store.Dir, raftDirName)
	s := &Storage{fs: fs, dir: dir, log: opts.Logger.With().Str("component", "raftlog").Logger(), confs: map[uint64]confEntry{}}
	s.index = indexFiles{fs: fs, dir: filepath.Join(dir, indexDirName), per: uint64(per)}
	defer func() {
		if err != nil {
			if s.hsFile != nil {
				_ = s.hsFile.Close()
			}
			_ = s.index.close()
		}
	}()

	raw, err := fs.ReadFile(filepath.Join(dir, metaName))
	fresh := errors.Is(err, os.ErrNotExist)
	switch {
	case fresh:
		if bases, _ := s.index.list(); len(bases) > 0 {
			return nil, fmt.Errorf("%w: %s is missing but index files exist", ErrCorrupt, filepath.Join(dir, metaName))
		}
	case err != nil:
		return nil, err
	default:
		if s.meta, err = decodeMeta(raw); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, filepath.Join(dir, metaName), err)
		}
		s.index.per = uint64(s.meta.perFile) // the layout the files were written with
	}
	if err := s.loadHardState(); err != nil {
		return nil, err
	}
	if fresh && s.hasHS {
		return nil, fmt.Errorf("%w: %s is missing but a hard state exists", ErrCorrupt, filepath.Join(dir, metaName))
	}
	if !fresh {
		if err := s.loadConfs(); err != nil {
			return nil, err
		}
		if err := s.loadIndex(); err != nil {
			return nil, err
		}
	}

	so := opts.Store
	so.HoldDispatch = true
	so.DispatchLimit = math.MaxInt64 // an adopted log is committed whole
	if !fresh {
		so.DispatchLimit = s.commitOffsetLocked()
	}
	st, err := storage.Open(so)
	if err != nil {
		return nil, err
	}
	s.store = st
	if err := s.start(fresh); err != nil {
		_ = st.Close()
		return nil, err
	}
	return s, nil
}

// start creates the Raft files of a fresh store, or reconciles the index
// with the CommitLog; then it sets the dispatch limit.
func (s *Storage) start(fresh bool) error {
	end := s.store.WriteOffset()
	if err := vfs.MkdirAllSync(s.fs, s.index.dir, 0o755); err != nil {
		return err
	}
	if fresh {
		s.report.Adopted = end > 0
		s.meta = meta{compact: mark{offset: end}, snap: mark{offset: end}, conf: &pb.ConfState{}, perFile: uint32(s.index.per)}
		if err := s.writeMeta(s.meta); err != nil {
			return err
		}
		s.store.SetDispatchLimit(end)
		return nil
	}
	if err := s.reconcile(end); err != nil {
		return err
	}
	if err := s.index.syncFrom(s.meta.compact.index + 1); err != nil {
		return err
	}
	s.store.SetDispatchLimit(s.commitOffsetLocked())
	s.report.Entries = uint64(len(s.ents))
	if s.report.CutEntries > 0 || s.report.TruncatedBytes > 0 || s.report.Repaired > 0 {
		s.log.Warn().Uint64("cut_entries", s.report.CutEntries).Int64("truncated_bytes", s.report.TruncatedBytes).
			Uint64("repaired", s.report.Repaired).Msg("raft index and CommitLog reconciled")
	}
	return nil
}

// loadHardState reads the hard-state file: the newer valid slot wins.
// A file with no valid slot is damage: the term and vote it held are
// what keeps this replica from voting twice.
func (s *Storage) loadHardState() error {
	b, err := s.fs.ReadFile(filepath.Join(s.dir, hardName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	h, slot, ok := decodeHardState(b)
	if !ok {
		if neverWritten(b) {
			return nil // the first write was torn: nothing relied on it
		}
		return fmt.Errorf("%w: %s has no valid slot", ErrCorrupt, filepath.Join(s.dir, hardName))
	}
	// What was read may have been in the page cache only (a process
	// crash): make it durable before the next write relies on it.
	f, err := s.fs.OpenReadWrite(filepath.Join(s.dir, hardName))
	if err == nil {
		if err = f.Sync(); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", filepath.Join(s.dir, hardName), err)
	}
	s.hard, s.hasHS, s.hsDurable, s.hsFile = h, true, slot, f
	return nil
}

// neverWritten reports whether a hard-state file without a valid slot
// has a slot that was never written (missing or zeros): the first write
// (always synced, to slot 0) then never completed, and SetHardState never
// returned for it. Two slots that were both written and are both invalid
// are damage.
func neverWritten(b []byte) bool {
	for slot := 0; slot < 2; slot++ {
		if len(b) < (slot+1)*hardSlotSize || allZero(b[slot*hardSlotSize:(slot+1)*hardSlotSize]) {
			return true
		}
	}
	return false
}

func (s *Storage) loadConfs() error {
	b, err := s.fs.ReadFile(filepath.Join(s.dir, confsName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	confs, err := decodeConfs(b)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, filepath.Join(s.dir, confsName), err)
	}
	s.confs = confs
	return nil
}

// loadIndex reads the index entries that follow the compaction point and
// chain: consecutive indexes, terms that never go down, each entry
// starting where the one before ended. A damaged entry between two good
// ones of the same term is rebuilt from them (its offset and size follow
// from theirs, its type from the confs file); the first entry that cannot
// be trusted otherwise ends the index (a torn tail, unless it is at or
// below the commit point: reconcile decides).
func (s *Storage) loadIndex() error {
	bases, err := s.index.list()
	if err != nil {
		return err
	}
	prev := entry{index: s.meta.compact.index, term: s.meta.compact.term, offset: s.meta.compact.offset}
	next := s.meta.compact.index + 1
	var raw []byte
	var rawBase uint64
	slot := func(i uint64) []byte { // the bytes of index entry i, nil if absent
		b := s.index.base(i)
		if b != rawBase || raw == nil {
			if !slices.Contains(bases, b) {
				return nil
			}
			raw, err = s.index.read(b)
			rawBase = b
			if err != nil {
				return nil
			}
		}
		at := (i - b) * IndexEntrySize
		if uint64(len(raw)) < at+IndexEntrySize {
			return nil
		}
		return raw[at : at+IndexEntrySize]
	}
	valid := func(e entry, i uint64, prev entry) bool {
		return e.index == i && e.term >= prev.term && e.offset == prev.end()
	}
	for {
		b := slot(next)
		if err != nil {
			return err
		}
		if b == nil {
			break
		}
		e, derr := decodeIndexEntry(b)
		if derr != nil || !valid(e, next, prev) {
			// Rebuild it from its neighbours when they pin it down.
			nb := slot(next + 1)
			n, nerr := decodeIndexEntry(nb)
			if nb == nil || nerr != nil || n.index != next+1 || n.term != prev.term || n.offset < prev.end() ||
				n.offset-prev.end() > math.MaxUint32 {
				break
			}
			e = entry{index: next, term: prev.term, offset: prev.end(), size: uint32(n.offset - prev.end())}
			if c, ok := s.confs[next]; ok && c.term == e.term {
				e.typ = c.typ
			}
			if e.typ != pb.EntryNormal && e.size != 0 {
				break
			}
			s.report.Repaired++
			if err := s.index.write([]entry{e}); err != nil {
				return err
			}
		}
		s.ents = append(s.ents, e)
		prev, next = e, next+1
	}
	return nil
}

// reconcile makes the index and the CommitLog (which ends at end) agree:
// index entries past the log's end are dropped, log bytes past the last
// entry are cut, both only above the commit point.
func (s *Storage) reconcile(end int64) error {
	if end < s.meta.compact.offset {
		return fmt.Errorf("%w: the CommitLog ends at %d, below the compaction point's offset %d", ErrCorrupt, end, s.meta.compact.offset)
	}
	keep := len(s.ents)
	for keep > 0 && s.ents[keep-1].end() > end {
		keep--
	}
	last := s.meta.compact.index + uint64(keep)
	if s.hasHS && s.hard.commit > last {
		return fmt.Errorf("%w: the index ends at %d (the CommitLog at %d), below the commit point %d", ErrCorrupt, last, end, s.hard.commit)
	}
	// Whatever follows the kept entries in the files is a torn tail.
	if bases, err := s.index.list(); err != nil {
		return err
	} else if len(bases) > 0 {
		top := bases[len(bases)-1]
		if raw, err := s.index.read(top); err != nil {
			return err
		} else if stored := top + uint64(len(raw))/IndexEntrySize; stored > last+1 || len(raw)%IndexEntrySize != 0 {
			s.report.CutEntries += uint64(len(s.ents) - keep)
			if stored > last+1 {
				s.report.CutEntries += stored - 1 - (s.meta.compact.index + uint64(len(s.ents)))
			}
			if err := s.index.truncateFrom(last + 1); err != nil {
				return err
			}
		}
	}
	s.ents = s.ents[:keep]
	if err := s.dropConfsFrom(last + 1); err != nil {
		return err
	}
	if want := s.lastEndLocked(); end > want {
		if err := s.store.TruncateFrom(want); err != nil {
			return fmt.Errorf("cut the CommitLog past the last indexed entry (%d): %w", want, err)
		}
		s.report.TruncatedBytes = end - want
	}
	return nil
}

// Store is the store whose CommitLog is the Raft log.
func (s *Storage) Store() *storage.Store { return s.store }

// Report says what Open found and mended.
func (s *Storage) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.report
}

// NextOffset is the CommitLog offset where the frames of the next entry
// must start: the end of the last entry.
func (s *Storage) NextOffset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastEndLocked()
}

// CommitOffset is the CommitLog offset where the committed entries end
// (the persisted commit point): the dispatcher's limit.
func (s *Storage) CommitOffset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitOffsetLocked()
}

func (s *Storage) lastEndLocked() int64 {
	if len(s.ents) == 0 {
		return s.meta.compact.offset
	}
	return s.ents[len(s.ents)-1].end()
}

func (s *Storage) lastIndexLocked() uint64 { return s.meta.compact.index + uint64(len(s.ents)) }

// commitOffsetLocked is the end of the committed entries.
func (s *Storage) commitOffsetLocked() int64 {
	c := s.hard.commit
	switch {
	case c <= s.meta.compact.index:
		return s.meta.compact.offset
	case c >= s.lastIndexLocked():
		return s.lastEndLocked()
	default:
		return s.ents[c-s.meta.compact.index-1].end()
	}
}

// Close closes the store and the index files.
func (s *Storage) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var hsErr error
	if s.hsFile != nil {
		hsErr = errors.Join(s.hsFile.Sync(), s.hsFile.Close())
	}
	return errors.Join(hsErr, s.index.close(), s.store.Close())
}

// InitialState implements raft.Storage.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := proto.Clone(pb.EnsureConfState(s.meta.conf)).(*pb.ConfState)
	if !s.hasHS {
		return &pb.HardState{}, cs, nil
	}
	return &pb.HardState{Term: proto.Uint64(s.hard.term), Vote: proto.Uint64(s.hard.vote), Commit: proto.Uint64(s.hard.commit)}, cs, nil
}

// FirstIndex implements raft.Storage.
func (s *Storage) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.meta.compact.index + 1, nil
}

// LastIndex implements raft.Storage.
func (s *Storage) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastIndexLocked(), nil
}

// Term implements raft.Storage.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.termLocked(i)
}

func (s *Storage) termLocked(i uint64) (uint64, error) {
	c := s.meta.compact
	switch {
	case i < c.index:
		return 0, raft.ErrCompacted
	case i == c.index:
		return c.term, nil
	case i > s.lastIndexLocked():
		return 0, raft.ErrUnavailable
	}
	return s.ents[i-c.index-1].term, nil
}

// Entries implements raft.Storage: the entries [lo, hi), at most maxSize
// bytes of them (at least one). A normal entry's data is read back from
// the CommitLog, the frame stream it was appended as.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.meta.compact.index
	if lo <= c {
		return nil, raft.ErrCompacted
	}
	if hi > s.lastIndexLocked()+1 {
		return nil, fmt.Errorf("%w: entries [%d,%d) past the last index %d", raft.ErrUnavailable, lo, hi, s.lastIndexLocked())
	}
	if len(s.ents) == 0 {
		return nil, raft.ErrUnavailable
	}
	var out []*pb.Entry
	var size uint64
	for i := lo; i < hi; i++ {
		e := s.ents[i-c-1]
		pe := &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(e.term), Type: e.typ.Enum()}
		switch {
		case e.typ != pb.EntryNormal:
			if ce, ok := s.confs[i]; ok {
				pe.Data = ce.data
			}
		case e.size > 0:
			data, err := s.store.ReadFrameRange(e.offset, e.end(), make([]byte, 0, e.size))
			if errors.Is(err, storage.ErrOffsetTooSmall) {
				return nil, raft.ErrCompacted // retention took it before compaction did
			}
			if err != nil {
				return nil, fmt.Errorf("raft entry %d at CommitLog [%d,%d): %w", i, e.offset, e.end(), err)
			}
			pe.Data = data
		}
		size += uint64(proto.Size(pe))
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, pe)
	}
	return out, nil
}

// Snapshot implements raft.Storage: the snapshot point, its
// configuration, and as Data the CommitLog offset where the log continues
// (DecodeSnapshotData). The messages themselves are the log: a replica
// that needs a snapshot first gets the CommitLog up to that offset by
// frame streams.
//
// Raft asks for it only to send it to a replica that needs entries the
// log no longer holds. When no snapshot can bring such a replica past
// them — none was taken (index 0), or retention deleted the CommitLog
// from the offset it names on — Snapshot answers
// raft.ErrSnapshotTemporarilyUnavailable: raft then leaves that replica
// behind and asks again later (an empty snapshot would make it panic, and
// take the leader down with it). Such a replica is rebuilt from a copy
// of another's data (package shard's copies); the leader's log says it
// needs to be.
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.snapshotLocked()
	if snap.GetMetadata().GetIndex() == 0 || s.meta.snap.offset < s.store.MinPhysicalOffset() {
		if now := time.Now(); now.Sub(s.behindLogged) >= time.Minute {
			s.behindLogged = now
			s.log.Warn().Uint64("snapshot_index", snap.GetMetadata().GetIndex()).Int64("snapshot_offset", s.meta.snap.offset).
				Int64("commitlog_min", s.store.MinPhysicalOffset()).
				Msg("a replica needs Raft entries that retention deleted; it cannot catch up from the log: rebuild it (mqgate replica rebuild, then start it with --join: it starts from a copy of the leader's data)")
		}
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return snap, nil
}

func (s *Storage) snapshotLocked() *pb.Snapshot {
	m := s.meta.snap
	return SnapshotAt(m.index, m.term, m.offset, s.meta.conf)
}

// SnapshotAt is the snapshot of index i (term t) with configuration cs
// whose CommitLog continues at offset (doc.go, "Snapshots").
func SnapshotAt(i, t uint64, offset int64, cs *pb.ConfState) *pb.Snapshot {
	return &pb.Snapshot{
		Data: encodeSnapData(offset),
		Metadata: &pb.SnapshotMetadata{
			Index:     proto.Uint64(i),
			Term:      proto.Uint64(t),
			ConfState: proto.Clone(pb.EnsureConfState(cs)).(*pb.ConfState),
		},
	}
}

// SetHardState persists st and moves the dispatcher's limit to the end
// of the committed entries. It always writes the slot that does not hold
// the last synced hard state. A change of term or vote is fdatasynced
// (the slot then becomes the synced one), so a torn write leaves the
// synced one; a change of the commit point alone is written without a
// sync (etcd's MustSync: the commit point is the cluster's, learned again
// after a crash; the entries are synced by Append) and can only be lost,
// or win over the synced slot with the same term and vote. The commit
// point never moves back: a lower one than the last keeps the last; a
// hard state equal to the last is not written again.
func (s *Storage) SetHardState(st *pb.HardState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	h := hardState{seq: s.hard.seq + 1, term: st.GetTerm(), vote: st.GetVote(), commit: st.GetCommit()}
	if s.hasHS && h.commit < s.hard.commit {
		// Raft never lowers its commit point; a hard state written
		// after a later commit point (SetCommit: shard's node loop
		// applies committed entries while its append worker persists
		// earlier hard states) keeps the later one, and the
		// dispatcher's limit never moves back.
		h.commit = s.hard.commit
	}
	// A hard state the file holds already (the append worker's, after
	// SetCommit wrote a later commit point) is not written again.
	if !s.hasHS || h.term != s.hard.term || h.vote != s.hard.vote || h.commit != s.hard.commit {
		sync := !s.hasHS || h.term != s.hard.term || h.vote != s.hard.vote
		if err := s.writeHardSlot(h, sync); err != nil {
			return err
		}
		s.hard, s.hasHS = h, true
	}
	s.store.SetDispatchLimit(s.commitOffsetLocked())
	return nil
}

// SetCommit raises the commit point to c (no further than the last
// entry Append persisted), keeping the term and vote the file holds: a
// change of the commit point alone, written without a sync, which moves
// the dispatcher's limit. A node loop with asynchronous storage writes
// calls it before it applies committed entries whose hard state its
// append worker has not written yet. A c at or below the commit point
// changes nothing.
func (s *Storage) SetCommit(c uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	c = min(c, s.lastIndexLocked())
	if !s.hasHS || c <= s.hard.commit {
		return nil
	}
	h := s.hard
	h.seq++
	h.commit = c
	if err := s.writeHardSlot(h, false); err != nil {
		return err
	}
	s.hard = h
	s.store.SetDispatchLimit(s.commitOffsetLocked())
	return nil
}

func (s *Storage) writeHardSlot(h hardState, sync bool) error {
	p := filepath.Join(s.dir, hardName)
	if s.hsFile == nil {
		f, err := s.fs.OpenReadWrite(p)
		if errors.Is(err, os.ErrNotExist) {
			if f, err = s.fs.Create(p); err == nil {
				if err = f.Sync(); err == nil {
					err = s.fs.SyncDir(s.dir)
				}
				if err != nil {
					_ = f.Close()
				}
			}
		}
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		s.hsFile = f
	}
	if !s.hasHS {
		s.hsDurable = 1 // the first write goes to slot 0 (neverWritten)
	}
	slot := 1 - s.hsDurable
	_, err := s.hsFile.WriteAt(encodeHardSlot(h), int64(slot)*hardSlotSize)
	if err == nil && sync {
		if err = s.hsFile.Sync(); err == nil {
			s.hsDurable = slot
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func (s *Storage) writableLocked() error {
	if s.closed {
		return storage.ErrClosed
	}
	return nil
}

// Append persists entries (raft's Ready.Entries), in order. Entries
// already held with the same index and term are the same entries (the
// Log Matching property) and are passed over; from the first that
// differs the log is cut (above the commit point only: ErrCommitted) and
// the rest appended. The frame streams of the normal entries go to the
// CommitLog in one AppendFrames (one flush), which checks every frame;
// then their index entries are written and synced. Nothing is written
// when a stream is refused. On a leader the CommitLog may already hold an
// entry's frames past the last entry (written when it was proposed): they
// are compared with the entry's data and, equal, made durable in place
// instead of appended again; a tail that differs is cut first.
func (s *Storage) Append(entries []*pb.Entry) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	first, last := s.meta.compact.index+1, s.lastIndexLocked()
	if entries[len(entries)-1].GetIndex() < first {
		return nil
	}
	if e0 := entries[0].GetIndex(); e0 < first {
		entries = entries[first-e0:]
	}
	if e0 := entries[0].GetIndex(); e0 > last+1 {
		return fmt.Errorf("raftlog: append at %d leaves a gap after the last index %d", e0, last)
	}
	for len(entries) > 0 && entries[0].GetIndex() <= last {
		if t, _ := s.termLocked(entries[0].GetIndex()); t != entries[0].GetTerm() {
			break
		}
		entries = entries[1:]
	}
	if len(entries) == 0 {
		return nil
	}
	if at := entries[0].GetIndex(); at <= last {
		if err := s.truncateLocked(at); err != nil {
			return err
		}
	}

	// Plan: every entry's place; the frames to append, as one stream.
	// CommitLog bytes past the last entry are a pre-written tail: a
	// leader's own frames, written when it proposed them (doc.go,
	// "A leader's entries are written when proposed"). An entry whose
	// data equals the tail's bytes at its place is verified there, not
	// written again; from the first that does not, the tail is cut and
	// the rest appended.
	pos := s.lastEndLocked()
	written := s.store.WriteOffset()
	if written < pos {
		return fmt.Errorf("raftlog: the CommitLog ends at %d, below the last entry's end %d", written, pos)
	}
	tail := written > pos // bytes left to verify against
	verified, appended := uint64(0), uint64(0)
	cutAt, verifiedEnd := int64(-1), int64(-1)
	planned := make([]entry, len(entries))
	var stream []byte
	confsChanged := false
	for k, pe := range entries {
		e := entry{index: pe.GetIndex(), term: pe.GetTerm(), offset: pos, typ: pe.GetType()}
		if e.index != s.lastIndexLocked()+1+uint64(k) {
			return fmt.Errorf("raftlog: entries not consecutive at %d", e.index)
		}
		switch {
		case e.typ == pb.EntryConfChange || e.typ == pb.EntryConfChangeV2:
			confsChanged = true
		case e.typ != pb.EntryNormal:
			return fmt.Errorf("raftlog: entry %d of unknown type %d", e.index, e.typ)
		case len(pe.GetData()) > 0:
			start, end, err := commitlog.StreamExtent(pe.GetData())
			if err != nil || start != pos || end-start > math.MaxUint32 {
				return fmt.Errorf("%w: entry %d (stream from %d, the log ends at %d): %v", ErrNotFrames, e.index, start, pos, err)
			}
			e.size = uint32(end - start)
			switch {
			case tail && end <= written && s.holdsLocked(start, end, pe.GetData()):
				verifiedEnd = end
				verified++
			default:
				if tail {
					cutAt, tail = start, false
				}
				stream = append(stream, pe.GetData()...)
				appended++
			}
			pos = end
		}
		planned[k] = e
	}
	if confsChanged {
		for k, pe := range entries {
			if planned[k].typ != pb.EntryNormal {
				s.confs[planned[k].index] = confEntry{term: planned[k].term, typ: planned[k].typ, data: append([]byte{}, pe.GetData()...)}
			}
		}
		if err := s.writeConfsLocked(); err != nil {
			return err
		}
	}
	// The index entries and the frames are written, then made durable at
	// once: the index's fdatasync runs beside the CommitLog's flush (Open
	// drops index entries whose bytes did not make it, so the order of
	// the two does not matter; Append returns only after both).
	if err := s.index.writeUnsynced(planned); err != nil {
		return err
	}
	if cutAt >= 0 {
		// The tail from here on is not these entries (a proposal raft
		// dropped, or entries of another leader): it was never indexed,
		// never committed, never dispatched.
		if err := s.store.TruncateFrom(cutAt); err != nil {
			if terr := s.index.truncateFrom(planned[0].index); terr != nil {
				return terr
			}
			return fmt.Errorf("raftlog: cut the pre-written tail at %d: %w", cutAt, err)
		}
		s.stats.TailCuts++
		s.stats.TailBytes += written - cutAt
	}
	flushTo := int64(-1) // the CommitLog offset to wait for
	if len(stream) > 0 {
		end, err := s.store.AppendFramesNoWait(stream)
		if err != nil {
			return s.unplanLocked(planned, fmt.Errorf("%w: %w", ErrNotFrames, err))
		}
		if end != pos {
			return fmt.Errorf("raftlog: the CommitLog ends at %d after the append, the entries at %d", end, pos)
		}
		flushTo = end
	} else if verifiedEnd >= 0 {
		flushTo = verifiedEnd // only verified frames: made durable in place
	}
	// The CommitLog's flush and the index's fdatasync, side by side,
	// without mu: raft's reads (the entries being persisted are still in
	// its unstable log) and SetHardState go on meanwhile; wmu keeps every
	// other writer of the index and the CommitLog's tail out.
	s.mu.Unlock()
	var ferr, serr error
	if flushTo >= 0 {
		synced := make(chan error, 1)
		go func() { synced <- s.index.syncTail() }()
		ferr = s.store.WaitFlushed(flushTo)
		serr = <-synced
	} else {
		serr = s.index.syncTail()
	}
	s.mu.Lock()
	if ferr != nil {
		if len(stream) > 0 {
			return s.unplanLocked(planned, fmt.Errorf("%w: %w", ErrNotFrames, ferr))
		}
		return fmt.Errorf("raftlog: flush the verified entries up to %d: %w", verifiedEnd, ferr)
	}
	if serr != nil {
		return serr
	}
	s.ents = append(s.ents, planned...)
	s.stats.Verified += verified
	s.stats.Appended += appended
	return nil
}

// unplanLocked forgets the entries an Append could not persist (their
// confs; their index entries, which the next write or Open mends) and
// returns err.
func (s *Storage) unplanLocked(planned []entry, err error) error {
	for _, e := range planned {
		if e.typ != pb.EntryNormal {
			delete(s.confs, e.index)
		}
	}
	if terr := s.index.truncateFrom(planned[0].index); terr != nil {
		return terr
	}
	return err
}

// holdsLocked reports whether the CommitLog holds data at [start, end):
// the pre-written frames of a leader's own proposal.
func (s *Storage) holdsLocked(start, end int64, data []byte) bool {
	s.verify = s.verify[:0]
	got, err := s.store.ReadFrameRange(start, end, s.verify)
	s.verify = got[:0]
	return err == nil && bytes.Equal(got, data)
}

// DropUnindexed cuts the CommitLog bytes past the last entry and returns
// how many it cut: a leader's frames written for proposals raft did not
// take into its log, or took and then lost to another leader's entries
// before persisting them. The node loop calls it only when no append is
// outstanding and the store does not serve (no proposal is outstanding):
// then every such byte is stale.
func (s *Storage) DropUnindexed() (int64, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writableLocked(); err != nil {
		return 0, err
	}
	end, written := s.lastEndLocked(), s.store.WriteOffset()
	if written <= end {
		return 0, nil
	}
	if err := s.store.TruncateFrom(end); err != nil {
		return 0, fmt.Errorf("raftlog: cut the unindexed tail at %d: %w", end, err)
	}
	s.stats.TailCuts++
	s.stats.TailBytes += written - end
	return written - end, nil
}

// truncateLocked drops the entries from index at on: first the index
// files, then the CommitLog from the entry's offset (a crash between the
// two leaves log bytes past the last entry, which Open cuts).
func (s *Storage) truncateLocked(at uint64) error {
	if s.hasHS && at <= s.hard.commit {
		return fmt.Errorf("%w: a conflicting entry at %d, commit %d", ErrCommitted, at, s.hard.commit)
	}
	c := s.meta.compact.index
	if at <= c {
		return fmt.Errorf("%w: truncate at %d, compacted to %d", ErrCommitted, at, c)
	}
	off := s.ents[at-c-1].offset
	if err := s.index.truncateFrom(at); err != nil {
		return err
	}
	s.stats.Conflicts++
	s.stats.ConflictEntries += s.lastIndexLocked() - at + 1
	s.ents = s.ents[:at-c-1]
	if err := s.dropConfsFrom(at); err != nil {
		return err
	}
	if err := s.store.TruncateFrom(off); err != nil {
		return fmt.Errorf("raftlog: cut the CommitLog at %d (entry %d): %w", off, at, err)
	}
	return nil
}

// dropConfsFrom forgets the configuration entries from index at on.
func (s *Storage) dropConfsFrom(at uint64) error {
	changed := false
	for i := range s.confs {
		if i >= at {
			delete(s.confs, i)
			changed = true
		}
	}
	if changed {
		return s.writeConfsLocked()
	}
	return nil
}

func (s *Storage) writeConfsLocked() error {
	order := make([]uint64, 0, len(s.confs))
	for i := range s.confs {
		order = append(order, i)
	}
	slices.Sort(order)
	return vfs.WriteFileAtomic(s.fs, filepath.Join(s.dir, confsName), encodeConfs(s.confs, order), 0o644)
}

func (s *Storage) writeMeta(m meta) error {
	b, err := encodeMeta(m)
	if err != nil {
		return err
	}
	return vfs.WriteFileAtomic(s.fs, filepath.Join(s.dir, metaName), b, 0o644)
}

// Compact discards the entries before index i (raft.MemoryStorage's
// Compact): entry i stays as the log's first point (its term is kept);
// the index files wholly below it are removed. The caller compacts no
// further than it has applied. The CommitLog is not touched: retention
// deletes its segments (CompactBelow finds the index for a retention
// cut).
func (s *Storage) Compact(i uint64) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	c := s.meta.compact.index
	if i <= c {
		return raft.ErrCompacted
	}
	if i > s.lastIndexLocked() {
		return fmt.Errorf("raftlog: compact %d is past the last index %d", i, s.lastIndexLocked())
	}
	e := s.ents[i-c-1]
	m := s.meta
	m.compact = mark{index: i, term: e.term, offset: e.end()}
	if err := s.writeMeta(m); err != nil {
		return err
	}
	s.meta = m
	s.ents = slices.Clone(s.ents[i-c:])
	changed := false
	for k := range s.confs {
		if k <= i {
			delete(s.confs, k)
			changed = true
		}
	}
	if changed {
		if err := s.writeConfsLocked(); err != nil {
			return err
		}
	}
	return s.index.removeBelow(i + 1)
}

// CompactBelow compacts to the last entry, at most applied, whose bytes
// end at or below offset (a retention cut: the CommitLog's new minimum)
// and returns that index (0 and nil when there is none to compact).
func (s *Storage) CompactBelow(offset int64, applied uint64) (uint64, error) {
	s.mu.Lock()
	c := s.meta.compact.index
	hi := min(applied, s.lastIndexLocked())
	k, _ := slices.BinarySearchFunc(s.ents, offset, func(e entry, off int64) int {
		if e.end() <= off {
			return -1
		}
		return 1
	})
	i := min(c+uint64(k), hi)
	s.mu.Unlock()
	if i <= c {
		return 0, nil
	}
	return i, s.Compact(i)
}

// CreateSnapshot records index i (at most the last) as the snapshot
// point with configuration cs (nil keeps the last one), like
// raft.MemoryStorage's. data is not kept: the snapshot's data is the
// CommitLog offset after entry i.
func (s *Storage) CreateSnapshot(i uint64, cs *pb.ConfState, _ []byte) (*pb.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writableLocked(); err != nil {
		return nil, err
	}
	if i <= s.meta.snap.index {
		return nil, raft.ErrSnapOutOfDate
	}
	if i > s.lastIndexLocked() {
		return nil, fmt.Errorf("raftlog: snapshot %d is past the last index %d", i, s.lastIndexLocked())
	}
	t, err := s.termLocked(i)
	if err != nil {
		return nil, err
	}
	off := s.meta.compact.offset
	if c := s.meta.compact.index; i > c {
		off = s.ents[i-c-1].end()
	}
	m := s.meta
	m.snap = mark{index: i, term: t, offset: off}
	if cs != nil {
		m.conf = proto.Clone(cs).(*pb.ConfState)
	}
	if err := s.writeMeta(m); err != nil {
		return nil, err
	}
	s.meta = m
	return s.snapshotLocked(), nil
}

// ApplySnapshot replaces the log with snap (raft.MemoryStorage's
// ApplySnapshot): the snapshot becomes both the compaction and the
// snapshot point and every entry is dropped. The messages are in the
// CommitLog, not in the snapshot, so the store's CommitLog must already
// end exactly at the offset the snapshot's data names (a learner gets it
// there by frame streams; doc.go, "Snapshots"): else ErrSnapshotNeedsLog
// and nothing changes. A snapshot without data (index 0, a bootstrap
// configuration) continues at the CommitLog's end.
func (s *Storage) ApplySnapshot(snap *pb.Snapshot) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writableLocked(); err != nil {
		return err
	}
	md := snap.GetMetadata()
	if cur := s.meta.snap.index; cur != 0 && cur >= md.GetIndex() {
		return raft.ErrSnapOutOfDate
	}
	end := s.store.WriteOffset()
	off := end
	if len(snap.GetData()) > 0 || md.GetIndex() > 0 {
		var err error
		if off, err = DecodeSnapshotData(snap.GetData()); err != nil {
			return err
		}
	}
	if off != end {
		return fmt.Errorf("%w: it continues at %d, the CommitLog ends at %d", ErrSnapshotNeedsLog, off, end)
	}
	p := mark{index: md.GetIndex(), term: md.GetTerm(), offset: off}
	m := meta{compact: p, snap: p, conf: proto.Clone(pb.EnsureConfState(md.GetConfState())).(*pb.ConfState), perFile: s.meta.perFile}
	if err := s.writeMeta(m); err != nil {
		return err
	}
	s.meta, s.ents = m, nil
	if len(s.confs) > 0 {
		s.confs = map[uint64]confEntry{}
		if err := s.writeConfsLocked(); err != nil {
			return err
		}
	}
	if err := s.index.removeAll(); err != nil {
		return err
	}
	s.store.SetDispatchLimit(off)
	return nil
}

// EndOffset is the CommitLog offset where entry i ends (false when i is
// not in the log: compacted, or past its end). The cluster's view uses it
// to say how many bytes a follower lags.
func (s *Storage) EndOffset(i uint64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i == s.meta.compact.index:
		return s.meta.compact.offset, true
	case i < s.meta.compact.index || i > s.lastIndexLocked():
		return 0, false
	}
	return s.ents[i-s.meta.compact.index-1].end(), true
}
