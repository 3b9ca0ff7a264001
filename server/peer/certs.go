package peer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync/atomic"
)

// Certs is the peer port's key pair and CA pool, replaceable while the
// port serves (Set: a rotated certificate, a CA bundle with a new CA in
// it): the configurations of ServerTLS and the connections of a
// Transport or Client made with Certs look them up at every handshake,
// so new connections use what is in force and established ones keep
// theirs.
type Certs struct {
	cur  atomic.Pointer[certs]
	hook atomic.Pointer[func()]
}

type certs struct {
	pair tls.Certificate
	ca   *x509.CertPool
}

// NewCerts holds pair and ca.
func NewCerts(pair tls.Certificate, ca *x509.CertPool) *Certs {
	c := &Certs{}
	c.Set(pair, ca)
	return c
}

// Set puts pair and ca in force for the handshakes that follow.
func (c *Certs) Set(pair tls.Certificate, ca *x509.CertPool) {
	c.cur.Store(&certs{pair: pair, ca: ca})
}

// OnHandshake makes f run before every handshake (a reloader that looks
// at its files, and may Set).
func (c *Certs) OnHandshake(f func()) { c.hook.Store(&f) }

// current runs the hook and returns what is in force.
func (c *Certs) current() *certs {
	if f := c.hook.Load(); f != nil {
		(*f)()
	}
	return c.cur.Load()
}

// ServerTLS is the peer listener's configuration: ServerTLS of the pair
// and pool in force at each handshake.
func (c *Certs) ServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cur := c.current()
			return ServerTLS(cur.pair, cur.ca), nil
		},
	}
}

// dialTLS dials addr and shakes hands with ClientTLS of the pair and
// pool in force, verifying the peer's certificate for addr's host (a
// name, or an IP address its certificate must name).
func (c *Certs) dialTLS(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		raw, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cur := c.current()
		conf := ClientTLS(cur.pair, cur.ca)
		conf.ServerName = host
		tc := tls.Client(raw, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			return nil, errors.Join(err, raw.Close())
		}
		return tc, nil
	}
}
