package instance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func refs(rs []Ref) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, Key(r.Group, r.Client))
	}
	return out
}

// The sweep's decision as server/broker's golden test makes it: fan (idle
// 1h) with a seen at goldenAt, b 10 min later and c under way; all (the
// default 24 h) with x at goldenAt.
func TestIdle(t *testing.T) {
	s := &Set{}
	add := func(group, client string, at time.Duration) *Instance {
		in := New(time.Time{})
		s.Add(group, client, in)
		s.Enter(in, goldenAt.Add(at))
		return in
	}
	s.Leave(add("fan", "a", 0), goldenAt)
	s.Leave(add("all", "x", 0), goldenAt)
	c := add("fan", "c", 0)
	s.Leave(add("fan", "b", 10*time.Minute), goldenAt.Add(10*time.Minute))
	idle := func(group string) time.Duration {
		if group == "fan" {
			return time.Hour
		}
		return Idle(0)
	}
	at := func(d time.Duration) []string { return refs(s.Idle(goldenAt.Add(d), idle)) }
	require.Equal(t, []string{}, at(time.Hour-time.Millisecond))
	require.Equal(t, []string{"fan@a"}, at(time.Hour))
	require.Equal(t, []string{"fan@a", "fan@b"}, at(time.Hour+10*time.Minute))
	require.Equal(t, []string{"all@x", "fan@a", "fan@b"}, at(24*time.Hour), "by group, then client id; c is under way")
	r := s.Idle(goldenAt.Add(24*time.Hour), idle)[0]
	require.Equal(t, Ref{Group: "all", Client: "x", LastSeen: goldenAt, Idle: 24 * time.Hour}, r)
	require.True(t, c.ForgetAt(time.Hour).IsZero(), "under way")
	s.Leave(c, goldenAt.Add(time.Minute))
	require.Equal(t, goldenAt.Add(time.Hour+time.Minute), c.ForgetAt(time.Hour))
	require.Equal(t, []string{"fan@a", "fan@c"}, at(time.Hour+time.Minute))
	s.Remove("fan", "a")
	require.Equal(t, []string{"fan@c"}, at(time.Hour+time.Minute))
	require.Equal(t, []string{"b", "c"}, s.Clients("fan"))
}

func TestRoomAndChanges(t *testing.T) {
	s := &Set{}
	for _, c := range []string{"a", "b"} {
		have, ok := s.Room("fan", 2)
		require.True(t, ok)
		s.Add("fan", c, New(goldenAt))
		require.Equal(t, have+1, s.Count("fan"))
	}
	have, ok := s.Room("fan", 2)
	require.Equal(t, 2, have)
	require.False(t, ok, "the limit")
	_, ok = s.Room("fan", 0)
	require.True(t, ok, "0: unlimited")
	_, ok = s.Room("all", 2)
	require.True(t, ok, "per group")

	_, changed := s.Snapshot()
	require.True(t, changed)
	s.Leave(s.Get("fan", "a"), goldenAt.Add(time.Second))
	_, changed = s.Snapshot()
	require.False(t, changed, "a request's end alone is no change")
	s.Touch("fan", map[string]struct{}{"zz": {}}, goldenAt)
	_, changed = s.Snapshot()
	require.False(t, changed, "an unknown instance is not registered by a touch")
	require.Nil(t, s.Get("fan", "zz"))
	s.Touch("fan", map[string]struct{}{"b": {}}, goldenAt.Add(time.Minute))
	snap, changed := s.Snapshot()
	require.True(t, changed)
	require.Equal(t, []Seen{{"fan", "a", goldenAt.Add(time.Second).UnixMilli()}, {"fan", "b", goldenAt.Add(time.Minute).UnixMilli()}}, snap.Instances)

	s.DropGroup("all")
	_, changed = s.Snapshot()
	require.False(t, changed, "nothing to drop")
	s.DropGroup("fan")
	_, changed = s.Snapshot()
	require.True(t, changed)
	require.Zero(t, s.Count("fan"))
	require.Equal(t, []string{}, s.Clients("fan"))
}

func TestRestore(t *testing.T) {
	now := goldenAt.Add(10 * time.Second)
	seen := map[string]time.Time{
		"fan@a":     goldenAt,
		"fan@b":     now, // not before the open
		"fan@ghost": goldenAt,
	}
	s := &Set{}
	for _, k := range [][2]string{{"fan", "news"}, {"fan@a", "news"}, {"fan@a", "other"}, {"fan@b", "news"}, {"all@x", "news"}, {"fan@", "news"}} {
		s.Restore(k[0], k[1], seen, now)
	}
	require.Equal(t, []string{"a", "b"}, s.Clients("fan"))
	require.Equal(t, []string{"x"}, s.Clients("all"))
	require.Equal(t, &Instance{LastSeen: goldenAt, Met: map[string]bool{"news": true, "other": true}}, s.Get("fan", "a"))
	require.Equal(t, &Instance{LastSeen: now, Met: map[string]bool{"news": true}}, s.Get("fan", "b"))
	require.Equal(t, &Instance{LastSeen: now, Met: map[string]bool{"news": true}}, s.Get("all", "x"))

	// Again over a set that knows them (a promotion): the known keep their
	// time and requests.
	s.Enter(s.Get("fan", "a"), now.Add(time.Minute))
	s.Restore("fan@a", "third", seen, now.Add(time.Hour))
	a := s.Get("fan", "a")
	require.Equal(t, now.Add(time.Minute), a.LastSeen)
	require.Equal(t, 1, a.Active)
	require.True(t, a.Met["third"])
}
