package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
)

// TestE2ELostReceiptKeyIsLoggedLoudly: config/receipt.key deleted from a
// data dir that holds messages is replaced at start-up, and the log says
// so at error level with what it means: the receipts issued before are
// invalid (an ack with one answers "invalid") and their messages come
// again after their leases. A first start on an empty data dir makes its
// key without a word.
func TestE2ELostReceiptKeyIsLoggedLoudly(t *testing.T) {
	t.Parallel()
	var first syncBuffer
	e := startE2E(t, func(c *server.Config) { c.LogOutput, c.LogLevel = &first, "info" })
	require.NotContains(t, first.String(), "receipt.key")
	e.Send(t, "keyed", api.SendMessage{Body: "leased across the restart"})
	held := e.PullN(t, "g", "keyed", 1, 800, 10*time.Second)[0]
	e.Close(t)

	require.NoError(t, os.Remove(filepath.Join(e.Cfg.DataDir, "config", "receipt.key")))
	var logs syncBuffer
	e2 := &e2eServer{e.Reopen(t, func(c *server.Config) { c.LogOutput = &logs })}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "receipt.key") {
			require.NoError(t, json.Unmarshal([]byte(l), &line), l)
			break
		}
	}
	require.NotNil(t, line, "no log line names receipt.key:\n%s", logs.String())
	require.Equal(t, "error", line["level"])
	msg := line["message"].(string)
	for _, want := range []string{"receipt", "invalid", "delivered again", "lease"} {
		require.Contains(t, msg, want)
	}
	res := e2.Receipts(t, "g", "ack", api.AckRequest{Receipts: []string{held.Receipt}})
	require.Equal(t, "invalid", res[0].Status, "the old receipt")
	require.Contains(t, res[0].Error, "receipt key")
	again := e2.PullN(t, "g", "keyed", 1, 30_000, 10*time.Second)[0]
	require.Equal(t, held.MessageID, again.OriginMessageID, "delivered again after its lease")
	require.Equal(t, []string{"ok"}, e2.Ack(t, "g", again.Receipt))
}
