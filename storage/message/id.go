package message

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
)

// Host is a network address in 8 bytes: the IPv4 address (4 bytes, network
// order) followed by the port as a big-endian uint32. Part of the on-disk
// format; never change.
type Host [8]byte

// HostFrom converts addr to a Host. IPv4 and IPv4-mapped IPv6 addresses
// keep their address; any other address is recorded as 0.0.0.0 with its
// port, since the format has room for IPv4 only.
func HostFrom(addr netip.AddrPort) Host {
	var h Host
	if ip := addr.Addr().Unmap(); ip.Is4() {
		a := ip.As4()
		copy(h[:4], a[:])
	}
	binary.BigEndian.PutUint32(h[4:], uint32(addr.Port()))
	return h
}

// port returns the stored port.
func (h Host) port() uint32 { return binary.BigEndian.Uint32(h[4:]) }

// AddrPort returns h as a netip.AddrPort. A stored port above 65535 (never
// written by HostFrom) is truncated to 16 bits.
func (h Host) AddrPort() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(h[:4])), uint16(h.port()))
}

// String formats h as "a.b.c.d:port".
func (h Host) String() string {
	buf := make([]byte, 0, len("255.255.255.255:4294967295"))
	for i := 0; i < 4; i++ {
		if i > 0 {
			buf = append(buf, '.')
		}
		buf = strconv.AppendUint(buf, uint64(h[i]), 10)
	}
	buf = append(buf, ':')
	buf = strconv.AppendUint(buf, uint64(h.port()), 10)
	return string(buf)
}

// ID is a message id: the store host (8 bytes) followed by the record's
// CommitLog physical offset (8 bytes, big-endian), as in RocketMQ. Part of
// the on-disk and wire format; never change.
type ID [16]byte

// IDStringLen is the length of ID.String's result.
const IDStringLen = 2 * len(ID{})

// NewID builds the id of the record at CommitLog offset stored by host h.
func NewID(h Host, offset int64) ID {
	var id ID
	copy(id[:8], h[:])
	binary.BigEndian.PutUint64(id[8:], uint64(offset))
	return id
}

// Offset returns the CommitLog physical offset in id.
func (id ID) Offset() int64 { return int64(binary.BigEndian.Uint64(id[8:])) }

// Host returns the store host in id.
func (id ID) Host() Host { return Host(id[:8]) }

// String formats id as 32 upper-case hexadecimal characters.
func (id ID) String() string {
	const digits = "0123456789ABCDEF"
	var buf [IDStringLen]byte
	for i, b := range id {
		buf[2*i] = digits[b>>4]
		buf[2*i+1] = digits[b&0x0f]
	}
	return string(buf[:])
}

// ParseID parses the 32 hexadecimal characters of an id, in either case.
// Anything else is ErrBadID.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != IDStringLen {
		return id, fmt.Errorf("%w: length %d, want %d", ErrBadID, len(s), IDStringLen)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return ID{}, fmt.Errorf("%w: %q", ErrBadID, s)
	}
	return id, nil
}
