// Package storagetest holds test helpers for the storage engine: a store in
// a temporary directory with tiny files, message fixtures and helpers that
// damage files on disk the way crashes do. Test code only.
package storagetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/message"
)

// SmallOptions returns Options for a store in dir with files small enough
// that tests roll segments, queue files and index files constantly.
func SmallOptions(dir string) storage.Options {
	return storage.Options{
		Dir:                 dir,
		SegmentSize:         64 << 10,
		MaxMessageSize:      16 << 10,
		QueueEntriesPerFile: 64,
		IndexSlots:          64,
		IndexEntries:        256,
	}
}

// MustOpen opens a store with opts (Dir defaults to a fresh t.TempDir())
// and closes it when the test ends (a second Close is harmless).
func MustOpen(t testing.TB, opts storage.Options) *storage.Store {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	s, err := storage.Open(opts)
	if err != nil {
		t.Fatalf("open store in %s: %v", opts.Dir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// NewMessage builds a message for topic/queue with a tag and keys.
func NewMessage(topic string, queueID int32, body string, tag string, keys ...string) *message.Message {
	m := &message.Message{Topic: topic, QueueID: queueID, Body: []byte(body), BornTimestamp: 1}
	if tag != "" {
		m.SetTag(tag)
	}
	if len(keys) > 0 {
		m.SetKeys(keys)
	}
	return m
}

// MustPut stores m or fails the test.
func MustPut(t testing.TB, s *storage.Store, m *message.Message) storage.PutResult {
	t.Helper()
	r, err := s.Put(m)
	if err != nil {
		t.Fatalf("put %s/%d: %v", m.Topic, m.QueueID, err)
	}
	return r
}

// Segments lists the CommitLog segment files of the store in dir, oldest first.
func Segments(t testing.TB, dir string) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "commitlog", "[0-9]*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range matches {
		if filepath.Ext(m) == "" {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// ZeroFrom zeroes path from byte offset off to its end, keeping its size
// (a preallocated file whose tail never reached the disk).
func ZeroFrom(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if off < st.Size() {
		if _, err := f.WriteAt(make([]byte, st.Size()-off), off); err != nil {
			t.Fatal(err)
		}
	}
}

// BodyOffset finds the record at CommitLog offset phys in the segment
// files of the store in dir and returns the segment's path and the file
// offset of the middle byte of body inside that record: the place to
// FlipBit to damage a stored message's body (so its frame fails its CRC)
// while its frame header stays intact. The store may be open or closed.
func BodyOffset(t testing.TB, dir string, phys int64, body []byte) (string, int64) {
	t.Helper()
	var path string
	var base int64 = -1
	for _, seg := range Segments(t, dir) {
		b, err := strconv.ParseInt(filepath.Base(seg), 10, 64)
		if err == nil && b <= phys && b > base {
			path, base = seg, b
		}
	}
	if path == "" {
		t.Fatalf("no segment of %s holds offset %d", dir, phys)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rel := phys - base
	if rel+commitlog.HeaderSize > int64(len(data)) {
		t.Fatalf("offset %d is past the end of %s", phys, path)
	}
	size := int64(binary.BigEndian.Uint32(data[rel:]))
	if size < commitlog.HeaderSize || rel+size > int64(len(data)) {
		t.Fatalf("no frame at offset %d of %s (size field %d)", phys, path, size)
	}
	i := bytes.Index(data[rel+commitlog.HeaderSize:rel+size], body)
	if i < 0 || len(body) == 0 {
		t.Fatalf("the record at %d does not hold the body %.20q", phys, body)
	}
	return path, rel + commitlog.HeaderSize + int64(i) + int64(len(body))/2
}

// FlipBit flips one bit of path at byte offset off.
func FlipBit(t testing.TB, path string, off int64, bit uint) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(fmt.Errorf("read %s at %d: %w", path, off, err))
	}
	b[0] ^= 1 << (bit % 8)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// SimulateCrash leaves dir as a killed process would: the abort marker in
// place. Call it after Close to turn a clean image into an unclean one.
func SimulateCrash(t testing.TB, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "abort"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// rawPayload is a commitlog.Encoder of fixed bytes.
type rawPayload []byte

func (p rawPayload) Len() int                   { return len(p) }
func (p rawPayload) Encode(dst []byte, _ int64) { copy(dst, p) }

// AppendRaw appends payload as one CommitLog record of the closed store in
// dir (whose segments are segmentSize bytes), bypassing every check Put
// makes: the way to plant a record with an intact frame that the
// dispatcher or a reader cannot use. It returns the record's offset. The
// store's checkpoint still ends before the record, so the next Open
// recovers it as an unclean start would (SimulateCrash is applied).
func AppendRaw(t testing.TB, dir string, segmentSize int64, payload []byte) int64 {
	t.Helper()
	log, err := commitlog.Open(commitlog.Options{Dir: filepath.Join(dir, "commitlog"), SegmentSize: segmentSize})
	if err != nil {
		t.Fatalf("open commitlog of %s: %v", dir, err)
	}
	res, err := log.Append(rawPayload(payload))
	if err != nil {
		t.Fatalf("append raw record: %v", err)
	}
	if err := log.Close(); err != nil {
		t.Fatalf("close commitlog: %v", err)
	}
	SimulateCrash(t, dir)
	return res.Offset
}

// EncodeUnchecked encodes m as a payload without validating it (Put would
// refuse what the format forbids); for planting bad records with AppendRaw.
func EncodeUnchecked(m *message.Message) []byte {
	b := make([]byte, m.PayloadSize())
	m.EncodePayload(b)
	return b
}

// RemoveCheckpoint deletes the store's checkpoint in dir, so that the next
// Open scans and re-dispatches the whole CommitLog.
func RemoveCheckpoint(t testing.TB, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, "checkpoint")); err != nil {
		t.Fatal(err)
	}
}

// RemoveScrubProgress deletes the scrubber's saved progress of the store
// in dir (if any), so that the next Open starts a pass at once.
func RemoveScrubProgress(t testing.TB, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, "config", "scrub.json")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// DirDigest is a digest of every file's path, length and content under
// dir: equal digests before and after an operation mean it changed no
// file.
func DirDigest(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		t.Fatalf("digest of %s: %v", dir, err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
