package server

import (
	"fmt"
	"net"
	"strconv"
)

// --advertise-addr is the host:port clients use to reach this server
// behind a proxy or a name; its host is allowed in Host headers
// (browser.go). Message ids no longer carry it: they name the store (see
// "Store id" in storage/doc.go), so that every copy of a log mints the
// same ids.

// checkAdvertiseAddr checks the form of --advertise-addr: host:port with a
// port in 1-65535 and a host (an address or a name).
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
	return nil
}
