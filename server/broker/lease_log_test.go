package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// Durable leases (lease_log.go): a lease survives a restart, clean or a
// crash, with its receipt and its deadline.

func (bd *bundle) ackStatuses(t *testing.T, group string, rs ...string) []broker.ReceiptStatus {
	t.Helper()
	res, err := bd.b.Ack(bd.ctx, group, rs)
	require.NoError(t, err)
	out := make([]broker.ReceiptStatus, len(res))
	for i, r := range res {
		out[i] = r.Status
	}
	return out
}

func statuses(n int, s broker.ReceiptStatus) []broker.ReceiptStatus {
	out := make([]broker.ReceiptStatus, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestLeaseSurvivesRestart: messages leased before a clean restart and
// before a crash (a copy of the live directory) are not offered again
// while their leases run, and their receipts ack ok afterwards.
func TestLeaseSurvivesRestart(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			bd := setup(t)
			bd.send(t, "lt", "a", "b", "c", "d", "e", "f")
			first := bd.pull(t, "g", "lt", 4, time.Second, time.Minute)
			require.Len(t, first, 4)
			if crash {
				bd.crashImage(t, brokertest.Options)
			} else {
				bd.restart(t)
			}
			rec := bd.b.LeasesRecovered()
			require.Equal(t, 4, rec.Leases, "%+v", rec)
			rest := bd.pull(t, "g", "lt", 32, 200*time.Millisecond, time.Minute)
			require.Len(t, rest, 2, "only the two messages never leased are offered")
			for _, m := range rest {
				require.NotContains(t, bodies(first), string(m.Body))
			}
			require.Equal(t, statuses(4, broker.ReceiptOK), bd.ackStatuses(t, "g", receipts(first)...), "the receipts of before the restart settle their leases")
			require.Equal(t, statuses(2, broker.ReceiptOK), bd.ackStatuses(t, "g", receipts(rest)...))
			require.Empty(t, bd.pull(t, "g", "lt", 32, 100*time.Millisecond, time.Minute))
			bd.restart(t)
			require.Empty(t, bd.pull(t, "g", "lt", 32, 100*time.Millisecond, time.Minute), "nothing acked comes back")
			require.Zero(t, bd.b.LeasesRecovered().Leases)
		})
	}
}

// TestLeaseEndsAfterRestart: a lease restored by a restart still ends at
// its deadline, as an expired lease: the message is not offered before
// it, then comes back through the retry path, and the old receipt is
// refused.
func TestLeaseEndsAfterRestart(t *testing.T) {
	bd := setup(t)
	bd.send(t, "le", "x")
	const lease = 1500 * time.Millisecond
	start := time.Now()
	first := bd.pull(t, "g", "le", 1, time.Second, lease)
	require.Len(t, first, 1)
	bd.restart(t)
	// A long poll that ends just before the deadline sees nothing.
	early := bd.pull(t, "g", "le", 1, time.Until(start.Add(lease))-100*time.Millisecond, time.Minute)
	require.Empty(t, early, "offered again %v before its restored lease ended", time.Until(start.Add(lease)))
	var again []broker.ReceivedMessage
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		again = bd.pull(t, "g", "le", 1, 200*time.Millisecond, time.Minute)
		return len(again) == 1, "the message never came back after its lease ended"
	})
	require.False(t, time.Now().Before(start.Add(lease)), "redelivered before the lease ended")
	require.Equal(t, "x", string(again[0].Body))
	require.Equal(t, int32(1), again[0].ReconsumeTimes, "an expired lease goes through the retry path")
	require.NotEmpty(t, again[0].OriginMessageID)
	require.Equal(t, []broker.ReceiptStatus{broker.ReceiptExpired}, bd.ackStatuses(t, "g", first[0].Receipt))
	require.Equal(t, []broker.ReceiptStatus{broker.ReceiptOK}, bd.ackStatuses(t, "g", again[0].Receipt))
}

