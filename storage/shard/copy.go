package shard

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/raftlog"
)

// A copy (doc.go, "Copies") is how a replica starts from another's data
// when the Raft log cannot bring it there: after retention deleted the
// beginning of the CommitLog, or on a log adopted from a single node
// (whose entries start past offset 0). It is a tar stream:
//
//	copy.json          CopyHeader: the Raft point the copy ends at (index,
//	                   term, CommitLog offset), its configuration, where
//	                   the CommitLog starts and the segment size
//	config/<name>      each metadata file the store carries to another
//	                   replica (storage.Store.MetaFiles), read before the
//	                   point was chosen
//	frames/<n>         the CommitLog from its first segment to the point,
//	                   as frame streams of at most CopyChunk bytes
//	end.json           CopyEnd: the number of frame chunks and the offset
//	                   reached, so that a stream cut short is refused
//
// The receiver builds a data directory from it (ReceiveCopy) whose Raft
// log is a snapshot at the point: the CommitLog ends there, the
// configuration is the point's, the hard state names its term, no vote,
// and the point as committed. The leader then sends the entries after it.

// Names of a copy's tar entries, and its limits.
const (
	copyHeaderName = "copy.json"
	copyEndName    = "end.json"
	copyConfigDir  = "config/"
	copyFramesDir  = "frames/"
	// CopyVersion is the version of the copy format WriteCopy writes.
	CopyVersion = 1
	// CopyChunk bounds the frame stream of one frames/<n> entry.
	CopyChunk = 4 << 20
	// maxCopyMeta bounds one metadata file of a copy (and the header).
	maxCopyMeta = 64 << 20
	// maxCopyEntry bounds any entry a receiver reads into memory.
	maxCopyEntry = max(CopyChunk+64<<10, maxCopyMeta)
)

// CopyHeader is a copy's copy.json.
type CopyHeader struct {
	Version int `json:"version"`
	// Index and Term are the Raft point the copy ends at: an entry the
	// source had applied, so committed.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Offset is the CommitLog offset after entry Index, where the copy's
	// CommitLog ends; First is where it starts (the source's first
	// segment's base).
	Offset int64 `json:"offset"`
	First  int64 `json:"first"`
	// SegmentSize is the source's: a replica's segments must be the
	// leader's, byte for byte.
	SegmentSize int64 `json:"segmentSize"`
	// Conf is the configuration at Index (raftpb.ConfState, protobuf).
	Conf []byte `json:"conf"`
	// Source is the id of the replica the copy came from.
	Source uint64 `json:"source"`
}

// CopyEnd is a copy's end.json.
type CopyEnd struct {
	Chunks int   `json:"chunks"`
	Offset int64 `json:"offset"`
}

// ErrBadCopy: a copy stream that is not one, or that does not hold what
// its header says. Nothing is left of the directory it was building.
var ErrBadCopy = errors.New("shard: bad copy")

// ErrCannotReceive: this replica cannot start from the copy (its data
// directory is not empty, or its segment size is not the source's);
// asking again would not help.
var ErrCannotReceive = errors.New("shard: this replica cannot receive the copy")

