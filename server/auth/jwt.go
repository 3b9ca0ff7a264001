package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/internal/worker"
)

// Defaults of JWT verification.
const (
	// DefaultAccountClaim is the claim naming the account.
	DefaultAccountClaim = "sub"
	// DefaultJWKSRefresh is how often the key set is fetched again.
	DefaultJWKSRefresh = 5 * time.Minute
	// DefaultJWKSMinRefetch is the least time between two fetches caused
	// by tokens signed with a key id the set does not have (a new key of
	// the identity provider), so that such tokens cannot hammer it.
	DefaultJWKSMinRefetch = 30 * time.Second
	// jwtLeeway is the clock skew allowed on exp, nbf and iat.
	jwtLeeway = 30 * time.Second
	// minJWTSecret is the shortest HMAC secret (RFC 7518 §3.2: at least
	// the hash size).
	minJWTSecret = 32
	// maxJWKSSize bounds a key set document.
	maxJWKSSize = 1 << 20
	// jwksTimeout bounds one fetch of the key set.
	jwksTimeout = 10 * time.Second
)

// JWTOptions configure bearer-token verification: exactly one of Secret
// (HMAC: HS256, HS384, HS512) and JWKSURL (RS*, PS*, ES*, EdDSA keys of a
// JSON Web Key Set).
type JWTOptions struct {
	// Secret is the HMAC key (at least 32 bytes).
	Secret []byte
	// JWKSURL is the https (or loopback http) URL of the key set.
	JWKSURL string
	// Issuer, when set, must equal the iss claim.
	Issuer string
	// Audience, when set, must be in the aud claim.
	Audience string
	// AccountClaim names the claim holding the account (default "sub").
	AccountClaim string
	// JWKSRefresh and JWKSMinRefetch: see the defaults.
	JWKSRefresh    time.Duration
	JWKSMinRefetch time.Duration
	// HTTPClient fetches the key set (default: a client with a timeout).
	HTTPClient *http.Client
	// Logger and Metrics receive fetches and their failures.
	Logger  zerolog.Logger
	Metrics *Metrics
}

// JWTVerifier checks bearer tokens and returns the account they name.
type JWTVerifier struct {
	opts   JWTOptions
	parser *jwt.Parser
	keys   *keySet // nil with a Secret
}

// NewJWTVerifier validates opts; with a JWKSURL it fetches the key set
// once (a failure is logged and reported by Degraded, and fetching is
// retried: bearer tokens fail until it succeeds, Basic still works).
func NewJWTVerifier(ctx context.Context, opts JWTOptions) (*JWTVerifier, error) {
	if opts.AccountClaim == "" {
		opts.AccountClaim = DefaultAccountClaim
	}
	if opts.JWKSRefresh <= 0 {
		opts.JWKSRefresh = DefaultJWKSRefresh
	}
	if opts.JWKSMinRefetch <= 0 {
		opts.JWKSMinRefetch = DefaultJWKSMinRefetch
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: jwksTimeout}
	}
	opts.Logger = opts.Logger.With().Str("component", "jwt").Logger()
	parserOpts := []jwt.ParserOption{jwt.WithExpirationRequired(), jwt.WithLeeway(jwtLeeway), jwt.WithIssuedAt()}
	if opts.Issuer != "" {
		parserOpts = append(parserOpts, jwt.WithIssuer(opts.Issuer))
	}
	if opts.Audience != "" {
		parserOpts = append(parserOpts, jwt.WithAudience(opts.Audience))
	}
	v := &JWTVerifier{opts: opts}
	switch {
	case len(opts.Secret) > 0 && opts.JWKSURL != "":
		return nil, fmt.Errorf("%w: give a secret or a JWKS URL, not both", ErrJWTConfig)
	case len(opts.Secret) > 0:
		if len(opts.Secret) < minJWTSecret {
			return nil, fmt.Errorf("%w: the secret is %d bytes; HMAC secrets must be at least %d", ErrJWTConfig, len(opts.Secret), minJWTSecret)
		}
		parserOpts = append(parserOpts, jwt.WithValidMethods([]string{"HS256", "HS384", "HS512"}))
	case opts.JWKSURL != "":
		if err := CheckJWKSURL(opts.JWKSURL); err != nil {
			return nil, err
		}
		if opts.Issuer == "" || opts.Audience == "" {
			return nil, fmt.Errorf("%w: a JWKS URL needs an issuer and an audience: an identity provider signs tokens for other services too", ErrJWTConfig)
		}
		parserOpts = append(parserOpts, jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}))
		v.keys = &keySet{opts: &v.opts}
		v.keys.ctx, v.keys.cancel = context.WithCancel(context.Background())
		v.keys.refresher = worker.New(v.keys.refresh)
		if err := v.keys.fetch(ctx); err != nil {
			opts.Logger.Error().Err(err).Str("jwks_url", opts.JWKSURL).Msg("fetching the JWT key set failed; bearer tokens fail until it succeeds")
		}
	default:
		return nil, fmt.Errorf("%w: a secret or a JWKS URL is required", ErrJWTConfig)
	}
	v.parser = jwt.NewParser(parserOpts...)
	return v, nil
}

