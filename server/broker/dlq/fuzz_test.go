package dlq

import (
	"testing"
)

// FuzzDecodeStatuses: status records are read back from the CommitLog (at
// open, on a follower, by the projection feed); decoding arbitrary bytes
// never panics, and what decodes encodes to a body that decodes to the
// same.
func FuzzDecodeStatuses(f *testing.F) {
	f.Add([]byte(`[{"group":"g","messageId":"7F00000100001F900000000000000100","status":"discarded","at":"2023-11-14T22:13:20.123Z"}]`))
	f.Add([]byte(`[{"group":"g","messageId":"X","status":"resent","at":"2023-11-14T22:13:21.623+01:00"},{}]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"group":"g"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := DecodeStatuses(data)
		if err != nil {
			return
		}
		body, err := EncodeStatuses(recs)
		if err != nil {
			t.Fatalf("decoded records do not encode: %v", err)
		}
		again, err := DecodeStatuses(body)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-encoded records do not decode: %v (%d of %d)", err, len(again), len(recs))
		}
		for i := range recs {
			a, b := recs[i], again[i]
			if a.Group != b.Group || a.MessageID != b.MessageID || a.Status != b.Status || !a.At.Equal(b.At) {
				t.Fatalf("round trip changed %d: %+v, %+v", i, a, b)
			}
		}
		var x Table
		x.Apply(recs...)
	})
}

// FuzzParseCursor: a listing's cursor comes from a client; parsing
// arbitrary text never panics, and a cursor that parses names an offset
// whose own cursor parses to it.
func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "0", "12", "-1", "x", "99999999999999999999", "+3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		off, ok := ParseCursor(s)
		if !ok {
			return
		}
		if off < 0 {
			t.Fatalf("%q: offset %d", s, off)
		}
		if again, ok := ParseCursor(FormatCursor(off)); !ok || again != off {
			t.Fatalf("%q: %d, then %d %v", s, off, again, ok)
		}
	})
}
