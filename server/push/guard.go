package push

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// The SSRF guard. A push endpoint is an URL an API user chose, so the
// gateway must not become their way into what only it can reach. Every
// connection goes through guard.dialContext, which resolves the host at
// delivery time, refuses the whole host when any of its addresses is
// forbidden, and dials the checked address itself (no second lookup a
// rebinding DNS server could answer differently). The dialer's Control
// hook checks the address once more right before connect(2), so nothing
// reaches a forbidden address whatever path led to the dial.
//
// Always forbidden: link-local (169.254.0.0/16 with the cloud metadata
// service 169.254.169.254, fe80::/10), AWS's IPv6 metadata address
// fd00:ec2::254, unspecified (0.0.0.0/8, ::), multicast and broadcast —
// also when written as IPv4-mapped or NAT64 IPv6 addresses. Plus every
// range on the operator's deny list. Loopback and private ranges are
// allowed by default so that local receivers work; deny them with
// --push-deny-cidrs where the gateway must not reach them.

// forbiddenRange is one always-forbidden range and why.
type forbiddenRange struct {
	prefix netip.Prefix
	why    string
}

// alwaysForbidden lists the ranges no deny list can re-allow; more
// specific entries come first so that the reason is the precise one.
var alwaysForbidden = []forbiddenRange{
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata address"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "the cloud metadata address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052), whose last 32 bits
// embed an IPv4 address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// LookupFunc resolves a host name to its addresses.
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// guard checks and dials push endpoints.
type guard struct {
	deny   []netip.Prefix
	lookup LookupFunc
	dialer *net.Dialer
}

func newGuard(deny []netip.Prefix, lookup LookupFunc) *guard {
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	g := &guard{deny: deny, lookup: lookup}
	g.dialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	return g
}

// forbiddenError is an address the guard refused; errors.Is matches it to
// ErrForbiddenAddress.
type forbiddenError struct {
	host string // the name that resolved to addr ("" for a literal)
	addr netip.Addr
	why  string
}

func (e *forbiddenError) Error() string { return ErrForbiddenAddress.Error() + ": " + e.detail() }

// Is makes errors.Is(err, ErrForbiddenAddress) hold.
func (e *forbiddenError) Is(target error) bool { return target == ErrForbiddenAddress }

// detail says what was refused, for the attempt's reason.
func (e *forbiddenError) detail() string {
	if e.host != "" && e.host != e.addr.String() {
		return e.addr.String() + " (" + e.host + ") is " + e.why
	}
	return e.addr.String() + " is " + e.why
}

// check returns a *forbiddenError when a may not be dialed.
func (g *guard) check(a netip.Addr) error {
	a = a.WithZone("").Unmap()
	if why := g.forbidden(a); why != "" {
		return &forbiddenError{addr: a, why: why}
	}
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		embedded := netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		if why := g.forbidden(embedded); why != "" {
			return &forbiddenError{addr: a, why: "NAT64 for " + embedded.String() + ", which is " + why}
		}
	}
	return nil
}

// forbidden says why a may not be dialed ("" when it may).
func (g *guard) forbidden(a netip.Addr) string {
	for _, f := range alwaysForbidden {
		if f.prefix.Contains(a) {
			return f.why
		}
	}
	for _, p := range g.deny {
		if p.Contains(a) {
			return "in the denied range " + p.String()
		}
	}
	return ""
}

// control is the dialer's last check, on the address about to be
// connected to.
func (g *guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &forbiddenError{why: fmt.Sprintf("not checkable (%q: %v)", address, err)}
	}
	return g.check(ap.Addr())
}

// dialContext resolves addr's host, refuses it when any address is
// forbidden, and dials the checked addresses in order.
func (g *guard) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portText, err)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = g.lookup(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
	}
	for _, a := range addrs {
		if err := g.check(a); err != nil {
			var fe *forbiddenError
			if errors.As(err, &fe) {
				fe.host = host
			}
			return nil, err
		}
	}
	var firstErr error
	for _, a := range addrs {
		conn, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}
