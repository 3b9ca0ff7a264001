package broker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// The lease log's decisions, pinned with the code from before it moved to
// server/broker/lease: which folded leases a promoted follower still owes
// and puts into their cursors (a lease held, one waiting in place with its
// sharding key held, a broadcasting instance's, one whose deadline passed
// before the promotion: put back, counted expired), and which it owes no
// more (acknowledged, released, of a deleted group, of a deleted
// namesake's group, of a deleted topic, before a reset); the epoch counter
// raised to the highest epoch folded; what the receipts of both kinds
// answer after the promotion; the leases snapshot a leader then writes from
// its cursors; and an open whose leases snapshot is damaged, which replays
// every lease record and puts the same leases back.

// goldenInstallBroker is a broker on fc with the topics and groups of the
// test below (a follower: none of its own).
func goldenInstallBroker(t *testing.T, fc clockwork.Clock, follower bool) *Broker {
	t.Helper()
	b := openReplica(t, replicaOptions(fc, follower))
	if follower {
		return b
	}
	ctx := context.Background()
	for _, tc := range []TopicConfig{{Name: "orders", Queues: 1}, {Name: "doomed", Queues: 1}} {
		_, _, err := b.PutTopic(ctx, tc)
		require.NoError(t, err)
	}
	for _, g := range []GroupConfig{
		{Name: "g", RetryMaxTimes: 16},
		{Name: "o", Orderly: true, RetryMaxTimes: 16},
		{Name: "bc", ConsumeMode: ConsumeBroadcasting, RetryMaxTimes: 16},
		{Name: "x", RetryMaxTimes: 16},
		{Name: "y", RetryMaxTimes: 16},
		{Name: "r", RetryMaxTimes: 16},
	} {
		_, _, err := b.PutGroup(ctx, g)
		require.NoError(t, err)
	}
	var msgs []SendMessage
	for i, k := range []string{"k", "k", "j", "j"} {
		msgs = append(msgs, SendMessage{Body: []byte(fmt.Sprintf("m%d", i)), ShardingKey: k})
	}
	_, err := b.Send(ctx, "orders", msgs)
	require.NoError(t, err)
	_, err = b.Send(ctx, "doomed", msgs[:1])
	require.NoError(t, err)
	return b
}

// leaseGoldenPull pulls n messages of topic for group as client, leased for inv.
func leaseGoldenPull(t *testing.T, b *Broker, client, group, topic string, n int, inv time.Duration) []ReceivedMessage {
	t.Helper()
	got, err := b.Pull(WithClient(context.Background(), client), PullRequest{Group: group, Topic: topic, MaxMessages: n, Invisible: inv})
	require.NoError(t, err)
	require.Len(t, got, n, "%s pulls %s", group, topic)
	return got
}

// goldenStatus is the status of one receipt's request.
func goldenStatus(t *testing.T, res []ReceiptResult, err error) string {
	t.Helper()
	if err != nil {
		return "error: " + err.Error()
	}
	require.Len(t, res, 1)
	return string(res[0].Status)
}

// goldenCursors lists the leases in a leader's cursors, one line each:
// key@offset, the epoch above base, the deadline (a waiting lease's: its
// retry time), the client, the sharding key held, waiting, failures and
// deliveries; and the keys each cursor holds busy.
func goldenCursors(b *Broker, base uint64) []string {
	var out []string
	states := b.consume.States()
	for k, ps := range states {
		ps.Lock()
		for qid, c := range ps.Cursors() {
			for off, l := range c.Leases() {
				d := l.Deadline()
				if l.Waiting() {
					d = l.RetryAt()
				}
				out = append(out, fmt.Sprintf("%s/%s/%d@%d e+%d d%d client=%q key=%q waiting=%v failures=%d deliveries=%d",
					k.Group, k.Topic, qid, off, l.Epoch()-base, d.UnixMilli(), l.Client(), l.Key(), l.Waiting(), l.Failures(), l.Deliveries()))
			}
			for key, off := range c.Busy() {
				out = append(out, fmt.Sprintf("%s/%s/%d busy %q@%d", k.Group, k.Topic, qid, key, off))
			}
		}
		ps.Unlock()
	}
	sort.Strings(out)
	return out
}

// goldenInstalled is what the promoted follower's cursors hold: g's
// offset 2 (its 5 s lease ran out before the promotion: put back, and
// counted expired) and 3; o's waiting lease on offset 0 (its retry due
// before the promotion), holding key k,
// and its lease on 2, holding j; bc's instance c9's lease. Epochs count
// from the clock's Unix nanoseconds at open, the followers' as the
// leader's.
var goldenInstalled = []string{
	`bc@c9/orders/0@0 e+7 d1700000032123 client="c9" key="" waiting=false failures=0 deliveries=1`,
	`g/orders/0@2 e+3 d1700000005123 client="c1" key="" waiting=false failures=0 deliveries=1`,
	`g/orders/0@3 e+4 d1700000030123 client="c1" key="" waiting=false failures=0 deliveries=1`,
	`o/orders/0 busy "j"@2`,
	`o/orders/0 busy "k"@0`,
	`o/orders/0@0 e+12 d1700000005123 client="c2" key="k" waiting=true failures=1 deliveries=1`,
	`o/orders/0@2 e+6 d1700000031123 client="c2" key="j" waiting=false failures=0 deliveries=1`,
}