// TestChangeLeaseSurvivesRestart: an extended lease keeps its new
// deadline across a restart, and a lease changed to 0 stays given up: the
// message is offered at once, as the same copy (a postponement, not a
// failure).
func TestChangeLeaseSurvivesRestart(t *testing.T) {
	bd := setup(t)
	bd.send(t, "cl", "long", "zero")
	got := bd.pull(t, "g", "cl", 2, time.Second, 300*time.Millisecond)
	require.Len(t, got, 2)
	byBody := map[string]broker.ReceivedMessage{}
	for _, m := range got {
		byBody[string(m.Body)] = m
	}
	res, err := bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{
		{Receipt: byBody["long"].Receipt, Invisible: time.Minute},
		{Receipt: byBody["zero"].Receipt, Invisible: 0},
	})
	require.NoError(t, err)
	require.Equal(t, broker.ReceiptOK, res[0].Status)
	require.Equal(t, broker.ReceiptOK, res[1].Status)
	bd.restart(t)
	zero := bd.pull(t, "g", "cl", 32, time.Second, time.Minute)
	require.Equal(t, []string{"zero"}, bodiesOf(zero), "the lease changed to 0 is not restored")
	require.Equal(t, int32(0), zero[0].ReconsumeTimes)
	require.Equal(t, byBody["zero"].MessageID, zero[0].MessageID, "offered again as the same copy")
	time.Sleep(400 * time.Millisecond) // on purpose: past the first deadline (300 ms), which the change replaced
	require.Empty(t, bd.pull(t, "g", "cl", 32, 0, time.Minute), "the extended lease ended at its old deadline")
	require.Equal(t, []broker.ReceiptStatus{broker.ReceiptOK, broker.ReceiptExpired, broker.ReceiptOK},
		bd.ackStatuses(t, "g", byBody["long"].Receipt, byBody["zero"].Receipt, zero[0].Receipt))
	// And a shortened lease: restored with the new, earlier deadline.
	bd.send(t, "cl", "short")
	s := bd.pull(t, "g", "cl", 1, time.Second, time.Hour)
	require.Len(t, s, 1)
	_, err = bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: s[0].Receipt, Invisible: 200 * time.Millisecond}})
	require.NoError(t, err)
	bd.restart(t)
	brokertest.Eventually(t, 10*time.Second, func() (bool, string) {
		again := bd.pull(t, "g", "cl", 1, 100*time.Millisecond, time.Minute)
		return len(again) == 1 && again[0].ReconsumeTimes == 1, "the shortened lease was restored with its old deadline"
	})
}

// TestLeaseEpochsAfterRestart: a lease granted after a restart has a new
// epoch: the receipt of an earlier lease of the same message is stale.
func TestLeaseEpochsAfterRestart(t *testing.T) {
	bd := setup(t)
	bd.send(t, "ep", "m")
	first := bd.pull(t, "g", "ep", 1, time.Second, time.Minute)
	require.Len(t, first, 1)
	_, err := bd.b.ChangeLease(bd.ctx, "g", []broker.LeaseItem{{Receipt: first[0].Receipt, Invisible: 0}})
	require.NoError(t, err)
	bd.restart(t)
	second := bd.pull(t, "g", "ep", 1, time.Second, time.Minute)
	require.Len(t, second, 1)
	require.NotEqual(t, first[0].Receipt, second[0].Receipt)
	bd.restart(t)
	require.Equal(t, []broker.ReceiptStatus{broker.ReceiptExpired, broker.ReceiptOK}, bd.ackStatuses(t, "g", first[0].Receipt, second[0].Receipt))
}

// TestLeaseAfterResetIsDropped: an offset reset drops the group's leases
// on the queue; a restart does not bring them back.
func TestLeaseAfterResetIsDropped(t *testing.T) {
	bd := setup(t)
	_, _, err := bd.b.PutTopic(bd.ctx, broker.TopicConfig{Name: "rz", Queues: 1})
	require.NoError(t, err)
	bd.send(t, "rz", "a", "b")
	got := bd.pull(t, "g", "rz", 2, time.Second, time.Minute)
	require.Len(t, got, 2)
	require.NoError(t, bd.b.CommitOffsets(bd.ctx, "g", []broker.OffsetCommit{{Topic: "rz", QueueID: 0, Offset: 0}}))
	bd.restart(t)
	again := bd.pull(t, "g", "rz", 32, time.Second, time.Minute)
	require.Equal(t, map[string]int{"a": 1, "b": 1}, bodies(again), "after the reset both are delivered again")
}
