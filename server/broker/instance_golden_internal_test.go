package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

// The broadcasting consumer-instance family's formats and rules, pinned
// with the code from before the family moved to server/broker/instance:
// the instances snapshot's bytes and how it is read (good, damaged,
// missing), an instance's progress group name, which instances a sweep
// forgets at a given time, and the instance limit's refusal.

var goldenInstAt = time.UnixMilli(1_700_000_000_123)

// goldenInstanceBroker opens a broker on dir with a clock that moves only
// when the test moves it, the topic news and two broadcasting groups: fan
// (InstanceIdle 1h) and all (the default).
func goldenInstanceBroker(t *testing.T, dir string, fc *clockwork.FakeClock, limit int) *Broker {
	t.Helper()
	opts := replicaOptions(fc, false)
	opts.DataDir = dir
	opts.Quotas.MaxInstancesPerGroup = limit
	b, err := Open(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := context.Background()
	if _, ok := b.registry.Topic("news"); !ok {
		_, _, err = b.PutTopic(ctx, TopicConfig{Name: "news", Queues: 1})
		require.NoError(t, err)
		_, _, err = b.PutGroup(ctx, GroupConfig{Name: "fan", ConsumeMode: ConsumeBroadcasting, InstanceIdle: time.Hour,
			Subscriptions: []Subscription{{Topic: "news"}}})
		require.NoError(t, err)
		_, _, err = b.PutGroup(ctx, GroupConfig{Name: "all", ConsumeMode: ConsumeBroadcasting, Subscriptions: []Subscription{{Topic: "news"}}})
		require.NoError(t, err)
	}
	return b
}

// registerInstance registers client in group by an offset commit (which
// writes no lease).
func registerInstance(b *Broker, group, client string) error {
	return b.CommitOffsets(WithClient(context.Background(), client), group, []OffsetCommit{{Topic: "news", QueueID: 0, Offset: 0}})
}

// instanceLastSeen is each known instance of group with its last-seen
// time and forget time as Instances reports them (ms since goldenInstAt).
func instanceLastSeen(t *testing.T, b *Broker, group string) []string {
	t.Helper()
	all, err := b.Instances(context.Background(), group)
	require.NoError(t, err)
	var out []string
	for _, ip := range all {
		forget := "-"
		if !ip.ForgetAt.IsZero() {
			forget = fmt.Sprint(ip.ForgetAt.Sub(goldenInstAt).Milliseconds())
		}
		out = append(out, fmt.Sprintf("%s seen %d forget %s active %d", ip.ClientID, ip.LastSeen.Sub(goldenInstAt).Milliseconds(), forget, ip.Active))
	}
	return out
}

// instanceKeys lists the progress groups of instances (sorted, once each).
func instanceKeys(b *Broker) []string {
	var out []string
	for _, k := range b.progress.Keys() {
		if strings.Contains(k.Group, "@") && !slices.Contains(out, k.Group) {
			out = append(out, k.Group)
		}
	}
	slices.Sort(out)
	return out
}

func TestGoldenInstanceNames(t *testing.T) {
	require.Equal(t, "fan@c-1", instanceKey("fan", "c-1"))
	require.Equal(t, "fan@a@b", instanceKey("fan", "a@b"))
	for _, c := range []struct{ name, group, client, base string }{
		{"fan@c-1", "fan", "c-1", "fan"},
		{"fan@a@b", "fan", "a@b", "fan"}, // the first separator splits: a client id may hold one
		{"fan", "fan", "", "fan"},        // a group's own keys
		{"fan@", "fan", "", "fan"},       // an empty client id is the group's own
		{"@c", "", "c", ""},
		{"", "", "", ""},
	} {
		g, cl := splitInstance(c.name)
		require.Equal(t, [2]string{c.group, c.client}, [2]string{g, cl}, "split %q", c.name)
		require.Equal(t, c.base, baseGroup(c.name), "base %q", c.name)
	}
	require.Equal(t, "BROADCAST_INSTANCE", propInstance)
	require.Equal(t, "instances.snapshot", instancesSnapshot)

	require.Equal(t, 24*time.Hour, instanceIdle(GroupConfig{}))
	require.Equal(t, time.Minute, instanceIdle(GroupConfig{InstanceIdle: time.Minute}))
	for _, d := range []time.Duration{0, time.Second, 366 * 24 * time.Hour} {
		require.NoError(t, checkInstanceIdle(d), "%v", d)
	}
	for _, d := range []time.Duration{time.Second - 1, 366*24*time.Hour + 1, -time.Second} {
		err := checkInstanceIdle(d)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.EqualError(t, err, "invalid argument: instanceIdle must be 1s..8784h0m0s", "%v", d)
	}

	// The progress groups an instance's requests write, and the client ids
	// a broadcasting group refuses.
	fc := clockwork.NewFakeClockAt(goldenInstAt)
	b := goldenInstanceBroker(t, memDir(t), fc, 0)
	require.NoError(t, registerInstance(b, "fan", "c-1"))
	require.NoError(t, registerInstance(b, "fan", "a@b"))
	require.NoError(t, registerInstance(b, "all", "c-1"))
	require.Equal(t, []string{"all@c-1", "fan@a@b", "fan@c-1"}, instanceKeys(b))
	require.Equal(t, []string{"a@b", "c-1"}, b.instanceClients("fan"))
	require.True(t, b.instanceKnown("fan@a@b"))
	require.True(t, b.instanceKnown("fan"))
	require.False(t, b.instanceKnown("fan@zz"))
	err := b.CommitOffsets(context.Background(), "fan", []OffsetCommit{{Topic: "news", QueueID: 0, Offset: 0}})
	require.NoError(t, err, "without a client id: the group's own offsets")
	g, _ := b.registry.Group("fan")
	_, err = b.enterInstance(g, "")
	require.ErrorIs(t, err, ErrClientIDRequired)
	require.EqualError(t, err, "client id required: group fan is broadcasting: every consumer instance names itself with X-Mqgate-Client-Id")
	_, err = b.enterInstance(g, "a b")
	require.EqualError(t, err, "invalid argument: X-Mqgate-Client-Id must be printable ASCII without spaces")
	require.Equal(t, []string{"all@c-1", "fan@a@b", "fan@c-1"}, instanceKeys(b), "a refused client id writes nothing")
}

func TestGoldenInstancesSnapshot(t *testing.T) {
	dir := memDir(t)
	fc := clockwork.NewFakeClockAt(goldenInstAt)
	b := goldenInstanceBroker(t, dir, fc, 0)
	require.NoError(t, registerInstance(b, "fan", "b-2"))
	fc.Advance(1500 * time.Millisecond)
	require.NoError(t, registerInstance(b, "fan", "a@1"))
	fc.Advance(2 * time.Second)
	require.NoError(t, registerInstance(b, "all", "x"))
	fc.Advance(time.Second)

	require.NoError(t, b.snapshotInstances())
	raw, err := b.store.ReadMeta("instances.snapshot")
	require.NoError(t, err)
	want := `{"version":1,"instances":[` +
		`{"group":"all","client":"x","lastSeenMs":1700000003623},` +
		`{"group":"fan","client":"a@1","lastSeenMs":1700000001623},` +
		`{"group":"fan","client":"b-2","lastSeenMs":1700000000123}]}`
	require.Equal(t, want, string(raw))

	// Unchanged since: not written again.
	require.NoError(t, os.Remove(b.store.MetaPath("instances.snapshot")))
	require.NoError(t, b.snapshotInstances())
	_, err = b.store.ReadMeta("instances.snapshot")
	require.ErrorIs(t, err, os.ErrNotExist)
	// A request of a known instance changes it.
	require.NoError(t, registerInstance(b, "fan", "b-2"))
	require.NoError(t, b.snapshotInstances())
	raw, err = b.store.ReadMeta("instances.snapshot")
	require.NoError(t, err)
	require.Equal(t, strings.Replace(want, `"b-2","lastSeenMs":1700000000123`, `"b-2","lastSeenMs":1700000004623`, 1), string(raw))

	// Nothing known: an empty list.
	e := goldenInstanceBroker(t, memDir(t), clockwork.NewFakeClockAt(goldenInstAt), 0)
	require.NoError(t, registerInstance(e, "fan", "gone"))
	e.forgetIdleInstances(goldenInstAt.Add(time.Hour))
	require.NoError(t, e.snapshotInstances())
	raw, err = e.store.ReadMeta("instances.snapshot")
	require.NoError(t, err)
	require.Equal(t, `{"version":1,"instances":[]}`, string(raw))
}

func TestGoldenInstancesSnapshotRead(t *testing.T) {
	// Three instances known by their progress keys; each case replaces the
	// snapshot file and opens the broker again 10 s after the writes.
	dir := memDir(t)
	fc := clockwork.NewFakeClockAt(goldenInstAt)
	b := goldenInstanceBroker(t, dir, fc, 0)
	require.NoError(t, registerInstance(b, "fan", "b-2"))
	require.NoError(t, registerInstance(b, "fan", "a@1"))
	require.NoError(t, registerInstance(b, "all", "x"))
	require.NoError(t, b.Close(context.Background()))
	path := filepath.Join(dir, "config", "instances.snapshot")

	fromNow := map[string][]string{ // every idle time counts from the open
		"fan": {"a@1 seen 10000 forget 3610000 active 0", "b-2 seen 10000 forget 3610000 active 0"},
		"all": {"x seen 10000 forget 86410000 active 0"},
	}
	for _, c := range []struct {
		name string
		file *string
		want map[string][]string
	}{
		{"good", ptr(`{"version":1,"instances":[{"group":"all","client":"x","lastSeenMs":1700000003623},` +
			`{"group":"fan","client":"a@1","lastSeenMs":1700000001623},{"group":"fan","client":"b-2","lastSeenMs":1700000000123}]}`),
			map[string][]string{
				"fan": {"a@1 seen 1500 forget 3601500 active 0", "b-2 seen 0 forget 3600000 active 0"},
				"all": {"x seen 3500 forget 86403500 active 0"},
			}},
		{"in any order, unknown members ignored, an instance without progress not registered, one missing from the file seen now",
			ptr(`{"version":1,"extra":true,"instances":[{"group":"fan","client":"b-2","lastSeenMs":1700000000123,"note":"x"},` +
				`{"group":"fan","client":"ghost","lastSeenMs":1700000000123},{"group":"all","client":"x","lastSeenMs":1700000003623}]}`),
			map[string][]string{
				"fan": {"a@1 seen 10000 forget 3610000 active 0", "b-2 seen 0 forget 3600000 active 0"},
				"all": {"x seen 3500 forget 86403500 active 0"},
			}},
		{"a time not before the open counts from the open",
			ptr(`{"version":1,"instances":[{"group":"fan","client":"b-2","lastSeenMs":1700000010123},{"group":"fan","client":"a@1","lastSeenMs":1800000000000},` +
				`{"group":"all","client":"x","lastSeenMs":1700000010122}]}`),
			map[string][]string{
				"fan": {"a@1 seen 10000 forget 3610000 active 0", "b-2 seen 10000 forget 3610000 active 0"},
				"all": {"x seen 9999 forget 86409999 active 0"},
			}},
		{"missing", nil, fromNow},
		{"not JSON", ptr(`{"version":1,"instances":[{"group":"fan"`), fromNow},
		{"garbage", ptr("\x00\x01garbage"), fromNow},
		{"empty", ptr(""), fromNow},
		{"version 2", ptr(`{"version":2,"instances":[{"group":"fan","client":"b-2","lastSeenMs":1700000000123}]}`), fromNow},
		{"no version", ptr(`{"instances":[{"group":"fan","client":"b-2","lastSeenMs":1700000000123}]}`), fromNow},
		{"version as a string", ptr(`{"version":"1","instances":[{"group":"fan","client":"b-2","lastSeenMs":1700000000123}]}`), fromNow},
		{"a time as a string", ptr(`{"version":1,"instances":[{"group":"fan","client":"b-2","lastSeenMs":"1700000000123"}]}`), fromNow},
		{"trailing data", ptr(`{"version":1,"instances":[{"group":"fan","client":"b-2","lastSeenMs":1700000000123}]}{}`), fromNow},
		{"a list", ptr(`[{"group":"fan","client":"b-2","lastSeenMs":1700000000123}]`), fromNow},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.file == nil {
				require.NoError(t, os.RemoveAll(path))
			} else {
				require.NoError(t, os.WriteFile(path, []byte(*c.file), 0o600))
			}
			r := goldenInstanceBroker(t, dir, clockwork.NewFakeClockAt(goldenInstAt.Add(10*time.Second)), 0)
			for _, g := range []string{"fan", "all"} {
				require.Equal(t, c.want[g], instanceLastSeen(t, r, g), g)
			}
			require.NoError(t, r.Close(context.Background()))
		})
	}
}

