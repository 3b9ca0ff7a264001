package instance

import (
	"bytes"
	"testing"
	"time"
)

// FuzzDecodeSnapshot: the snapshot is read back from disk (damaged,
// truncated, edited); decoding arbitrary bytes never panics, and whatever
// decodes, restored into a set with a progress key per entry, makes a
// snapshot that encodes to a file that decodes to the same times.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add([]byte(goldenSnapshot))
	f.Add([]byte(`{"version":1,"instances":[]}`))
	f.Add([]byte(`{"version":1,"extra":[1],"instances":[{"group":"g","client":"a@b","lastSeenMs":-1,"x":null}]}`))
	f.Add([]byte(`{"version":1,"instances":[{"group":"g","client":"c","lastSeenMs":1},{"group":"g","client":"c","lastSeenMs":2}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":"1"}`))
	f.Add([]byte("{garbage"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return
		}
		snap, err := DecodeSnapshot(data)
		if err != nil {
			return
		}
		seen := snap.LastSeen()
		if len(seen) != len(snap.Instances) {
			t.Fatalf("%d entries make %d times: an entry lost", len(snap.Instances), len(seen))
		}
		now := time.UnixMilli(1 << 50) // the open: a time not before it counts as it
		s := &Set{}
		for _, e := range snap.Instances {
			s.Restore(Key(e.Group, e.Client), "t", seen, now)
		}
		again, changed := s.Snapshot()
		if !changed {
			if len(snap.Instances) > 0 {
				t.Fatal("a restored set is unchanged")
			}
			return
		}
		once, err := EncodeSnapshot(again)
		if err != nil {
			t.Fatalf("a restored set does not encode: %v", err)
		}
		back, err := DecodeSnapshot(once)
		if err != nil {
			t.Fatalf("an encoded set does not decode: %v\n%s", err, once)
		}
		for k, at := range back.LastSeen() {
			want, ok := seen[k]
			if !ok || (want.Before(now) && !want.Equal(at)) || (!want.Before(now) && !at.Equal(now)) {
				t.Fatalf("%s: %v after the round trip, %v (%v) in the file", k, at, want, ok)
			}
		}
		twice, err := EncodeSnapshot(back)
		if err != nil || !bytes.Equal(twice, once) {
			t.Fatalf("round trip changed the file:\n%s\n%s (%v)", once, twice, err)
		}
	})
}

// FuzzSplit: Split undoes Key for every group name without the separator,
// whatever the client id, and Key(Split(name)) is name for every name
// with a client id.
func FuzzSplit(f *testing.F) {
	for _, s := range [][2]string{{"fan", "c-1"}, {"fan", "a@b"}, {"fan", ""}, {"", "c"}, {"f@n", "c"}, {"", ""}, {"g", "@@"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, group, client string) {
		if len(group) > 256 || len(client) > 256 {
			return
		}
		name := Key(group, client)
		g, c := Split(name)
		if g+Sep+c != name && c != "" {
			t.Fatalf("Split(%q) = %q, %q: not the name", name, g, c)
		}
		if Base(name) != g {
			t.Fatalf("Base(%q) = %q, Split's group %q", name, Base(name), g)
		}
		if !bytes.Contains([]byte(group), []byte(Sep)) && (g != group || c != client) {
			t.Fatalf("Split(Key(%q, %q)) = %q, %q", group, client, g, c)
		}
		if c != "" && Key(g, c) != name {
			t.Fatalf("Key(Split(%q)) = %q", name, Key(g, c))
		}
	})
}
