package broker

import (
	"testing"
)

// FuzzDecodeReceipt: receipts come from clients; decoding arbitrary text
// never panics, and whatever decodes was produced by this key (the HMAC)
// and re-encodes to the same text.
func FuzzDecodeReceipt(f *testing.F) {
	codec := &receiptCodec{key: []byte("0123456789abcdef0123456789abcdef")}
	f.Add(codec.encode(receipt{Group: "g", Topic: "t", QueueID: 3, Offset: 42, Epoch: 7}))
	f.Add(codec.encode(receipt{Group: "", Topic: "", QueueID: -1}))
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := codec.decode(s)
		if err != nil {
			return
		}
		if again := codec.encode(r); again != s {
			t.Fatalf("decoded receipt re-encodes differently: %q vs %q", again, s)
		}
	})
}

func TestReceiptTamperingIsDetected(t *testing.T) {
	codec := &receiptCodec{key: []byte("0123456789abcdef0123456789abcdef")}
	other := &receiptCodec{key: []byte("fedcba9876543210fedcba9876543210")}
	s := codec.encode(receipt{Group: "g", Topic: "t", QueueID: 1, Offset: 9, Epoch: 5})
	r, err := codec.decode(s)
	if err != nil || r.Group != "g" || r.Topic != "t" || r.QueueID != 1 || r.Offset != 9 || r.Epoch != 5 {
		t.Fatalf("round trip: %+v %v", r, err)
	}
	if _, err := other.decode(s); err == nil {
		t.Fatal("a receipt signed with another key was accepted")
	}
	b := []byte(s)
	for i := range b {
		flipped := append([]byte(nil), b...)
		flipped[i] ^= 1
		if _, err := codec.decode(string(flipped)); err == nil && string(flipped) != s {
			t.Fatalf("a receipt changed at byte %d was accepted", i)
		}
	}
}
