package broker

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"sync"
)

// A receipt is the opaque handle of one lease. It carries everything an
// ack needs — group, topic, queue, offset and the lease epoch — and an HMAC
// so that it cannot be forged or edited; a receipt of an older lease of the
// same message (a smaller epoch) is refused as stale instead of acking the
// newer lease (ARCHITECTURE.md, the life of a message).
//
// Layout before base64url (no padding):
//
//	version u8 (1) | epoch u64 | queueId i32 | offset i64 | groupLen u8 | group
//	| topicLen u8 | topic | mac [16] (HMAC-SHA256 of everything before, truncated)
type receipt struct {
	Group   string
	Topic   string // the queue's topic (a retry topic for retried messages)
	QueueID int32
	Offset  int64
	Epoch   uint64
}

const (
	receiptVersion = 1
	receiptMACLen  = 16
	receiptKeyFile = "receipt.key"
)

var errBadReceipt = errors.New("broker: malformed or forged receipt")

type receiptCodec struct {
	key []byte
	// macs pools keyed HMAC states: hmac.New costs two SHA-256 states and
	// key schedule per call, on every pulled message and every ack.
	macs sync.Pool
}

// loadReceiptKey reads the receipt HMAC key, creating a random one on
// first start, so receipts stay verifiable across restarts.
func loadReceiptKey(files metaFiles) (*receiptCodec, error) {
	key, err := files.ReadMeta(receiptKeyFile)
	if errors.Is(err, os.ErrNotExist) {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := files.WriteMeta(receiptKeyFile, key); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("broker: receipt key file is %d bytes; want 32", len(key))
	}
	return &receiptCodec{key: key}, nil
}

// mac appends the truncated HMAC of b to dst.
func (c *receiptCodec) mac(dst, b []byte) []byte {
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

func (c *receiptCodec) encode(r receipt) string {
	b := make([]byte, 0, 1+8+4+8+2+len(r.Group)+len(r.Topic)+receiptMACLen)
	b = append(b, receiptVersion)
	b = binary.BigEndian.AppendUint64(b, r.Epoch)
	b = binary.BigEndian.AppendUint32(b, uint32(r.QueueID))
	b = binary.BigEndian.AppendUint64(b, uint64(r.Offset))
	b = append(b, byte(len(r.Group)))
	b = append(b, r.Group...)
	b = append(b, byte(len(r.Topic)))
	b = append(b, r.Topic...)
	b = c.mac(b, b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (c *receiptCodec) decode(s string) (receipt, error) {
	if len(s) > 1024 {
		return receipt{}, errBadReceipt
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s) // strict: one text per receipt
	if err != nil || len(b) < 1+8+4+8+2+receiptMACLen || b[0] != receiptVersion {
		return receipt{}, errBadReceipt
	}
	body, sum := b[:len(b)-receiptMACLen], b[len(b)-receiptMACLen:]
	var want [receiptMACLen]byte
	if !hmac.Equal(sum, c.mac(want[:0], body)) {
		return receipt{}, errBadReceipt
	}
	r := receipt{
		Epoch:   binary.BigEndian.Uint64(body[1:]),
		QueueID: int32(binary.BigEndian.Uint32(body[9:])),
		Offset:  int64(binary.BigEndian.Uint64(body[13:])),
	}
	rest := body[21:]
	n := int(rest[0])
	if len(rest) < 1+n+1 {
		return receipt{}, errBadReceipt
	}
	r.Group, rest = string(rest[1:1+n]), rest[1+n:]
	n = int(rest[0])
	if len(rest) != 1+n {
		return receipt{}, errBadReceipt
	}
	r.Topic = string(rest[1:])
	return r, nil
}
