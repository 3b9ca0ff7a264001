package receipt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/subtle"
)

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
