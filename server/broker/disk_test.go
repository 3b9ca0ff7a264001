package broker_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
	"github.com/mqgate/mqgate/storage/message"
)

// fakeDisk is a storage DiskUsage whose answer the test sets.
type fakeDisk struct{ bits atomic.Uint64 }

func (d *fakeDisk) set(u float64) { d.bits.Store(math.Float64bits(u)) }
func (d *fakeDisk) usage(string) (float64, error) {
	return math.Float64frombits(d.bits.Load()), nil
}

// pressureBundle is a broker on 128 KiB segments whose disk reads usage
// (the file system is the test's to say), with retention every 10 ms, and
// a one-queue topic "t" holding n messages of 2 KB ("m00000", …) that
// group "g" consumes.
func pressureBundle(t *testing.T, usage float64, n int, tune func(*broker.Options)) (*bundle, *fakeDisk, []broker.SendResult) {
	t.Helper()
	disk := &fakeDisk{}
	disk.set(usage)
	opts := brokertest.Options(t.TempDir())
	opts.MaxMessageSize = 4 << 10
	opts.Storage.SegmentSize = 128 << 10
	opts.Storage.RetentionInterval = 10 * time.Millisecond
	opts.Storage.DiskCheckInterval = 5 * time.Millisecond
	opts.Storage.DiskUsage = disk.usage
	if tune != nil {
		tune(&opts)
	}
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "t", Queues: 1})
	require.NoError(t, err)
	_, _, err = bd.b.PutGroup(bd.ctx, broker.GroupConfig{Name: "g", Subscriptions: []broker.Subscription{{Topic: "t"}}})
	require.NoError(t, err)
	var sent []broker.SendResult
	for i := 0; i < n; i += 50 {
		batch := make([]broker.SendMessage, 0, 50)
		for j := i; j < min(i+50, n); j++ {
			batch = append(batch, broker.SendMessage{Body: []byte(fmt.Sprintf("m%05d%s", j, strings.Repeat("x", 2000)))})
		}
		res, err := bd.b.Send(bd.ctx, "t", batch)
		require.NoError(t, err)
		sent = append(sent, res...)
	}
	return bd, disk, sent
}

// physical is the CommitLog offset a message id names.
func physical(t *testing.T, id string) int64 {
	t.Helper()
	mid, err := message.ParseID(id)
	require.NoError(t, err)
	return mid.Offset()
}

// consume pulls and acks n messages of "t" for "g" and returns their bodies'
// names in order of queue offset.
func (bd *bundle) consume(t *testing.T, n int) []string {
	t.Helper()
	var names []string
	for len(names) < n {
		got := bd.pull(t, "g", "t", min(32, n-len(names)), time.Second, time.Minute)
		require.NotEmpty(t, got, "consumed %d of %d", len(names), n)
		res, err := bd.b.Ack(bd.ctx, "g", receipts(got))
		require.NoError(t, err)
		for i, m := range got {
			require.Equal(t, broker.ReceiptOK, res[i].Status)
			names = append(names, string(m.Body[:6]))
		}
	}
	return names
}

