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
		for _, checkCRC := range []bool{false, true} {
			status, size := decodeFrame(b, pos, checkCRC)
			if !status.valid() {
				continue
			}
			if size < HeaderSize || size > len(b) {
				t.Fatalf("%v with size %d out of [%d, %d]", status, size, HeaderSize, len(b))
			}
			if !checkCRC {
				continue
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
			_, err = l.Verify(rec.Offset, nil)
			require.NoError(t, err)
			off = next
		}
		require.Equal(t, l.Written(), off)
		_, err = l.Append(bytesPayload([]byte("after")))
		require.NoError(t, err)
	})
}
