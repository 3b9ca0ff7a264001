package broker

import (
	"context"

	"github.com/mqgate/mqgate/server/broker/receipt"
)

// The receipt family (package receipt: the receipt codec, the keyring,
// the key record) is glued to the broker here: the keyring lives in the
// registry (registry.State.Ring, applied from the rmq_sys_META records of
// kind receipt.MetaKind by registry.State.Apply), its snapshot is
// config/receipt-keys.json beside topics.json, and the registry's Service
// proposes key records (EnsureReceiptKey at Promote, RotateReceiptKey;
// server/broker/registry's receiptkeys.go). The secret and the time of a
// key are chosen by the request that proposes it (the first open, a
// rotation); applying the record only adds it.

// receipts returns the keyring the broker signs and checks with.
func (b *Broker) receipts() *receipt.Ring { return b.registry.Ring() }

// RotateReceiptKey adds a new receipt key to the keyring and makes it the
// one that signs. Receipts signed by the previous receipt.MaxKeys-1 keys
// stay valid. It returns the new key's id.
func (b *Broker) RotateReceiptKey(ctx context.Context) (int, error) {
	id, err := b.registry.RotateReceiptKey()
	if err != nil {
		return 0, err
	}
	b.log.Info().Int("keyId", id).Msg("receipt key rotated")
	return id, nil
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
