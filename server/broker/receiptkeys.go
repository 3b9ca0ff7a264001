package broker

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/rs/zerolog"
)

// The receipt keyring is part of the registry and lives where the rest of
// it does: each key is an rmq_sys_META record of kind "receipt-key" with
// its id, its secret and when it was made, so every copy of the log — a
// replica's, a restored backup's — verifies the same receipts, and losing
// config/ loses no key. The secret and the time are chosen by the request
// that proposes the key (the first open, a rotation); applying the record
// only adds it. The newest key signs; the maxReceiptKeys newest verify, so
// a receipt outlives up to maxReceiptKeys-1 rotations (a lease is at most
// 12 h). config/receipt-keys.json is the keyring's snapshot, as
// topics.json is the topics'.

const (
	metaReceiptKey  = "receipt-key" // Key is a receipt key
	receiptKeysFile = "receipt-keys.json"
	// maxReceiptKeys is how many of the newest keys verify receipts.
	maxReceiptKeys = 8
	// receiptSecretLen is the size of a new key's secret.
	receiptSecretLen = 32
)

// receiptKey is one key of the keyring.
type receiptKey struct {
	ID        uint16 `json:"id"`
	Secret    []byte `json:"secret"`
	CreatedMs int64  `json:"createdMs"`
}

// receiptRing is the keyring as applied: immutable, replaced whole.
type receiptRing struct {
	keys   []receiptKey // by id, at most maxReceiptKeys
	signer *receiptCodec
	byID   map[uint16]*receiptCodec
}

// withKey returns the ring with k added (or replaced) and only the
// maxReceiptKeys newest keys kept.
func (rr *receiptRing) withKey(k receiptKey) (*receiptRing, error) {
	var keys []receiptKey
	if rr != nil {
		keys = slices.DeleteFunc(slices.Clone(rr.keys), func(o receiptKey) bool { return o.ID == k.ID })
	}
	keys = append(keys, k)
	slices.SortFunc(keys, func(a, b receiptKey) int { return int(a.ID) - int(b.ID) })
	if len(keys) > maxReceiptKeys {
		keys = keys[len(keys)-maxReceiptKeys:]
	}
	next := &receiptRing{keys: keys, byID: make(map[uint16]*receiptCodec, len(keys))}
	for _, key := range keys {
		c, err := newReceiptCodec(key.ID, key.Secret)
		if err != nil {
			return nil, err
		}
		next.byID[key.ID] = c
		next.signer = c
	}
	return next, nil
}

// nextID is the id a new key takes.
func (rr *receiptRing) nextID() uint16 {
	if rr == nil || len(rr.keys) == 0 {
		return 1
	}
	return rr.keys[len(rr.keys)-1].ID + 1
}

// encode signs r with the newest key.
func (rr *receiptRing) encode(r receipt) string { return rr.signer.encode(r) }

// decode checks a receipt against the key it names (version 3) or key 1
// (versions 1 and 2, from before the keyring).
func (rr *receiptRing) decode(s string) (receipt, error) {
	r, _, err := decodeReceipt(s, func(version byte, id uint16) *receiptCodec {
		if version != receiptVersionKeyed {
			id = 1
		}
		return rr.byID[id]
	})
	return r, err
}

// receipts returns the keyring the broker signs and checks with.
func (b *Broker) receipts() *receiptRing { return b.registry.ring.Load() }

// ensureReceiptKey gives a registry without a key its first one: the
// receipt.key of a data dir from before the keyring (so its receipts still
// settle), else a new random key. used reports a data dir that already
// holds records: a keyring missing there was lost with its records and
// snapshot (or receipt.key deleted before an upgrade), and the receipts
// handed out before no longer verify, which is logged as an error.
func (r *registry) ensureReceiptKey(used bool, nowMs int64, log zerolog.Logger) error {
	if r.ring.Load() != nil {
		return nil
	}
	key := receiptKey{ID: 1, CreatedMs: nowMs}
	legacy, err := r.files.ReadMeta(receiptKeyFile)
	switch {
	case err == nil && len(legacy) >= 16:
		key.Secret = legacy
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", receiptKeyFile, err)
	default:
		key.Secret = make([]byte, receiptSecretLen)
		if _, err := rand.Read(key.Secret); err != nil {
			return err
		}
		if used {
			ev := log.Error()
			if p, ok := r.files.(interface{ MetaPath(string) string }); ok {
				ev = ev.Str("file", p.MetaPath(receiptKeysFile))
			}
			ev.Msg("the receipt keyring was missing from a data dir that holds messages (its records and config/receipt-keys.json, " +
				"or config/receipt.key before an upgrade, were lost), and a new key was made: " +
				"every receipt issued before this start is now invalid, acks, nacks and lease changes with one answer \"invalid\", " +
				"and the messages leased with them are delivered again when their leases expire")
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitLocked(metaRecord{Kind: metaReceiptKey, Key: &key})
}

// RotateReceiptKey adds a new receipt key to the keyring and makes it the
// one that signs. Receipts signed by the previous maxReceiptKeys-1 keys
// stay valid. It returns the new key's id.
func (b *Broker) RotateReceiptKey(ctx context.Context) (int, error) {
	key := receiptKey{CreatedMs: b.clock.Now().UnixMilli(), Secret: make([]byte, receiptSecretLen)}
	if _, err := rand.Read(key.Secret); err != nil {
		return 0, err
	}
	r := b.registry
	r.mu.Lock()
	defer r.mu.Unlock()
	key.ID = r.ring.Load().nextID()
	if key.ID == 0 {
		return 0, fmt.Errorf("%w: the receipt keyring has used every key id", ErrInvalidArgument)
	}
	if err := r.commitLocked(metaRecord{Kind: metaReceiptKey, Key: &key}); err != nil {
		return 0, err
	}
	b.log.Info().Int("keyId", int(key.ID)).Msg("receipt key rotated")
	return int(key.ID), nil
}

// ReceiptKeys lists the ids of the keys that verify receipts, oldest
// first; the last one signs.
func (b *Broker) ReceiptKeys() []int {
	rr := b.receipts()
	out := make([]int, len(rr.keys))
	for i, k := range rr.keys {
		out[i] = int(k.ID)
	}
	return out
}