// TestDiskPressureNeverDeletesUnconsumed: above the clean ratio retention
// deletes, early, only the segments group g has consumed; everything from
// g's committed offset on stays and is delivered. Above the send ceiling
// sends get ErrDiskFull while acks, nacks and offset commits go on; below
// it sends resume without a restart.
func TestDiskPressureNeverDeletesUnconsumed(t *testing.T) {
	t.Parallel()
	bd, disk, sent := pressureBundle(t, 0.80, 300, nil)
	require.Equal(t, []string{"m00000", "m00001"}, bd.consume(t, 150)[:2])
	segment := int64(128 << 10)
	firstUnconsumed := physical(t, sent[150].MessageID)
	want := firstUnconsumed - firstUnconsumed%segment
	require.Positive(t, want, "the test needs consumed segments")
	require.Eventually(t, func() bool {
		st, err := bd.b.Status(bd.ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, st.CommitLogMin, want, "a segment holding unconsumed messages was deleted")
		return st.CommitLogMin == want
	}, 10*time.Second, time.Millisecond, "the consumed segments go under pressure")

	// Sends are refused above the send ceiling; consumers go on.
	disk.set(0.90)
	require.Eventually(t, func() bool {
		_, err := bd.b.Send(bd.ctx, "t", []broker.SendMessage{{Body: []byte("refused?")}})
		if err == nil {
			sent = append(sent, broker.SendResult{}) // slipped in before the sample
		}
		return err != nil
	}, 10*time.Second, time.Millisecond)
	_, err := bd.b.Send(bd.ctx, "t", []broker.SendMessage{{Body: []byte("refused")}})
	require.ErrorIs(t, err, broker.ErrDiskFull)
	require.Contains(t, strings.Join(bd.b.Degraded(), "\n"), "above the send ceiling")
	require.NoError(t, bd.b.Ready(), "a full disk does not make the broker unready")
	names := bd.consume(t, 50)
	require.Equal(t, "m00150", names[0], "nothing unconsumed was deleted")
	got := bd.pull(t, "g", "t", 2, time.Second, time.Minute)
	require.Len(t, got, 2)
	res, err := bd.b.Nack(bd.ctx, "g", []broker.NackItem{{Receipt: got[0].Receipt, DelayLevel: 1}, {Receipt: got[1].Receipt, DelayLevel: -1}})
	require.NoError(t, err, "nacks write their retry and dead-letter copies above the send ceiling")
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	require.NoError(t, bd.b.CommitOffsets(bd.ctx, "other", []broker.OffsetCommit{{Topic: "t", QueueID: 0, Offset: 290}}))
	require.Eventually(t, func() bool {
		for _, m := range bd.pull(t, "g", "t", 32, 100*time.Millisecond, time.Minute) {
			if m.ReconsumeTimes == 1 {
				require.Equal(t, string(got[0].Body), string(m.Body))
				return true
			}
		}
		return false
	}, 10*time.Second, time.Millisecond, "the retry copy is delivered")

	// Space returns: sends resume without a restart.
	disk.set(0.50)
	require.Eventually(t, func() bool {
		_, err := bd.b.Send(bd.ctx, "t", []broker.SendMessage{{Body: []byte("again")}})
		return err == nil
	}, 10*time.Second, time.Millisecond)
	// Group other appeared (by its commit) while retention was running: a
	// pass that began before it may count other's queues it never consumed.
	// g, whose offsets were known all along, lost nothing.
	require.Zero(t, bd.b.Stats().RetentionDropped["g"], "nothing unconsumed was dropped")
}

// TestDiskPressureDeleteIsOptInAndCounted: with DiskPressureDelete the
// oldest segments go under pressure although g has consumed nothing, and
// every message g loses is counted (metric, progress) and the rest is
// delivered from the new minimum.
func TestDiskPressureDeleteIsOptInAndCounted(t *testing.T) {
	t.Parallel()
	bd, disk, _ := pressureBundle(t, 0.80, 300, func(o *broker.Options) { o.Storage.DiskPressureDelete = true })
	require.Eventually(t, func() bool {
		st, err := bd.b.Status(bd.ctx)
		require.NoError(t, err)
		return st.CommitLogMin >= 2*128<<10
	}, 10*time.Second, time.Millisecond)
	disk.set(0.10) // stop deleting
	// Every message below the new minimum is counted, and delivery goes on
	// from it. A retention pass that began before the disk emptied may still
	// delete a segment meanwhile: then the minimum moves and the check is
	// made again; a delivery that does not start at an unchanged minimum
	// never passes.
	require.Eventually(t, func() bool {
		progress := func() (int64, bool) {
			prog, err := bd.b.Progress(bd.ctx, "g")
			require.NoError(t, err)
			require.Len(t, prog, 1)
			lost := prog[0].ConsumerOffset
			return lost, lost > 0 && lost == prog[0].DroppedUnconsumed && uint64(lost) == bd.b.Stats().RetentionDropped["g"]
		}
		lost, counted := progress()
		if !counted {
			return false
		}
		got := bd.pull(t, "g", "t", 1, 200*time.Millisecond, time.Minute)
		if len(got) != 1 {
			return false
		}
		if again, _ := progress(); again != lost {
			// Moved meanwhile: give the message back for the next try.
			_, err := bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: got[0].Receipt}})
			require.NoError(t, err)
			return false
		}
		return fmt.Sprintf("m%05d", lost) == string(got[0].Body[:6])
	}, 10*time.Second, time.Millisecond, "every lost message counted, delivery goes on from the new minimum")
}

