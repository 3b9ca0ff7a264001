package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// TestE2EReceiptKeysLiveInTheLog: the receipt keyring is kept in the
// CommitLog. A receipt handed out before a restart still acks after the
// keyring's snapshot and the old receipt.key are deleted; a rotation
// (POST /v1/broker/receipt-keys/rotate) signs new receipts with a new key
// while receipts of the seven keys before it stay valid, and a receipt of
// a key eight rotations back answers "invalid".
func TestE2EReceiptKeysLiveInTheLog(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	rotate := func(t *testing.T, e *e2eServer) api.ReceiptKeys {
		t.Helper()
		var keys api.ReceiptKeys
		servertest.Decode(t, e.Do(t, http.MethodPost, "/v1/broker/receipt-keys/rotate", "", nil, nil), http.StatusOK, &keys)
		return keys
	}
	for i := 0; i < 3; i++ {
		e.Send(t, "keyed", api.SendMessage{Body: "m"})
	}
	first := e.PullN(t, "g", "keyed", 1, 600_000, 10*time.Second)[0]
	keys := rotate(t, e)
	require.Equal(t, 2, keys.SigningKeyID)
	require.Equal(t, []int{1, 2}, keys.KeyIDs)
	second := e.PullN(t, "g", "keyed", 1, 600_000, 10*time.Second)[0]
	require.NotEqual(t, first.Receipt[:4], second.Receipt[:4], "the receipt names another key")

	cfg := filepath.Join(e.Cfg.DataDir, "config")
	e.Close(t)
	for _, f := range []string{"receipt-keys.json", "topics.json", "groups.json"} {
		require.NoError(t, os.Remove(filepath.Join(cfg, f)), f)
	}
	e2 := &e2eServer{e.Reopen(t)}
	require.Equal(t, []string{"ok", "ok"}, e2.Ack(t, "g", first.Receipt, second.Receipt), "both keys came back from the log")

	third := e2.PullN(t, "g", "keyed", 1, 600_000, 10*time.Second)[0]
	for i := 0; i < 7; i++ {
		keys = rotate(t, e2)
	}
	require.Equal(t, 9, keys.SigningKeyID)
	require.Equal(t, []int{2, 3, 4, 5, 6, 7, 8, 9}, keys.KeyIDs)
	res := e2.Receipts(t, "g", "ack", api.AckRequest{Receipts: []string{third.Receipt}})
	require.Equal(t, "ok", res[0].Status, "key 2 still verifies")
	e2.Send(t, "keyed", api.SendMessage{Body: "late"})
	fourth := e2.PullN(t, "g", "keyed", 1, 600_000, 10*time.Second)[0]
	rotate(t, e2)
	res = e2.Receipts(t, "g", "ack", api.AckRequest{Receipts: []string{fourth.Receipt}})
	require.Equal(t, "ok", res[0].Status, "the key before the newest")
}

// TestE2ELostReceiptKeyIsLoggedLoudly: a data dir that holds messages but
// no receipt key (a data dir from before the keyring whose receipt.key was
// deleted) gets a new key at start-up, and the log says so at error level
// with what it means: the receipts issued before are invalid and their
// messages come again after their leases. A first start on an empty data
// dir makes its key without a word.
func TestE2ELostReceiptKeyIsLoggedLoudly(t *testing.T) {
	t.Parallel()
	var first syncBuffer
	e := startE2E(t, func(c *server.Config) { c.LogOutput, c.LogLevel = &first, "info" })
	require.NotContains(t, first.String(), "receipt keyring was missing")
	e.Close(t)

	// A data dir written without a receipt key: records, no keyring.
	dir := t.TempDir()
	st, err := storage.Open(storage.Options{Dir: dir, SegmentSize: 64 << 20})
	require.NoError(t, err)
	_, err = st.Put(&message.Message{Topic: "keyed", Body: []byte("from before the keyring")})
	require.NoError(t, err)
	require.NoError(t, st.Close())

	var logs syncBuffer
	e2 := &e2eServer{e.Reopen(t, func(c *server.Config) { c.DataDir, c.LogOutput = dir, &logs })}
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "receipt keyring was missing") {
			require.NoError(t, json.Unmarshal([]byte(l), &line), l)
			break
		}
	}
	require.NotNil(t, line, "no log line says the keyring was missing:\n%s", logs.String())
	require.Equal(t, "error", line["level"])
	msg := line["message"].(string)
	for _, want := range []string{"receipt", "invalid", "delivered again", "lease"} {
		require.Contains(t, msg, want)
	}
	e2.Send(t, "keyed", api.SendMessage{Body: "after"})
	got := e2.PullN(t, "g", "keyed", 2, 30_000, 10*time.Second)
	require.Equal(t, []string{"ok", "ok"}, e2.Ack(t, "g", got[0].Receipt, got[1].Receipt), "the new key works")
}
