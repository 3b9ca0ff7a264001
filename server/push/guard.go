package push

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mqgate/mqgate/server/broker"
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
// range on the operator's deny list, and with DenyPrivate the loopback,
// private, shared (carrier-grade NAT) and unique-local ranges of both
// families (privateRanges). Loopback and private ranges are allowed by
// default so that local receivers work.
//
// Always forbidden too: the gateway's own listening sockets (Config.Self;
// a listener on an unspecified address stands for its port on loopback and
// on every local interface address). A push to the gateway's own send
// endpoint would store each message again and push it again, for ever.
// Loops the guard cannot see (another gateway, a relay, NAT hairpins) are
// stopped by the hop header every push carries (api.HeaderPushHop), which
// the send endpoint refuses.
//
// An IPv4-mapped address (::ffff:a.b.c.d) is checked as the IPv4 address
// it is on the wire; a NAT64 address (64:ff9b::/96) is also checked as
// the IPv4 address it embeds. Deny-list prefixes written in the mapped
// form (::ffff:10.0.0.0/104) are turned into their IPv4 prefix.
//
// CheckURLResolved applies the same rules when a group is saved: to
// literal addresses and localhost names, and to the addresses a host name
// resolves to at that moment; numeric host forms that resolvers disagree
// on and the metadata services' names are refused outright.

// forbiddenRange is one forbidden range and why.
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

// privateRanges are refused with Config.DenyPrivate: loopback, private
// (RFC 1918), shared address space (RFC 6598, carrier-grade NAT) and
// unique-local (RFC 4193) addresses. IPv4-mapped and NAT64 forms are
// covered by check, which tests the IPv4 address they stand for.
var privateRanges = []forbiddenRange{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (carrier-grade NAT)"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052), whose last 32 bits
// embed an IPv4 address.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// LookupFunc resolves a host name to its addresses.
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// guard checks and dials push endpoints.
type guard struct {
	deny        []netip.Prefix
	denyPrivate bool
	self        []netip.AddrPort
	localAddrs  func() ([]netip.Addr, error)
	lookup      LookupFunc
	dialer      *net.Dialer
}

// newGuard builds the guard of c (DenyCIDRs, DenyPrivate, Self,
// LocalAddrs, Lookup).
func newGuard(c Config) *guard {
	g := &guard{denyPrivate: c.DenyPrivate, self: c.Self, localAddrs: c.LocalAddrs, lookup: c.Lookup}
	for _, p := range c.DenyCIDRs {
		g.deny = append(g.deny, unmapPrefix(p))
	}
	if g.lookup == nil {
		g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if g.localAddrs == nil {
		g.localAddrs = interfaceAddrs
	}
	g.dialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	return g
}

// unmapPrefix turns an IPv4-mapped prefix (::ffff:10.0.0.0/104) into the
// IPv4 prefix it stands for (10.0.0.0/8): check tests mapped addresses as
// IPv4, so a mapped prefix would otherwise never match.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
	}
	return p
}

// interfaceAddrs lists the addresses of this host's interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		} else if ip, err := netip.ParseAddr(a.String()); err == nil {
			out = append(out, ip)
		}
	}
	return out, nil
}

// forbiddenError is an address the guard refused; errors.Is matches it to
// ErrForbiddenAddress.
type forbiddenError struct {
	host   string // the name that resolved to addr ("" for a literal)
	addr   netip.Addr
	target string // what was refused when it is more than addr (addr:port)
	why    string
}

func (e *forbiddenError) Error() string { return ErrForbiddenAddress.Error() + ": " + e.detail() }

// Is makes errors.Is(err, ErrForbiddenAddress) hold.
func (e *forbiddenError) Is(target error) bool { return target == ErrForbiddenAddress }

// detail says what was refused, for the attempt's reason.
func (e *forbiddenError) detail() string {
	what := e.addr.String()
	if e.target != "" {
		what = e.target
	}
	if e.host != "" && e.host != e.addr.String() {
		return what + " (" + e.host + ") is " + e.why
	}
	return what + " is " + e.why
}

// check returns a *forbiddenError when a may not be dialed, whatever the
// port.
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

// checkAddrPort is check plus the gateway's own listeners.
func (g *guard) checkAddrPort(ap netip.AddrPort) error {
	if err := g.check(ap.Addr()); err != nil {
		return err
	}
	a := ap.Addr().WithZone("").Unmap()
	target := netip.AddrPortFrom(a, ap.Port()).String()
	listener, err := g.ownListener(a, ap.Port())
	switch {
	case err != nil:
		// Fail closed: a push that might loop is not sent.
		return &forbiddenError{addr: a, target: target, why: "not checkable against this gateway's own listeners (" + err.Error() + ")"}
	case listener.IsValid():
		return &forbiddenError{addr: a, target: target, why: "this gateway's own listener " + listener.String() + " (a push there would store every message again)"}
	}
	return nil
}

// ownListener returns the gateway's listener that a:port reaches (the
// zero AddrPort when none): one on exactly that address, or one on an
// unspecified address with that port when a is loopback or an address of
// a local interface. a is unmapped.
func (g *guard) ownListener(a netip.Addr, port uint16) (netip.AddrPort, error) {
	var wildcard netip.AddrPort
	for _, l := range g.self {
		if l.Port() != port {
			continue
		}
		la := l.Addr().WithZone("").Unmap()
		switch {
		case la == a:
			return l, nil
		case la.IsUnspecified():
			wildcard = l
		}
	}
	if !wildcard.IsValid() {
		return netip.AddrPort{}, nil
	}
	if a.IsLoopback() {
		return wildcard, nil
	}
	local, err := g.localAddrs()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("list local addresses: %w", err)
	}
	for _, l := range local {
		if l.WithZone("").Unmap() == a {
			return wildcard, nil
		}
	}
	return netip.AddrPort{}, nil
}

