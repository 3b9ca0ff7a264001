package push

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// These tests never open a connection to a forbidden address: check and
// control are called directly, and the dial test refuses before dialing
// (a dial that got through would fail the test, not reach the address:
// the dialer's Control refuses it too).

func TestGuardCheck(t *testing.T) {
	t.Parallel()
	g := newGuard([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd12::/16")}, nil)
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
	g := newGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, nil)
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
	g := newGuard([]netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, lookup)
	for _, addr := range []string{"metadata.test:80", "mixed.test:80", "denied.test:8080", "169.254.169.254:80", "[::ffff:169.254.169.254]:80", "0.0.0.0:8080"} {
		conn, err := g.dialContext(context.Background(), "tcp", addr)
		require.Nil(t, conn, addr)
		require.ErrorIs(t, err, ErrForbiddenAddress, addr)
	}
	_, err := g.dialContext(context.Background(), "tcp", "unknown.test:80")
	require.ErrorContains(t, err, "no such host")
}
