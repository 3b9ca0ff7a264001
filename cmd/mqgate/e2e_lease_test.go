package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/servertest"
)

// TestKill9KeepsLeases: leases granted over HTTP outlive a kill -9 of the
// server (the real binary, --flush sync). After the restart no pull gets a
// leased message before its lease ends, the receipts of before the kill
// ack ok, a lease extended before the kill keeps its new end, and a lease
// that ends unacknowledged comes back through the retry path
// (reconsumeTimes 1) no earlier than its end.
func TestKill9KeepsLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the server")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	p := startServer(t, dir, addr)
	base := "http://" + addr
	ctx := context.Background()
	_, err := call(ctx, http.MethodPut, base+"/v1/topics/lk", map[string]any{"queues": 2}, nil)
	require.NoError(t, err)
	for _, body := range []string{"a", "b", "c", "d"} {
		_, err := call(ctx, http.MethodPost, base+"/v1/topics/lk/messages", wireMsg{Body: body}, nil)
		require.NoError(t, err)
	}
	const lease, longer = 10 * time.Second, 13 * time.Second // a restart of the race-built binary on a loaded machine takes seconds
	leasedAt := time.Now()
	var got pulled
	_, err = call(ctx, http.MethodPost, base+"/v1/groups/g/topics/lk/pull", map[string]any{"maxMessages": 4, "invisibleMs": lease.Milliseconds()}, &got)
	require.NoError(t, err)
	require.Len(t, got.Messages, 4)
	receipt := map[string]string{}
	for _, m := range got.Messages {
		receipt[m.Body] = m.Receipt
	}
	extendedAt := time.Now()
	var changed receiptResults
	_, err = call(ctx, http.MethodPost, base+"/v1/groups/g/leases",
		map[string]any{"items": []map[string]any{{"receipt": receipt["d"], "invisibleMs": longer.Milliseconds()}}}, &changed)
	require.NoError(t, err)
	require.Equal(t, "ok", changed.Results[0].Status)

	p.kill9()
	p = startServer(t, dir, addr)
	_ = p

	var early pulled
	_, err = call(ctx, http.MethodPost, base+"/v1/groups/g/topics/lk/pull", map[string]any{"maxMessages": 32, "waitMs": 500}, &early)
	require.NoError(t, err)
	require.True(t, time.Now().Before(leasedAt.Add(lease)), "the restart took longer than the lease; the test checks nothing")
	require.Empty(t, early.Messages, "a message leased before the kill was delivered again before its lease ended")

	var acked receiptResults
	_, err = call(ctx, http.MethodPost, base+"/v1/groups/g/ack", map[string]any{"receipts": []string{receipt["a"], receipt["b"]}}, &acked)
	require.NoError(t, err)
	require.Equal(t, "ok", acked.Results[0].Status, "a receipt of before the kill")
	require.Equal(t, "ok", acked.Results[1].Status)

	due := map[string]time.Time{"c": leasedAt.Add(lease), "d": extendedAt.Add(longer)}
	seen := map[string]bool{}
	servertest.Eventually(t, 30*time.Second, func() (bool, string) {
		var again pulled
		_, err := call(ctx, http.MethodPost, base+"/v1/groups/g/topics/lk/pull", map[string]any{"maxMessages": 32, "waitMs": 100, "invisibleMs": 60_000}, &again)
		returned := time.Now()
		require.NoError(t, err)
		for _, m := range again.Messages {
			end, ok := due[m.Body]
			require.True(t, ok, "%s (acked) delivered again", m.Body)
			require.False(t, returned.Before(end), "%s delivered %v before its lease ended", m.Body, end.Sub(returned))
			require.Equal(t, 1, m.ReconsumeTimes, "%s: an expired lease takes the retry path", m.Body)
			seen[m.Body] = true
		}
		return seen["c"] && seen["d"], "c and d not delivered again after their leases"
	})
	var stale receiptResults
	_, err = call(ctx, http.MethodPost, base+"/v1/groups/g/ack", map[string]any{"receipts": []string{receipt["c"]}}, &stale)
	require.NoError(t, err)
	require.Equal(t, "expired", stale.Results[0].Status, "the receipt of the expired lease")
}
