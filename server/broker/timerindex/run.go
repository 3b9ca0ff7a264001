package timerindex

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Run file layout. Part of the on-disk format; never change (see doc.go).
const (
	runMagic      = 0x4D515452 // "MQTR"
	runVersion    = 1
	runHeaderSize = 24
	entrySize     = 28 // due int64, id int64, seq int64, topic uint32

	runSuffix = ".run"
	tmpSuffix = ".tmp"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func runName(id uint64) string { return fmt.Sprintf("%020d%s", id, runSuffix) }

// parseRunName is the id of a run file name.
func parseRunName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, runSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	return id, err == nil
}

func encodeEntry(dst []byte, it item) {
	binary.BigEndian.PutUint64(dst[0:], uint64(it.due))
	binary.BigEndian.PutUint64(dst[8:], uint64(it.id))
	binary.BigEndian.PutUint64(dst[16:], uint64(it.seq))
	binary.BigEndian.PutUint32(dst[24:], it.topic)
}

func decodeEntry(b []byte) item {
	return item{
		due:   int64(binary.BigEndian.Uint64(b[0:])),
		id:    int64(binary.BigEndian.Uint64(b[8:])),
		seq:   int64(binary.BigEndian.Uint64(b[16:])),
		topic: binary.BigEndian.Uint32(b[24:]),
	}
}

func encodeRunHeader(n uint64, crc uint32) []byte {
	h := make([]byte, runHeaderSize)
	binary.BigEndian.PutUint32(h[0:], runMagic)
	binary.BigEndian.PutUint16(h[4:], runVersion)
	binary.BigEndian.PutUint64(h[8:], n)
	binary.BigEndian.PutUint32(h[16:], crc)
	binary.BigEndian.PutUint32(h[20:], crc32.Checksum(h[:20], castagnoli))
	return h
}

// decodeRunHeader checks a run header and returns its entry count and crc.
func decodeRunHeader(h []byte) (uint64, uint32, error) {
	if len(h) < runHeaderSize {
		return 0, 0, fmt.Errorf("%w: run header of %d bytes", ErrCorrupt, len(h))
	}
	if got := binary.BigEndian.Uint32(h[0:]); got != runMagic {
		return 0, 0, fmt.Errorf("%w: run magic %#x", ErrCorrupt, got)
	}
	if v := binary.BigEndian.Uint16(h[4:]); v != runVersion {
		return 0, 0, fmt.Errorf("%w: run version %d", ErrCorrupt, v)
	}
	if crc32.Checksum(h[:20], castagnoli) != binary.BigEndian.Uint32(h[20:]) {
		return 0, 0, fmt.Errorf("%w: run header crc", ErrCorrupt)
	}
	return binary.BigEndian.Uint64(h[8:]), binary.BigEndian.Uint32(h[16:]), nil
}

// run is one open run file. Its entries never change; head is the
// in-memory hint (entries before it are dead).
type run struct {
	id   uint64
	tier int
	n    int64
	crc  uint32
	head int64
	path string
	f    *os.File
}

// runWriter writes a run file as <name>.tmp, then fsyncs and renames it.
type runWriter struct {
	dir, path string
	f         *os.File
	w         *bufio.Writer
	crc       uint32
	n         uint64
	last      item
	buf       [entrySize]byte
}

func createRun(dir string, id uint64) (*runWriter, error) {
	path := filepath.Join(dir, runName(id))
	f, err := os.OpenFile(path+tmpSuffix, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	w := &runWriter{dir: dir, path: path, f: f, w: bufio.NewWriterSize(f, 256<<10)}
	if _, err := w.w.Write(make([]byte, runHeaderSize)); err != nil { // the header goes in last
		w.abort()
		return nil, err
	}
	return w, nil
}

// add appends an item; items must come in ascending key order.
func (w *runWriter) add(it item) error {
	if w.n > 0 && !w.last.key().Less(it.key()) {
		return fmt.Errorf("timerindex: run %s: entry %v after %v", w.path, it.key(), w.last.key())
	}
	encodeEntry(w.buf[:], it)
	w.crc = crc32.Update(w.crc, castagnoli, w.buf[:])
	w.last = it
	w.n++
	_, err := w.w.Write(w.buf[:])
	return err
}

// finish writes the header, fsyncs and renames the file into place and
// opens it for reading.
func (w *runWriter) finish(tier int) (*run, error) {
	err := w.w.Flush()
	if err == nil {
		_, err = w.f.WriteAt(encodeRunHeader(w.n, w.crc), 0)
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.path+tmpSuffix, w.path)
	}
	if err != nil {
		_ = os.Remove(w.path + tmpSuffix)
		return nil, fmt.Errorf("write run %s: %w", w.path, err)
	}
	f, err := os.Open(w.path)
	if err != nil {
		return nil, err
	}
	id, _ := parseRunName(filepath.Base(w.path))
	return &run{id: id, tier: tier, n: int64(w.n), crc: w.crc, path: w.path, f: f}, nil
}

