package push

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
)

// These tests never open a connection to a forbidden address: check and
// control are called directly, and the dial test refuses before dialing
// (a dial that got through would fail the test, not reach the address:
// the dialer's Control refuses it too).

func TestGuardCheck(t *testing.T) {
	t.Parallel()
	g := newGuard(Config{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd12::/16")}})
	for _, tc := range []struct {
		addr string
		why  string // "" = allowed
	}{
		{"169.254.169.254", "cloud metadata"},
		{"::ffff:169.254.169.254", "cloud metadata"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata"}, // NAT64 of 169.254.169.254
		{"fd00:ec2::254", "cloud metadata"},
		{"169.254.1.2", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"10.1.2.3", "denied range 10.0.0.0/8"},
		{"::ffff:10.1.2.3", "denied range 10.0.0.0/8"},
		{"fd12:3456::1", "denied range fd12::/16"},
		{"127.0.0.1", ""},
		{"::1", ""},
		{"192.168.1.10", ""},
		{"172.16.0.1", ""},
		{"8.8.8.8", ""},
		{"2001:db8::1", ""},
	} {
		err := g.check(netip.MustParseAddr(tc.addr))
		if tc.why == "" {
			require.NoError(t, err, tc.addr)
			continue
		}
		require.ErrorIs(t, err, ErrForbiddenAddress, tc.addr)
		require.Contains(t, err.Error(), tc.why, tc.addr)
	}
}

func TestGuardControl(t *testing.T) {
	t.Parallel()
	g := newGuard(Config{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}})
	require.ErrorIs(t, g.control("tcp4", "169.254.169.254:80", nil), ErrForbiddenAddress)
	require.ErrorIs(t, g.control("tcp6", "[fd00:ec2::254]:80", nil), ErrForbiddenAddress)
	require.ErrorIs(t, g.control("tcp4", "127.0.0.2:8080", nil), ErrForbiddenAddress)
	require.ErrorIs(t, g.control("tcp", "not-an-address", nil), ErrForbiddenAddress)
	require.NoError(t, g.control("tcp4", "127.0.0.1:8080", nil))
}

func TestGuardDialRefusesBeforeDialing(t *testing.T) {
	t.Parallel()
	lookups := map[string][]netip.Addr{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		// one good address does not launder a bad one
		"mixed.test":  {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("169.254.169.254")},
		"denied.test": {netip.MustParseAddr("127.0.0.2")},
	}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := lookups[host]; ok {
			return a, nil
		}
		return nil, errors.New("no such host")
	}
	g := newGuard(Config{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, Lookup: lookup})
	for _, addr := range []string{"metadata.test:80", "mixed.test:80", "denied.test:8080", "169.254.169.254:80", "[::ffff:169.254.169.254]:80", "0.0.0.0:8080"} {
		conn, err := g.dialContext(context.Background(), "tcp", addr)
		require.Nil(t, conn, addr)
		require.ErrorIs(t, err, ErrForbiddenAddress, addr)
	}
	_, err := g.dialContext(context.Background(), "tcp", "unknown.test:80")
	require.ErrorContains(t, err, "no such host")
}

// privateCases are the loopback, private, shared and unique-local
// addresses DenyPrivate refuses, in every spelling the guard normalises.
var privateCases = []struct{ addr, why string }{
	{"127.0.0.1", "loopback"},
	{"127.9.9.9", "loopback"},
	{"::1", "loopback"},
	{"::ffff:127.0.0.1", "loopback"},
	{"64:ff9b::7f00:1", "NAT64 for 127.0.0.1, which is loopback"},
	{"10.1.2.3", "private"},
	{"::ffff:10.1.2.3", "private"},
	{"64:ff9b::a01:203", "NAT64 for 10.1.2.3, which is private"},
	{"172.16.0.1", "private"},
	{"172.31.255.255", "private"},
	{"192.168.1.10", "private"},
	{"100.64.0.1", "carrier-grade NAT"},
	{"100.127.255.254", "carrier-grade NAT"},
	{"fc00::1", "unique-local"},
	{"fd00::1", "unique-local"},
	{"fd12:3456::1", "unique-local"},
}

func TestGuardDenyPrivate(t *testing.T) {
	t.Parallel()
	open, deny := newGuard(Config{}), newGuard(Config{DenyPrivate: true})
	for _, tc := range privateCases {
		a := netip.MustParseAddr(tc.addr)
		require.NoError(t, open.check(a), "%s is allowed by default", tc.addr)
		err := deny.check(a)
		require.ErrorIs(t, err, ErrForbiddenAddress, tc.addr)
		require.Contains(t, err.Error(), tc.why, tc.addr)
		require.Contains(t, err.Error(), "private ranges are denied", tc.addr)
	}
	// Neighbours of the ranges and public addresses stay allowed.
	for _, addr := range []string{"8.8.8.8", "203.0.113.7", "172.32.0.1", "172.15.255.255", "192.169.0.1",
		"100.128.0.1", "100.63.255.255", "11.0.0.1", "2001:db8::1", "2606:4700::1111", "fe00::1", "::ffff:8.8.8.8", "64:ff9b::808:808"} {
		require.NoError(t, deny.check(netip.MustParseAddr(addr)), addr)
	}
	// The always-forbidden reason stays the precise one.
	require.ErrorContains(t, deny.check(netip.MustParseAddr("fd00:ec2::254")), "cloud metadata")
}

// TestGuardDenyCIDRsCoverMappedForms: an IPv4 deny range refuses the
// IPv4-mapped and NAT64 spellings of its addresses, and a deny range
// written in the mapped form works as its IPv4 range.
func TestGuardDenyCIDRsCoverMappedForms(t *testing.T) {
	t.Parallel()
	g := newGuard(Config{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::ffff:10.0.0.0/104")}})
	for _, addr := range []string{"127.0.0.1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "10.1.2.3", "::ffff:10.1.2.3", "64:ff9b::a01:203"} {
		require.ErrorIs(t, g.check(netip.MustParseAddr(addr)), ErrForbiddenAddress, addr)
	}
	require.ErrorContains(t, g.check(netip.MustParseAddr("::ffff:10.1.2.3")), "10.1.2.3 is in the denied range 10.0.0.0/8")
	require.NoError(t, g.check(netip.MustParseAddr("::1")), "127.0.0.0/8 says nothing about ::1: that is what DenyPrivate is for")
	require.NoError(t, g.check(netip.MustParseAddr("11.0.0.1")))
}

func TestGuardOwnListener(t *testing.T) {
	t.Parallel()
	refused := func(t *testing.T, g *guard, addr, listener string) {
		t.Helper()
		err := g.checkAddrPort(netip.MustParseAddrPort(addr))
		require.ErrorIs(t, err, ErrForbiddenAddress, addr)
		require.ErrorContains(t, err, "this gateway's own listener "+listener, addr)
		require.ErrorIs(t, g.control("tcp", addr, nil), ErrForbiddenAddress, "the dialer's last check: %s", addr)
	}
	t.Run("SpecificAddress", func(t *testing.T) {
		t.Parallel()
		g := newGuard(Config{Self: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8080")},
			LocalAddrs: func() ([]netip.Addr, error) { panic("not needed for a listener on a specific address") }})
		refused(t, g, "127.0.0.1:8080", "127.0.0.1:8080")
		refused(t, g, "[::ffff:127.0.0.1]:8080", "127.0.0.1:8080")
		for _, addr := range []string{"127.0.0.1:8081", "127.0.0.2:8080", "[::1]:8080"} {
			require.NoError(t, g.checkAddrPort(netip.MustParseAddrPort(addr)), "not the listener: %s", addr)
		}
	})
	t.Run("Wildcard", func(t *testing.T) {
		t.Parallel()
		local := []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("fe80::1%eth0")}
		g := newGuard(Config{Self: []netip.AddrPort{netip.MustParseAddrPort("[::]:8080")},
			LocalAddrs: func() ([]netip.Addr, error) { return local, nil }})
		for _, addr := range []string{"127.0.0.1:8080", "127.5.5.5:8080", "[::1]:8080", "192.0.2.10:8080", "[::ffff:192.0.2.10]:8080", "[2001:db8::5]:8080"} {
			refused(t, g, addr, "[::]:8080")
		}
		for _, addr := range []string{"192.0.2.11:8080", "192.0.2.10:9090", "[2001:db8::6]:8080", "127.0.0.1:80"} {
			require.NoError(t, g.checkAddrPort(netip.MustParseAddrPort(addr)), "not the listener: %s", addr)
		}
	})
	t.Run("UnlistableInterfacesFailClosed", func(t *testing.T) {
		t.Parallel()
		g := newGuard(Config{Self: []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:8080")},
			LocalAddrs: func() ([]netip.Addr, error) { return nil, errors.New("netlink: no") }})
		require.ErrorContains(t, g.checkAddrPort(netip.MustParseAddrPort("192.0.2.10:8080")), "not checkable against this gateway's own listeners")
		require.NoError(t, g.checkAddrPort(netip.MustParseAddrPort("192.0.2.10:9090")), "other ports need no listing")
	})
}

// TestCheckURL is the check when a group is saved: literal addresses and
// localhost names are checked like a dial, other names are left to
// delivery time (never resolved here).
func TestCheckURL(t *testing.T) {
	t.Parallel()
	noLookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		t.Errorf("CheckURL resolved %s", host)
		return nil, errors.New("no lookups at save time")
	}
	self := Config{Self: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:8080"), netip.MustParseAddrPort("[::1]:80")}, Lookup: noLookup}
	private := Config{DenyPrivate: true, Lookup: noLookup}
	for _, tc := range []struct {
		cfg  Config
		url  string
		why  string // "" = accepted
		name string
	}{
		{self, "http://127.0.0.1:8080/v1/topics/T/messages", "127.0.0.1:8080 is this gateway's own listener 127.0.0.1:8080", "SelfByIP"},
		{self, "http://localhost:8080/v1/topics/T/messages", "127.0.0.1:8080 (localhost) is this gateway's own listener", "SelfByLocalhost"},
		{self, "https://LocalHost.:8080/", "(LocalHost.) is this gateway's own listener", "SelfByLocalhostSpelling"},
		{self, "http://gw.localhost:8080/", "(gw.localhost) is this gateway's own listener", "SelfByLocalhostSubdomain"},
		{self, "http://[::ffff:127.0.0.1]:8080/", "127.0.0.1:8080 (::ffff:127.0.0.1) is this gateway's own listener", "SelfByMappedIP"},
		{self, "http://[::1]/v1/topics/T/messages", "[::1]:80 is this gateway's own listener [::1]:80", "SelfByDefaultPort"},
		{self, "http://localhost/", "[::1]:80 (localhost) is this gateway's own listener", "SelfByLocalhostIPv6"},
		{self, "http://127.0.0.1:8081/hook", "", "OtherPort"},
		{self, "http://gateway.internal:8080/v1/topics/T/messages", "", "NamesAreCheckedAtDelivery"},
		{self, "http://169.254.169.254/latest/meta-data/", "169.254.169.254 is the cloud metadata address", "AlwaysForbidden"},
		{private, "http://[::1]:9/", "::1 is loopback", "PrivateIPv6Loopback"},
		{private, "http://127.0.0.1:9/", "127.0.0.1 is loopback", "PrivateLoopback"},
		{private, "http://10.1.2.3/", "10.1.2.3 is private", "Private10"},
		{private, "http://[fd00::1]/", "fd00::1 is unique-local", "PrivateULA"},
		{private, "http://[::ffff:127.0.0.1]:9/", "127.0.0.1 (::ffff:127.0.0.1) is loopback", "PrivateMapped"},
		{private, "http://localhost:9/", "127.0.0.1 (localhost) is loopback", "PrivateLocalhost"},
		{private, "https://203.0.113.7/hook", "", "PublicLiteral"},
		{private, "https://hooks.example.com/hook", "", "PublicName"},
		{Config{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, "http://[::ffff:127.0.0.1]:9/", "in the denied range 127.0.0.0/8", "DeniedMapped"},
		{Config{}, "http://127.0.0.1:99999/", "port \"99999\"", "BadPort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.CheckURL(tc.url)
			if tc.why == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, broker.ErrInvalidArgument)
			require.ErrorContains(t, err, tc.why)
			if tc.name != "BadPort" {
				require.ErrorIs(t, err, ErrForbiddenAddress)
			}
		})
	}
}

// TestCheckURLResolved: at save time a name is resolved and refused when
// any address is forbidden; a name that does not resolve is left to
// delivery; numeric host forms and metadata names are refused without a
// lookup.
func TestCheckURLResolved(t *testing.T) {
	t.Parallel()
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "rebind.example":
			return []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("169.254.169.254")}, nil
		case "hooks.example":
			return []netip.Addr{netip.MustParseAddr("203.0.113.8")}, nil
		case "inside.example":
			return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil
		}
		return nil, errors.New("no such host")
	}
	cfg := Config{Lookup: lookup}
	private := Config{Lookup: lookup, DenyPrivate: true}
	for _, tc := range []struct {
		cfg      Config
		url, why string
		name     string
	}{
		{cfg, "http://rebind.example/", "169.254.169.254 (rebind.example) is the cloud metadata address", "OneBadAddress"},
		{cfg, "http://hooks.example/", "", "Public"},
		{cfg, "http://inside.example/", "", "PrivateAllowed"},
		{private, "http://inside.example/", "10.0.0.5 (inside.example) is private", "PrivateDenied"},
		{cfg, "http://nxdomain.example/", "", "Unresolved"},
		{cfg, "http://2852039166/", "numeric form", "Decimal"},
		{cfg, "http://0xA9FEA9FE/", "numeric form", "Hex"},
		{cfg, "http://0251.0376.0251.0376/", "numeric form", "Octal"},
		{cfg, "http://169.254.43518/", "numeric form", "ThreeParts"},
		{cfg, "http://010.0.0.1/", "numeric form", "LeadingZero"},
		{cfg, "http://Metadata.Google.Internal./", "cloud metadata service", "MetadataName"},
		{cfg, "http://1.example/", "", "DigitLabel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.CheckURLResolved(context.Background(), tc.url)
			if tc.why == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, broker.ErrInvalidArgument)
			require.ErrorIs(t, err, ErrForbiddenAddress)
			require.ErrorContains(t, err, tc.why)
		})
	}
}
