package auth

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// ThrottledError is ErrThrottled with the time to wait.
type ThrottledError struct{ Wait time.Duration }

// Error says what happened.
func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%v for this account from this address; retry in %s", ErrThrottled, e.Wait.Round(time.Second))
}

// Is makes errors.Is(err, ErrThrottled) hold.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// RetryAfter is the time to wait (the Retry-After header).
func (e *ThrottledError) RetryAfter() time.Duration { return e.Wait }

// Source gives the ACL in force (a *File).
type Source interface {
	ACL() *ACL
}

// Options configure a Guard.
type Options struct {
	// ACL is where the ACL in force comes from.
	ACL Source
	// JWT verifies bearer tokens; nil refuses them.
	JWT *JWTVerifier
	// FailuresPerMinute is the failure limiter's rate (default
	// DefaultFailuresPerMinute).
	FailuresPerMinute int
	// ClientCertificates is set when TLS asks for client certificates
	// (the 401's detail mentions them). A verified one signs in whether or
	// not it is set.
	ClientCertificates bool
	// Metrics, when not nil, count failures.
	Metrics *Metrics
	// Logger receives throttling (default: none).
	Logger zerolog.Logger
}

// Guard authenticates requests against the ACL in force.
type Guard struct {
	opts    Options
	limiter *failureLimiter
	// slots bounds the password-hash checks running at once, so that a
	// flood of wrong secrets cannot take all memory (argon2id) or queue
	// every core.
	slots chan struct{}
	now   func() time.Time
}

// NewGuard returns a Guard.
func NewGuard(opts Options) *Guard {
	opts.Logger = opts.Logger.With().Str("component", "auth").Logger()
	return &Guard{
		opts:    opts,
		limiter: newFailureLimiter(opts.FailuresPerMinute),
		slots:   make(chan struct{}, max(2, runtime.GOMAXPROCS(0))),
		now:     time.Now,
	}
}

// Principal is an authenticated caller.
type Principal struct {
	account *Account
	method  string
}

// Name is the account's accessKey.
func (p *Principal) Name() string { return p.account.AccessKey }

// Method is how the caller authenticated: "basic", "bearer" or
// "certificate".
func (p *Principal) Method() string { return p.method }

// Limits are the account's abuse limits from the ACL file.
func (p *Principal) Limits() Limits { return p.account.Limits }

// Admin reports an admin account.
func (p *Principal) Admin() bool { return p.account.Admin }

// Can reports whether the caller may act with need on the resource.
func (p *Principal) Can(kind Kind, name string, need Perm) bool {
	return p.account.Can(kind, name, need)
}

// Challenge is the WWW-Authenticate value of a 401.
func (g *Guard) Challenge() string {
	if g.opts.JWT != nil {
		return `Basic realm="mqgate", charset="UTF-8", Bearer realm="mqgate"`
	}
	return `Basic realm="mqgate", charset="UTF-8"`
}

// Degraded says what keeps the newest ACL file or the JWT key set from
// being in force.
func (g *Guard) Degraded() []string {
	var out []string
	if d, ok := g.opts.ACL.(interface{ Degraded() []string }); ok {
		out = append(out, d.Degraded()...)
	}
	if g.opts.JWT != nil {
		out = append(out, g.opts.JWT.Degraded()...)
	}
	return out
}

// errBadCredentials is the one answer for an unknown accessKey and a
// wrong secret.
var errBadCredentials = fmt.Errorf("%w: wrong accessKey or secretKey", ErrUnauthenticated)

