package auth

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAddressPatterns(t *testing.T) {
	cases := []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"*", []string{"1.2.3.4", "::1"}, nil},
		{"*.*.*.*", []string{"1.2.3.4"}, nil},
		{"192.168.0.1", []string{"192.168.0.1", "::ffff:192.168.0.1"}, []string{"192.168.0.2"}},
		{"::1", []string{"::1"}, []string{"127.0.0.1"}},
		{"10.0.0.0/8", []string{"10.255.0.1"}, []string{"11.0.0.1"}},
		{"fd00::/8", []string{"fd12::1"}, []string{"fe80::1"}},
		{"10.0.*", []string{"10.0.0.0", "10.0.255.255"}, []string{"10.1.0.0", "::1"}},
		{"10.0.*.*", []string{"10.0.7.7"}, []string{"10.1.7.7"}},
		{"10.*", []string{"10.9.9.9"}, []string{"11.0.0.0"}},
		{"10.0.1.1-10", []string{"10.0.1.1", "10.0.1.10"}, []string{"10.0.1.0", "10.0.1.11", "10.0.2.5"}},
		{"10.0.1-3.*", []string{"10.0.1.0", "10.0.3.255"}, []string{"10.0.4.0", "10.0.0.9"}},
		{"10.0.1.{1,2, 3}", []string{"10.0.1.1", "10.0.1.3"}, []string{"10.0.1.4", "10.0.2.1"}},
	}
	for _, c := range cases {
		m, err := parseAddressPattern(c.pattern)
		require.NoError(t, err, c.pattern)
		for _, a := range c.match {
			require.True(t, m.match(netip.MustParseAddr(a).Unmap()), "%s should match %s", c.pattern, a)
		}
		for _, a := range c.miss {
			require.False(t, m.match(netip.MustParseAddr(a).Unmap()), "%s should not match %s", c.pattern, a)
		}
	}
	for _, bad := range []string{"", "10.0", "10.0.*.1", "10.0.1.10-1", "10.0.1.256", "10.0.1.01", "1.2.3.4.5",
		"10.0.1.{}", "10.0.{1,2}", "fe80::1%eth0", "fd00::*", "10.0.0.0/33", "host.example"} {
		_, err := parseAddressPattern(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestRemoteAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.2:5555":       "127.0.0.2",
		"[::ffff:10.0.0.1]:80": "10.0.0.1",
		"[fe80::1%eth0]:80":    "fe80::1",
		"[2001:db8::7]:443":    "2001:db8::7",
		"192.0.2.1":            "192.0.2.1",
	} {
		got, ok := remoteAddr(in)
		require.True(t, ok, in)
		require.Equal(t, want, got.String(), in)
	}
	_, ok := remoteAddr("pipe")
	require.False(t, ok)
}
