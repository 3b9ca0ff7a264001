package broker

import (
	"bytes"
	"context"
	"encoding/hex"
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

// The lease family's formats, pinned byte for byte with the code from
// before the family moved to server/broker/lease: the rmq_sys_LEASE record
// bodies as a pull, a lease change (longer, and to 0: released) and an
// ordered message's failure in place write them, with their born times;
// the leases.snapshot file as a leader and a follower write it; what
// folding the records makes (of one offset the newest epoch wins, of one
// epoch the later record; a release stays in the fold until it is pruned)
// and that an undecodable record is skipped.

var goldenLeaseAt = time.UnixMilli(1_700_000_000_123)

// goldenLeaseHex is want (hex, spaces and bars between fields) as bytes.
func goldenLeaseHex(t *testing.T, want string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "").Replace(want))
	require.NoError(t, err)
	return b
}

// awaitLogged waits until every record appended so far is flushed and in
// its ConsumeQueue, for a golden test that reads a record family's queue.
// A pull answers before its records (grants, offsets its filters passed
// over) are durable, and in sync mode the dispatcher stops at the flushed
// point: without the flush, a pull's last record would show only when the
// flusher happened to have run.
func awaitLogged(t *testing.T, b *Broker) {
	t.Helper()
	require.NoError(t, b.store.WaitFlushed(b.store.WriteOffset()))
	require.NoError(t, b.store.AwaitDispatch(context.Background()))
}

// leaseQueue reads rmq_sys_LEASE as stored, from queue offset from.
func leaseQueue(t *testing.T, b *Broker, from int64) []*message.Message {
	t.Helper()
	awaitLogged(t, b)
	res, err := b.store.ReadQueue("rmq_sys_LEASE", 0, from, 100, nil)
	require.NoError(t, err)
	return res.Messages
}

func goldenLeaseBroker(t *testing.T, fc clockwork.Clock, follower bool) *Broker {
	t.Helper()
	b := openReplica(t, replicaOptions(fc, follower))
	if follower {
		return b
	}
	ctx := context.Background()
	_, _, err := b.PutTopic(ctx, TopicConfig{Name: "orders", Queues: 1})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "g", RetryMaxTimes: 16})
	require.NoError(t, err)
	_, _, err = b.PutGroup(ctx, GroupConfig{Name: "o", Orderly: true, RetryMaxTimes: 16})
	require.NoError(t, err)
	msgs := make([]SendMessage, 3)
	for i := range msgs {
		msgs[i] = SendMessage{Body: []byte(fmt.Sprintf("m%d", i)), ShardingKey: "k"}
	}
	_, err = b.Send(ctx, "orders", msgs)
	require.NoError(t, err)
	return b
}

// The records of the test below, field by field (server/broker/doc.go
// describes them): version | entry count | per entry group, topic, queue
// id, generation, at, client, item count | per item offset, epoch,
// deadline, failures, state. Epochs count from the clock's Unix
// nanoseconds at open (0x17979cfe3d7ed4c0).
var goldenLeaseBodies = []string{
	// A pull of two messages by client c1: one entry, two items held for
	// 30 s.
	"01 00000001 | 01 67 06 6f7264657273 00000000 00000000 0000018bcfe5687b 02 6331 00000002 " +
		"| 0000000000000000 17979cfe3d7ed4c1 0000018bcfe5ddab 0000 01 " +
		"| 0000000000000001 17979cfe3d7ed4c2 0000018bcfe5ddab 0000 01",
	// A second later, the first lease changed to a minute.
	"01 00000001 | 01 67 06 6f7264657273 00000000 00000000 0000018bcfe56c63 02 6331 00000001 " +
		"| 0000000000000000 17979cfe3d7ed4c1 0000018bcfe656c3 0000 01",
	// A second later, the other changed to 0: released, no client, no
	// deadline.
	"01 00000001 | 01 67 06 6f7264657273 00000000 00000000 0000018bcfe5704b 00 00000001 " +
		"| 0000000000000001 17979cfe3d7ed4c2 0000000000000000 0000 03",
	// The orderly group o's pull by c2: one message of the key.
	"01 00000001 | 01 6f 06 6f7264657273 00000000 00000000 0000018bcfe57433 02 6332 00000001 " +
		"| 0000000000000000 17979cfe3d7ed4c3 0000018bcfe5e963 0000 01",
	// Its nack at level 1 (1 s): failed in place, a new epoch, waiting
	// until its retry is due, one failure.
	"01 00000001 | 01 6f 06 6f7264657273 00000000 00000000 0000018bcfe5781b 02 6332 00000001 " +
		"| 0000000000000000 17979cfe3d7ed4c4 0000018bcfe57c03 0001 02",
}

// goldenLeaseBorn is the born time of each record of goldenLeaseBodies.
var goldenLeaseBorn = []int64{1_700_000_000_123, 1_700_000_001_123, 1_700_000_002_123, 1_700_000_003_123, 1_700_000_004_123}

