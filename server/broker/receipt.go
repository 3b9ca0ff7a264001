package broker

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"sync"
	"unsafe"

	"github.com/rs/zerolog"
)

// A receipt is the opaque handle of one lease. It carries everything an
// ack needs — group, topic, queue, offset and the lease epoch — and a MAC
// so that it cannot be forged or edited; a receipt of an older lease of the
// same message (a smaller epoch) is refused as stale instead of acking the
// newer lease (ARCHITECTURE.md, the life of a message).
//
// Layout before base64url (no padding):
//
//	version u8 | epoch u64 | queueId i32 | offset i64 | groupLen u8 | group
//	| topicLen u8 | topic | mac [16]
//
// Version 2 (written): mac is AES-128-CMAC (RFC 4493) of everything
// before it, under a key derived from receipt.key (HMAC-SHA256 of
// receiptCMACLabel). Version 1 (still read, so that leases granted before
// an upgrade still settle): mac is HMAC-SHA256 under receipt.key,
// truncated. CMAC costs a few AES blocks with the CPU's AES instructions,
// where HMAC-SHA256 costs two SHA-256 states and copies — on every
// pulled message and every acked one.
type receipt struct {
	Group   string
	Topic   string // the queue's topic (a retry topic for retried messages)
	QueueID int32
	Offset  int64
	Epoch   uint64
}

const (
	receiptVersionHMAC = 1
	receiptVersionCMAC = 2
	receiptMACLen      = 16
	// receiptFixedLen is a receipt's length without group and topic.
	receiptFixedLen = 1 + 8 + 4 + 8 + 2 + receiptMACLen
	// receiptMaxText bounds the text decode reads: 255-byte group and
	// topic names at most.
	receiptMaxText = 1024
	// receiptCMACLabel derives the CMAC key from receipt.key.
	receiptCMACLabel = "mqgate receipt v2 AES-128-CMAC"
	// receiptKeyFile holds the key, under the broker's meta directory.
	receiptKeyFile = "receipt.key"
)

var errBadReceipt = errors.New("broker: malformed or forged receipt")

type receiptCodec struct {
	key []byte
	// macs pools keyed HMAC states of version 1 receipts.
	macs sync.Pool
	// cmac signs and checks version 2 receipts.
	cmac cmac
}

// newReceiptCodec returns the codec of key (at least 16 bytes).
func newReceiptCodec(key []byte) (*receiptCodec, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("broker: receipt key file is %d bytes; want 32", len(key))
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(receiptCMACLabel))
	c := &receiptCodec{key: key}
	if err := c.cmac.init(h.Sum(nil)[:16]); err != nil {
		return nil, err
	}
	return c, nil
}

// loadReceiptKey reads the receipt key, creating a random one on first
// start, so receipts stay verifiable across restarts. used reports a data
// dir that already holds records: a key missing there was lost (deleted,
// or a backup restored without it), and the receipts handed out before
// no longer verify, which is logged as an error.
func loadReceiptKey(files metaFiles, used bool, log zerolog.Logger) (*receiptCodec, error) {
	key, err := files.ReadMeta(receiptKeyFile)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := files.WriteMeta(receiptKeyFile, key); err != nil {
			return nil, err
		}
		if used {
			ev := log.Error()
			if p, ok := files.(interface{ MetaPath(string) string }); ok {
				ev = ev.Str("file", p.MetaPath(receiptKeyFile))
			}
			ev.Msg("the receipt key (config/receipt.key) was missing from a data dir that holds messages, and a new one was made: " +
				"every receipt issued before this start is now invalid, acks, nacks and lease changes with one answer \"invalid\", " +
				"and the messages leased with them are delivered again when their leases expire")
		}
	} else if err != nil {
		return nil, err
	}
	return newReceiptCodec(key)
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

// encode returns r's receipt text (version 2).
func (c *receiptCodec) encode(r receipt) string {
	return c.encodeVersion(r, receiptVersionCMAC)
}

// encodeVersion returns r's receipt text in the given version.
func (c *receiptCodec) encodeVersion(r receipt, version byte) string {
	n := receiptFixedLen + len(r.Group) + len(r.Topic)
	// One buffer: the receipt, then its base64 text.
	buf := make([]byte, n, n+base64.RawURLEncoding.EncodedLen(n))
	b := append(buf[:0], version)
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

// decode checks a receipt text and returns what it carries.
func (c *receiptCodec) decode(s string) (receipt, error) {
	r, _, err := c.decodeVersion(s)
	return r, err
}

// decodeVersion is decode that also returns the receipt's version.
func (c *receiptCodec) decodeVersion(s string) (receipt, byte, error) {
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
	switch b[0] {
	case receiptVersionCMAC:
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
		Epoch:   binary.BigEndian.Uint64(body[1:]),
		QueueID: int32(binary.BigEndian.Uint32(body[9:])),
		Offset:  int64(binary.BigEndian.Uint64(body[13:])),
	}
	rest := body[21:]
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
