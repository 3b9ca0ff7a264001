package sqs

import (
	"crypto/md5" //nolint:gosec // SQS's checksums are MD5; they detect corruption, not attacks
	"encoding/binary"
	"encoding/hex"
	"slices"
)

// md5Hex is the hex MD5 of s (MD5OfMessageBody).
func md5Hex(s string) string {
	sum := md5.Sum([]byte(s)) //nolint:gosec // as above
	return hex.EncodeToString(sum[:])
}

// attributeValue is one message attribute (or message system attribute).
type attributeValue struct {
	DataType         string
	StringValue      *string  `json:",omitempty"`
	BinaryValue      []byte   `json:",omitempty"`
	StringListValues []string `json:",omitempty"`
	BinaryListValues [][]byte `json:",omitempty"`
}

// md5OfAttributes is SQS's MD5 of message attributes: for each attribute
// in name order, the name, the data type (each a 4-byte big-endian length
// and the bytes), a transport byte (1 string, 2 binary) and the value
// (length and bytes). "" for none.
func md5OfAttributes(attrs map[string]attributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	slices.Sort(names)
	h := md5.New() //nolint:gosec // as above
	field := func(b []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		h.Write(l[:])
		h.Write(b)
	}
	for _, n := range names {
		a := attrs[n]
		field([]byte(n))
		field([]byte(a.DataType))
		if a.BinaryValue != nil {
			h.Write([]byte{2})
			field(a.BinaryValue)
		} else {
			h.Write([]byte{1})
			var s string
			if a.StringValue != nil {
				s = *a.StringValue
			}
			field([]byte(s))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