// goldenLeaseSnapshot is the leader's leases.snapshot after the third
// record: magic "MQLS" | version | CRC-32C of the rest | the
// rmq_sys_LEASE offset covered | the epoch counter | a record body of the
// live lease (its entry's at: when the snapshot was written).
const goldenLeaseSnapshot = "4d514c53 0001 f5e35ee3 0000000000000003 17979cfe3d7ed4c2 " +
	"| 01 00000001 | 01 67 06 6f7264657273 00000000 00000000 0000018bcfe5704b 02 6331 00000001 " +
	"| 0000000000000000 17979cfe3d7ed4c1 0000018bcfe656c3 0000 01"

// goldenLeaseWrites makes the records of goldenLeaseBodies on b, whose
// clock is fc, and the leader's snapshot after the third; it returns the
// first pull's messages and the snapshot.
func goldenLeaseWrites(t *testing.T, b *Broker, fc *clockwork.FakeClock) ([]ReceivedMessage, []byte) {
	t.Helper()
	ctx := context.Background()
	got, err := b.Pull(WithClient(ctx, "c1"), PullRequest{Group: "g", Topic: "orders", MaxMessages: 2, Invisible: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, got, 2)
	fc.Advance(time.Second)
	res, err := b.ChangeLease(ctx, "g", []LeaseItem{{Receipt: got[0].Receipt, Invisible: time.Minute}})
	require.NoError(t, err)
	require.Equal(t, ReceiptOK, res[0].Status)
	fc.Advance(time.Second)
	res, err = b.ChangeLease(ctx, "g", []LeaseItem{{Receipt: got[1].Receipt, Invisible: 0}})
	require.NoError(t, err)
	require.Equal(t, ReceiptOK, res[0].Status)

	require.NoError(t, b.store.AwaitDispatch(ctx)) // the snapshot covers what is dispatched
	require.NoError(t, b.snapshotLeases())
	snap, err := b.store.ReadMeta("leases.snapshot")
	require.NoError(t, err)

	fc.Advance(time.Second)
	og, err := b.Pull(WithClient(ctx, "c2"), PullRequest{Group: "o", Topic: "orders", MaxMessages: 3, Invisible: 30 * time.Second})
	require.NoError(t, err)
	require.Len(t, og, 1, "one message of the key at a time")
	fc.Advance(time.Second)
	res, err = b.Nack(ctx, "o", []NackItem{{Receipt: og[0].Receipt, DelayLevel: 1}})
	require.NoError(t, err)
	require.Equal(t, ReceiptOK, res[0].Status)
	return got, snap
}

func TestGoldenLeaseRecords(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenLeaseAt)
	b := goldenLeaseBroker(t, fc, false)
	_, snap := goldenLeaseWrites(t, b, fc)
	if want := goldenLeaseHex(t, goldenLeaseSnapshot); !bytes.Equal(snap, want) {
		t.Errorf("snapshot:\n got %x\nwant %x", snap, want)
	}
	recs := leaseQueue(t, b, 0)
	require.Len(t, recs, len(goldenLeaseBodies))
	for i, m := range recs {
		if want := goldenLeaseHex(t, goldenLeaseBodies[i]); !bytes.Equal(m.Body, want) {
			t.Errorf("record %d:\n got %x\nwant %x", i, m.Body, want)
		}
		if m.QueueID != 0 || len(m.Properties) != 0 || m.BornTimestamp != goldenLeaseBorn[i] {
			t.Errorf("record %d: queue %d, properties %v, born %d", i, m.QueueID, m.Properties, m.BornTimestamp)
		}
	}
}

// goldenLeaseExtra are records a test appends by hand, after the ones a
// broker wrote: of the group gone (no such group), offset 5 leased at
// epoch 0x20, then at the older epoch 0x1f (which loses), then released
// at 0x20 (which wins: of one epoch, the later record); offset 6 at epoch
// 0x21 in a record after an undecodable one (version 2).
var goldenLeaseExtra = []string{
	"01 00000001 | 04 676f6e65 06 6f7264657273 00000000 00000003 0000018bcfe57c03 02 6333 00000002 " +
		"| 0000000000000005 0000000000000020 0000018bcfe5ddab 0000 01 " +
		"| 0000000000000006 0000000000000010 0000018bcfe5ddab 0002 02",
	"01 00000001 | 04 676f6e65 06 6f7264657273 00000000 00000003 0000018bcfe57c03 02 6333 00000001 " +
		"| 0000000000000005 000000000000001f 0000018bcfe5eeee 0000 01",
	"01 00000001 | 04 676f6e65 06 6f7264657273 00000000 00000003 0000018bcfe57c03 00 00000001 " +
		"| 0000000000000005 0000000000000020 0000000000000000 0000 03",
	"02 00000000",
	"01 00000001 | 04 676f6e65 06 6f7264657273 00000000 00000004 0000018bcfe57c03 02 6334 00000001 " +
		"| 0000000000000006 0000000000000021 0000018bcfe5ffff 0003 02",
}

