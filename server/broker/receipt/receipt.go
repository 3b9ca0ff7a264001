package receipt

import (
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

// Receipt is what a receipt text carries: the lease it settles. The
// layout of the text is in doc.go.
type Receipt struct {
	Group   string
	Topic   string // the queue's topic (a retry topic for retried messages)
	QueueID int32
	Offset  int64
	Epoch   uint64
}

// The versions of the receipt layout (doc.go). Only VersionKeyed is
// written; the two before it are still read, under LegacyKeyID.
const (
	VersionHMAC  = 1 // HMAC-SHA256 truncated to 16 bytes, no key id
	VersionCMAC  = 2 // AES-128-CMAC, no key id
	VersionKeyed = 3 // AES-128-CMAC under the key id it names
)

const (
	macLen   = 16
	keyIDLen = 2
	// fixedLen is a version 1 or 2 receipt's length without group and
	// topic; version 3 adds keyIDLen.
	fixedLen = 1 + 8 + 4 + 8 + 2 + macLen
	// maxText bounds the text decode reads: 255-byte group and topic
	// names at most.
	maxText = 1024
	// cmacLabel derives a key's CMAC key from its secret.
	cmacLabel = "mqgate receipt v2 AES-128-CMAC"
	// MinSecretLen is the shortest secret a key may have (a receipt.key
	// from before the keyring shorter than this is not adopted).
	MinSecretLen = 16
)

var errBadReceipt = errors.New("malformed or forged receipt")

// Codec signs and checks receipts under one key. A Ring holds one per
// key; tests use a Codec alone to write the receipts of older versions.
type Codec struct {
	id  uint16
	key []byte
	// macs pools keyed HMAC states of version 1 receipts.
	macs sync.Pool
	// cmac signs and checks version 2 and 3 receipts.
	cmac cmac
}

// NewCodec returns the codec of key id with secret key (at least
// MinSecretLen bytes).
func NewCodec(id uint16, key []byte) (*Codec, error) {
	if len(key) < MinSecretLen {
		return nil, fmt.Errorf("receipt key %d is %d bytes; want 32", id, len(key))
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(cmacLabel))
	c := &Codec{id: id, key: key}
	if err := c.cmac.init(h.Sum(nil)[:16]); err != nil {
		return nil, err
	}
	return c, nil
}

// hmacTag appends the truncated HMAC of b to dst (version 1).
func (c *Codec) hmacTag(dst, b []byte) []byte {
	h, _ := c.macs.Get().(hash.Hash)
	if h == nil {
		h = hmac.New(sha256.New, c.key)
	}
	h.Write(b)
	var sum [sha256.Size]byte
	out := h.Sum(sum[:0])
	h.Reset()
	c.macs.Put(h)
	return append(dst, out[:macLen]...)
}

// encode returns r's receipt text (version 3, under c's key id).
func (c *Codec) encode(r Receipt) string {
	return c.EncodeVersion(r, VersionKeyed)
}

// EncodeVersion returns r's receipt text in the given version (one of
// VersionHMAC, VersionCMAC, VersionKeyed).
func (c *Codec) EncodeVersion(r Receipt, version byte) string {
	n := fixedLen + len(r.Group) + len(r.Topic)
	if version == VersionKeyed {
		n += keyIDLen
	}
	// One buffer: the receipt, then its base64 text.
	buf := make([]byte, n, n+base64.RawURLEncoding.EncodedLen(n))
	b := append(buf[:0], version)
	if version == VersionKeyed {
		b = binary.BigEndian.AppendUint16(b, c.id)
	}
	b = binary.BigEndian.AppendUint64(b, r.Epoch)
	b = binary.BigEndian.AppendUint32(b, uint32(r.QueueID))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Offset))
	b = append(b, byte(len(r.Group)))
	b = append(b, r.Group...)
	b = append(b, byte(len(r.Topic)))
	b = append(b, r.Topic...)
	if version == VersionHMAC {
		b = c.hmacTag(b, b)
	} else {
		b = b[:len(b)+macLen]
		c.cmac.tag(b[len(b)-macLen:], b[:len(b)-macLen])
	}
	text := base64.RawURLEncoding.AppendEncode(b[len(b):], b)
	return unsafe.String(unsafe.SliceData(text), len(text))
}

// decode checks a receipt text signed by c and returns what it carries.
func (c *Codec) decode(s string) (Receipt, error) {
	r, _, err := c.DecodeVersion(s)
	return r, err
}

// DecodeVersion checks a receipt text signed by c and returns what it
// carries and its version. A version 3 receipt must name c's key id.
func (c *Codec) DecodeVersion(s string) (Receipt, byte, error) {
	return decode(s, func(version byte, id uint16) *Codec {
		if version == VersionKeyed && id != c.id {
			return nil
		}
		return c
	})
}

// decode checks a receipt text with the codec keyFor names for its
// version and key id (nil: no such key) and returns what it carries and
// its version.
func decode(s string, keyFor func(version byte, id uint16) *Codec) (Receipt, byte, error) {
	if len(s) > maxText {
		return Receipt{}, 0, errBadReceipt
	}
	// One buffer: the decoded receipt, then room for the expected MAC.
	enc := base64.RawURLEncoding.Strict() // strict: one text per receipt
	buf := make([]byte, enc.DecodedLen(len(s))+macLen)
	n, err := enc.Decode(buf, unsafe.Slice(unsafe.StringData(s), len(s)))
	if err != nil || n < fixedLen {
		return Receipt{}, 0, errBadReceipt
	}
	b := buf[:n]
	body, sum := b[:n-macLen], b[n-macLen:]
	want := buf[n : n+macLen]
	fields := body[1:]
	var id uint16
	if b[0] == VersionKeyed {
		if n < fixedLen+keyIDLen {
			return Receipt{}, 0, errBadReceipt
		}
		id, fields = binary.BigEndian.Uint16(fields), fields[keyIDLen:]
	}
	c := keyFor(b[0], id)
	if c == nil {
		return Receipt{}, 0, errBadReceipt
	}
	switch b[0] {
	case VersionCMAC, VersionKeyed:
		c.cmac.tag(want, body)
	case VersionHMAC:
		want = c.hmacTag(want[:0], body)
	default:
		return Receipt{}, 0, errBadReceipt
	}
	if subtle.ConstantTimeCompare(sum, want) != 1 {
		return Receipt{}, 0, errBadReceipt
	}
	r := Receipt{
		Epoch:   binary.BigEndian.Uint64(fields),
		QueueID: int32(binary.BigEndian.Uint32(fields[8:])),
		Offset:  int64(binary.BigEndian.Uint64(fields[12:])),
	}
	rest := fields[20:]
	l := int(rest[0])
	if len(rest) < 1+l+1 {
		return Receipt{}, 0, errBadReceipt
	}
	r.Group, rest = string(rest[1:1+l]), rest[1+l:]
	l = int(rest[0])
	if len(rest) != 1+l {
		return Receipt{}, 0, errBadReceipt
	}
	r.Topic = string(rest[1:])
	return r, b[0], nil
}