// WriteCopy writes a copy of this replica's data to w (the source side;
// the format is above). Retention is held while it runs (the store keeps
// every segment; a cut applied meanwhile waits until the copy is done). The
// metadata files are read first and the point chosen after: an applied
// entry whose end is at or past what the store had dispatched when they
// were read, so that they cover nothing the copy's log lacks. ctx bounds
// the wait for that entry and for the frames' flush.
func (s *Shard) WriteCopy(ctx context.Context, w io.Writer) (CopyHeader, error) {
	st := s.Store()
	release := st.HoldRetention()
	defer release()
	dispatched := st.Dispatched()
	files, err := st.MetaFiles()
	if err != nil {
		return CopyHeader{}, err
	}
	h := CopyHeader{Version: CopyVersion, Source: s.opts.ID, SegmentSize: st.SegmentSize()}
	var conf *pb.ConfState
	for {
		status := s.Status()
		if err := s.Err(); err != nil {
			return CopyHeader{}, err
		}
		if end, ok := s.log.EndOffset(status.AppliedIndex); ok && end >= dispatched {
			term, err := s.log.Term(status.AppliedIndex)
			if err != nil {
				return CopyHeader{}, err
			}
			h.Index, h.Term, h.Offset, conf = status.AppliedIndex, term, end, status.conf
			break
		}
		select {
		case <-ctx.Done():
			return CopyHeader{}, fmt.Errorf("shard: copy: waiting for the applied log to pass offset %d: %w", dispatched, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if h.First = st.MinPhysicalOffset(); h.First > h.Offset {
		return CopyHeader{}, fmt.Errorf("shard: copy: the CommitLog starts at %d, past the point's end %d", h.First, h.Offset)
	}
	mo := proto.MarshalOptions{Deterministic: true}
	if h.Conf, err = mo.Marshal(pb.EnsureConfState(conf)); err != nil {
		return CopyHeader{}, err
	}
	tw := tar.NewWriter(w)
	put := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return CopyHeader{}, err
	}
	if err := put(copyHeaderName, hb); err != nil {
		return CopyHeader{}, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := put(copyConfigDir+name, files[name]); err != nil {
			return CopyHeader{}, err
		}
	}
	var buf []byte
	chunks := 0
	for off := h.First; off < h.Offset; {
		var next int64
		buf, next, err = st.ReadFramesTo(off, h.Offset, CopyChunk, buf[:0])
		if err != nil {
			return CopyHeader{}, fmt.Errorf("shard: copy: read frames at %d: %w", off, err)
		}
		if next == off { // not flushed yet (async flush)
			select {
			case <-ctx.Done():
				return CopyHeader{}, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		if len(buf) > 0 {
			if err := put(copyFramesDir+strconv.Itoa(chunks), buf); err != nil {
				return CopyHeader{}, err
			}
			chunks++
		}
		off = next
	}
	eb, err := json.Marshal(CopyEnd{Chunks: chunks, Offset: h.Offset})
	if err != nil {
		return CopyHeader{}, err
	}
	if err := put(copyEndName, eb); err != nil {
		return CopyHeader{}, err
	}
	return h, tw.Close()
}

// ReceiveCopy builds the data directory opts.Store.Dir from a copy read
// from r (the receiving side; WriteCopy wrote it). The directory must not
// hold a store (missing, or empty). The copy is built beside it, in
// "<dir>.copying" (removed first, should an earlier attempt have left it),
// and renamed into place once it is whole and durable; on any error
// nothing of it is left. The store's options must be the replica's own:
// its segment size must be the copy's. self is the receiving replica's id:
// a copy whose configuration holds it as a voter is refused
// (ErrCannotReceive), since a replica that lost its data lost the vote it
// may have cast in the copy's term with it and must not vote until it is
// promoted again; it is removed and added back as a learner first.
func ReceiveCopy(ctx context.Context, r io.Reader, opts raftlog.Options, self uint64) (h CopyHeader, err error) {
	dir := filepath.Clean(opts.Store.Dir)
	if err := emptyOrMissing(dir); err != nil {
		return h, err
	}
	tmp := dir + ".copying"
	if err := os.RemoveAll(tmp); err != nil {
		return h, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	tr := tar.NewReader(r)
	next := func(want string) (string, []byte, error) {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		th, err := tr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return "", nil, fmt.Errorf("%w: after %q: %w", ErrBadCopy, want, err)
		}
		if th.Typeflag != tar.TypeReg || th.Size < 0 || th.Size > maxCopyEntry {
			return "", nil, fmt.Errorf("%w: entry %q (type %q, %d bytes)", ErrBadCopy, th.Name, th.Typeflag, th.Size)
		}
		b := make([]byte, th.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return "", nil, fmt.Errorf("%w: entry %q: %w", ErrBadCopy, th.Name, err)
		}
		return th.Name, b, nil
	}
	name, b, err := next(copyHeaderName)
	if err != nil {
		return h, err
	}
	if name != copyHeaderName {
		return h, fmt.Errorf("%w: the first entry is %q, not %s", ErrBadCopy, name, copyHeaderName)
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("%w: %s: %w", ErrBadCopy, copyHeaderName, err)
	}
	conf := &pb.ConfState{}
	switch {
	case h.Version != CopyVersion:
		return h, fmt.Errorf("%w: version %d (this replica reads %d)", ErrBadCopy, h.Version, CopyVersion)
	case h.First < 0 || h.Offset < h.First || h.Index == 0 || h.Term == 0:
		return h, fmt.Errorf("%w: point %d (term %d) at offset %d, log from %d", ErrBadCopy, h.Index, h.Term, h.Offset, h.First)
	case proto.Unmarshal(h.Conf, conf) != nil || len(conf.GetVoters()) == 0:
		return h, fmt.Errorf("%w: its configuration is unreadable or has no voter", ErrBadCopy)
	case slices.Contains(conf.GetVoters(), self) || slices.Contains(conf.GetVotersOutgoing(), self):
		return h, fmt.Errorf("%w: replica %d is a voter in the cluster's configuration; remove it and add it back as a learner first (mqgate replica rebuild)", ErrCannotReceive, self)
	}
	so := opts.Store
	if so.SegmentSize != 0 && so.SegmentSize != h.SegmentSize {
		return h, fmt.Errorf("%w: the copy's segments are %d bytes, this replica's %d: every replica needs the same --segment-size", ErrCannotReceive, h.SegmentSize, so.SegmentSize)
	}
	// Built without a flush per chunk: the store's Close makes it durable,
	// before the directory is renamed into place.
	so.Dir, so.StartOffset, so.SegmentSize, so.FlushMode = tmp, h.First, h.SegmentSize, commitlog.FlushAsync
	lo := opts
	lo.Store = so
	lg, err := raftlog.Open(lo)
	if err != nil {
		return h, err
	}
	defer func() {
		if cerr := lg.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = rename(tmp, dir)
		}
	}()
	st := lg.Store()
	chunks := 0
	for {
		name, b, err := next("the frames")
		if err != nil {
			return h, err
		}
		if rest, ok := strings.CutPrefix(name, copyConfigDir); ok {
			if chunks > 0 || !storage.CopiedMeta(rest) || len(b) > maxCopyMeta {
				return h, fmt.Errorf("%w: metadata entry %q", ErrBadCopy, name)
			}
			if err := st.WriteMeta(rest, b); err != nil {
				return h, err
			}
			continue
		}
		if name == copyEndName {
			var end CopyEnd
			if err := json.Unmarshal(b, &end); err != nil {
				return h, fmt.Errorf("%w: %s: %w", ErrBadCopy, copyEndName, err)
			}
			if end.Chunks != chunks || end.Offset != h.Offset || st.WriteOffset() != h.Offset {
				return h, fmt.Errorf("%w: it ends with %d chunks at %d, received %d up to %d (the header says %d)",
					ErrBadCopy, end.Chunks, end.Offset, chunks, st.WriteOffset(), h.Offset)
			}
			break
		}
		if name != copyFramesDir+strconv.Itoa(chunks) {
			return h, fmt.Errorf("%w: entry %q where %s%d was due", ErrBadCopy, name, copyFramesDir, chunks)
		}
		end, err := st.AppendFrames(b)
		if err != nil {
			return h, fmt.Errorf("%w: %s: %w", ErrBadCopy, name, err)
		}
		if end > h.Offset {
			return h, fmt.Errorf("%w: frames up to %d, past the point's end %d", ErrBadCopy, end, h.Offset)
		}
		chunks++
	}
	if err := lg.ApplySnapshot(raftlog.SnapshotAt(h.Index, h.Term, h.Offset, conf)); err != nil {
		return h, err
	}
	if err := lg.SetHardState(&pb.HardState{Term: proto.Uint64(h.Term), Vote: proto.Uint64(0), Commit: proto.Uint64(h.Index)}); err != nil {
		return h, err
	}
	return h, nil
}

// EmptyDataDir reports whether dir holds no store: it is missing, empty,
// or holds only the lock file a store leaves (LOCK).
func EmptyDataDir(dir string) (bool, error) {
	des, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, nil
	case err != nil:
		return false, err
	}
	return len(des) == 0 || len(des) == 1 && des[0].Name() == lockFile, nil
}

// lockFile is the store's lock (storage's LockDir).
const lockFile = "LOCK"

// emptyOrMissing refuses a directory that holds a store, or anything.
func emptyOrMissing(dir string) error {
	empty, err := EmptyDataDir(dir)
	if err == nil && !empty {
		err = fmt.Errorf("%w: %s is not empty: a copy is only received into an empty data directory", ErrCannotReceive, dir)
	}
	return err
}

// rename moves the finished copy into place (over an empty directory)
// and makes the move durable.
func rename(tmp, dir string) error {
	if err := os.Remove(filepath.Join(dir, lockFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
