package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
)

// TestKill9KeepsTraces: what is durable when the server (the real binary,
// --flush sync) is killed with SIGKILL is traced after the restart — the
// deliveries, acks and nacks of the moment before the kill, which the
// trace follower may not have reached, included — and listed once.
func TestKill9KeepsTraces(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the server")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	p := startServer(t, dir, addr, "--message-trace")
	base := "http://" + addr
	ctx := context.Background()
	const n = 12
	ids := map[string]string{} // body -> message id
	for i := 0; i < n; i++ {
		var res api.SendResponse
		_, err := call(ctx, http.MethodPost, base+"/v1/topics/kt/messages", wireMsg{Body: fmt.Sprint("m", i)}, &res)
		require.NoError(t, err)
		ids[fmt.Sprint("m", i)] = res.Results[0].MessageID
	}
	var got pulled
	_, err := call(ctx, http.MethodPost, base+"/v1/groups/g/topics/kt/pull", map[string]any{"maxMessages": n, "waitMs": 2000, "invisibleMs": 60_000}, &got)
	require.NoError(t, err)
	require.Len(t, got.Messages, n)
	var acks []string
	var nacks []map[string]any
	acked, nacked := map[string]bool{}, map[string]bool{}
	for i, m := range got.Messages {
		if i%2 == 0 {
			acks, acked[m.Body] = append(acks, m.Receipt), true
		} else {
			nacks, nacked[m.Body] = append(nacks, map[string]any{"receipt": m.Receipt, "delayMs": 3_600_000, "reason": "later"}), true
		}
	}
	_, err = call(ctx, http.MethodPost, base+"/v1/groups/g/ack", map[string]any{"receipts": acks}, nil)
	require.NoError(t, err)
	_, err = call(ctx, http.MethodPost, base+"/v1/groups/g/nack", map[string]any{"items": nacks}, nil)
	require.NoError(t, err)
	p.kill9()
	startServer(t, dir, addr, "--message-trace")

	for body, id := range ids {
		var tr api.MessageTrace
		_, err := call(ctx, http.MethodGet, base+"/v1/messages/"+id+"/trace", nil, &tr)
		require.NoError(t, err)
		var types []string
		for _, ev := range tr.Events {
			types = append(types, ev.Type)
		}
		require.False(t, tr.Partial, "%s: the follower caught up after the restart", body)
		switch {
		case acked[body]:
			require.Equal(t, []string{"stored", "delivered", "acked"}, types, body)
		case nacked[body]:
			require.Equal(t, []string{"stored", "delivered", "nacked", "retried"}, types, body)
			require.Equal(t, "later", tr.Events[2].Reason)
			due, err := time.Parse(time.RFC3339Nano, tr.Events[3].DueAt)
			require.NoError(t, err)
			require.WithinDuration(t, time.Now().Add(time.Hour), due, time.Minute)
		default:
			t.Fatalf("%s was not pulled", body)
		}
	}
}