func (w *runWriter) abort() {
	_ = w.f.Close()
	_ = os.Remove(w.path + tmpSuffix)
}

// openRun opens a run file listed by the checkpoint and verifies it: its
// header, its size and the crc of every entry.
func openRun(dir string, id uint64, n int64, crc uint32) (*run, error) {
	path := filepath.Join(dir, runName(id))
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: run %s is missing", ErrCorrupt, path)
	}
	if err != nil {
		return nil, err
	}
	r := &run{id: id, n: n, crc: crc, path: path, f: f}
	if err := r.verify(); err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func (r *run) verify() error {
	h := make([]byte, runHeaderSize)
	if _, err := io.ReadFull(io.NewSectionReader(r.f, 0, runHeaderSize), h); err != nil {
		return fmt.Errorf("%w: run %s header: %w", ErrCorrupt, r.path, err)
	}
	n, crc, err := decodeRunHeader(h)
	if err != nil {
		return fmt.Errorf("run %s: %w", r.path, err)
	}
	if int64(n) != r.n || crc != r.crc {
		return fmt.Errorf("%w: run %s holds %d entries (crc %#x), the checkpoint says %d (%#x)", ErrCorrupt, r.path, n, crc, r.n, r.crc)
	}
	st, err := r.f.Stat()
	if err != nil {
		return err
	}
	if want := runHeaderSize + r.n*entrySize; st.Size() != want {
		return fmt.Errorf("%w: run %s is %d bytes, want %d", ErrCorrupt, r.path, st.Size(), want)
	}
	sum := crc32.New(castagnoli)
	if _, err := io.Copy(sum, io.NewSectionReader(r.f, runHeaderSize, r.n*entrySize)); err != nil {
		return fmt.Errorf("read run %s: %w", r.path, err)
	}
	if sum.Sum32() != r.crc {
		return fmt.Errorf("%w: run %s entry crc", ErrCorrupt, r.path)
	}
	return nil
}

// entryAt reads entry i.
func (r *run) entryAt(i int64) (item, error) {
	var b [entrySize]byte
	if _, err := r.f.ReadAt(b[:], runHeaderSize+i*entrySize); err != nil {
		return item{}, fmt.Errorf("read run %s entry %d: %w", r.path, i, err)
	}
	return decodeEntry(b[:]), nil
}

// seek is the index of the first entry with key > after (binary search).
func (r *run) seek(after Key) (int64, error) {
	var err error
	i := sort.Search(int(r.n), func(i int) bool {
		if err != nil {
			return true
		}
		var it item
		it, err = r.entryAt(int64(i))
		return after.Less(it.key())
	})
	return int64(i), err
}

func (r *run) close() error { return r.f.Close() }

// runBlock is how many entries a run iterator reads at once.
const runBlock = 256

// runIter reads a run's entries in order from a position, a block at a
// time.
type runIter struct {
	r        *run
	pos      int64 // index of the entry peek returns
	buf      []byte
	from, to int64 // entries [from, to) are in buf
	err      error
}

func newRunIter(r *run, pos int64) *runIter {
	return &runIter{r: r, pos: pos, from: pos, to: pos}
}

func (it *runIter) peek() (item, bool) {
	if it.pos >= it.r.n || it.err != nil {
		return item{}, false
	}
	if it.pos < it.from || it.pos >= it.to {
		n := min(int64(runBlock), it.r.n-it.pos)
		if it.buf == nil {
			it.buf = make([]byte, runBlock*entrySize)
		}
		if _, err := it.r.f.ReadAt(it.buf[:n*entrySize], runHeaderSize+it.pos*entrySize); err != nil {
			it.err = fmt.Errorf("read run %s at entry %d: %w", it.r.path, it.pos, err)
			return item{}, false
		}
		it.from, it.to = it.pos, it.pos+n
	}
	return decodeEntry(it.buf[(it.pos-it.from)*entrySize:]), true
}

func (it *runIter) advance() { it.pos++ }
