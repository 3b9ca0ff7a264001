package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStoreHost covers where the store host of message ids comes from.
func TestStoreHost(t *testing.T) {
	t.Parallel()
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	real := net.DefaultResolver.LookupNetIP
	ipv6Only := func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("2001:db8::1")}, nil
	}
	noSuchHost := func(context.Context, string, string) ([]netip.Addr, error) {
		return nil, errors.New("no such host")
	}
	for _, tc := range []struct {
		name, advertise, bound string
		lookup                 lookupFunc
		want, from             string
	}{
		{"AdvertisedIPv4", "10.1.2.3:9000", "127.0.0.1:4321", real, "10.1.2.3:9000", "advertise-addr"},
		{"AdvertisedMappedIPv4", "[::ffff:10.1.2.3]:9000", "127.0.0.1:4321", real, "10.1.2.3:9000", "advertise-addr"},
		{"AdvertisedNameResolved", "localhost:9000", "127.0.0.1:4321", real, "127.0.0.1:9000", "advertise-addr localhost"},
		{"SpecificIPv4Listen", "", "127.0.0.1:4321", real, "127.0.0.1:4321", "listen address"},
		{"SpecificOtherIPv4Listen", "", "127.0.0.2:4321", real, "127.0.0.2:4321", "listen address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, from, err := storeHost(context.Background(), tc.advertise, tcp(tc.bound), tc.lookup)
			require.NoError(t, err)
			require.Equal(t, tc.want, got.String())
			require.Equal(t, tc.from, from)
		})
	}

	t.Run("UnspecifiedListenUsesAnInterfaceAddress", func(t *testing.T) {
		t.Parallel()
		want, ok := firstNonLoopbackIPv4()
		if !ok {
			want = netip.MustParseAddr("127.0.0.1")
		}
		for _, bound := range []string{"0.0.0.0:4321", "[::]:4321", "[::1]:4321"} {
			got, from, err := storeHost(context.Background(), "", tcp(bound), real)
			require.NoError(t, err)
			require.Equal(t, netip.AddrPortFrom(want, 4321), got, "bound %s (%s)", bound, from)
			require.False(t, got.Addr().IsUnspecified())
		}
	})

	for _, tc := range []struct {
		name, advertise string
		lookup          lookupFunc
		wantErr         string
	}{
		{"IPv6Literal", "[2001:db8::1]:9000", real, "IPv4"},
		{"IPv6OnlyName", "v6.example:9000", ipv6Only, "has no IPv4 address"},
		{"UnresolvableName", "nowhere.invalid:9000", noSuchHost, "resolve nowhere.invalid"},
		{"NoPort", "10.1.2.3", real, "host:port"},
		{"PortZero", "10.1.2.3:0", real, "port must be 1-65535"},
		{"NoHost", ":9000", real, "host is missing"},
	} {
		t.Run("Refused/"+tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := storeHost(context.Background(), tc.advertise, tcp("127.0.0.1:4321"), tc.lookup)
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}
