// Package testnet gives tests loopback addresses for servers they start
// later: a process of the binary, or a replica whose address its peers
// must know before it listens.
package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr is a loopback address nobody listens on now. Its port is drawn
// below the kernel's ephemeral range (ip_local_port_range, 32768–60999 by
// default), which outgoing connections take their ports from: a port
// found by listening on port 0 lies in that range, and any client socket
// of the machine (another test's, a keep-alive to PostgreSQL) may take it
// before the server binds it ("address already in use"). Below the range
// only another listener can, and a listener takes a port chosen the same
// way with the same small chance.
func FreeAddr(t testing.TB) string {
	t.Helper()
	if low := ephemeralLow(); low > 10_000+1_000 {
		for range 200 {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 10_000+rand.IntN(low-10_000)))
			if err == nil {
				addr := ln.Addr().String()
				_ = ln.Close()
				return addr
			}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free loopback port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// ephemeralLow is the first port of the ephemeral range (0 when unknown).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}