// TestRetentionKeepsUndeliveredDelayedMessages: a delay-level entry is
// not carried forward, so retention keeps its segment until the scheduler
// has delivered it, however old the segment is.
func TestRetentionKeepsUndeliveredDelayedMessages(t *testing.T) {
	t.Parallel()
	opts := retentionOptions(t)
	opts.DelayLevels = []time.Duration{1500 * time.Millisecond}
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	_, err := bd.b.Send(bd.ctx, "dl", []broker.SendMessage{{Body: []byte("delayed"), DelayLevel: 1}})
	require.NoError(t, err)
	filler := strings.Repeat("f", 3000)
	for i := 0; i < 200; i++ {
		bd.send(t, "filler", filler)
	}
	require.Eventually(t, func() bool {
		st, err := bd.b.Status(bd.ctx)
		require.NoError(t, err)
		if st.CommitLogMin > 0 {
			require.Positive(t, bd.b.Stats().Scheduled, "the segment of an undelivered delayed message was deleted")
		}
		return st.CommitLogMin > 2*128<<10
	}, 20*time.Second, time.Millisecond)
	got := bd.pull(t, "g", "dl", 10, 15*time.Second, time.Minute) // returns at delivery; the wait only bounds a loaded machine
	require.Len(t, got, 1)
	require.Equal(t, "delayed", string(got[0].Body))
}

// TestRefusedNackOffersTheMessageAgain: above the system ceiling even a
// nack's retry copy is refused (ErrDiskFull); the message is then
// offered again at once, not stranded until a restart.
func TestRefusedNackOffersTheMessageAgain(t *testing.T) {
	t.Parallel()
	bd, disk, _ := pressureBundle(t, 0.10, 3, nil)
	got := bd.pull(t, "g", "t", 1, time.Second, time.Minute)
	require.Len(t, got, 1)
	disk.set(0.97)
	var err error
	require.Eventually(t, func() bool {
		_, err = bd.b.Send(bd.ctx, "t", []broker.SendMessage{{Body: []byte("probe")}})
		return err != nil
	}, 10*time.Second, time.Millisecond)
	_, err = bd.b.Nack(bd.ctx, "g", []broker.NackItem{{Receipt: got[0].Receipt}})
	require.ErrorIs(t, err, broker.ErrDiskFull)
	require.Contains(t, strings.Join(bd.b.Degraded(), "\n"), "above the system ceiling")
	disk.set(0.10)
	start := time.Now()
	var again []broker.ReceivedMessage
	require.Eventually(t, func() bool {
		// A pull records its leases: refused too until the disk is sampled again.
		again, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "t", MaxMessages: 1, Wait: time.Second, Invisible: time.Minute})
		if err != nil {
			require.ErrorIs(t, err, broker.ErrDiskFull)
		}
		return err == nil
	}, 10*time.Second, time.Millisecond)
	t.Logf("offered again after %v", time.Since(start))
	require.Len(t, again, 1)
	require.Equal(t, got[0].Body, again[0].Body, "the message whose nack was refused is offered again")
}

