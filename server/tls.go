package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/peer"
)

// TLS, when --tls-cert-file and --tls-key-file are given:
//
//   - TLS 1.2 and 1.3 only; Go's default cipher suites (all AEAD with
//     forward secrecy for 1.2). HTTP/1.1 only (ALPN "http/1.1"): the
//     connection wrapper of conn.go — problem bodies for net/http's own
//     errors, lingering close — is an HTTP/1 thing and sits above TLS.
//   - The key pair (and the client CA bundle) is re-read when a file
//     changes: every handshake looks at the files' stat, at most once per
//     tlsReloadInterval, and a changed pair is loaded and served to new
//     connections; established connections keep theirs. A pair that does
//     not load (a half-written rotation, a key that does not match) leaves
//     the previous one in force, is logged once and reported by /readyz,
//     like the ACL file.
//   - With --tls-client-ca-file, clients may present a certificate signed
//     by that CA (requested, not required: Basic and bearer clients work
//     as before); a verified certificate's subject Common Name is the
//     accessKey of the account it signs in as (server/auth).
//   - Plain HTTP sent to the TLS port gets a 400 https-required problem
//     in plain text (serverConn.handshake).

// tlsReloadInterval is how often, at most, a handshake looks at the
// certificate files.
const tlsReloadInterval = time.Second

// tlsFiles is the server's key pair and client CA bundle, kept loaded
// and re-read when the files change. Its serverConfig hands every
// handshake the current *tls.Config.
type tlsFiles struct {
	certFile, keyFile, caFile string
	interval                  time.Duration
	log                       zerolog.Logger
	// what names the files in errors ("tls", "peer tls"); build makes a
	// handshake configuration of a key pair and the CA pool (nil without
	// caFile): clientTLSConfig unless set. certs, when set, gets every
	// version put in force (the peer port's, package peer).
	what  string
	build func(tls.Certificate, *x509.CertPool) *tls.Config
	certs *peer.Certs

	// current is the configuration handshakes get.
	current atomic.Pointer[tls.Config]

	mu sync.Mutex
	// checked is when the files were last looked at.
	checked time.Time
	// stamps are the stats of the files of the version in force.
	stamps [3]tlsStamp
	// loadedAt is when the version in force was loaded; notAfter is the
	// expiry of its certificate.
	loadedAt time.Time
	notAfter time.Time
	// lastErr is why the newest files did not load (nil when they did).
	lastErr error
}

// tlsStamp is what a stat says about a version of a file.
type tlsStamp struct {
	info    os.FileInfo
	size    int64
	modTime time.Time
}

// same reports whether two stamps are of the same version of a file.
func (a tlsStamp) same(b tlsStamp) bool {
	if a.info == nil || b.info == nil {
		return a.info == b.info
	}
	return a.size == b.size && a.modTime.Equal(b.modTime) && os.SameFile(a.info, b.info)
}

// openTLS loads the key pair and the client CA bundle of cfg (nil, nil
// without TLS).
func openTLS(cfg Config, log zerolog.Logger) (*tlsFiles, error) {
	if cfg.TLSCertFile == "" {
		return nil, nil
	}
	f := &tlsFiles{
		certFile: cfg.TLSCertFile,
		keyFile:  cfg.TLSKeyFile,
		caFile:   cfg.TLSClientCAFile,
		interval: cfg.TLSReloadInterval,
		log:      log.With().Str("component", "tls").Logger(),
		what:     "tls",
	}
	if err := f.open(); err != nil {
		return nil, err
	}
	f.log.Info().Str("cert_file", f.certFile).Str("client_ca_file", f.caFile).Time("not_after", f.notAfter).
		Msg("TLS on: serving https")
	return f, nil
}

// open loads the files and puts them in force.
func (f *tlsFiles) open() error {
	if f.interval <= 0 {
		f.interval = tlsReloadInterval
	}
	stamps := f.stat()
	v, err := f.load()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	f.install(v, stamps, time.Now())
	return nil
}

// openPeerTLS loads the peer port's key pair and CA bundle of cfg (nil
// without --peer-tls-*), re-read when the files change as --tls-* are:
// the peer listener's handshakes and the dials to the peers (package
// peer's Certs) use the version in force.
func openPeerTLS(cfg Config, log zerolog.Logger) (*tlsFiles, error) {
	if cfg.PeerTLSCertFile == "" {
		return nil, nil
	}
	f := &tlsFiles{
		certFile: cfg.PeerTLSCertFile,
		keyFile:  cfg.PeerTLSKeyFile,
		caFile:   cfg.PeerTLSCAFile,
		interval: cfg.TLSReloadInterval,
		log:      log.With().Str("component", "peer-tls").Logger(),
		what:     "peer tls",
		build:    peer.ServerTLS,
		certs:    &peer.Certs{},
	}
	f.certs.OnHandshake(func() { f.maybeReload(time.Now()) })
	if err := f.open(); err != nil {
		return nil, err
	}
	f.log.Info().Str("cert_file", f.certFile).Str("ca_file", f.caFile).Time("not_after", f.notAfter).
		Msg("mutual TLS on the peer port")
	return f, nil
}

