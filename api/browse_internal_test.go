package api

import (
	"testing"

	"github.com/mqgate/mqgate/server/broker"
)

// FuzzSearchCursor: any string either is refused or names a position
// whose cursor reads back as the same position; the cursors the server
// writes always read back.
func FuzzSearchCursor(f *testing.F) {
	for _, p := range []broker.SearchPosition{{QueueID: 0, Offset: -1}, {QueueID: 3, Offset: 12}, {QueueID: 1<<31 - 1, Offset: 1<<63 - 1}} {
		f.Add(formatSearchCursor(p))
	}
	f.Add("")
	f.Add("MS4tMg")  // "1.-2"
	f.Add("LTEuMA")  // "-1.0"
	f.Add("MS4xMg=") // padding
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parseSearchCursor(s)
		if !ok {
			return
		}
		if p.QueueID < 0 || p.Offset < -1 {
			t.Fatalf("%q: a position out of range %+v", s, p)
		}
		back, ok := parseSearchCursor(formatSearchCursor(p))
		if !ok || back != p {
			t.Fatalf("%q: %+v wrote a cursor that reads back as %+v (%v)", s, p, back, ok)
		}
	})
}