// TestRefusedPullLeasesNothing: above the system ceiling a pull cannot
// record its leases, so it is refused (ErrDiskFull) and leases nothing:
// once there is room again the same messages are offered at once, as
// first deliveries.
func TestRefusedPullLeasesNothing(t *testing.T) {
	t.Parallel()
	bd, disk, sent := pressureBundle(t, 0.10, 3, nil)
	disk.set(0.97)
	want := len(sent)
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		_, err := bd.b.Send(bd.ctx, "t", []broker.SendMessage{{Body: []byte("probe")}})
		if err == nil {
			want++ // stored before the sampler saw the full disk
		}
		return err != nil, "the disk sampler has not seen the full disk"
	})
	for range 2 { // refused, and nothing leased behind the error
		_, err := bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "t", MaxMessages: 8, Invisible: time.Hour})
		require.ErrorIs(t, err, broker.ErrDiskFull)
	}
	var err error
	disk.set(0.10)
	var got []broker.ReceivedMessage
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		got, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "t", MaxMessages: 8, Invisible: time.Hour})
		return err == nil, fmt.Sprintf("pull: %v", err)
	})
	require.Equal(t, want, len(got), "every message is offered again, none held by a refused pull's lease")
	for _, m := range got {
		require.Zero(t, m.ReconsumeTimes)
	}
}

// TestRefusedPullSkipsNothing: a pull refused for want of room records
// neither its leases nor the offsets its filter passed over, and applies
// neither: once there is room again the next pulls pass over those
// offsets again and record them, so the group's committed offset reaches
// the queue's end when the matching messages are acked (not stuck below
// the first message the refused pull passed over).
func TestRefusedPullSkipsNothing(t *testing.T) {
	t.Parallel()
	bd, disk, _ := pressureBundle(t, 0.10, 0, nil)
	var batch []broker.SendMessage
	for i, tag := range []string{"B", "A", "B", "A"} {
		batch = append(batch, broker.SendMessage{Body: []byte(fmt.Sprintf("m%d", i)), Tag: tag})
	}
	_, err := bd.b.Send(bd.ctx, "t", batch)
	require.NoError(t, err)
	disk.set(0.97)
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		_, err := bd.b.Send(bd.ctx, "t", []broker.SendMessage{{Body: []byte("probe"), Tag: "C"}})
		return err != nil, "the disk sampler has not seen the full disk"
	})
	_, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "t", MaxMessages: 8, Invisible: time.Hour, TagExpression: "A"})
	require.ErrorIs(t, err, broker.ErrDiskFull)

	disk.set(0.10)
	var got []broker.ReceivedMessage
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		got, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "t", MaxMessages: 8, Invisible: time.Hour, TagExpression: "A"})
		return err == nil, fmt.Sprintf("pull: %v", err)
	})
	require.Len(t, got, 2)
	res, err := bd.b.Ack(bd.ctx, "g", receipts(got))
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, broker.ReceiptOK, r.Status)
	}
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		ps, err := bd.b.GetOffsets(bd.ctx, "g")
		require.NoError(t, err)
		for _, p := range ps {
			if p.QueueID == 0 && p.ConsumerOffset == p.BrokerOffset {
				return true, ""
			}
		}
		return false, fmt.Sprintf("the committed offset stays below the queue's end: %+v", ps)
	})
}

// TestRefusedLeaseChangeChangesNothing: a lease change that cannot be
// recorded (the disk above the system ceiling) is refused and changes
// nothing: the lease ends when it would have, and the message is
// delivered again then, not an hour later.
func TestRefusedLeaseChangeChangesNothing(t *testing.T) {
	t.Parallel()
	bd, disk, _ := pressureBundle(t, 0.10, 1, nil)
	got := bd.pull(t, "g", "t", 1, time.Second, 2*time.Second)
	require.Len(t, got, 1)
	disk.set(0.97)
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		_, err := bd.b.Send(bd.ctx, "t", []broker.SendMessage{{Body: []byte("probe")}})
		return err != nil, "the disk sampler has not seen the full disk"
	})
	_, err := bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: got[0].Receipt, Invisible: time.Hour}})
	require.ErrorIs(t, err, broker.ErrDiskFull)
	disk.set(0.10)
	var again []broker.ReceivedMessage
	brokertest.Eventually(t, 15*time.Second, func() (bool, string) {
		again, err = bd.b.Pull(bd.ctx, broker.PullRequest{Group: "g", Topic: "t", MaxMessages: 8, Wait: time.Second, Invisible: time.Hour})
		for _, m := range again {
			if string(m.Body) == string(got[0].Body) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("pull: %v, %d messages, not the one whose lease change was refused", err, len(again))
	})
}