// Authenticate identifies the caller of r: HTTP Basic with accessKey and
// secretKey, or a bearer JWT naming an account. The address is the TCP
// peer's (r.RemoteAddr), never a header a client could write.
func (g *Guard) Authenticate(r *http.Request) (*Principal, error) {
	acl := g.opts.ACL.ACL()
	now := g.now()
	addr, ok := remoteAddr(r.RemoteAddr)
	if !ok {
		return nil, fmt.Errorf("%w: the remote address %q is not an IP address", ErrForbidden, r.RemoteAddr)
	}
	if !acl.allowsAddress(addr) {
		g.opts.Metrics.failed(accountNoneLabel, reasonAddress)
		return nil, fmt.Errorf("%w: requests from %s are not allowed (globalWhiteRemoteAddresses)", ErrForbidden, addr)
	}
	header := r.Header.Get("Authorization")
	if header == "" {
		if cert := clientCertificate(r); cert != nil {
			return g.certificatePrincipal(acl, addr, cert)
		}
		g.opts.Metrics.failed(accountNoneLabel, reasonMissing)
		how := "HTTP Basic with accessKey:secretKey"
		if g.opts.JWT != nil {
			how += ", or a bearer token"
		}
		if g.opts.ClientCertificates {
			how += ", or a client certificate"
		}
		return nil, fmt.Errorf("%w: credentials are required (%s)", ErrUnauthenticated, how)
	}
	scheme, credentials, _ := strings.Cut(header, " ")
	var account *Account
	var method string
	switch strings.ToLower(scheme) {
	case "basic":
		method = "basic"
		accessKey, secretKey, ok := r.BasicAuth()
		if !ok {
			return nil, g.failed(r.Context(), addr, "", reasonMalformed, now,
				fmt.Errorf("%w: the Basic credentials are not base64 of accessKey:secretKey", ErrUnauthenticated))
		}
		account = acl.Account(accessKey)
		verified, err := g.verifySecret(r.Context(), acl, account, accessKey, []byte(secretKey), now)
		if err != nil {
			return nil, err
		}
		if !verified {
			label := accessKey
			if account == nil {
				label = ""
			}
			return nil, g.failed(r.Context(), addr, label, reasonBadSecret, now, errBadCredentials)
		}
	case "bearer":
		method = "bearer"
		if g.opts.JWT == nil {
			return nil, g.failed(r.Context(), addr, "", reasonNoBearer, now,
				fmt.Errorf("%w: bearer tokens are not accepted here (no --jwt-secret or --jwt-jwks-url); use HTTP Basic", ErrUnauthenticated))
		}
		name, err := g.opts.JWT.Verify(r.Context(), strings.TrimSpace(credentials))
		if err != nil {
			g.opts.Logger.Debug().Err(err).Str("ip", addr.String()).Msg("bearer token refused")
			return nil, g.failed(r.Context(), addr, "", reasonBadToken, now,
				fmt.Errorf("%w: the bearer token is invalid or expired", ErrUnauthenticated))
		}
		if account = acl.Account(name); account == nil {
			return nil, g.failed(r.Context(), addr, "", reasonUnknownClaim, now,
				fmt.Errorf("%w: the bearer token names no account of the ACL", ErrUnauthenticated))
		}
	default:
		return nil, g.failed(r.Context(), addr, "", reasonMalformed, now,
			fmt.Errorf("%w: unsupported Authorization scheme; use Basic%s", ErrUnauthenticated, map[bool]string{true: " or Bearer"}[g.opts.JWT != nil]))
	}
	if !account.allowsAddress(addr) {
		g.opts.Metrics.failed(account.AccessKey, reasonAddress)
		return nil, fmt.Errorf("%w: account %q may not be used from %s (whiteRemoteAddress)", ErrForbidden, account.AccessKey, addr)
	}
	return &Principal{account: account, method: method}, nil
}

// clientCertificate is the client certificate the TLS handshake verified
// against the client CAs (nil without one). Unverified certificates never
// count: the handshake refuses them.
func clientCertificate(r *http.Request) *x509.Certificate {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return nil
	}
	return r.TLS.VerifiedChains[0][0]
}

// certificatePrincipal signs a verified client certificate in as the
// account its subject Common Name names. A certificate proves possession
// of its key, so nothing is guessed and the failure limiter is not asked;
// the white lists apply as to every sign-in.
func (g *Guard) certificatePrincipal(acl *ACL, addr netip.Addr, cert *x509.Certificate) (*Principal, error) {
	name := cert.Subject.CommonName
	account := acl.Account(name)
	if account == nil {
		g.opts.Metrics.failed(accountUnknownLabel, reasonUnknownCert)
		return nil, fmt.Errorf("%w: the client certificate's subject CN %s names no account of the ACL", ErrUnauthenticated, quoteKey(name))
	}
	if !account.allowsAddress(addr) {
		g.opts.Metrics.failed(account.AccessKey, reasonAddress)
		return nil, fmt.Errorf("%w: account %q may not be used from %s (whiteRemoteAddress)", ErrForbidden, account.AccessKey, addr)
	}
	return &Principal{account: account, method: "certificate"}, nil
}

