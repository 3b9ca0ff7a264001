package broker

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/receipt"
	"github.com/mqgate/mqgate/server/broker/registry"
)

// The receipt family (package receipt: the receipt codec, the keyring,
// the key record) is glued to the broker here: the keyring lives in the
// registry (registry.State.Ring, applied from the rmq_sys_META records of
// kind receipt.MetaKind by registry.State.Apply), its snapshot is
// config/receipt-keys.json beside topics.json (package registry, written
// and read by metalog.go), and the requests below propose key records. The secret and the time of a key are
// chosen by the request that proposes it (the first open, a rotation);
// applying the record only adds it.

// receiptKeyFile held the key before the keyring, under the broker's
// meta directory; it is adopted as key receipt.LegacyKeyID.
const receiptKeyFile = "receipt.key"

// receipts returns the keyring the broker signs and checks with.
func (b *Broker) receipts() *receipt.Ring { return b.registry.state.Ring() }

// ensureReceiptKey gives a registry without a key its first one: the
// receipt.key of a data dir from before the keyring (so its receipts still
// settle), else a new random key. used reports a data dir that already
// holds records: a keyring missing there was lost with its records and
// snapshot (or receipt.key deleted before an upgrade), and the receipts
// handed out before no longer verify, which is logged as an error.
func (r *registrar) ensureReceiptKey(used bool, nowMs int64, log zerolog.Logger) error {
	if r.state.Ring() != nil {
		return nil
	}
	key := receipt.Key{ID: receipt.LegacyKeyID, CreatedMs: nowMs}
	legacy, err := r.files.ReadMeta(receiptKeyFile)
	switch {
	case err == nil && len(legacy) >= receipt.MinSecretLen:
		key.Secret = legacy
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", receiptKeyFile, err)
	default:
		if key.Secret, err = receipt.NewSecret(); err != nil {
			return err
		}
		if used {
			ev := log.Error()
			if p, ok := r.files.(interface{ MetaPath(string) string }); ok {
				ev = ev.Str("file", p.MetaPath(registry.ReceiptKeysFile))
			}
			ev.Msg("the receipt keyring was missing from a data dir that holds messages (its records and config/receipt-keys.json, " +
				"or config/receipt.key before an upgrade, were lost), and a new key was made: " +
				"every receipt issued before this start is now invalid, acks, nacks and lease changes with one answer \"invalid\", " +
				"and the messages leased with them are delivered again when their leases expire")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitLocked(registry.Record{Kind: registry.KindReceiptKey, Key: &key})
}

// RotateReceiptKey adds a new receipt key to the keyring and makes it the
// one that signs. Receipts signed by the previous receipt.MaxKeys-1 keys
// stay valid. It returns the new key's id.
func (b *Broker) RotateReceiptKey(ctx context.Context) (int, error) {
	secret, err := receipt.NewSecret()
	if err != nil {
		return 0, err
	}
	key := receipt.Key{CreatedMs: b.clock.Now().UnixMilli(), Secret: secret}
	r := b.registry
	r.mu.Lock()
	defer r.mu.Unlock()
	key.ID = r.state.Ring().NextID()
	if key.ID == 0 {
		return 0, fmt.Errorf("%w: the receipt keyring has used every key id", ErrInvalidArgument)
	}
	if err := r.commitLocked(registry.Record{Kind: registry.KindReceiptKey, Key: &key}); err != nil {
		return 0, err
	}
	b.log.Info().Int("keyId", int(key.ID)).Msg("receipt key rotated")
	return int(key.ID), nil
}

// ReceiptKeys lists the ids of the keys that verify receipts, oldest
// first; the last one signs.
func (b *Broker) ReceiptKeys() []int {
	keys := b.receipts().Keys()
	out := make([]int, len(keys))
	for i, k := range keys {
		out[i] = int(k.ID)
	}
	return out
}