func ptr(s string) *string { return &s }

func TestGoldenInstanceSweep(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenInstAt)
	b := goldenInstanceBroker(t, memDir(t), fc, 0)
	require.NoError(t, registerInstance(b, "fan", "a"))
	require.NoError(t, registerInstance(b, "all", "x"))
	g, _ := b.registry.Group("fan")
	news, _ := b.registry.Topic("news")
	leave, err := b.enterInstance(g, "c", news) // under way until leave
	require.NoError(t, err)
	fc.Advance(10 * time.Minute)
	require.NoError(t, registerInstance(b, "fan", "b"))
	require.Equal(t, []string{"a seen 0 forget 3600000 active 0", "b seen 600000 forget 4200000 active 0", "c seen 0 forget - active 1"},
		instanceLastSeen(t, b, "fan"))

	sweep := func(at time.Duration) []string {
		b.forgetIdleInstances(goldenInstAt.Add(at))
		return append(b.instanceClients("fan"), b.instanceClients("all")...)
	}
	require.Equal(t, []string{"a", "b", "c", "x"}, sweep(time.Hour-time.Millisecond), "idle for less than the group's InstanceIdle")
	require.Equal(t, []string{"b", "c", "x"}, sweep(time.Hour), "idle for the group's InstanceIdle: forgotten")
	require.Equal(t, []string{"all@x", "fan@b", "fan@c"}, instanceKeys(b), "a forget record ended its progress")
	require.Equal(t, []string{"c", "x"}, sweep(time.Hour+10*time.Minute))
	require.Equal(t, []string{"c", "x"}, sweep(24*time.Hour-time.Millisecond), "all's default: 24h")
	require.Equal(t, []string{"c"}, sweep(24*time.Hour), "a request under way keeps its instance")
	require.Equal(t, []string{"c"}, sweep(1000*time.Hour))
	leave() // seen at its end: the clock's now
	require.Equal(t, []string{"c seen 600000 forget 4200000 active 0"}, instanceLastSeen(t, b, "fan"))
	require.Equal(t, []string{"c"}, sweep(time.Hour+10*time.Minute-time.Millisecond))
	require.Empty(t, sweep(time.Hour+10*time.Minute))
	require.Empty(t, instanceKeys(b))
	require.False(t, b.instanceKnown("fan@a"), "a forgotten instance's late settlements are dropped")

	// A forgotten client id comes back as a new instance.
	require.NoError(t, registerInstance(b, "fan", "a"))
	require.Equal(t, []string{"a seen 600000 forget 4200000 active 0"}, instanceLastSeen(t, b, "fan"))
}

