package instance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var goldenAt = time.UnixMilli(1_700_000_000_123)

// goldenSet is the set server/broker's golden test makes: fan's b-2 at
// goldenAt, a@1 1.5 s later, all's x 2 s after that.
func goldenSet() *Set {
	s := &Set{}
	for _, e := range []struct {
		group, client string
		at            time.Duration
	}{{"fan", "b-2", 0}, {"fan", "a@1", 1500 * time.Millisecond}, {"all", "x", 3500 * time.Millisecond}} {
		in := New(time.Time{})
		in.Met["news"] = true
		s.Add(e.group, e.client, in)
		s.Enter(in, goldenAt.Add(e.at))
		s.Leave(in, goldenAt.Add(e.at))
	}
	return s
}

const goldenSnapshot = `{"version":1,"instances":[` +
	`{"group":"all","client":"x","lastSeenMs":1700000003623},` +
	`{"group":"fan","client":"a@1","lastSeenMs":1700000001623},` +
	`{"group":"fan","client":"b-2","lastSeenMs":1700000000123}]}`

func TestGoldenSnapshot(t *testing.T) {
	s := goldenSet()
	snap, changed := s.Snapshot()
	require.True(t, changed)
	raw, err := EncodeSnapshot(snap)
	require.NoError(t, err)
	require.Equal(t, goldenSnapshot, string(raw))
	_, changed = s.Snapshot()
	require.False(t, changed, "unchanged since")
	s.MarkChanged()
	_, changed = s.Snapshot()
	require.True(t, changed, "a snapshot not written")

	snap, changed = (&Set{dirty: true}).Snapshot()
	require.True(t, changed)
	raw, err = EncodeSnapshot(snap)
	require.NoError(t, err)
	require.Equal(t, `{"version":1,"instances":[]}`, string(raw))

	got, err := DecodeSnapshot([]byte(goldenSnapshot))
	require.NoError(t, err)
	require.Equal(t, map[string]time.Time{
		"all@x":   goldenAt.Add(3500 * time.Millisecond),
		"fan@a@1": goldenAt.Add(1500 * time.Millisecond),
		"fan@b-2": goldenAt,
	}, got.LastSeen())
}

func TestGoldenDecodeSnapshot(t *testing.T) {
	for _, ok := range []string{
		goldenSnapshot,
		`{"version":1,"instances":[]}`,
		`{"version":1}`,
		`{"version":1,"instances":null}`,
		`{"version":1,"extra":true,"instances":[{"group":"fan","client":"b","lastSeenMs":1,"note":"x"}]}`,
		`{"version":1,"instances":[{"group":"fan","client":"b","lastSeenMs":-5},{"group":"fan","client":"c@d","lastSeenMs":0}]}`,
		` {"version":1} `,
	} {
		_, err := DecodeSnapshot([]byte(ok))
		require.NoError(t, err, ok)
	}
	for _, bad := range []struct{ file, err string }{
		{`{"version":1,"instances":[{"group":"fan"`, "instances snapshot: unexpected end of JSON input"},
		{"\x00garbage", "instances snapshot: invalid character '\\x00' looking for beginning of value"},
		{"", "instances snapshot: unexpected end of JSON input"},
		{`{"version":2,"instances":[]}`, "instances snapshot: version 2"},
		{`{"instances":[]}`, "instances snapshot: version 0"},
		{`{"version":"1","instances":[]}`, "instances snapshot: json: cannot unmarshal string into Go struct field Snapshot.version of type int"},
		{`{"version":1,"instances":[{"group":"fan","client":"b","lastSeenMs":"1"}]}`, "instances snapshot: json: cannot unmarshal string into Go struct field Seen.instances.lastSeenMs of type int64"},
		{`{"version":1,"instances":[]}{}`, "instances snapshot: invalid character '{' after top-level value"},
		{`[{"group":"fan","client":"b","lastSeenMs":1}]`, "instances snapshot: json: cannot unmarshal array into Go value of type instance.Snapshot"},
		{`{"version":1,"instances":[{"group":"","client":"b","lastSeenMs":1}]}`, `instances snapshot: instances[0]: the group is empty or holds "@"`},
		{`{"version":1,"instances":[{"group":"f@n","client":"b","lastSeenMs":1}]}`, `instances snapshot: instances[0]: the group is empty or holds "@"`},
		{`{"version":1,"instances":[{"group":"fan","lastSeenMs":1}]}`, "instances snapshot: instances[0]: the client id is empty"},
		{`{"version":1,"instances":[{"group":"fan","client":"b","lastSeenMs":1},{"group":"fan","client":"b","lastSeenMs":2}]}`, "instances snapshot: instances[1]: the instance is listed twice"},
	} {
		_, err := DecodeSnapshot([]byte(bad.file))
		require.EqualError(t, err, bad.err, bad.file)
	}
}

func TestGoldenNames(t *testing.T) {
	require.Equal(t, "@", Sep)
	require.Equal(t, "fan@c-1", Key("fan", "c-1"))
	require.Equal(t, "fan@a@b", Key("fan", "a@b"))
	for _, c := range []struct{ name, group, client string }{
		{"fan@c-1", "fan", "c-1"},
		{"fan@a@b", "fan", "a@b"},
		{"fan", "fan", ""},
		{"fan@", "fan", ""},
		{"@c", "", "c"},
		{"", "", ""},
	} {
		g, cl := Split(c.name)
		require.Equal(t, [2]string{c.group, c.client}, [2]string{g, cl}, c.name)
		require.Equal(t, c.group, Base(c.name), c.name)
	}
	require.Equal(t, "BROADCAST_INSTANCE", Prop)
	require.Equal(t, "instances.snapshot", SnapshotFile)
	require.Equal(t, 24*time.Hour, Idle(0))
	require.Equal(t, time.Minute, Idle(time.Minute))
	for _, d := range []time.Duration{0, time.Second, 366 * 24 * time.Hour} {
		require.NoError(t, CheckIdle(d), d)
	}
	for _, d := range []time.Duration{time.Second - 1, 366*24*time.Hour + 1, -time.Second} {
		require.EqualError(t, CheckIdle(d), "instanceIdle must be 1s..8784h0m0s", d)
	}
	require.Equal(t, uint32(1_700_000_000), Generation(goldenAt, 0))
	require.Equal(t, uint32(1_700_000_000), Generation(goldenAt, 1_699_999_999))
	require.Equal(t, uint32(1_800_000_001), Generation(goldenAt, 1_800_000_000), "above what the key had")
}
