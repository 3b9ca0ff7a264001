package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// idp is a test identity provider: a JWKS over real HTTP whose keys can
// change, counting its fetches.
type idp struct {
	mu      sync.Mutex
	keys    map[string]*ecdsa.PrivateKey
	down    bool
	fetches atomic.Int64
	srv     *httptest.Server
}

func newIDP(t *testing.T) *idp {
	p := &idp{keys: map[string]*ecdsa.PrivateKey{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.fetches.Add(1)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range p.keys {
			raw, err := k.PublicKey.Bytes()
			if err != nil {
				panic(err)
			}
			set.Keys = append(set.Keys, map[string]string{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256",
				"x": base64.RawURLEncoding.EncodeToString(raw[1:33]), "y": base64.RawURLEncoding.EncodeToString(raw[33:])})
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *idp) addKey(t *testing.T, kid string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	p.mu.Lock()
	p.keys[kid] = k
	p.mu.Unlock()
}

func (p *idp) token(t *testing.T, kid string) string {
	p.mu.Lock()
	k := p.keys[kid]
	p.mu.Unlock()
	if k == nil {
		var err error
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "acct", "iss": "iss", "aud": "aud", "exp": time.Now().Add(time.Minute).Unix()})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k)
	require.NoError(t, err)
	return s
}

// TestJWKSRotationAndOutage: a token signed with a key the set gained
// since the last fetch triggers a fetch (at most one per JWKSMinRefetch,
// however many such tokens come); a set that cannot be fetched at start is
// reported by Degraded and fetched again by the refresher until it works.
func TestJWKSRotationAndOutage(t *testing.T) {
	p := newIDP(t)
	p.addKey(t, "k1")
	v, err := NewJWTVerifier(context.Background(), JWTOptions{JWKSURL: p.srv.URL, Issuer: "iss", Audience: "aud",
		JWKSMinRefetch: 200 * time.Millisecond, JWKSRefresh: time.Hour})
	require.NoError(t, err)
	require.EqualValues(t, 1, p.fetches.Load())
	account, err := v.Verify(context.Background(), p.token(t, "k1"))
	require.NoError(t, err)
	require.Equal(t, "acct", account)

	// Within JWKSMinRefetch of the last fetch, unknown kids fetch nothing.
	for range 20 {
		_, err := v.Verify(context.Background(), p.token(t, "unknown"))
		require.ErrorIs(t, err, errBadToken)
	}
	require.LessOrEqual(t, p.fetches.Load(), int64(2), "unknown kids are not a way to hammer the identity provider")

	p.addKey(t, "k2")
	require.Eventually(t, func() bool {
		_, err := v.Verify(context.Background(), p.token(t, "k2"))
		return err == nil
	}, 5*time.Second, 50*time.Millisecond, "the new key is fetched")
	_, err = v.Verify(context.Background(), p.token(t, "k1"))
	require.NoError(t, err, "the old key still works")

	t.Run("Outage", func(t *testing.T) {
		q := newIDP(t)
		q.addKey(t, "k1")
		q.mu.Lock()
		q.down = true
		q.mu.Unlock()
		v, err := NewJWTVerifier(context.Background(), JWTOptions{JWKSURL: q.srv.URL, Issuer: "iss", Audience: "aud",
			JWKSMinRefetch: 20 * time.Millisecond, JWKSRefresh: time.Hour})
		require.NoError(t, err, "an unreachable identity provider does not stop the start")
		require.Len(t, v.Degraded(), 1)
		require.Contains(t, v.Degraded()[0], "503")
		require.Contains(t, v.Degraded()[0], "no keys yet")
		v.Start()
		defer v.Stop()
		q.mu.Lock()
		q.down = false
		q.mu.Unlock()
		require.Eventually(t, func() bool { return len(v.Degraded()) == 0 }, 5*time.Second, 10*time.Millisecond)
		_, err = v.Verify(context.Background(), q.token(t, "k1"))
		require.NoError(t, err)
		v.Stop()
	})
}

func TestJWTConfig(t *testing.T) {
	_, err := NewJWTVerifier(context.Background(), JWTOptions{Secret: []byte("short")})
	require.ErrorIs(t, err, ErrJWTConfig)
	_, err = NewJWTVerifier(context.Background(), JWTOptions{JWKSURL: "https://idp.example/jwks", Issuer: "i"})
	require.ErrorContains(t, err, "needs an issuer and an audience")
	_, err = NewJWTVerifier(context.Background(), JWTOptions{})
	require.ErrorIs(t, err, ErrJWTConfig)
	for _, u := range []string{"http://idp.example/jwks", "ftp://x/y", "/relative"} {
		require.ErrorIs(t, CheckJWKSURL(u), ErrJWTConfig, u)
	}
	for _, u := range []string{"https://idp.example/jwks", "http://127.0.0.1:8000/jwks", "http://localhost/jwks", "http://[::1]/jwks"} {
		require.NoError(t, CheckJWKSURL(u), u)
	}
	_, err = parseJWKS([]byte(`{"keys":[{"kty":"RSA","kid":"small","n":"AQAB","e":"AQAB"}]}`))
	require.ErrorContains(t, err, "at least 2048")
	_, err = parseJWKS([]byte(`{"keys":[{"kty":"oct","kid":"k","k":"c2VjcmV0"}]}`))
	require.ErrorContains(t, err, "no usable signature key")
}
