// Package receipt is the receipt family of the broker: the receipt a pull
// hands out with each leased message, the keyring that signs and checks
// receipts, and the key record the keyring is made of.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; the first was package trace): it
// imports nothing of the module, and server/broker imports it. What needs
// the registry's state is package registry's (server/broker/registry's
// receiptkeys.go): the keyring as applied, the requests that propose a
// key, the snapshot file; server/broker/receiptkeys.go is their facade.
//
// # Receipts
//
// A receipt is the opaque handle of one lease. It carries everything an
// ack, a nack or a lease change needs — group, topic, queue, offset and
// the lease's epoch — and a MAC, so that it cannot be forged or edited; a
// receipt of an older lease of the same message (a smaller epoch) is
// refused by the broker as stale instead of settling the newer lease
// (ARCHITECTURE.md, the life of a message; server/broker/doc.go,
// "Receipts"). The text is base64url without padding of, big-endian:
//
//	version u8 | [keyId u16, version 3] | epoch u64 | queueId i32 | offset i64
//	| groupLen u8 | group | topicLen u8 | topic | mac [16]
//
// Version 3 (VersionKeyed, the only one written): mac is AES-128-CMAC
// (RFC 4493) of everything before it, under the CMAC key of key keyId of
// the keyring: the first 16 bytes of HMAC-SHA256(secret, "mqgate receipt
// v2 AES-128-CMAC"). Version 2 (still read): the same MAC, without keyId,
// under key 1 (LegacyKeyID). Version 1 (still read): HMAC-SHA256 under key
// 1's secret, truncated to 16 bytes. Key 1 is the receipt.key of a data
// dir from before the keyring, so leases granted before an upgrade still
// settle. CMAC costs a few AES blocks with the CPU's AES instructions,
// where HMAC-SHA256 costs two SHA-256 states and copies — on every pulled
// message and every acked one. The layout, the MACs and the key
// derivation are part of the wire format: receipts already handed out
// must verify after any change (ring_test.go holds texts written before
// this package existed).
//
// # The keyring
//
// The keyring is part of the registry and lives where the rest of it does:
// each key is an rmq_sys_META record of kind "receipt-key" (MetaKind)
// whose "key" member is a Key ({"id","secret","createdMs"}), so every copy
// of the log — a replica's, a restored backup's — verifies the same
// receipts, and losing config/ loses no key. config/receipt-keys.json is
// the keyring's snapshot, as topics.json is the topics'
// (server/broker/doc.go, "What the broker persists").
//
// A Ring is the keyring as applied: immutable, replaced whole by
// Ring.WithKey, the apply of a key record, so readers need no lock. The
// newest key signs; the MaxKeys newest verify, so a receipt outlives up to
// MaxKeys-1 rotations (a lease is at most 12 h). A key applied again
// replaces itself, so a record replayed over a newer snapshot changes
// nothing.
//
// # Who writes and applies the records
//
// The broker proposes a key record at two points: the first start of a
// data dir (its receipt.key from before the keyring, adopted as key 1, or
// a new key) and a rotation (POST /v1/broker/receipt-keys/rotate,
// Broker.RotateReceiptKey). The request chooses the secret (NewSecret) and
// the time and puts both in the record; WithKey reads neither the clock
// nor a random source, so the registry's apply — at open, on a follower,
// and at run time — reaches the same ring from the same records.
package receipt
