package lease

import (
	"bytes"
	"testing"
)

// FuzzDecodeRecord: lease records are read back from the CommitLog;
// decoding arbitrary bytes never panics, and what it accepts encodes back
// to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	b, _ := EncodeRecord(sampleRecord())
	f.Add(b)
	empty, _ := EncodeRecord(Record{})
	f.Add(empty)
	f.Add([]byte{2, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := DecodeRecord(data)
		if err != nil {
			return
		}
		again, err := EncodeRecord(rec)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("re-encoding %x gave %x, %v", data, again, err)
		}
		fold := NewFold()
		fold.Apply(rec)
		for _, k := range fold.Unreleased() {
			if fl, ok := fold.Get(k); !ok || fl.Item.State == Released || fl.Item.Epoch > fold.Top() {
				t.Fatalf("folded %v: %+v %v (top %d)", k, fl, ok, fold.Top())
			}
		}
	})
}

// FuzzDecodeSnapshot: the snapshot is read back from config/ (damaged,
// truncated, from another version); decoding arbitrary bytes never
// panics, and what it accepts encodes back to the same bytes.
func FuzzDecodeSnapshot(f *testing.F) {
	snap, _ := EncodeSnapshot(1, 2, sampleRecord())
	f.Add(snap)
	empty, _ := EncodeSnapshot(0, 0, Record{})
	f.Add(empty)
	f.Add([]byte("MQLS"))
	f.Fuzz(func(t *testing.T, data []byte) {
		off, epoch, rec, err := DecodeSnapshot(data)
		if err != nil {
			return
		}
		again, err := EncodeSnapshot(off, epoch, rec)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("re-encoding snapshot %x gave %x, %v", data, again, err)
		}
	})
}
