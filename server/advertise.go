package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// A message id carries the store host that minted it: an IPv4 address and
// a port (storage/message.Host; the format has room for IPv4 only). The
// store host is --advertise-addr, or else derived from the listener.

// lookupFunc resolves a host name, as net.Resolver.LookupNetIP.
type lookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// checkAdvertiseAddr checks the form of --advertise-addr: host:port with a
// port in 1-65535 and a host that is an IPv4 address or a name (resolved
// at start). An IPv6 address is refused.
func checkAdvertiseAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("advertise-addr %q: want host:port: %v", addr, err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("advertise-addr %q: port must be 1-65535", addr)
	}
	if host == "" {
		return fmt.Errorf("advertise-addr %q: the host is missing", addr)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !ip.Unmap().Is4() {
		return fmt.Errorf("advertise-addr %q: message ids hold an IPv4 address; give an IPv4 address or a name that resolves to one", addr)
	}
	return nil
}

// storeHost returns the store host for message ids and where it came from
// (for the start-up log): the advertised address (a name resolved to its
// first IPv4 address), else the bound listen address when that is a
// specific IPv4 address, else the first non-loopback IPv4 address of the
// host's interfaces (127.0.0.1 if there is none) with the bound port.
// lookup resolves names (net.DefaultResolver.LookupNetIP).
func storeHost(ctx context.Context, advertise string, bound net.Addr, lookup lookupFunc) (netip.AddrPort, string, error) {
	if advertise != "" {
		if err := checkAdvertiseAddr(advertise); err != nil {
			return netip.AddrPort{}, "", err
		}
		host, portText, _ := net.SplitHostPort(advertise)
		port, _ := strconv.ParseUint(portText, 10, 16)
		if ip, err := netip.ParseAddr(host); err == nil {
			return netip.AddrPortFrom(ip.Unmap(), uint16(port)), "advertise-addr", nil
		}
		ips, err := lookup(ctx, "ip", host)
		if err != nil {
			return netip.AddrPort{}, "", fmt.Errorf("advertise-addr %q: resolve %s: %w", advertise, host, err)
		}
		for _, ip := range ips {
			if ip = ip.Unmap(); ip.Is4() {
				return netip.AddrPortFrom(ip, uint16(port)), "advertise-addr " + host, nil
			}
		}
		return netip.AddrPort{}, "", fmt.Errorf("advertise-addr %q: %s has no IPv4 address (%v); message ids hold an IPv4 address", advertise, host, ips)
	}
	listen, err := netip.ParseAddrPort(bound.String())
	if err != nil {
		return netip.AddrPort{}, "", fmt.Errorf("listen address %s: %w", bound, err)
	}
	if ip := listen.Addr().Unmap(); ip.Is4() && !ip.IsUnspecified() {
		return netip.AddrPortFrom(ip, listen.Port()), "listen address", nil
	}
	if ip, ok := firstNonLoopbackIPv4(); ok {
		return netip.AddrPortFrom(ip, listen.Port()), "first non-loopback IPv4 address", nil
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), listen.Port()), "no non-loopback IPv4 address", nil
}

// firstNonLoopbackIPv4 returns the first IPv4 address of the host's
// interfaces that is neither loopback nor link-local.
func firstNonLoopbackIPv4() (netip.Addr, bool) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		prefix, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := prefix.Addr().Unmap(); ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsUnspecified() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}
