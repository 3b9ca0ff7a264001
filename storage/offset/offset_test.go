package offset

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

var k = Key{Group: "g", Topic: "t", QueueID: 1}

func ack(gen uint32, offs ...int64) Record {
	return Record{Entries: []Entry{{Kind: KindAck, Key: k, Generation: gen, Offsets: offs}}}
}

func TestCommittedIsLowestUnacked(t *testing.T) {
	tb := NewTable()
	require.Empty(t, tb.Apply(ack(0, 1, 2)), "offset 0 is still open")
	c, _, _ := tb.Get(k)
	require.Equal(t, int64(0), c)
	require.True(t, tb.IsAcked(k, 2))
	require.False(t, tb.IsAcked(k, 0))
	ch := tb.Apply(ack(0, 0))
	require.Equal(t, []Change{{Key: k, Committed: 3}}, ch)
	require.Empty(t, tb.AckedAbove(k))
	require.Empty(t, tb.Apply(ack(0, 0, 1)), "re-applying is a no-op")
}

func TestCommitGenerationsMakeReplayIdempotent(t *testing.T) {
	tb := NewTable()
	tb.Apply(ack(0, 0, 1, 2, 5))
	reset := Record{Entries: []Entry{{Kind: KindCommit, Key: k, Generation: 1, Offset: 1}}}
	tb.Apply(reset)
	c, g, _ := tb.Get(k)
	require.Equal(t, int64(1), c)
	require.Equal(t, uint32(1), g)
	require.False(t, tb.IsAcked(k, 5), "a reset replays everything from its offset, out-of-order acks too")
	tb.Apply(ack(1, 1))
	tb.Apply(ack(0, 3)) // from before the reset: ignored
	require.False(t, tb.IsAcked(k, 3))
	c, _, _ = tb.Get(k)
	require.Equal(t, int64(2), c)
	tb.Apply(reset) // replayed: must not rewind again
	c, _, _ = tb.Get(k)
	require.Equal(t, int64(2), c)
}

func TestAdvanceKeepsAcksAboveAndFailedIsRemembered(t *testing.T) {
	tb := NewTable()
	tb.Apply(ack(0, 7, 9))
	tb.Apply(Record{Entries: []Entry{{Kind: KindFailed, Key: k, Offsets: []int64{8}}}})
	require.True(t, tb.IsFailed(k, 8))
	require.True(t, tb.IsAcked(k, 8), "a failed delivery is done for the group")
	require.False(t, tb.IsFailed(k, 7))
	// Retention moved the minimum to 5: acks above stay.
	ch := tb.Apply(Record{Entries: []Entry{{Kind: KindAdvance, Key: k, Offset: 5}}})
	require.Equal(t, []Change{{Key: k, Committed: 5}}, ch)
	require.True(t, tb.IsAcked(k, 7))
	tb.Apply(Record{Entries: []Entry{{Kind: KindAdvance, Key: k, Offset: 3}}}) // never lowers
	c, _, _ := tb.Get(k)
	require.Equal(t, int64(5), c)
	tb.Apply(ack(0, 5, 6))
	c, _, _ = tb.Get(k)
	require.Equal(t, int64(10), c)
	require.True(t, tb.IsFailed(k, 8), "recent failures are remembered below the committed offset too")

	path := filepath.Join(t.TempDir(), "snap")
	tb.Apply(Record{Entries: []Entry{{Kind: KindFailed, Key: k, Offsets: []int64{12}}}})
	require.NoError(t, tb.Save(path, func() int64 { return 1 }))
	got, _, err := Load(path)
	require.NoError(t, err)
	require.True(t, got.IsFailed(k, 12), "failed offsets survive the snapshot")
}

func TestRecordRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var r Record
		for i, n := 0, rapid.IntRange(0, 5).Draw(t, "n"); i < n; i++ {
			e := Entry{
				Key: Key{
					Group:   rapid.StringN(0, 20, 255).Draw(t, "g"),
					Topic:   rapid.StringN(0, 20, 255).Draw(t, "t"),
					QueueID: rapid.Int32().Draw(t, "q"),
				},
				Generation: rapid.Uint32().Draw(t, "gen"),
			}
			e.Kind = rapid.SampledFrom([]Kind{KindAck, KindCommit, KindAdvance, KindFailed, KindForget}).Draw(t, "kind")
			if e.Kind == KindForget {
				e.Key = Key{Group: rapid.StringN(1, 20, 255).Draw(t, "fg")}
				e.Generation = 0
			} else if e.Kind == KindAck || e.Kind == KindFailed {
				e.Offsets = rapid.SliceOfN(rapid.Int64(), 0, 10).Draw(t, "offs")
			} else {
				e.Offset = rapid.Int64Min(0).Draw(t, "off")
			}
			r.Entries = append(r.Entries, e)
		}
		b, err := EncodeRecord(r)
		require.NoError(t, err)
		got, err := DecodeRecord(b)
		require.NoError(t, err)
		require.Equal(t, len(r.Entries), len(got.Entries))
		b2, err := EncodeRecord(got)
		require.NoError(t, err)
		require.Equal(t, b, b2)
	})
}

