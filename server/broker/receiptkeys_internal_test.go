package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/server/broker/registry"
)

// TestReceiptKeyAdoptedFromAnOlderDataDir: a data dir from before the
// keyring keeps its config/receipt.key as key 1, so the version 1 and 2
// receipts handed out before the upgrade still settle, and new receipts
// (version 3) name key 1 until a rotation.
func TestReceiptKeyAdoptedFromAnOlderDataDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	secret := []byte("0123456789abcdef0123456789abcdef")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "config"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config", registry.LegacyKeyFile), secret, 0o600))
	b := openLeaseBroker(t, dir)
	defer b.Close(ctx)
	require.Equal(t, []int{1}, b.ReceiptKeys())
	legacy, err := receipt.NewCodec(receipt.LegacyKeyID, secret)
	require.NoError(t, err)

	_, err = b.Send(ctx, "old", []SendMessage{{Body: []byte("a")}, {Body: []byte("b")}})
	require.NoError(t, err)
	got, err := b.Pull(ctx, PullRequest{Group: "g", Topic: "old", MaxMessages: 2, Wait: time.Second, Invisible: time.Hour})
	require.NoError(t, err)
	require.Len(t, got, 2)
	var olds []string
	for i, m := range got {
		r, v, err := legacy.DecodeVersion(m.Receipt)
		require.NoError(t, err, "a new receipt verifies under the adopted key")
		require.Equal(t, byte(receipt.VersionKeyed), v)
		olds = append(olds, legacy.EncodeVersion(r, []byte{receipt.VersionCMAC, receipt.VersionHMAC}[i]))
	}
	res, err := b.Ack(ctx, "g", olds)
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, ReceiptOK, r.Status, r.Error)
	}
}
