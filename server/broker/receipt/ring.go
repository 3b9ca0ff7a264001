package receipt

import (
	"crypto/rand"
	"slices"
)

const (
	// MetaKind is the kind of the family's rmq_sys_META records: the
	// record's "key" member is a Key.
	MetaKind = "receipt-key"
	// MaxKeys is how many of the newest keys verify receipts: a receipt
	// outlives up to MaxKeys-1 rotations.
	MaxKeys = 8
	// LegacyKeyID is the id of the first key, the one receipts of
	// versions 1 and 2 (from before the keyring) are checked under: a
	// data dir's receipt.key from before the keyring is adopted as it.
	LegacyKeyID uint16 = 1
	// secretLen is the size of a new key's secret.
	secretLen = 32
)

// Key is one key of the keyring, as its record and the keyring's
// snapshot hold it (JSON: {"id","secret","createdMs"}, the secret in
// base64; part of the on-disk format).
type Key struct {
	ID        uint16 `json:"id"`
	Secret    []byte `json:"secret"`
	CreatedMs int64  `json:"createdMs"`
}

// NewSecret returns a new key's random secret. It is for the request that
// proposes a key; applying a key record never calls it (the secret travels
// inside the record).
func NewSecret() ([]byte, error) {
	secret := make([]byte, secretLen)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	return secret, nil
}

// Ring is the keyring as applied: immutable, replaced whole, so readers
// need no lock. The nil *Ring is the empty keyring (before the first key):
// WithKey, NextID and Keys accept it; Encode and Decode need a key.
type Ring struct {
	keys   []Key // by id, at most MaxKeys
	signer *Codec
	byID   map[uint16]*Codec
}

// WithKey returns the ring with k added (or replaced) and only the
// MaxKeys newest keys kept: the apply of a key record. It reads neither
// the clock nor a random source, so every copy of the log that applies
// the same records holds the same ring.
func (rr *Ring) WithKey(k Key) (*Ring, error) {
	var keys []Key
	if rr != nil {
		keys = slices.DeleteFunc(slices.Clone(rr.keys), func(o Key) bool { return o.ID == k.ID })
	}
	keys = append(keys, k)
	slices.SortFunc(keys, func(a, b Key) int { return int(a.ID) - int(b.ID) })
	if len(keys) > MaxKeys {
		keys = keys[len(keys)-MaxKeys:]
	}
	next := &Ring{keys: keys, byID: make(map[uint16]*Codec, len(keys))}
	for _, key := range keys {
		c, err := NewCodec(key.ID, key.Secret)
		if err != nil {
			return nil, err
		}
		next.byID[key.ID] = c
		next.signer = c
	}
	return next, nil
}

// NextID is the id a new key takes: LegacyKeyID for the empty ring, else
// one above the newest key's (0 once every id was used).
func (rr *Ring) NextID() uint16 {
	if rr == nil || len(rr.keys) == 0 {
		return LegacyKeyID
	}
	return rr.keys[len(rr.keys)-1].ID + 1
}

// Keys returns the ring's keys by id, oldest first (the last one signs);
// nil for the empty ring. The slice is the caller's; the secrets are
// shared and must not be changed.
func (rr *Ring) Keys() []Key {
	if rr == nil {
		return nil
	}
	return slices.Clone(rr.keys)
}

// Encode returns r's receipt text, signed by the newest key.
func (rr *Ring) Encode(r Receipt) string { return rr.signer.encode(r) }

// Decode checks a receipt text against the key it names (version 3) or
// LegacyKeyID (versions 1 and 2) and returns what it carries. A receipt
// that is malformed, forged, or names a key the ring does not hold (rotated
// out, or lost) is an error.
func (rr *Ring) Decode(s string) (Receipt, error) {
	r, _, err := decode(s, func(version byte, id uint16) *Codec {
		if version != VersionKeyed {
			id = LegacyKeyID
		}
		return rr.byID[id]
	})
	return r, err
}
