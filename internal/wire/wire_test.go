package wire

import "testing"

// A Reader reads big-endian fields in order; the first read that does not
// fit sets Bad, leaves the rest unread and makes every later read zero.
func TestReader(t *testing.T) {
	r := &Reader{B: []byte{1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 9}}
	if r.U8() != 1 || r.U16() != 2 || r.U32() != 3 || r.U64() != 4 || r.Bad {
		t.Fatal("fields read wrong")
	}
	if r.U16() != 0 || !r.Bad || len(r.B) != 1 {
		t.Fatalf("a read past the end: bad %v, %d bytes left", r.Bad, len(r.B))
	}
	if r.U8() != 0 {
		t.Fatal("a read after a bad one returned data")
	}
	if n := (&Reader{B: []byte{1}}); n.Take(-1) != nil || !n.Bad {
		t.Fatal("a negative length")
	}
}
