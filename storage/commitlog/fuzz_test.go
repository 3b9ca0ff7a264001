package commitlog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// encodeFrame builds a valid record frame, for seeds and tests.
func encodeFrame(payload []byte, pos int64) []byte {
	b := make([]byte, HeaderSize+len(payload))
	putHeader(b, len(b), RecordMagic, pos)
	copy(b[HeaderSize:], payload)
	sealFrame(b)
	return b
}

// FuzzFrameDecode: decoding arbitrary bytes never panics; whatever it
// accepts is in bounds and re-encodes byte for byte.
func FuzzFrameDecode(f *testing.F) {
	f.Add(encodeFrame([]byte("hello"), 0), int64(0))
	f.Add(encodeFrame(nil, 4096), int64(4096))
	f.Add(append(encodeFrame([]byte("x"), 7), 0, 0, 0), int64(7))
	blank := make([]byte, 64)
	writeBlank(blank, 123)
	f.Add(blank, int64(123))
	f.Add(make([]byte, HeaderSize), int64(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xda, 0xa3, 0x20, 0xa7}, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, pos int64) {
		status, size := decodeFrame(b, pos)
		if status == frameBadCRC {
			// The header is intact, so the length is trusted: in bounds.
			if size < HeaderSize || size > len(b) {
				t.Fatalf("%v with size %d out of [%d, %d]", status, size, HeaderSize, len(b))
			}
			return
		}
		if !status.valid() {
			return
		}
		if size < HeaderSize || size > len(b) {
			t.Fatalf("%v with size %d out of [%d, %d]", status, size, HeaderSize, len(b))
		}
		var again []byte
		if status == frameRecord {
			again = encodeFrame(b[HeaderSize:size], pos)
		} else {
			again = make([]byte, size)
			writeBlank(again, pos)
			again = again[:HeaderSize]
		}
		if !bytes.Equal(again, b[:len(again)]) {
			t.Fatalf("%v does not re-encode identically", status)
		}
	})
}

// FuzzRecover opens a log whose only segment holds arbitrary bytes: Open
// never panics, and every byte below the recovered end is valid frames.
func FuzzRecover(f *testing.F) {
	const seg = 512
	var good []byte
	for pos := 0; pos+HeaderSize+40 < seg; pos += HeaderSize + 40 {
		good = append(good, encodeFrame(bytes.Repeat([]byte{byte(pos)}, 40), int64(pos))...)
	}
	f.Add(good)
	f.Add(good[:100])
	f.Add(append(encodeFrame([]byte("a"), 0), 0xff))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if len(data) > seg {
			data = data[:seg]
		}
		content := make([]byte, seg)
		copy(content, data)
		require.NoError(t, os.WriteFile(filepath.Join(dir, segmentName(0)), content, 0o644))
		l, err := Open(Options{Dir: dir, SegmentSize: seg})
		require.NoError(t, err)
		defer l.Close()
		off := int64(0)
		for {
			rec, next, err := l.Next(off, nil)
			if err != nil {
				require.ErrorIs(t, err, ErrNoData)
				break
			}
			_, err = l.Read(rec.Offset, nil)
			require.NoError(t, err)
			off = next
		}
		require.Equal(t, l.Written(), off)
		_, err = l.Append(bytesPayload([]byte("after")))
		require.NoError(t, err)
	})
}

// FuzzScrub scrubs a sealed segment holding arbitrary bytes (the log is
// told to trust it, as a checkpoint would): Scrub never panics, accounts
// for every byte of the segment exactly once, reports bad frames in order
// and inside the segment, and agrees with Read about each record it found.
func FuzzScrub(f *testing.F) {
	const seg = 512
	var good []byte
	for pos := 0; pos+HeaderSize+40 < seg; pos += HeaderSize + 40 {
		good = append(good, encodeFrame(bytes.Repeat([]byte{byte(pos)}, 40), int64(pos))...)
	}
	f.Add(good, int64(1))
	flipped := bytes.Clone(good)
	flipped[HeaderSize+70] ^= 1
	f.Add(flipped, int64(100))
	f.Add(good[:100], int64(1<<20))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, data []byte, budget int64) {
		dir := t.TempDir()
		content := make([]byte, seg)
		copy(content, data)
		require.NoError(t, os.WriteFile(filepath.Join(dir, segmentName(0)), content, 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, segmentName(seg)), make([]byte, seg), 0o644))
		l, err := Open(Options{Dir: dir, SegmentSize: seg, RecoverFrom: seg})
		require.NoError(t, err)
		defer l.Close()
		require.Len(t, l.Segments(), 2, "segment 0 is trusted and sealed")
		budget = max(budget%(2*seg), 0)
		var total int64
		last := int64(-1)
		for pos := int64(0); ; {
			r, err := l.Scrub(pos, budget)
			require.NoError(t, err)
			require.Equal(t, pos, r.From)
			require.Equal(t, r.Next-pos, r.Bytes)
			total += r.Bytes
			for _, b := range r.Bad {
				require.Greater(t, b.Offset, last)
				require.GreaterOrEqual(t, b.Offset, pos)
				require.Less(t, b.Offset, r.Next)
				require.ErrorIs(t, b.Err, ErrCorrupt)
				if b.Size > 0 {
					require.ErrorIs(t, b.Err, ErrChecksum)
					_, err := l.Read(b.Offset, nil)
					require.ErrorIs(t, err, ErrChecksum)
				} else {
					require.Equal(t, seg-b.Offset, b.Unverified)
				}
				last = b.Offset
			}
			pos = r.Next
			if r.Done {
				break
			}
			require.Positive(t, r.Bytes)
		}
		require.Equal(t, int64(seg), total)
	})
}
