// Package wire reads the big-endian binary records of mqgate's own
// formats (the progress and lease records, the timer index's files): a
// Reader that never panics and never reads past its input, and remembers
// the first read that did not fit (Bad), so that a decoder reads every
// field and checks once. It imports nothing of the module.
package wire

import "encoding/binary"

// Reader reads from B, advancing it. Once a read does not fit, Bad is
// set, B is left as it was, and every read after it returns zero.
type Reader struct {
	B   []byte
	Bad bool
}

// Take returns the next n bytes (sharing B's memory), or nil and Bad
// when fewer are left or n is negative.
func (r *Reader) Take(n int) []byte {
	if r.Bad || n < 0 || n > len(r.B) {
		r.Bad = true
		return nil
	}
	out := r.B[:n]
	r.B = r.B[n:]
	return out
}

// U8 reads one byte.
func (r *Reader) U8() uint8 {
	if b := r.Take(1); b != nil {
		return b[0]
	}
	return 0
}

// U16 reads a big-endian uint16.
func (r *Reader) U16() uint16 {
	if b := r.Take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

// U32 reads a big-endian uint32.
func (r *Reader) U32() uint32 {
	if b := r.Take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// U64 reads a big-endian uint64.
func (r *Reader) U64() uint64 {
	if b := r.Take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}
