package receipt

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"testing"
)

// testCodec is a receipt codec over a fixed key.
func testCodec(t testing.TB, key string) *Codec {
	t.Helper()
	c, err := NewCodec(7, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzDecodeReceipt: receipts come from clients; decoding arbitrary text
// never panics, and whatever decodes was produced by this key (the MAC of
// its version) and re-encodes, in that version, to the same text.
func FuzzDecodeReceipt(f *testing.F) {
	codec := testCodec(f, "0123456789abcdef0123456789abcdef")
	for _, v := range []byte{VersionKeyed, VersionCMAC, VersionHMAC} {
		f.Add(codec.EncodeVersion(Receipt{Group: "g", Topic: "t", QueueID: 3, Offset: 42, Epoch: 7}, v))
		f.Add(codec.EncodeVersion(Receipt{Group: "", Topic: "", QueueID: -1}, v))
	}
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		r, v, err := codec.DecodeVersion(s)
		if err != nil {
			return
		}
		if again := codec.EncodeVersion(r, v); again != s {
			t.Fatalf("decoded receipt re-encodes differently: %q vs %q", again, s)
		}
	})
}

func TestReceiptTamperingIsDetected(t *testing.T) {
	codec := testCodec(t, "0123456789abcdef0123456789abcdef")
	other := testCodec(t, "fedcba9876543210fedcba9876543210")
	want := Receipt{Group: "g", Topic: "t", QueueID: 1, Offset: 9, Epoch: 5}
	for _, v := range []byte{VersionKeyed, VersionCMAC, VersionHMAC} {
		s := codec.EncodeVersion(want, v)
		r, got, err := codec.DecodeVersion(s)
		if err != nil || r != want || got != v {
			t.Fatalf("version %d round trip: %+v %d %v", v, r, got, err)
		}
		if _, err := other.decode(s); err == nil {
			t.Fatalf("version %d: a receipt signed with another key was accepted", v)
		}
		b := []byte(s)
		for i := range b {
			flipped := append([]byte(nil), b...)
			flipped[i] ^= 1
			if _, err := codec.decode(string(flipped)); err == nil && string(flipped) != s {
				t.Fatalf("version %d: a receipt changed at byte %d was accepted", v, i)
			}
		}
	}
	// A receipt relabelled with the other version does not verify: the
	// version byte is under the MAC, and the other version's MAC is
	// another function.
	for _, v := range []byte{VersionCMAC, VersionHMAC} {
		raw, err := base64.RawURLEncoding.DecodeString(codec.EncodeVersion(want, v))
		if err != nil {
			t.Fatal(err)
		}
		raw[0] = VersionCMAC + VersionHMAC - v
		if _, err := codec.decode(base64.RawURLEncoding.EncodeToString(raw)); err == nil {
			t.Fatalf("a version %d receipt relabelled as version %d was accepted", v, raw[0])
		}
	}
}

// TestReceiptsWrittenAreVersion3: what a pull hands out is a CMAC receipt
// that names its key, of the length the layout says; a receipt naming
// another key id does not verify, even with the same secret.
func TestReceiptsWrittenAreVersion3(t *testing.T) {
	codec := testCodec(t, "0123456789abcdef0123456789abcdef")
	r := Receipt{Group: "orders-group", Topic: "orders", QueueID: 7, Offset: 1 << 40, Epoch: 1<<63 + 5}
	_, v, err := codec.DecodeVersion(codec.encode(r))
	if err != nil || v != VersionKeyed {
		t.Fatalf("version %d, %v", v, err)
	}
	if n := len(codec.encode(r)); n != base64.RawURLEncoding.EncodedLen(fixedLen+keyIDLen+len(r.Group)+len(r.Topic)) {
		t.Fatalf("receipt text of %d characters", n)
	}
	sameSecret, err := NewCodec(8, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sameSecret.decode(codec.encode(r)); err == nil {
		t.Fatal("a receipt of key 7 verified as key 8")
	}
}

// TestCMACVectors: the CMAC is RFC 4493's (its examples 1–4, and the
// subkeys of its section 4).
func TestCMACVectors(t *testing.T) {
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var m cmac
	if err := m.init(unhex("2b7e151628aed2a6abf7158809cf4f3c")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.k1[:], unhex("fbeed618357133667c85e08f7236a8de")) || !bytes.Equal(m.k2[:], unhex("f7ddac306ae266ccf90bc11ee46d513b")) {
		t.Fatalf("subkeys %x %x", m.k1, m.k2)
	}
	msg := unhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
	for _, c := range []struct {
		n   int
		tag string
	}{
		{0, "bb1d6929e95937287fa37d129b756746"},
		{16, "070a16b46b4d4144f79bdd9dd04a287c"},
		{40, "dfa66747de9ae63030ca32611497c827"},
		{64, "51f0bebf7e3b9d92fc49741779363cfe"},
	} {
		got := make([]byte, 16)
		m.tag(got, msg[:c.n])
		if hex.EncodeToString(got) != c.tag {
			t.Errorf("CMAC of %d bytes: %x, want %s", c.n, got, c.tag)
		}
	}
}

// BenchmarkReceipt: encode (every pulled message) and decode (every
// acked one).
func BenchmarkReceipt(b *testing.B) {
	codec := testCodec(b, "0123456789abcdef0123456789abcdef")
	r := Receipt{Group: "pb", Topic: "pull1", QueueID: 3, Offset: 123456, Epoch: 1<<62 + 9}
	for _, v := range []byte{VersionHMAC, VersionCMAC} {
		s := codec.EncodeVersion(r, v)
		b.Run("encode/v"+string('0'+v), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = codec.EncodeVersion(r, v)
			}
		})
		b.Run("decode/v"+string('0'+v), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := codec.decode(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