func FuzzDecodeRecord(f *testing.F) {
	b, _ := EncodeRecord(ack(3, 1, 2, 3))
	f.Add(b)
	b, _ = EncodeRecord(Record{Entries: []Entry{{Kind: KindCommit, Key: k, Generation: 9, Offset: 7}}})
	f.Add(b)
	b, _ = EncodeRecord(Record{Entries: []Entry{{Kind: KindForget, Key: Key{Group: "g"}}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		again, err := EncodeRecord(r)
		if err != nil {
			t.Fatalf("decoded record does not re-encode: %v", err)
		}
		if string(again) != string(b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func TestSnapshotRoundTripAndDamage(t *testing.T) {
	tb := NewTable()
	tb.Apply(ack(0, 0, 1, 4, 9))
	tb.Apply(Record{Entries: []Entry{{Kind: KindCommit, Key: Key{"h", "u", 0}, Generation: 2, Offset: 40}}})
	path := filepath.Join(t.TempDir(), "offsets")
	require.NoError(t, tb.Save(path, func() int64 { return 77 }))
	got, sys, err := Load(path)
	require.NoError(t, err)
	require.Equal(t, int64(77), sys)
	c, _, _ := got.Get(k)
	require.Equal(t, int64(2), c)
	require.Equal(t, []int64{4, 9}, got.AckedAbove(k))
	c, g, _ := got.Get(Key{"h", "u", 0})
	require.Equal(t, int64(40), c)
	require.Equal(t, uint32(2), g)

	b, err := tb.encodeSnapshot(func() int64 { return 77 })
	require.NoError(t, err)
	for i := 0; i < len(b); i += 3 {
		flipped := append([]byte(nil), b...)
		flipped[i] ^= 0x10
		_, _, err := decodeSnapshot(flipped)
		require.ErrorIs(t, err, ErrBadSnap, "flip at %d", i)
		_, _, err = decodeSnapshot(b[:i])
		require.ErrorIs(t, err, ErrBadSnap, "torn at %d", i)
	}
	empty, sys, err := Load(filepath.Join(t.TempDir(), "missing"))
	require.NoError(t, err)
	require.Zero(t, sys)
	require.Empty(t, empty.Keys())
}

// A forget entry drops every key of its group, whatever came before it;
// what follows it applies to a fresh state, so replaying the records
// from any point before the forget reaches the same table. It names a
// group and nothing else.
func TestForgetEndsTheGroup(t *testing.T) {
	other := Key{Group: "h", Topic: "t", QueueID: 1}
	k2 := Key{Group: "g", Topic: "u", QueueID: 0}
	forget := Record{Entries: []Entry{{Kind: KindForget, Key: Key{Group: "g"}}}}
	records := []Record{
		ack(0, 0, 1, 2),
		{Entries: []Entry{{Kind: KindCommit, Key: k2, Generation: 4, Offset: 9}, {Kind: KindAck, Key: other, Offsets: []int64{0}}}},
		forget,
		ack(0, 0),
	}
	for from := range records {
		tb := NewTable()
		for _, r := range records[from:] {
			b, err := EncodeRecord(r)
			require.NoError(t, err)
			dec, err := DecodeRecord(b)
			require.NoError(t, err)
			tb.Apply(dec)
		}
		c, gen, _ := tb.Get(k)
		require.Equal(t, int64(1), c, "from %d: only the ack after the forget counts", from)
		require.Zero(t, gen)
		c, gen, _ = tb.Get(k2)
		require.Zero(t, c, "from %d: the commit before the forget is gone", from)
		require.Zero(t, gen)
		if from <= 1 {
			c, _, _ = tb.Get(other)
			require.Equal(t, int64(1), c, "another group keeps its progress")
		}
	}
	for _, bad := range []Entry{
		{Kind: KindForget},
		{Kind: KindForget, Key: Key{Group: "g", Topic: "t"}},
		{Kind: KindForget, Key: Key{Group: "g", QueueID: 1}},
		{Kind: KindForget, Key: Key{Group: "g"}, Generation: 1},
	} {
		_, err := EncodeRecord(Record{Entries: []Entry{bad}})
		require.ErrorIs(t, err, ErrCorrupt, "%+v", bad)
	}
	b, err := EncodeRecord(forget)
	require.NoError(t, err)
	b[len(b)-1] = 1 // generation 1
	_, err = DecodeRecord(b)
	require.ErrorIs(t, err, ErrCorrupt)
}

// A consumer instance's keys ("<group>@<client id>") end with their
// group's forget, and an instance's forget ends its own keys only: not
// its group's, not another instance's, not one whose client id starts
// with it, not a group whose name starts with the group's.
func TestForgetOfGroupsAndInstances(t *testing.T) {
	key := func(group string) Key { return Key{Group: group, Topic: "t", QueueID: 0} }
	groups := []string{"g", "g@a", "g@a@b", "g@ab", "gh", "gh@a", "h@g"}
	fill := func() *Table {
		tb := NewTable()
		for _, g := range groups {
			tb.Apply(Record{Entries: []Entry{{Kind: KindCommit, Key: key(g), Generation: 1, Offset: 5}}})
		}
		return tb
	}
	for _, tc := range []struct {
		forget string
		left   []string
	}{
		{"g", []string{"gh", "gh@a", "h@g"}},
		{"g@a", []string{"g", "g@a@b", "g@ab", "gh", "gh@a", "h@g"}},
		{"g@a@b", []string{"g", "g@a", "g@ab", "gh", "gh@a", "h@g"}},
		{"gh", []string{"g", "g@a", "g@a@b", "g@ab", "h@g"}},
	} {
		tb := fill()
		b, err := EncodeRecord(Record{Entries: []Entry{{Kind: KindForget, Key: Key{Group: tc.forget}}}})
		require.NoError(t, err)
		rec, err := DecodeRecord(b)
		require.NoError(t, err)
		tb.Apply(rec)
		var left []string
		for _, k := range tb.Keys() {
			left = append(left, k.Group)
		}
		require.Equal(t, tc.left, left, "forget %s", tc.forget)
		for _, g := range groups {
			require.Equal(t, !slices.Contains(tc.left, g), Forgets(tc.forget, g), "Forgets(%s, %s)", tc.forget, g)
		}
		tb = fill()
		tb.Forget(tc.forget)
		require.Len(t, tb.Keys(), len(tc.left), "Table.Forget(%s) as the record", tc.forget)
	}
}