// failed counts a failure and returns err; over the limit of the
// (account, address) pair it holds the answer back and returns a
// *ThrottledError instead (the credentials were checked and wrong:
// correct ones never get here). account is "" when the request named no
// account of the ACL.
func (g *Guard) failed(ctx context.Context, addr netip.Addr, account, reason string, now time.Time, err error) error {
	label, limiterKey := account, account
	if account == "" {
		label, limiterKey = accountUnknownLabel, unknownAccount
		if reason == reasonMalformed || reason == reasonNoBearer {
			label = accountNoneLabel
		}
	}
	g.opts.Metrics.failed(label, reason)
	v := g.limiter.fail(addr, limiterKey, now)
	if v.dried {
		g.opts.Logger.Warn().Str("ip", addr.String()).Str("account", label).
			Msg("too many failed authentications on this account from this address: its failures get 429 for a while (correct credentials still pass)")
	}
	if v.retryAfter == 0 {
		return err
	}
	g.opts.Metrics.throttle(throttledAccount)
	t := time.NewTimer(v.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return &ThrottledError{Wait: v.retryAfter}
}

// verifySecret checks secretKey against the account's secrets (against a
// dummy of the same cost when the account is unknown or has none). A
// password-hash success is cached for a short time. A wrong secret of an
// account of plain secrets is checked against the dummy too before the
// answer, so that it costs what an unknown accessKey costs: no failure
// tells by its time whether the account exists or how its secret is kept.
func (g *Guard) verifySecret(ctx context.Context, acl *ACL, account *Account, accessKey string, secretKey []byte, now time.Time) (verified bool, err error) {
	if account == nil || len(account.secrets) == 0 {
		_, err := g.check(ctx, acl.dummy, secretKey)
		return false, err
	}
	slow := false
	for _, s := range account.secrets {
		slow = slow || s.slow()
	}
	if !slow {
		defer func() {
			if !verified && err == nil {
				_, err = g.check(ctx, acl.dummy, secretKey)
			}
		}()
	}
	var key cacheKey
	if slow {
		key = acl.cache.key(accessKey, secretKey)
		if acl.cache.has(key, now) {
			return true, nil
		}
	}
	for _, s := range account.secrets {
		ok, err := g.check(ctx, s, secretKey)
		if err != nil {
			return false, err
		}
		if ok {
			if slow {
				acl.cache.add(key, now)
			}
			return true, nil
		}
	}
	return false, nil
}

// check runs one verification, a password hash in one of the slots.
func (g *Guard) check(ctx context.Context, s secret, candidate []byte) (bool, error) {
	if s.slow() {
		select {
		case g.slots <- struct{}{}:
			defer func() { <-g.slots }()
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return s.verify(candidate), nil
}

// SignatureFailure is why a request signed in a scheme the Guard does not
// verify itself (AWS Signature Version 4 on the SQS endpoint) failed to
// authenticate: what SignatureFailed counts.
type SignatureFailure int

// The signature failures.
const (
	// SignatureMissing: the request is not signed. Counted (reason
	// missing), never limited: it guesses nothing.
	SignatureMissing SignatureFailure = iota + 1
	// SignatureMalformed: the signature does not parse. Limited with the
	// failures naming no account from the address (reason malformed).
	SignatureMalformed
	// SignatureMismatch: the signature does not verify with the secrets
	// of its access key, or the access key is no account's. Limited per
	// (account, address) as a wrong secret is (reason bad_signature).
	SignatureMismatch
	// SignatureAddress: the account may not be used from the address.
	// Counted (reason address), never limited.
	SignatureAddress
)

// errSignatureFailed marks a failure within the limit (SignatureFailed
// returns nil for it).
var errSignatureFailed = fmt.Errorf("%w: the signature does not verify", ErrUnauthenticated)

// SignatureFailed counts a failed signature the caller checked itself in
// the metrics and the failure limiter of Authenticate, so that a guesser
// is slowed on every listener alike. Within the limit it returns nil and
// the caller answers with its own error; over it, it holds the answer
// back (100 ms doubling up to 3 s) and returns a *ThrottledError; it
// returns ctx's error when ctx ends first. Report failures only: the
// limiter never sees a right signature, so right credentials are never
// slowed.
func (g *Guard) SignatureFailed(ctx context.Context, addr netip.Addr, accessKey string, why SignatureFailure) error {
	addr = addr.Unmap()
	var account string
	if a := g.opts.ACL.ACL().Account(accessKey); a != nil {
		account = a.AccessKey
	}
	var err error
	switch why {
	case SignatureMissing:
		g.opts.Metrics.failed(accountNoneLabel, reasonMissing)
		return nil
	case SignatureAddress:
		label := account
		if label == "" {
			label = accountUnknownLabel
		}
		g.opts.Metrics.failed(label, reasonAddress)
		return nil
	case SignatureMalformed:
		err = g.failed(ctx, addr, "", reasonMalformed, g.now(), errSignatureFailed)
	default:
		err = g.failed(ctx, addr, account, reasonBadSignature, g.now(), errSignatureFailed)
	}
	if err == errSignatureFailed {
		return nil
	}
	return err
}
