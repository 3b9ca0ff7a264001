package clustercheck_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/internal/clustercheck"
)

// TestProxyBlocksAndHeals: through the proxy an echo server answers;
// blocked, the open connection is cut and a new one is accepted but never
// answered (a black hole, not a refusal); healed, a new one is answered.
func TestProxyBlocksAndHeals(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c) }()
		}
	}()
	p, err := clustercheck.NewProxy(ln.Addr().String())
	require.NoError(t, err)
	defer p.Close()

	echo := func(c net.Conn) (string, error) {
		_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return "", err
		}
		return bufio.NewReader(c).ReadString('\n')
	}
	open, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer open.Close()
	got, err := echo(open)
	require.NoError(t, err)
	require.Equal(t, "ping\n", got)

	p.Block()
	_, err = echo(open)
	require.Error(t, err, "the open connection is cut")
	held, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err, "a blocked link accepts")
	defer held.Close()
	_, err = echo(held)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "and never answers: %v", err)

	p.Heal()
	again, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer again.Close()
	got, err = echo(again)
	require.NoError(t, err)
	require.Equal(t, "ping\n", got)
}
