package broker

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
	"unsafe"
)

// A receipt is the opaque handle of one lease. It carries everything an
// ack needs — group, topic, queue, offset and the lease epoch — and a MAC
// so that it cannot be forged or edited; a receipt of an older lease of the
// same message (a smaller epoch) is refused as stale instead of acking the
// newer lease (ARCHITECTURE.md, the life of a message).
//
// Layout before base64url (no padding):
//
//	version u8 | [keyId u16, version 3] | epoch u64 | queueId i32 | offset i64
//	| groupLen u8 | group | topicLen u8 | topic | mac [16]
//
// Version 3 (written): mac is AES-128-CMAC (RFC 4493) of everything before
// it, under the CMAC key of receipt key keyId of the keyring
// (receiptkeys.go; the CMAC key is HMAC-SHA256(secret, receiptCMACLabel)
// truncated to 16 bytes). The keyring is in the CommitLog, so every copy of
// the log verifies the same receipts. Version 2 (still read): the same MAC,
// without keyId, under key 1. Version 1 (still read): HMAC-SHA256 under
// key 1's secret, truncated. Key 1 is the receipt.key of a data dir from
// before the keyring, so leases granted before an upgrade still settle.
// CMAC costs a few AES blocks with the CPU's AES instructions, where
// HMAC-SHA256 costs two SHA-256 states and copies — on every pulled
// message and every acked one.
type receipt struct {
	Group   string
	Topic   string // the queue's topic (a retry topic for retried messages)
	QueueID int32
	Offset  int64
	Epoch   uint64
}

const (
	receiptVersionHMAC  = 1
	receiptVersionCMAC  = 2
	receiptVersionKeyed = 3
	receiptMACLen       = 16
	receiptKeyIDLen     = 2
	// receiptFixedLen is a version 1 or 2 receipt's length without group
	// and topic; version 3 adds receiptKeyIDLen.
	receiptFixedLen = 1 + 8 + 4 + 8 + 2 + receiptMACLen
	// receiptMaxText bounds the text decode reads: 255-byte group and
	// topic names at most.
	receiptMaxText = 1024
	// receiptCMACLabel derives a key's CMAC key from its secret.
	receiptCMACLabel = "mqgate receipt v2 AES-128-CMAC"
	// receiptKeyFile held the key before the keyring, under the broker's
	// meta directory; it is adopted as key 1 (receiptkeys.go).
	receiptKeyFile = "receipt.key"
)

var errBadReceipt = errors.New("malformed or forged receipt")

// receiptCodec signs and checks receipts under one key of the keyring.
type receiptCodec struct {
	id  uint16
	key []byte
	// macs pools keyed HMAC states of version 1 receipts.
	macs sync.Pool
	// cmac signs and checks version 2 and 3 receipts.
	cmac cmac
}

// newReceiptCodec returns the codec of key id with secret key (at least
// 16 bytes).
func newReceiptCodec(id uint16, key []byte) (*receiptCodec, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("receipt key %d is %d bytes; want 32", id, len(key))
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(receiptCMACLabel))
	c := &receiptCodec{id: id, key: key}
	if err := c.cmac.init(h.Sum(nil)[:16]); err != nil {
		return nil, err
	}
	return c, nil
}

// hmacTag appends the truncated HMAC of b to dst (version 1).
func (c *receiptCodec) hmacTag(dst, b []byte) []byte {
	h, _ := c.macs.Get().(hash.Hash)
	if h == nil {
		h = hmac.New(sha256.New, c.key)
	}
	h.Write(b)
	var sum [sha256.Size]byte
	out := h.Sum(sum[:0])
	h.Reset()
	c.macs.Put(h)
	return append(dst, out[:receiptMACLen]...)
}

// encode returns r's receipt text (version 3, under c's key id).
func (c *receiptCodec) encode(r receipt) string {
	return c.encodeVersion(r, receiptVersionKeyed)
}

// encodeVersion returns r's receipt text in the given version.
func (c *receiptCodec) encodeVersion(r receipt, version byte) string {
	n := receiptFixedLen + len(r.Group) + len(r.Topic)
	if version == receiptVersionKeyed {
		n += receiptKeyIDLen
	}
	// One buffer: the receipt, then its base64 text.
	buf := make([]byte, n, n+base64.RawURLEncoding.EncodedLen(n))
	b := append(buf[:0], version)
	if version == receiptVersionKeyed {
		b = binary.BigEndian.AppendUint16(b, c.id)
	}
	b = binary.BigEndian.AppendUint64(b, r.Epoch)
	b = binary.BigEndian.AppendUint32(b, uint32(r.QueueID))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Offset))
	b = append(b, byte(len(r.Group)))
	b = append(b, r.Group...)
	b = append(b, byte(len(r.Topic)))
	b = append(b, r.Topic...)
	if version == receiptVersionHMAC {
		b = c.hmacTag(b, b)
	} else {
		b = b[:len(b)+receiptMACLen]
		c.cmac.tag(b[len(b)-receiptMACLen:], b[:len(b)-receiptMACLen])
	}
	text := base64.RawURLEncoding.AppendEncode(b[len(b):], b)
	return unsafe.String(unsafe.SliceData(text), len(text))
}