// forbidden says why a may not be dialed ("" when it may).
func (g *guard) forbidden(a netip.Addr) string {
	for _, f := range alwaysForbidden {
		if f.prefix.Contains(a) {
			return f.why
		}
	}
	if g.denyPrivate {
		for _, f := range privateRanges {
			if f.prefix.Contains(a) {
				return f.why + " (private ranges are denied)"
			}
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
	return g.checkAddrPort(ap)
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
	if err := g.checkAll(host, addrs, uint16(port)); err != nil {
		return nil, err
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

// checkAll refuses host when any of its addresses may not be dialed on
// port (one good address does not launder a bad one).
func (g *guard) checkAll(host string, addrs []netip.Addr, port uint16) error {
	for _, a := range addrs {
		if err := g.checkAddrPort(netip.AddrPortFrom(a, port)); err != nil {
			var fe *forbiddenError
			if errors.As(err, &fe) {
				fe.host = host
			}
			return err
		}
	}
	return nil
}

// localhostAddrs are what localhost names stand for (RFC 6761 §6.3).
var localhostAddrs = []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}

// isLocalhost reports whether host is "localhost" or a name under it.
func isLocalhost(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// CheckURL refuses, when a group is saved, a push endpoint that delivery
// would certainly refuse, without resolving names: one whose host is a
// literal address (or a localhost name, which is always loopback) that is
// forbidden, denied or one of Self on the URL's port; a host in one of the
// numeric forms some resolvers read as an IPv4 address (2852039166,
// 0xa9fea9fe, 0251.0376.0251.0376, 169.254.43518: inet_aton's); and the
// cloud metadata services' names (metadataNames). A URL that does not
// parse is left to broker.NormalizePush. The error wraps
// broker.ErrInvalidArgument (a 400 invalid-argument) and
// ErrForbiddenAddress.
func (c Config) CheckURL(rawURL string) error {
	_, err := c.checkURL(context.Background(), rawURL, false)
	return err
}

// CheckURLResolved is CheckURL plus, for a host name, a lookup (bounded by
// saveLookupTimeout) whose every address must be allowed, so that a name
// pointing at a forbidden address is refused when the group is saved, not
// only at delivery. A name that does not resolve (yet) is accepted:
// delivery resolves and checks again on every connection, since where a
// name points may change.
func (c Config) CheckURLResolved(ctx context.Context, rawURL string) error {
	_, err := c.checkURL(ctx, rawURL, true)
	return err
}

// saveLookupTimeout bounds the lookup of CheckURLResolved.
const saveLookupTimeout = 3 * time.Second

// metadataNames are the names of cloud metadata services, refused
// whatever they resolve to here (GCP's, and AWS's instance-data).
var metadataNames = []string{"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}

// checkURL applies the save-time checks; resolved reports whether a name
// was resolved.
func (c Config) checkURL(ctx context.Context, rawURL string, resolve bool) (bool, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return false, nil
	}
	host := u.Hostname()
	port, err := urlPort(u)
	if err != nil {
		return false, fmt.Errorf("%w: push url: %w", broker.ErrInvalidArgument, err)
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	var addrs []netip.Addr
	switch a, err := netip.ParseAddr(host); {
	case err == nil:
		addrs = []netip.Addr{a}
	case isLocalhost(host):
		addrs = localhostAddrs
	case numericHost(lower):
		return false, fmt.Errorf("%w: push url: %w: host %s is a numeric form some resolvers read as an IPv4 address; write the address in dotted decimal",
			broker.ErrInvalidArgument, ErrForbiddenAddress, broker.QuoteValue(host))
	case slices.Contains(metadataNames, lower):
		return false, fmt.Errorf("%w: push url: %w: %s is a cloud metadata service", broker.ErrInvalidArgument, ErrForbiddenAddress, broker.QuoteValue(host))
	case !resolve:
		return false, nil
	default:
		g := newGuard(c)
		lookupCtx, cancel := context.WithTimeout(ctx, saveLookupTimeout)
		defer cancel()
		addrs, err = g.lookup(lookupCtx, host)
		if err != nil || len(addrs) == 0 {
			return false, nil // checked at delivery
		}
		if err := g.checkAll(host, addrs, port); err != nil {
			return true, fmt.Errorf("%w: push url: %w", broker.ErrInvalidArgument, err)
		}
		return true, nil
	}
	if err := newGuard(c).checkAll(host, addrs, port); err != nil {
		return false, fmt.Errorf("%w: push url: %w", broker.ErrInvalidArgument, err)
	}
	return false, nil
}

// numericHost reports whether host is 1 to 4 dot-separated numbers in
// decimal, octal (leading 0) or hexadecimal (0x) — what inet_aton, and so
// some resolvers and HTTP clients, take for an IPv4 address — without
// being a plain dotted-decimal address (netip parses those).
func numericHost(host string) bool {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		digits := p
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			digits, base = p[2:], 16
		case len(p) > 1 && p[0] == '0':
			digits, base = p[1:], 8
		}
		if digits == "" && base != 16 {
			return false
		}
		if _, err := strconv.ParseUint(digits, base, 32); err != nil && digits != "" {
			return false
		}
	}
	return true
}

// urlPort is u's port, or its scheme's default one.
func urlPort(u *url.URL) (uint16, error) {
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("port %q is not a number 0..65535", p)
		}
		return uint16(n), nil
	}
	if u.Scheme == "https" {
		return 443, nil
	}
	return 80, nil
}