// goldenLeaseFoldText is the fold after the records above, one line per
// offset: key@offset, then the item (epoch, deadline, failures, state)
// and its entry's generation, at and client.
var goldenLeaseFoldText = []string{
	"g/orders/0@0 epoch=17979cfe3d7ed4c1 deadline=1700000061123 failures=0 state=1 gen=0 at=1700000001123 client=\"c1\"",
	"g/orders/0@1 epoch=17979cfe3d7ed4c2 deadline=0 failures=0 state=3 gen=0 at=1700000002123 client=\"\"",
	"gone/orders/0@5 epoch=20 deadline=0 failures=0 state=3 gen=3 at=1700000005123 client=\"\"",
	"gone/orders/0@6 epoch=21 deadline=1700000038911 failures=3 state=2 gen=4 at=1700000005123 client=\"c4\"",
	"o/orders/0@0 epoch=17979cfe3d7ed4c4 deadline=1700000005123 failures=1 state=2 gen=0 at=1700000004123 client=\"c2\"",
}

// TestGoldenLeaseFold: a follower folds the records: of each offset the
// newest epoch wins, of one epoch the later record, a release stays until
// the fold is pruned, an undecodable record is skipped; its snapshot is
// the pruned fold (only o's waiting lease is still owed: g's first lease
// is acked, its second released, and gone is no group).
func TestGoldenLeaseFold(t *testing.T) {
	fc := clockwork.NewFakeClockAt(goldenLeaseAt)
	b := goldenLeaseBroker(t, fc, false)
	got, _ := goldenLeaseWrites(t, b, fc)
	ctx := context.Background()
	res, err := b.Ack(ctx, "g", []string{got[0].Receipt})
	require.NoError(t, err)
	require.Equal(t, ReceiptOK, res[0].Status)
	for _, s := range goldenLeaseExtra {
		m := &message.Message{Topic: "rmq_sys_LEASE", Body: goldenLeaseHex(t, s), BornTimestamp: fc.Now().UnixMilli()}
		require.NoError(t, b.store.PutClass(storage.ClassSystem, []*message.Message{m}, make([]storage.PutResult, 1)))
	}

	f := goldenLeaseBroker(t, fc, true)
	ship(t, b, f)
	if got := goldenLeaseFold(f); !slices.Equal(got, goldenLeaseFoldText) {
		t.Errorf("fold:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(goldenLeaseFoldText, "\n     "))
	}
	require.Equal(t, uint64(0x17979cfe3d7ed4c4), goldenLeaseTop(f), "the highest epoch folded")

	fc.Advance(time.Second)
	require.NoError(t, f.snapshotLeases())
	snap, err := f.store.ReadMeta("leases.snapshot")
	require.NoError(t, err)
	want := goldenLeaseHex(t, goldenLeaseFollowerSnapshot)
	if !bytes.Equal(snap, want) {
		t.Errorf("follower snapshot:\n got %x\nwant %x", snap, want)
	}
	if got := goldenLeaseFold(f); !slices.Equal(got, goldenLeaseFoldText[4:]) {
		t.Errorf("pruned fold:\n got %s", strings.Join(got, "\n     "))
	}
}

// goldenLeaseFollowerSnapshot: the follower's, covering the ten records,
// the epoch counter the highest epoch folded, o's lease as folded.
const goldenLeaseFollowerSnapshot = "4d514c53 0001 048673ed 000000000000000a 17979cfe3d7ed4c4 " +
	"| 01 00000001 | 01 6f 06 6f7264657273 00000000 00000000 0000018bcfe5781b 02 6332 00000001 " +
	"| 0000000000000000 17979cfe3d7ed4c4 0000018bcfe57c03 0001 02"

// goldenLeaseFold is b's follower fold as goldenLeaseFoldText's lines, in
// order.
func goldenLeaseFold(b *Broker) []string {
	var out []string
	var rec leaselog.Record
	b.leases.WithFold(func(f *leaselog.Fold) { rec = f.Record() })
	for _, e := range rec.Entries {
		f := e.Items[0]
		out = append(out, fmt.Sprintf("%s/%s/%d@%d epoch=%x deadline=%d failures=%d state=%d gen=%d at=%d client=%q",
			e.Key.Group, e.Key.Topic, e.Key.QueueID, f.Offset, f.Epoch, f.Deadline, f.Failures, f.State, e.Generation, e.At, e.Client))
	}
	sort.Strings(out)
	return out
}

// goldenLeaseTop is the highest epoch b's follower fold has seen.
func goldenLeaseTop(b *Broker) uint64 { return b.leases.Top() }