// decode checks a receipt text signed by c and returns what it carries.
func (c *receiptCodec) decode(s string) (receipt, error) {
	r, _, err := c.decodeVersion(s)
	return r, err
}

// decodeVersion is decode that also returns the receipt's version. A
// version 3 receipt must name c's key id.
func (c *receiptCodec) decodeVersion(s string) (receipt, byte, error) {
	return decodeReceipt(s, func(version byte, id uint16) *receiptCodec {
		if version == receiptVersionKeyed && id != c.id {
			return nil
		}
		return c
	})
}

// decodeReceipt checks a receipt text with the codec keyFor names for
// its version and key id (nil: no such key) and returns what it carries
// and its version.
func decodeReceipt(s string, keyFor func(version byte, id uint16) *receiptCodec) (receipt, byte, error) {
	if len(s) > receiptMaxText {
		return receipt{}, 0, errBadReceipt
	}
	// One buffer: the decoded receipt, then room for the expected MAC.
	enc := base64.RawURLEncoding.Strict() // strict: one text per receipt
	buf := make([]byte, enc.DecodedLen(len(s))+receiptMACLen)
	n, err := enc.Decode(buf, unsafe.Slice(unsafe.StringData(s), len(s)))
	if err != nil || n < receiptFixedLen {
		return receipt{}, 0, errBadReceipt
	}
	b := buf[:n]
	body, sum := b[:n-receiptMACLen], b[n-receiptMACLen:]
	want := buf[n : n+receiptMACLen]
	fields := body[1:]
	var id uint16
	if b[0] == receiptVersionKeyed {
		if n < receiptFixedLen+receiptKeyIDLen {
			return receipt{}, 0, errBadReceipt
		}
		id, fields = binary.BigEndian.Uint16(fields), fields[receiptKeyIDLen:]
	}
	c := keyFor(b[0], id)
	if c == nil {
		return receipt{}, 0, errBadReceipt
	}
	switch b[0] {
	case receiptVersionCMAC, receiptVersionKeyed:
		c.cmac.tag(want, body)
	case receiptVersionHMAC:
		want = c.hmacTag(want[:0], body)
	default:
		return receipt{}, 0, errBadReceipt
	}
	if subtle.ConstantTimeCompare(sum, want) != 1 {
		return receipt{}, 0, errBadReceipt
	}
	r := receipt{
		Epoch:   binary.BigEndian.Uint64(fields),
		QueueID: int32(binary.BigEndian.Uint32(fields[8:])),
		Offset:  int64(binary.BigEndian.Uint64(fields[12:])),
	}
	rest := fields[20:]
	l := int(rest[0])
	if len(rest) < 1+l+1 {
		return receipt{}, 0, errBadReceipt
	}
	r.Group, rest = string(rest[1:1+l]), rest[1+l:]
	l = int(rest[0])
	if len(rest) != 1+l {
		return receipt{}, 0, errBadReceipt
	}
	r.Topic = string(rest[1:])
	return r, b[0], nil
}

// cmac is AES-128-CMAC (RFC 4493, NIST SP 800-38B) with a fixed key.
type cmac struct {
	block  cipher.Block
	k1, k2 [aes.BlockSize]byte
}

// init sets the key (16 bytes) and derives the subkeys K1 and K2.
func (m *cmac) init(key []byte) error {
	block, err := aes.NewCipher(key)
	if err != nil {
		return err
	}
	m.block = block
	var l [aes.BlockSize]byte
	block.Encrypt(l[:], l[:])
	m.k1 = cmacDouble(l)
	m.k2 = cmacDouble(m.k1)
	return nil
}

// cmacDouble multiplies b by x in GF(2^128) (the subkey generation).
func cmacDouble(b [aes.BlockSize]byte) [aes.BlockSize]byte {
	var out [aes.BlockSize]byte
	for i := 0; i < aes.BlockSize-1; i++ {
		out[i] = b[i]<<1 | b[i+1]>>7
	}
	out[aes.BlockSize-1] = b[aes.BlockSize-1] << 1
	if b[0]&0x80 != 0 {
		out[aes.BlockSize-1] ^= 0x87
	}
	return out
}

// tag writes the CMAC of msg into t (aes.BlockSize bytes).
func (m *cmac) tag(t, msg []byte) {
	t = t[:aes.BlockSize]
	clear(t)
	for len(msg) > aes.BlockSize {
		subtle.XORBytes(t, t, msg[:aes.BlockSize])
		m.block.Encrypt(t, t)
		msg = msg[aes.BlockSize:]
	}
	if len(msg) == aes.BlockSize { // a complete last block: XOR K1
		subtle.XORBytes(t, t, msg)
		subtle.XORBytes(t, t, m.k1[:])
	} else { // padded with 0x80 0x00…: XOR K2
		subtle.XORBytes(t, t, msg)
		t[len(msg)] ^= 0x80
		subtle.XORBytes(t, t, m.k2[:])
	}
	m.block.Encrypt(t, t)
}
