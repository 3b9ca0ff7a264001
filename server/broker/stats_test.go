package broker_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// sum adds up the counts of m.
func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// TestStatsLabelLimit: at most MetricsMaxLabelValues topics and groups
// have counts of their own, the rest go to OtherLabel, and deleting a
// topic or group moves its counts there and frees its place; every sum
// stays what was counted.
func TestStatsLabelLimit(t *testing.T) {
	t.Parallel()
	opts := brokertest.Options(t.TempDir())
	opts.MetricsMaxLabelValues = 3
	bd := &bundle{b: brokertest.Open(t, opts), ctx: t.Context()}

	for i := range 6 {
		bd.send(t, fmt.Sprintf("topic-%d", i), "a", "b")
	}
	st := bd.b.Stats()
	require.Equal(t, map[string]uint64{"topic-0": 2, "topic-1": 2, "topic-2": 2, broker.OtherLabel: 6}, st.Sent)
	require.Len(t, st.SentBytes, 4)
	require.Equal(t, uint64(12), sum(st.SentBytes))

	require.NoError(t, bd.b.DeleteTopic(bd.ctx, "topic-1"))
	st = bd.b.Stats()
	require.Equal(t, map[string]uint64{"topic-0": 2, "topic-2": 2, broker.OtherLabel: 8}, st.Sent, "a deleted topic's counts move to _other")
	bd.send(t, "topic-5", "c")
	require.Equal(t, uint64(1), bd.b.Stats().Sent["topic-5"], "the freed place goes to the next topic counted")

	for i := range 5 {
		group := fmt.Sprintf("group-%d", i)
		msgs := bd.pull(t, group, "topic-0", 2, 0, 0)
		require.Len(t, msgs, 2)
		res, err := bd.b.Ack(bd.ctx, group, receipts(msgs))
		require.NoError(t, err)
		require.Len(t, res, 2)
	}
	st = bd.b.Stats()
	require.Len(t, st.Delivered, 4)
	require.Equal(t, uint64(4), st.Delivered[broker.OtherLabel])
	require.Equal(t, uint64(10), sum(st.Acked))
	require.Contains(t, st.Acked, "group-0")

	require.NoError(t, bd.b.DeleteGroup(bd.ctx, "group-0"))
	st = bd.b.Stats()
	require.NotContains(t, st.Acked, "group-0")
	require.NotContains(t, st.Delivered, "group-0")
	require.Equal(t, uint64(10), sum(st.Acked))
	require.Equal(t, uint64(6), st.Acked[broker.OtherLabel])
}
