package server_test

// End-to-end tests of TLS (server/tls.go) over real connections against
// the real server: https with a test CA made here, the connection wrapper
// above TLS (problem bodies for net/http's own errors, lingering close),
// plain HTTP and TLS 1.1 refused, the key pair reloaded without a restart,
// client certificates signing in as accounts, the healthcheck and the
// admin listener.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pemCrt []byte
	serial int64
}

// newTestCA makes a CA named name.
func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pemCrt: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
}

// pool is a pool holding the CA.
func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issued is a certificate the CA issued, with its key, in PEM.
type issued struct {
	serial          int64
	certPEM, keyPEM []byte
	pair            tls.Certificate
}

// issue makes a server certificate for 127.0.0.1 and localhost, or a
// client certificate with subject CN cn.
func (ca *testCA) issue(t testing.TB, cn string, client bool) issued {
	t.Helper()
	if client {
		return ca.issueWith(t, cn, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	}
	return ca.issueWith(t, cn, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
}

// issueWith makes a certificate for a fresh key with subject CN cn, the
// extended key usages eku, and the names ips and dns.
func (ca *testCA) issueWith(t testing.TB, cn string, eku []x509.ExtKeyUsage, ips []net.IP, dns []string) issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  eku,
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	return ca.sign(t, tmpl, key)
}

// sign issues tmpl for key.
func (ca *testCA) sign(t testing.TB, tmpl *x509.Certificate, key *ecdsa.PrivateKey) issued {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	out := issued{
		serial:  ca.serial,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	out.pair, err = tls.X509KeyPair(out.certPEM, out.keyPEM)
	require.NoError(t, err)
	return out
}

// writeFile writes data to path by a rename, as certificate managers do.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// tlsSetup is a CA, the server's key pair files and the client CA file.
type tlsSetup struct {
	ca                        *testCA
	dir                       string
	certFile, keyFile, caFile string
	serverCert                issued
}

// newTLSSetup writes a fresh server key pair (and the CA as client CA)
// into a temporary directory.
func newTLSSetup(t testing.TB) *tlsSetup {
	t.Helper()
	s := &tlsSetup{ca: newTestCA(t, "mqgate test CA"), dir: t.TempDir()}
	s.certFile, s.keyFile, s.caFile = filepath.Join(s.dir, "tls.crt"), filepath.Join(s.dir, "tls.key"), filepath.Join(s.dir, "ca.crt")
	s.serverCert = s.ca.issue(t, "mqgate", false)
	writeFile(t, s.certFile, s.serverCert.certPEM)
	writeFile(t, s.keyFile, s.serverCert.keyPEM)
	writeFile(t, s.caFile, s.ca.pemCrt)
	return s
}

// config turns TLS on (with client certificates when clientCAs).
func (s *tlsSetup) config(clientCAs bool) func(*server.Config) {
	return func(c *server.Config) {
		c.TLSCertFile, c.TLSKeyFile = s.certFile, s.keyFile
		c.TLSReloadInterval = 10 * time.Millisecond
		if clientCAs {
			c.TLSClientCAFile = s.caFile
		}
	}
}

// httpsClient trusts the test CA and presents certs.
func (s *tlsSetup) httpsClient(t *testing.T, certs ...tls.Certificate) *http.Client {
	t.Helper()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: s.ca.pool(), Certificates: certs, MinVersion: tls.VersionTLS12}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}
}

// withClient is a copy of e speaking https with client c.
func (e *e2eServer) withClient(c *http.Client) *e2eServer {
	return &e2eServer{e.With("https://"+e.Srv.Addr(), c)}
}

// startTLSE2E starts a TLS server and returns it speaking https (no
// client certificate).
func startTLSE2E(t *testing.T, s *tlsSetup, opts ...func(*server.Config)) *e2eServer {
	t.Helper()
	e := startE2E(t, opts...)
	e.Client.CloseIdleConnections()
	e.Base = "https://" + e.Srv.Addr()
	e.Client = s.httpsClient(t)
	return e
}

