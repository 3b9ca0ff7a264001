package peer

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"time"
)

// HTTP/2 settings of both ends. The receive windows are raised from
// net/http's defaults so that a batch of a few MiB is not held back by
// flow control on a link with some latency.
const (
	receiveBufferPerStream = 4<<20 - 1 // must be below 4 MiB
	receiveBufferPerConn   = 4<<20 - 1
	maxReadFrameSize       = 1 << 20
	// A connection silent this long is pinged, and closed when the ping
	// goes unanswered, so a peer that vanished without a FIN is noticed.
	pingAfter   = 10 * time.Second
	pingTimeout = 5 * time.Second
)

// NewServer is the peer port's server, serving h: HTTP/2 without TLS
// (h2c, prior knowledge, as Client and the Transport speak it) and
// HTTP/1.1 beside it (for tools); with tlsConf (ServerTLS), HTTP/2 and
// HTTP/1.1 over TLS only, the caller serving a tls.NewListener(ln,
// tlsConf). h is typically a mux holding Handler at MessagesPath and the
// routes that forward client requests to the leader. The caller runs
// Serve(listener) and Shutdown/Close.
func NewServer(addr string, h http.Handler, tlsConf *tls.Config) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	if tlsConf != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		Protocols:         &p,
		TLSConfig:         tlsConf,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream:     receiveBufferPerStream,
			MaxReceiveBufferPerConnection: receiveBufferPerConn,
			MaxReadFrameSize:              maxReadFrameSize,
			SendPingTimeout:               pingAfter,
			PingTimeout:                   pingTimeout,
		},
	}
}

// ServerTLS and ClientTLS are the peer port's mutual TLS: every replica
// holds a key pair its cluster's CA signed (for server and client
// authentication, naming its peer address) and trusts that CA only; a
// peer without a certificate the CA signed is refused at the handshake.
// TLS 1.3, HTTP/2.
func ServerTLS(pair tls.Certificate, ca *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"h2", "http/1.1"},
		Certificates: []tls.Certificate{pair},
		ClientCAs:    ca,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
}

// ClientTLS: see ServerTLS.
func ClientTLS(pair tls.Certificate, ca *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"h2"},
		Certificates: []tls.Certificate{pair},
		RootCAs:      ca,
	}
}

// Scheme is the scheme of the peer port's URLs: "https" with TLS, else
// "http" (h2c).
func Scheme(tlsConf *tls.Config) string {
	if tlsConf != nil {
		return "https"
	}
	return "http"
}

// newTransport speaks HTTP/2 only, without TLS (prior knowledge) or,
// with tlsConf (ClientTLS) or certs (the pair and pool in force at each
// dial), over TLS: one long-lived connection per peer carries every
// request, multiplexed.
func newTransport(tlsConf *tls.Config, certs *Certs) *http.Transport {
	var p http.Protocols
	if tlsConf != nil || certs != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	d := &net.Dialer{Timeout: 3 * time.Second, KeepAlive: 30 * time.Second}
	var dialTLS func(context.Context, string, string) (net.Conn, error)
	if certs != nil {
		dialTLS = certs.dialTLS(d)
	}
	return &http.Transport{
		Protocols:           &p,
		DialTLSContext:      dialTLS,
		DialContext:         d.DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 3 * time.Second,
		IdleConnTimeout:     5 * time.Minute,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream:     receiveBufferPerStream,
			MaxReceiveBufferPerConnection: receiveBufferPerConn,
			MaxReadFrameSize:              maxReadFrameSize,
			SendPingTimeout:               pingAfter,
			PingTimeout:                   pingTimeout,
		},
	}
}

// Client is an HTTP client for the peer port: HTTP/2 to
// "http://host:port" URLs (h2c), or to "https://host:port" ones with
// tlsConf (ClientTLS), with "Authorization: Bearer <secret>" on every
// request when secret is not empty (it replaces an Authorization header
// the request had: a forwarder that must carry a caller's credentials
// moves them to a header of its own first). The server reuses it to
// forward requests to the leader's peer address. Its connections stay
// open until CloseIdleConnections.
func Client(secret string, tlsConf *tls.Config) *http.Client {
	return &http.Client{Transport: bearer{secret: secret, next: newTransport(tlsConf, nil)}}
}

// ClientCerts is Client over TLS with the key pair and CA pool certs
// holds at each dial ("https://host:port" URLs).
func ClientCerts(secret string, certs *Certs) *http.Client {
	return &http.Client{Transport: bearer{secret: secret, next: newTransport(nil, certs)}}
}

// bearer adds the peer secret to each request.
type bearer struct {
	secret string
	next   *http.Transport
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.secret != "" {
		r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
		r.Header.Set("Authorization", "Bearer "+b.secret)
	}
	return b.next.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport.
func (b bearer) CloseIdleConnections() { b.next.CloseIdleConnections() }

// Authorized reports whether r carries "Authorization: Bearer <secret>";
// an empty secret authorizes everything. The comparison takes the same
// time whatever the header holds (both sides are hashed first, so not
// even the secret's length shows).
func Authorized(r *http.Request, secret string) bool {
	if secret == "" {
		return true
	}
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	got, want := sha256.Sum256([]byte(h[len(prefix):])), sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}
