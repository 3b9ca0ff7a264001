package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckAdvertiseAddr: --advertise-addr is host:port with a real port
// and a host; IPv6 and names are fine (message ids no longer hold it).
func TestCheckAdvertiseAddr(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"10.1.2.3:9000", "[2001:db8::1]:9000", "mq.example:443", "localhost:1"} {
		require.NoError(t, checkAdvertiseAddr(ok), ok)
	}
	for addr, want := range map[string]string{
		"10.1.2.3":     "host:port",
		"10.1.2.3:0":   "port must be 1-65535",
		"10.1.2.3:x":   "port must be 1-65535",
		":9000":        "host is missing",
		"a:b:c":        "host:port",
		"10.1.2.3:1e9": "port must be 1-65535",
	} {
		require.ErrorContains(t, checkAdvertiseAddr(addr), want, addr)
	}
}