// goldenAfterPromote is what the receipts answer on the promoted
// follower, in the order the test sends them.
var goldenAfterPromote = []string{
	"g@3 ack: ok",
	"g@0 ack (acked before): ok",
	"g@1 change (released before): expired",
	"o@2 change: ok",
	"bc@c9 ack: ok",
	"r ack (before a reset): expired",
	"x ack (group deleted): expired",
	"y ack (a namesake's): expired",
	"g doomed ack (topic deleted): expired",
}

// goldenSnapshotAfter is the leases snapshot the promoted follower writes
// from its cursors, decoded: the offset it covers and the epoch counter
// above base, then its leases as key@offset, epoch above base, deadline,
// failures, state, generation, at and client.
var goldenSnapshotAfter = []string{
	"from=11 epoch=+12",
	`g/orders/0@2 e+3 d1700000005123 failures=0 state=1 gen=0 at=1700000012123 client="c1"`,
	`o/orders/0@0 e+12 d1700000005123 failures=1 state=2 gen=0 at=1700000012123 client="c2"`,
	`o/orders/0@2 e+6 d1700000072123 failures=0 state=1 gen=0 at=1700000012123 client="c2"`,
}

// goldenSnapshotLines decodes a leases snapshot into goldenSnapshotAfter's
// lines.
func goldenSnapshotLines(t *testing.T, raw []byte, base uint64) []string {
	t.Helper()
	from, epoch, rec, err := leaselog.DecodeSnapshot(raw)
	require.NoError(t, err)
	var out []string
	for _, e := range rec.Entries {
		for _, it := range e.Items {
			out = append(out, fmt.Sprintf("%s/%s/%d@%d e+%d d%d failures=%d state=%d gen=%d at=%d client=%q",
				e.Key.Group, e.Key.Topic, e.Key.QueueID, it.Offset, it.Epoch-base, it.Deadline, it.Failures, it.State, e.Generation, e.At, e.Client))
		}
	}
	sort.Strings(out)
	return append([]string{fmt.Sprintf("from=%d epoch=+%d", from, epoch-base)}, out...)
}