// CheckJWKSURL accepts an https URL, or an http one on a loopback host.
func CheckJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: jwks url %q is not an absolute URL", ErrJWTConfig, raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("%w: jwks url %q must be https (http only on a loopback host)", ErrJWTConfig, raw)
}

// Start refreshes the key set periodically until Stop (nothing with a
// secret).
func (v *JWTVerifier) Start() {
	if v.keys != nil {
		v.keys.start()
	}
}

// Stop ends the refresh and waits for it; it is idempotent.
func (v *JWTVerifier) Stop() {
	if v.keys != nil {
		v.keys.stopRefresh()
	}
}

// Degraded says why the key set is not current, or nothing.
func (v *JWTVerifier) Degraded() []string {
	if v.keys == nil {
		return nil
	}
	return v.keys.degraded()
}

// Verify checks token's signature, exp, nbf, iat, iss and aud and returns
// the account its claim names.
func (v *JWTVerifier) Verify(ctx context.Context, token string) (string, error) {
	claims := jwt.MapClaims{}
	_, err := v.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		if v.keys == nil {
			return v.opts.Secret, nil
		}
		return v.keys.key(ctx, t)
	})
	if err != nil {
		return "", fmt.Errorf("%w: %w", errBadToken, err)
	}
	account, ok := claims[v.opts.AccountClaim].(string)
	if !ok || account == "" {
		return "", fmt.Errorf("%w: claim %q is missing or not a string", errBadToken, v.opts.AccountClaim)
	}
	return account, nil
}

// keySet is a cached JSON Web Key Set.
type keySet struct {
	opts *JWTOptions

	mu        sync.Mutex
	keys      map[string]jwk // by kid
	fetchedAt time.Time
	lastErr   error
	// fetching serialises fetches.
	fetching sync.Mutex

	// refresher re-fetches the set (a worker.Service; its context also
	// ends a fetch in progress when it stops). ctx is the context of
	// fetches outside it (an unknown kid), cancelled at stop.
	refresher *worker.Service
	ctx       context.Context
	cancel    context.CancelFunc
}

// jwk is one usable key.
type jwk struct {
	key crypto.PublicKey
	alg string // "" when the set does not say
}

// key returns the verification key of t: by its kid, or the only key of
// a set of one. An unknown kid fetches the set again (at most once per
// JWKSMinRefetch).
func (s *keySet) key(ctx context.Context, t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	k, ok := s.lookup(kid)
	if !ok {
		s.mu.Lock()
		recent := time.Since(s.fetchedAt) < s.opts.JWKSMinRefetch
		s.mu.Unlock()
		if !recent {
			_ = s.fetch(ctx)
			k, ok = s.lookup(kid)
		}
	}
	if !ok {
		return nil, fmt.Errorf("no key %q in the key set", kid)
	}
	if k.alg != "" && k.alg != t.Method.Alg() {
		return nil, fmt.Errorf("key %q is for %s, the token says %s", kid, k.alg, t.Method.Alg())
	}
	return k.key, nil
}

func (s *keySet) lookup(kid string) (jwk, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kid == "" {
		if len(s.keys) == 1 {
			for _, k := range s.keys {
				return k, true
			}
		}
		return jwk{}, false
	}
	k, ok := s.keys[kid]
	return k, ok
}

// fetch gets the key set and installs it; a failure keeps the old one.
func (s *keySet) fetch(ctx context.Context) error {
	s.fetching.Lock()
	defer s.fetching.Unlock()
	keys, err := s.get(ctx)
	s.mu.Lock()
	s.fetchedAt = time.Now()
	if err == nil {
		s.keys, s.lastErr = keys, nil
	} else {
		s.lastErr = err
	}
	s.mu.Unlock()
	s.opts.Metrics.fetchedKeys(err == nil)
	if err != nil {
		s.opts.Logger.Warn().Err(err).Msg("fetching the JWT key set failed; the previous keys stay in use")
	}
	return err
}