// serverConfig is the configuration of the TLS listener: every handshake
// asks for the current one.
func (f *tlsFiles) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			f.maybeReload(time.Now())
			return f.current.Load(), nil
		},
	}
}

// stat looks at the three files (a missing one has a nil info).
func (f *tlsFiles) stat() [3]tlsStamp {
	var out [3]tlsStamp
	for i, path := range []string{f.certFile, f.keyFile, f.caFile} {
		if path == "" {
			continue
		}
		if info, err := os.Stat(path); err == nil {
			out[i] = tlsStamp{info: info, size: info.Size(), modTime: info.ModTime()}
		}
	}
	return out
}

// load reads the files into a handshake configuration.
func (f *tlsFiles) load() (tlsVersion, error) {
	pair, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return tlsVersion{}, fmt.Errorf("%s key pair %s, %s: %w", f.what, f.certFile, f.keyFile, err)
	}
	if info, err := os.Stat(f.keyFile); err == nil && info.Mode().Perm()&0o077 != 0 {
		f.log.Warn().Str("key_file", f.keyFile).Str("mode", info.Mode().Perm().String()).
			Msg("the TLS private key file may be read by group or others: chmod 600 it")
	}
	var pool *x509.CertPool
	if f.caFile != "" {
		if pool, err = loadCAPool(f.what+" ca file", f.caFile); err != nil {
			return tlsVersion{}, err
		}
	}
	build := f.build
	if build == nil {
		build = clientTLSConfig
	}
	return tlsVersion{conf: build(pair, pool), pair: pair, pool: pool, notAfter: pair.Leaf.NotAfter}, nil
}

// tlsVersion is one version of the files, loaded.
type tlsVersion struct {
	conf     *tls.Config
	pair     tls.Certificate
	pool     *x509.CertPool
	notAfter time.Time
}

// clientTLSConfig is the configuration of --listen's (and the admin and
// SQS addresses') handshakes: pair, and with a client CA pool,
// certificates of that CA requested (not required: Basic and bearer
// clients work as before; one that presents a certificate must present
// a valid one, for client authentication).
func clientTLSConfig(pair tls.Certificate, pool *x509.CertPool) *tls.Config {
	conf := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
		Certificates: []tls.Certificate{pair},
	}
	if pool != nil {
		conf.ClientCAs = pool
		conf.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return conf
}

// install puts v in force.
func (f *tlsFiles) install(v tlsVersion, stamps [3]tlsStamp, now time.Time) {
	f.current.Store(v.conf)
	if f.certs != nil {
		f.certs.Set(v.pair, v.pool)
	}
	f.stamps, f.loadedAt, f.notAfter, f.lastErr, f.checked = stamps, now, v.notAfter, nil, now
}

// maybeReload re-reads the files when their stat changed, at most once
// per interval; a version that does not load leaves the current one.
func (f *tlsFiles) maybeReload(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.checked) < f.interval {
		return
	}
	f.checked = now
	stamps := f.stat()
	changed := false
	for i := range stamps {
		changed = changed || !stamps[i].same(f.stamps[i])
	}
	if !changed {
		return
	}
	v, err := f.load()
	if err != nil {
		if f.lastErr == nil || f.lastErr.Error() != err.Error() {
			f.log.Error().Err(err).Time("in_force_since", f.loadedAt).
				Msg("the new TLS files do not load; the previous key pair stays in force")
		}
		f.lastErr = err
		return
	}
	f.install(v, stamps, now)
	f.log.Info().Time("not_after", v.notAfter).Msg("TLS key pair reloaded")
}

// degraded says why the newest files are not in force, or that the
// certificate in force has expired. It looks at the files first, so that
// /readyz notices a bad rotation even while no client connects.
func (f *tlsFiles) degraded() []string {
	if f == nil {
		return nil
	}
	f.maybeReload(time.Now()) // a probe looks at the files too
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	if f.lastErr != nil {
		out = append(out, fmt.Sprintf("%v; serving the key pair loaded at %s", f.lastErr, f.loadedAt.UTC().Format(time.RFC3339)))
	}
	if time.Now().After(f.notAfter) {
		out = append(out, fmt.Sprintf("the TLS certificate expired at %s", f.notAfter.UTC().Format(time.RFC3339)))
	}
	return out
}

// errHTTPSRequired is the answer to plain HTTP on the TLS port.
var errHTTPSRequired = errors.New("this port speaks HTTPS (TLS): use https://")

// tlsRecordLooksLikeHTTP reports whether the first five bytes of a
// connection are the start of an HTTP/1 request line rather than a TLS
// record (net/http's own test, with PATCH and DELETE).
func tlsRecordLooksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "PATCH", "DELET", "CONNE", "TRACE":
		return true
	}
	return false
}

// loadCAPool reads a PEM bundle of CA certificates (what names the flag,
// for errors).
func loadCAPool(what, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s holds no PEM certificate", what, path)
	}
	return pool, nil
}