func TestGoldenLeaseInstall(t *testing.T) {
	ctx := context.Background()
	fc := clockwork.NewFakeClockAt(goldenLeaseAt)
	base := uint64(goldenLeaseAt.UnixNano())
	b := goldenInstallBroker(t, fc, false)
	f := goldenInstallBroker(t, fc, true) // opened at the leader's time: the same epoch seed

	gl := leaseGoldenPull(t, b, "c1", "g", "orders", 4, 30*time.Second)
	res, err := b.Ack(ctx, "g", []string{gl[0].Receipt})
	require.Equal(t, "ok", goldenStatus(t, res, err))
	res, err = b.ChangeLease(ctx, "g", []LeaseItem{{Receipt: gl[1].Receipt, Invisible: 0}})
	require.Equal(t, "ok", goldenStatus(t, res, err))
	res, err = b.ChangeLease(ctx, "g", []LeaseItem{{Receipt: gl[2].Receipt, Invisible: 5 * time.Second}})
	require.Equal(t, "ok", goldenStatus(t, res, err))
	fc.Advance(time.Second)
	ol := leaseGoldenPull(t, b, "c2", "o", "orders", 2, 30*time.Second) // one per sharding key: offsets 0 and 2
	require.Equal(t, []int64{0, 2}, []int64{ol[0].QueueOffset, ol[1].QueueOffset})
	fc.Advance(time.Second)
	bl := leaseGoldenPull(t, b, "c9", "bc", "orders", 1, 30*time.Second)
	xl := leaseGoldenPull(t, b, "c3", "x", "orders", 1, 30*time.Second)
	yl := leaseGoldenPull(t, b, "c3", "y", "orders", 1, 30*time.Second)
	rl := leaseGoldenPull(t, b, "c3", "r", "orders", 1, 30*time.Second)
	dl := leaseGoldenPull(t, b, "c1", "g", "doomed", 1, 30*time.Second)
	fc.Advance(time.Second)
	require.NoError(t, b.DeleteGroup(ctx, "x"))
	require.NoError(t, b.DeleteGroup(ctx, "y"))
	fc.Advance(time.Second)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "y", RetryMaxTimes: 16})
	require.NoError(t, err)
	_, err = b.ResetOffset(ctx, "r", "orders", time.UnixMilli(0))
	require.NoError(t, err)
	require.NoError(t, b.DeleteTopic(ctx, "doomed"))
	res, err = b.Nack(ctx, "o", []NackItem{{Receipt: ol[0].Receipt, DelayLevel: 1}}) // in place: waits 1 s
	require.Equal(t, "ok", goldenStatus(t, res, err))

	ship(t, b, f)
	require.NoError(t, b.Close(ctx)) // deposed: its receipts are the follower's now
	fc.Advance(8 * time.Second)      // past g@2's 5 s lease and o@0's retry time
	require.NoError(t, f.Promote(ctx))
	require.Equal(t, LeaseRecovery{Leases: 5, Expired: 1}, f.LeasesRecovered())
	require.GreaterOrEqual(t, f.epoch.Load(), base+12, "the epoch counter above every epoch folded")
	require.Less(t, f.epoch.Load(), base+13)
	if got := goldenCursors(f, base); !slices.Equal(got, goldenInstalled) {
		t.Errorf("cursors:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(goldenInstalled, "\n     "))
	}

	var answers []string
	answer := func(what string, res []ReceiptResult, err error) {
		answers = append(answers, what+": "+goldenStatus(t, res, err))
	}
	res, err = f.Ack(ctx, "g", []string{gl[3].Receipt})
	answer("g@3 ack", res, err)
	res, err = f.Ack(ctx, "g", []string{gl[0].Receipt})
	answer("g@0 ack (acked before)", res, err)
	res, err = f.ChangeLease(ctx, "g", []LeaseItem{{Receipt: gl[1].Receipt, Invisible: time.Minute}})
	answer("g@1 change (released before)", res, err)
	res, err = f.ChangeLease(ctx, "o", []LeaseItem{{Receipt: ol[1].Receipt, Invisible: time.Minute}})
	answer("o@2 change", res, err)
	res, err = f.Ack(WithClient(ctx, "c9"), "bc", []string{bl[0].Receipt})
	answer("bc@c9 ack", res, err)
	res, err = f.Ack(ctx, "r", []string{rl[0].Receipt})
	answer("r ack (before a reset)", res, err)
	res, err = f.Ack(ctx, "x", []string{xl[0].Receipt})
	answer("x ack (group deleted)", res, err)
	res, err = f.Ack(ctx, "y", []string{yl[0].Receipt})
	answer("y ack (a namesake's)", res, err)
	res, err = f.Ack(ctx, "g", []string{dl[0].Receipt})
	answer("g doomed ack (topic deleted)", res, err)
	require.Equal(t, goldenAfterPromote, answers)

	// The promoted follower (not replicated) snapshots its cursors: what
	// the acks and the change left (g@3 and bc's acked), o@2
	// at its new deadline, the records written so far covered.
	require.NoError(t, f.store.AwaitDispatch(ctx))
	require.NoError(t, f.snapshotLeases())
	raw, err := f.store.ReadMeta("leases.snapshot")
	require.NoError(t, err)
	require.Equal(t, goldenSnapshotAfter, goldenSnapshotLines(t, raw, base))
	require.Equal(t, int64(11), f.leases.KeepFrom(), "retention keeps the lease records from the snapshot's offset on")
}

// TestGoldenLeaseDamagedSnapshot: a leases snapshot that does not decode
// is ignored (logged): the open replays every retained lease record, and
// puts back the same leases as from an intact one; an undecodable lease
// record is skipped, not counted.
func TestGoldenLeaseDamagedSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openLeaseBroker(t, dir)
	msgs := make([]SendMessage, 6)
	for i := range msgs {
		msgs[i] = SendMessage{Body: []byte("m")}
	}
	_, err := b.Send(ctx, "ds", msgs)
	require.NoError(t, err)
	for range 3 {
		got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "ds", MaxMessages: 2, Wait: time.Second, Invisible: time.Hour})
		require.NoError(t, err)
		require.Len(t, got, 2)
	}
	bad := &message.Message{Topic: "rmq_sys_LEASE", Body: []byte{2, 0, 0, 0, 0}, BornTimestamp: 1}
	require.NoError(t, b.store.PutClass(storage.ClassSystem, []*message.Message{bad}, make([]storage.PutResult, 1)))
	require.NoError(t, b.Close(ctx))

	b = openLeaseBroker(t, dir)
	require.Equal(t, LeaseRecovery{Records: 0, Leases: 6, FromSnap: 6}, b.LeasesRecovered(), "a clean close snapshots")
	require.NoError(t, b.Close(ctx))
	require.NoError(t, b.store.WriteMeta("leases.snapshot", []byte("MQLS damaged")))

	b = openLeaseBroker(t, dir)
	require.Equal(t, LeaseRecovery{Records: 3, Leases: 6}, b.LeasesRecovered(), "the three pulls' records, not the undecodable one")
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "ds", MaxMessages: 6})
	require.NoError(t, err)
	require.Empty(t, got, "every message is still leased")
	require.NoError(t, b.Close(ctx))
}