func (s *keySet) get(ctx context.Context) (map[string]jwk, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.opts.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", s.opts.JWKSURL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxJWKSSize {
		return nil, fmt.Errorf("the key set is over %d bytes", maxJWKSSize)
	}
	return parseJWKS(body)
}

// parseJWKS reads the signature keys of a key set (RSA, EC P-256/384/521,
// Ed25519); encryption keys and unknown kinds are skipped.
func parseJWKS(body []byte) (map[string]jwk, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			Alg string `json:"alg"`
			N   string `json:"n"`
			E   string `json:"e"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Y   string `json:"y"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("the key set is not JSON: %v", err)
	}
	out := make(map[string]jwk)
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var key crypto.PublicKey
		var err error
		switch k.Kty {
		case "RSA":
			key, err = rsaKey(k.N, k.E)
		case "EC":
			key, err = ecKey(k.Crv, k.X, k.Y)
		case "OKP":
			if k.Crv != "Ed25519" {
				continue
			}
			var x []byte
			x, err = base64.RawURLEncoding.DecodeString(k.X)
			if err == nil && len(x) != ed25519.PublicKeySize {
				err = errors.New("bad Ed25519 key length")
			}
			key = ed25519.PublicKey(x)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("key %d (%q): %v", i, k.Kid, err)
		}
		out[k.Kid] = jwk{key: key, alg: k.Alg}
	}
	if len(out) == 0 {
		return nil, errors.New("the key set has no usable signature key")
	}
	return out, nil
}

func rsaKey(n, e string) (*rsa.PublicKey, error) {
	nb, err := base64.RawURLEncoding.DecodeString(n)
	if err != nil {
		return nil, fmt.Errorf("n: %v", err)
	}
	eb, err := base64.RawURLEncoding.DecodeString(e)
	if err != nil || len(eb) == 0 || len(eb) > 4 {
		return nil, errors.New("bad e")
	}
	key := &rsa.PublicKey{N: new(big.Int).SetBytes(nb), E: int(new(big.Int).SetBytes(eb).Int64())}
	if key.N.BitLen() < 2048 {
		return nil, fmt.Errorf("RSA key of %d bits; at least 2048 are required", key.N.BitLen())
	}
	return key, nil
}

func ecKey(crv, x, y string) (*ecdsa.PublicKey, error) {
	var curve elliptic.Curve
	switch crv {
	case "P-256":
		curve = elliptic.P256()
	case "P-384":
		curve = elliptic.P384()
	case "P-521":
		curve = elliptic.P521()
	default:
		return nil, fmt.Errorf("curve %q", crv)
	}
	xb, err1 := base64.RawURLEncoding.DecodeString(x)
	yb, err2 := base64.RawURLEncoding.DecodeString(y)
	if err1 != nil || err2 != nil {
		return nil, errors.New("bad x or y")
	}
	size := (curve.Params().BitSize + 7) / 8
	if len(xb) != size || len(yb) != size {
		return nil, errors.New("bad x or y length")
	}
	// Uncompressed point encoding, validated by ParseUncompressedPublicKey.
	point := append([]byte{4}, append(xb, yb...)...)
	return ecdsa.ParseUncompressedPublicKey(curve, point)
}

func (s *keySet) start() { s.refresher.Start(s.ctx) }

// refresh re-fetches the set every JWKSRefresh (every JWKSMinRefetch
// while the last fetch failed) until ctx ends.
func (s *keySet) refresh(ctx context.Context) {
	refresh := s.opts.JWKSRefresh
	for {
		s.mu.Lock()
		failing := s.lastErr != nil
		s.mu.Unlock()
		wait := refresh
		if failing {
			wait = min(refresh, s.opts.JWKSMinRefetch)
		}
		if !worker.Sleep(ctx, wait) {
			return
		}
		_ = s.fetch(ctx)
	}
}

func (s *keySet) stopRefresh() {
	s.cancel()
	s.refresher.Stop()
}

func (s *keySet) degraded() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr == nil {
		return nil
	}
	state := "no keys yet: bearer tokens fail"
	if s.keys != nil {
		state = "the previous keys stay in use"
	}
	return []string{fmt.Sprintf("jwt key set %s: %v; %s", s.opts.JWKSURL, s.lastErr, state)}
}
