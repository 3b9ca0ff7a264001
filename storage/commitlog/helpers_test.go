package commitlog

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// segmentSizeTests are the segment sizes every storage test runs over, as
// liftbridge's segmentSizeTests: tiny ones force a roll every one or two
// records (payloads are drawn up to about half a segment, capped at 4000).
var segmentSizeTests = []struct {
	name string
	size int64
}{
	{"Seg128", 128},
	{"Seg1000", 1000},
	{"Seg4KiB", 4 << 10},
	{"Seg64KiB", 64 << 10},
}

var flushModes = []FlushMode{FlushSync, FlushAsync}

// forEachConfig runs fn for every segment size and flush mode.
func forEachConfig(t *testing.T, fn func(t *testing.T, segSize int64, mode FlushMode)) {
	t.Helper()
	for _, ss := range segmentSizeTests {
		for _, mode := range flushModes {
			t.Run(ss.name+"/"+mode.String(), func(t *testing.T) {
				t.Parallel()
				fn(t, ss.size, mode)
			})
		}
	}
}

// testOptions are Options for a fresh directory.
func testOptions(t *testing.T, segSize int64, mode FlushMode) Options {
	t.Helper()
	return Options{Dir: t.TempDir(), SegmentSize: segSize, FlushMode: mode}
}

// mustOpen opens a log and closes it at the end of the test.
func mustOpen(t *testing.T, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// payload is a record payload; its Encode stamps the frame's offset into
// the first 8 bytes when stamp is set (the caller-stamping use case).
type payload struct {
	data  []byte
	stamp bool
}

func (p *payload) Len() int { return len(p.data) }

func (p *payload) Encode(dst []byte, offset int64) {
	copy(dst, p.data)
	if p.stamp && len(dst) >= 8 {
		binary.BigEndian.PutUint64(dst, uint64(offset))
	}
}

func bytesPayload(b []byte) *payload { return &payload{data: b} }

// randomPayload is n pseudo-random bytes that never start with a zero
// byte, so a zeroed prefix is always detectable.
func randomPayload(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(255) + 1)
	}
	return b
}

// maxTestPayload bounds generated payloads for a segment size.
func maxTestPayload(segSize int64) int {
	return int(min(segSize/2, 4000))
}

// written is what a test appended: payloads and where they went.
type written struct {
	payloads [][]byte
	results  []AppendResult
}

// appendRandom appends n records of random sizes in [0, maxTestPayload].
func appendRandom(t *testing.T, l *Log, rng *rand.Rand, n int) written {
	t.Helper()
	var w written
	for range n {
		p := randomPayload(rng, rng.IntN(maxTestPayload(l.SegmentSize())+1))
		res, err := l.Append(bytesPayload(p))
		require.NoError(t, err)
		w.payloads = append(w.payloads, p)
		w.results = append(w.results, res)
	}
	return w
}

// requireLogHolds walks the log with Next from MinOffset and checks that it
// holds exactly w's records, in order, and that Next and Read agree.
func requireLogHolds(t *testing.T, l *Log, w written) {
	t.Helper()
	off := l.MinOffset()
	var buf []byte
	for i, want := range w.payloads {
		rec, next, err := l.Next(off, buf)
		require.NoError(t, err, "record %d", i)
		require.Equal(t, w.results[i].Offset, rec.Offset, "record %d offset", i)
		require.Equal(t, w.results[i].Size, rec.Size, "record %d size", i)
		requirePayload(t, want, rec.Payload, "record %d payload", i)
		require.Equal(t, rec.Offset+int64(rec.Size), next)
		v, err := l.Read(rec.Offset, nil)
		require.NoError(t, err, "read record %d", i)
		requirePayload(t, want, v.Payload, "read record %d payload", i)
		buf = rec.Payload
		off = next
	}
	_, _, err := l.Next(off, buf)
	require.ErrorIs(t, err, ErrNoData)
}

// segmentPath is the file of the segment holding offset.
func segmentPath(t *testing.T, l *Log, offset int64) (string, int64) {
	t.Helper()
	for _, s := range l.Segments() {
		if s.Base <= offset && offset < s.Base+s.Size {
			return filepath.Join(l.opts.Dir, segmentName(s.Base)), s.Base
		}
	}
	t.Fatalf("no segment holds %d", offset)
	return "", 0
}

// mutateFile applies fn to the contents of path and writes them back.
func mutateFile(t *testing.T, path string, fn func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	fn(b)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// brokenFiles lists the .broken files in dir.
func brokenFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+brokenSuffix+"*"))
	require.NoError(t, err)
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

func describe(w written) string {
	return fmt.Sprintf("%d records, last %+v", len(w.results), w.results[len(w.results)-1])
}

// requirePayload compares payloads, treating nil and empty as equal.
func requirePayload(t *testing.T, want, got []byte, msgAndArgs ...any) {
	t.Helper()
	if len(want) == 0 && len(got) == 0 {
		return
	}
	require.Equal(t, want, got, msgAndArgs...)
}

// requireRecords checks that every record of w verifies and holds its
// payload (the log may hold more).
func requireRecords(t *testing.T, l *Log, w written) {
	t.Helper()
	for i, r := range w.results {
		rec, err := l.Read(r.Offset, nil)
		require.NoError(t, err, "record %d", i)
		requirePayload(t, w.payloads[i], rec.Payload, "record %d", i)
	}
}