// TestE2ETLSServesHTTPS: with a key pair the API speaks HTTPS only (TLS
// 1.2+, HTTP/1.1), the connection wrapper sits above TLS (net/http's own
// 431 is a problem, a 413 reaches a Python client that writes its whole
// body first), plain HTTP gets a 400 https-required problem, TLS 1.1 is
// refused, the healthcheck pins the server's certificate, and the admin
// listener speaks HTTPS too.
func TestE2ETLSServesHTTPS(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	e := startTLSE2E(t, s, s.config(false), func(c *server.Config) {
		c.AdminListen = "127.0.0.1:0"
		c.MaxRequestSize = 128 << 10
		c.MaxMessageSize = 64 << 10
	})

	resp, err := e.Client.Get(e.Base + "/readyz")
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, resp.TLS)
	require.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))
	require.Equal(t, "HTTP/1.1", resp.Proto)

	sent := e.Send(t, "tls-orders", api.SendMessage{Body: "over tls"})
	require.NotEmpty(t, sent.MessageID)
	got := e.PullN(t, "tls-group", "tls-orders", 1, 30_000, 10*time.Second)
	require.Equal(t, "over tls", got[0].Body)

	t.Run("NetHTTPErrorsAreProblems", func(t *testing.T) {
		conn, err := tls.Dial("tcp", e.Srv.Addr(), &tls.Config{RootCAs: s.ca.pool(), ServerName: "127.0.0.1"})
		require.NoError(t, err)
		defer conn.Close()
		require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = fmt.Fprintf(conn, "GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 80<<10))
		require.NoError(t, err)
		body, err := io.ReadAll(conn)
		require.NoError(t, err)
		require.Contains(t, string(body), "HTTP/1.1 431")
		require.Contains(t, string(body), "application/problem+json")
		require.Contains(t, string(body), `"code":"header-too-large"`)
	})

	t.Run("PythonSees413", func(t *testing.T) {
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("python3 not installed")
		}
		script := `
import ssl, sys, urllib.request, urllib.error
ctx = ssl.create_default_context(cafile=sys.argv[2])
req = urllib.request.Request(sys.argv[1], data=b"x" * (4 << 20), headers={"Content-Type": "text/plain"}, method="POST")
try:
    urllib.request.urlopen(req, context=ctx, timeout=20)
    print("no error")
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("Content-Type"))
`
		out, err := exec.Command("python3", "-c", script, e.Base+"/v1/topics/tls-orders/messages", s.caFile).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, "413 application/problem+json", strings.TrimSpace(string(out)))
	})

	t.Run("PlainHTTPGetsHTTPSRequired", func(t *testing.T) {
		plain := &http.Client{Timeout: 10 * time.Second}
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, err := http.NewRequest(method, "http://"+e.Srv.Addr()+"/v1/topics/tls-orders/messages", strings.NewReader(`{"body":"x"}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			resp, err := plain.Do(req)
			require.NoError(t, err, method)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			r := servertest.Resp{Status: resp.StatusCode, Header: resp.Header, Body: body}
			p := servertest.WantProblem(t, r, http.StatusBadRequest, "https-required")
			require.Contains(t, p.Detail, "use https://")
		}
	})

	t.Run("TLS11Refused", func(t *testing.T) {
		_, err := tls.Dial("tcp", e.Srv.Addr(), &tls.Config{RootCAs: s.ca.pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
		require.Error(t, err)
		require.Contains(t, err.Error(), "protocol version")
	})

	t.Run("HealthCheck", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, server.HealthCheckTLS(ctx, e.Srv.Addr(), s.certFile))
		require.Error(t, server.HealthCheck(ctx, e.Srv.Addr()), "plain http to the TLS port")
		other := filepath.Join(t.TempDir(), "other.crt")
		writeFile(t, other, s.ca.issue(t, "mqgate", false).certPEM)
		err := server.HealthCheckTLS(ctx, e.Srv.Addr(), other)
		require.Error(t, err)
		require.Contains(t, err.Error(), "is not the one in")
	})

	t.Run("AdminListener", func(t *testing.T) {
		resp, err := e.Client.Get("https://" + e.Srv.AdminAddr() + "/metrics")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Contains(t, string(body), "mqgate_build_info")
		require.NotNil(t, resp.TLS)
	})
}

// servedSerial is the serial number of the certificate the server shows
// on a request of c, and whether the connection was reused.
func servedSerial(t *testing.T, c *http.Client, url string) (int64, bool) {
	t.Helper()
	reused := false
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64(), reused
}

// TestE2ETLSReload: a new key pair written over the files is served to
// new connections without a restart, while an established connection
// keeps working; a pair that does not load leaves the last good one in
// force and /readyz says why.
func TestE2ETLSReload(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	e := startTLSE2E(t, s, s.config(false))
	url := e.Base + "/livez"

	old := s.httpsClient(t)
	serial, _ := servedSerial(t, old, url)
	require.Equal(t, s.serverCert.serial, serial)

	next := s.ca.issue(t, "mqgate", false)
	writeFile(t, s.keyFile, next.keyPEM)
	writeFile(t, s.certFile, next.certPEM)
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		fresh := s.httpsClient(t)
		got, _ := servedSerial(t, fresh, url)
		fresh.CloseIdleConnections()
		return got == next.serial, fmt.Sprintf("new connections are served serial %d, want %d", got, next.serial)
	})
	serial, reused := servedSerial(t, old, url)
	require.True(t, reused, "the established connection was kept")
	require.Equal(t, s.serverCert.serial, serial, "an established connection keeps its certificate")

	// A key that does not match the certificate: the last good pair stays.
	writeFile(t, s.certFile, s.ca.issue(t, "mqgate", false).certPEM)
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		r := e.Get(t, "/readyz")
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), "serving the key pair loaded at"), string(r.Body)
	})
	fresh := s.httpsClient(t)
	got, _ := servedSerial(t, fresh, url)
	require.Equal(t, next.serial, got, "the last good pair is served")
}

// TestE2ETLSClientCertificates: with --tls-client-ca-file a verified
// client certificate signs in as the account its subject CN names, with
// that account's permissions over every route of the matrix; a CN naming
// no account is a 401, a certificate of another CA is refused by the
// handshake, an Authorization header wins over the certificate, and Basic
// works as before over TLS.
func TestE2ETLSClientCertificates(t *testing.T) {
	t.Parallel()
	s := newTLSSetup(t)
	e := startTLSE2E(t, s, s.config(true), func(c *server.Config) {
		c.ACLFile = newACL(t, matrixACL(t))
		c.ACLPollInterval = 10 * time.Millisecond
		c.AuthFailuresPerMinute = 100_000
		c.Pprof = true
	})
	certClient := func(cn string) *e2eServer {
		return e.withClient(s.httpsClient(t, s.ca.issue(t, cn, true).pair))
	}
	adminE := certClient("admin")
	servertest.Decode(t, adminE.JSON(t, http.MethodPut, "/v1/topics/orders", map[string]int{"queues": 2}), http.StatusCreated, nil)
	servertest.Decode(t, adminE.JSON(t, http.MethodPut, "/v1/groups/billing", `{"subscriptions":[{"topic":"orders"}]}`), http.StatusCreated, nil)
	sent := certClient("producer").Send(t, "orders", api.SendMessage{Body: "first"})

	rows := []struct {
		name, role string
		e          *e2eServer
	}{
		{"producer-cert", "producer", certClient("producer")},
		{"consumer-cert", "consumer", certClient("consumer")},
		{"admin-cert", "admin", adminE},
		{"unknown-cert", "unknown-key", certClient("nobody")},
		{"no-cert", "anonymous", e},
	}
	half := certClient("producer").Send(t, "orders", api.SendMessage{Body: "half", Transactional: true, ProducerGroup: "order-service", CheckAfterMs: 60_000})
	calls := matrixCalls(sent.MessageID, half.TransactionID)
	keys := make([]string, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, op := range keys {
		call := calls[op]
		method, _, _ := strings.Cut(op, " ")
		for _, row := range rows {
			var body []byte
			if call.body != "" {
				body = []byte(call.body)
			}
			r := row.e.Do(t, method, call.path, call.contentType, body, nil)
			what := fmt.Sprintf("%s as %s: %s", op, row.name, r)
			switch want := expectedStatus(call, principal{name: row.role}); want {
			case 0:
				require.NotContains(t, []int{401, 403, 429}, r.Status, what)
				require.Less(t, r.Status, 500, what)
			default:
				require.Equal(t, want, r.Status, what)
			}
		}
	}

	p := servertest.WantProblem(t, certClient("nobody").Get(t, "/v1/topics"), http.StatusUnauthorized, "unauthenticated")
	require.Contains(t, p.Detail, `subject CN "nobody" names no account`)
	p = servertest.WantProblem(t, e.Get(t, "/v1/topics"), http.StatusUnauthorized, "unauthenticated")
	require.Contains(t, p.Detail, "or a client certificate")

	// The Authorization header wins: a wrong secret with the admin's
	// certificate is a 401, the producer's secret makes it the producer.
	servertest.WantProblem(t, adminE.Do(t, http.MethodGet, "/v1/topics", "", nil, basic("producer", "wrong-secret-1")), http.StatusUnauthorized, "unauthenticated")
	servertest.WantProblem(t, adminE.Do(t, http.MethodGet, "/v1/topics", "", nil, basic("producer", producerSecret)), http.StatusForbidden, "forbidden")
	servertest.Decode(t, e.Do(t, http.MethodGet, "/v1/topics/orders", "", nil, basic("producer", producerSecret)), http.StatusOK, nil)

	// A certificate of another CA fails the handshake (Go's client would
	// not even offer it: the server names its CAs).
	stranger := newTestCA(t, "stranger CA").issue(t, "admin", true)
	c := s.httpsClient(t)
	c.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &stranger.pair, nil
	}
	_, err := c.Get(e.Base + "/v1/topics")
	require.Error(t, err)
	require.Contains(t, err.Error(), "certificate")
}

// BenchmarkTLSOverhead compares a send over plain HTTP, over a kept-alive
// TLS connection and over a new TLS connection per request (handshake
// included), against the real server (auth off).
func BenchmarkTLSOverhead(b *testing.B) {
	for _, mode := range []string{"plain", "tls-keepalive", "tls-handshake-each"} {
		b.Run(mode, func(b *testing.B) {
			s := newTLSSetup(b)
			cfg := server.DefaultConfig()
			cfg.Listen, cfg.DataDir, cfg.SegmentSize = "127.0.0.1:0", b.TempDir(), 64<<20
			cfg.LogOutput, cfg.LogFormat, cfg.Flush = io.Discard, "json", "async"
			base := "http://"
			transport := http.DefaultTransport.(*http.Transport).Clone()
			if mode != "plain" {
				cfg.TLSCertFile, cfg.TLSKeyFile = s.certFile, s.keyFile
				base = "https://"
				transport.TLSClientConfig = &tls.Config{RootCAs: s.ca.pool()}
				transport.DisableKeepAlives = mode == "tls-handshake-each"
			}
			srv, err := server.Open(context.Background(), cfg)
			require.NoError(b, err)
			go func() { _ = srv.Serve() }()
			b.Cleanup(func() { _ = srv.Close(context.Background()) })
			client := &http.Client{Transport: transport}
			url := base + srv.Addr() + "/v1/topics/bench/messages"
			b.ResetTimer()
			for b.Loop() {
				resp, err := client.Post(url, "application/json", strings.NewReader(`{"body":"x"}`))
				require.NoError(b, err)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				require.Equal(b, http.StatusOK, resp.StatusCode)
			}
			transport.CloseIdleConnections()
		})
	}
}