func TestGoldenInstanceLimit(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenInstAt)
	b := goldenInstanceBroker(t, memDir(t), fc, 2)
	require.NoError(t, registerInstance(b, "fan", "a"))
	fc.Advance(time.Minute)
	require.NoError(t, registerInstance(b, "fan", "b"))
	err := registerInstance(b, "fan", "c")
	require.ErrorIs(t, err, ErrQuotaExceeded)
	var qe *QuotaError
	require.True(t, errors.As(err, &qe))
	require.Equal(t, QuotaError{Quota: "instancesPerGroup", Limit: 2, Unit: "consumer instances", Flag: "--max-instances-per-group", Have: 2, Want: 3}, *qe)
	require.EqualError(t, err, "quota exceeded: instancesPerGroup: the request would make 3 consumer instances where the limit is 2 (--max-instances-per-group; 2 exist)")
	require.Equal(t, []string{"fan@a", "fan@b"}, instanceKeys(b), "refused before anything is written")
	require.Equal(t, []string{"a", "b"}, b.instanceClients("fan"))
	require.NoError(t, registerInstance(b, "fan", "b"), "a known instance goes on")
	require.NoError(t, registerInstance(b, "all", "c"), "the limit is per group")
	b.forgetIdleInstances(goldenInstAt.Add(time.Hour))
	require.Equal(t, []string{"b"}, b.instanceClients("fan"))
	require.NoError(t, registerInstance(b, "fan", "c"), "a forgotten instance makes room")
	require.Equal(t, []string{"b", "c"}, b.instanceClients("fan"))
}
