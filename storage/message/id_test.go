package message_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/message"
)

func TestHost(t *testing.T) {
	t.Parallel()
	t.Run("OK_IPv4", func(t *testing.T) {
		ap := netip.MustParseAddrPort("10.1.2.3:8080")
		h := message.HostFrom(ap)
		require.Equal(t, message.Host{10, 1, 2, 3, 0, 0, 0x1f, 0x90}, h)
		require.Equal(t, ap, h.AddrPort())
		require.Equal(t, "10.1.2.3:8080", h.String())
	})
	t.Run("OK_IPv4MappedIPv6", func(t *testing.T) {
		h := message.HostFrom(netip.MustParseAddrPort("[::ffff:10.1.2.3]:1"))
		require.Equal(t, "10.1.2.3:1", h.String())
	})
	t.Run("OK_IPv6KeepsOnlyPort", func(t *testing.T) {
		h := message.HostFrom(netip.MustParseAddrPort("[2001:db8::1]:443"))
		require.Equal(t, "0.0.0.0:443", h.String())
	})
	t.Run("OK_Zero", func(t *testing.T) {
		require.Equal(t, "0.0.0.0:0", message.Host{}.String())
	})
}

func TestID(t *testing.T) {
	t.Parallel()
	host := message.HostFrom(netip.MustParseAddrPort("192.168.0.1:10911"))
	id := message.NewID(host, 0x0123456789ABCDEF)

	t.Run("OK_Layout", func(t *testing.T) {
		require.Equal(t, "C0A80001", id.String()[:8])
		require.Equal(t, "00002A9F", id.String()[8:16])
		require.Equal(t, "0123456789ABCDEF", id.String()[16:])
		require.Equal(t, int64(0x0123456789ABCDEF), id.Offset())
		require.Equal(t, host, id.Host())
	})
	t.Run("OK_RoundTripBothCases", func(t *testing.T) {
		s := id.String()
		require.Len(t, s, message.IDStringLen)
		require.Equal(t, strings.ToUpper(s), s)
		for _, in := range []string{s, strings.ToLower(s)} {
			got, err := message.ParseID(in)
			require.NoError(t, err)
			require.Equal(t, id, got)
		}
	})
	t.Run("OK_NegativeOffset", func(t *testing.T) {
		require.Equal(t, int64(-1), message.NewID(host, -1).Offset())
	})
	for _, bad := range []string{"", "C0A80001", id.String() + "0", id.String()[:31] + "G", strings.Repeat(" ", 32)} {
		t.Run("ErrBadID_"+bad, func(t *testing.T) {
			_, err := message.ParseID(bad)
			require.ErrorIs(t, err, message.ErrBadID)
		})
	}
}
