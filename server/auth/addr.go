package auth

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// addressMatcher matches a remote address against one white-list entry.
type addressMatcher interface {
	match(addr netip.Addr) bool
}

// addressList matches when any of its entries does.
type addressList []addressMatcher

func (l addressList) match(addr netip.Addr) bool {
	for _, m := range l {
		if m.match(addr) {
			return true
		}
	}
	return false
}

// anyAddress is "*".
type anyAddress struct{}

func (anyAddress) match(netip.Addr) bool { return true }

// prefixAddress is an exact address (a /32 or /128) or a CIDR prefix.
type prefixAddress struct{ prefix netip.Prefix }

func (p prefixAddress) match(addr netip.Addr) bool { return p.prefix.Contains(addr) }

// segmentAddress is an IPv4 pattern of RocketMQ's: each of the four
// segments is a range [lo, hi] ("*" is 0-255; missing trailing segments
// are "*").
type segmentAddress struct{ lo, hi [4]uint8 }

func (s segmentAddress) match(addr netip.Addr) bool {
	if !addr.Is4() {
		return false
	}
	b := addr.As4()
	for i := range b {
		if b[i] < s.lo[i] || b[i] > s.hi[i] {
			return false
		}
	}
	return true
}

// setAddress is RocketMQ's "192.168.1.{1,2,3}": the prefix's first three
// segments and one of the listed last ones.
type setAddress struct {
	first [3]uint8
	last  map[uint8]bool
}

func (s setAddress) match(addr netip.Addr) bool {
	if !addr.Is4() {
		return false
	}
	b := addr.As4()
	return b[0] == s.first[0] && b[1] == s.first[1] && b[2] == s.first[2] && s.last[b[3]]
}

// parseAddressPattern parses one white-list entry, in RocketMQ's
// notations plus CIDR:
//
//   - every address
//     192.168.0.1, ::1          one address (IPv4 or IPv6)
//     10.0.0.0/8, fd00::/8      a CIDR prefix
//     10.0.*, 10.0.*.*          IPv4 segments as wildcards (missing trailing ones are *)
//     10.0.1.1-10, 10.0.1-3.*   a range of one segment (later segments *)
//     10.0.1.{1,2,3}            a set of last segments
func parseAddressPattern(s string) (addressMatcher, error) {
	s = strings.TrimSpace(s)
	bad := func(why string) error {
		return fmt.Errorf("address pattern %q: %s (want an address, a CIDR such as 10.0.0.0/8, *, 10.0.*, 10.0.1.1-10 or 10.0.1.{1,2})", s, why)
	}
	switch {
	case s == "":
		return nil, bad("empty")
	case s == "*" || s == "*.*.*.*":
		return anyAddress{}, nil
	case strings.Contains(s, "/"):
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, bad(err.Error())
		}
		return prefixAddress{p.Masked()}, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return nil, bad("a zone is not allowed")
		}
		a = a.Unmap()
		return prefixAddress{netip.PrefixFrom(a, a.BitLen())}, nil
	}
	if strings.Contains(s, ":") {
		return nil, bad("not an IPv6 address; IPv6 takes an exact address or a CIDR")
	}
	if strings.HasSuffix(s, "}") {
		head, list, ok := strings.Cut(strings.TrimSuffix(s, "}"), "{")
		parts := strings.Split(head, ".")
		if !ok || len(parts) != 4 || parts[3] != "" {
			return nil, bad("a set is written a.b.c.{x,y}")
		}
		var m setAddress
		for i := 0; i < 3; i++ {
			v, err := segment(parts[i])
			if err != nil {
				return nil, bad(err.Error())
			}
			m.first[i] = v
		}
		m.last = make(map[uint8]bool)
		for _, x := range strings.Split(list, ",") {
			v, err := segment(strings.TrimSpace(x))
			if err != nil {
				return nil, bad(err.Error())
			}
			m.last[v] = true
		}
		return m, nil
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return nil, bad("more than four segments")
	}
	var m segmentAddress
	wild := false // after a wildcard or a range every segment must be *
	for i := 0; i < 4; i++ {
		if i >= len(parts) {
			if !wild {
				return nil, bad("fewer than four segments without a wildcard")
			}
			m.lo[i], m.hi[i] = 0, 255
			continue
		}
		p := parts[i]
		switch {
		case p == "*":
			m.lo[i], m.hi[i], wild = 0, 255, true
		case wild:
			return nil, bad("only * may follow a wildcard or a range")
		case strings.Contains(p, "-"):
			loText, hiText, _ := strings.Cut(p, "-")
			lo, err := segment(loText)
			if err != nil {
				return nil, bad(err.Error())
			}
			hi, err := segment(hiText)
			if err != nil {
				return nil, bad(err.Error())
			}
			if lo > hi {
				return nil, bad("a range runs from low to high")
			}
			m.lo[i], m.hi[i], wild = lo, hi, true
		default:
			v, err := segment(p)
			if err != nil {
				return nil, bad(err.Error())
			}
			m.lo[i], m.hi[i] = v, v
		}
	}
	if !wild {
		return nil, bad("not an address")
	}
	return m, nil
}

// segment parses one IPv4 segment (0-255, no sign, no leading zeros).
func segment(s string) (uint8, error) {
	if s == "" || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("segment %q is not 0-255", s)
	}
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("segment %q is not 0-255", s)
	}
	return uint8(v), nil
}

// remoteAddr parses http.Request.RemoteAddr ("ip:port") into an address,
// IPv4-mapped IPv6 addresses unmapped.
func remoteAddr(s string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Addr{}, false
		}
		return a.Unmap().WithZone(""), true
	}
	return ap.Addr().Unmap().WithZone(""), true
}
