package server_test

// End-to-end tests of the ACL file's life (hot reload under load, key
// rotation, a bad version and /readyz), bearer JWTs (HMAC, and a JWKS
// served over HTTP), the failure limiter, secrets kept out of the logs,
// the safe defaults, and the cost of authentication per request.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// sendAs sends one message to topic with header and returns the status.
func (e *e2eServer) sendAs(t *testing.T, topic string, header http.Header) servertest.Resp {
	t.Helper()
	return e.Do(t, http.MethodPost, "/v1/topics/"+topic+"/messages", "application/json", []byte(`{"body":"x"}`), header)
}

// TestE2EAuthHotReloadUnderLoad: while four clients send without pause
// as an account present in every version, the ACL file is rewritten
// again and again — by rename, and in place (so that a poll may read a
// half-written file) — adding and removing a second account. The second
// account starts and stops working without a restart, and not one
// request of the steady account fails.
func TestE2EAuthHotReloadUnderLoad(t *testing.T) {
	t.Parallel()
	base := "accounts:\n  - accessKey: steady\n    secretKey: steady-secret\n    topicPerms: [\"load=PUB\"]\n"
	withNewcomer := base + "  - accessKey: newcomer\n    secretKeyHash: \"" + bcryptHash(t, "newcomer-secret") + "\"\n    topicPerms: [\"load=PUB\"]\n"
	path := newACL(t, base)
	e := startAuthE2E(t, path)

	ctx, stop := context.WithCancel(context.Background())
	var sent, failed atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	steady := basic("steady", "steady-secret")
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && sent.Load() < 200_000 {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, e.Base+"/v1/topics/load/messages", strings.NewReader(`{"body":"x"}`))
				if err != nil {
					panic(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header["Authorization"] = steady["Authorization"]
				resp, err := e.Client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				sent.Add(1)
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%v %v", err, resp))
				}
			}
		}()
	}

	newcomer := basic("newcomer", "newcomer-secret")
	// underLoad waits until the steady clients sent a few more requests,
	// so that every version of the file is read while they send.
	underLoad := func() {
		from := sent.Load()
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			return sent.Load() >= from+8, "the steady clients are not sending"
		})
	}
	for round := range 6 {
		write := writeACL
		if round%2 == 1 {
			write = func(t *testing.T, path, content string) {
				t.Helper()
				require.NoError(t, os.WriteFile(path, []byte(content), 0o600)) // in place
			}
		}
		write(t, path, withNewcomer)
		underLoad()
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			r := e.sendAs(t, "load", newcomer)
			return r.Status == http.StatusOK, "newcomer not admitted yet: " + r.String()
		})
		write(t, path, base)
		underLoad()
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			r := e.sendAs(t, "load", newcomer)
			return r.Status == http.StatusUnauthorized, "newcomer still admitted: " + r.String()
		})
	}
	stop()
	wg.Wait()
	require.Zero(t, failed.Load(), "steady requests failed (of %d): first %v", sent.Load(), firstFailure.Load())
	require.GreaterOrEqual(t, sent.Load(), int64(12*8))
	t.Logf("%d requests of the steady account during 12 reloads, none failed", sent.Load())
}

// TestE2EAuthKeyRotation: a secret is rotated without a gap — the new
// one is added beside the old (both work), then the old one is removed
// (it stops working at once, although it had been verified and cached a
// moment before).
func TestE2EAuthKeyRotation(t *testing.T) {
	t.Parallel()
	oldHash, newHash := bcryptHash(t, "old-secret-1"), argon2Hash(t, "new-secret-2")
	acl := func(hashes ...string) string {
		return "accounts:\n  - accessKey: rotating\n    topicPerms: [\"orders=PUB\"]\n    secretKeyHash: [\"" + strings.Join(hashes, "\", \"") + "\"]\n"
	}
	path := newACL(t, acl(oldHash))
	e := startAuthE2E(t, path)
	oldH, newH := basic("rotating", "old-secret-1"), basic("rotating", "new-secret-2")
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", oldH).Status)
	require.Equal(t, http.StatusUnauthorized, e.sendAs(t, "orders", newH).Status)

	writeACL(t, path, acl(oldHash, newHash))
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		r := e.sendAs(t, "orders", newH)
		return r.Status == http.StatusOK, r.String()
	})
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", oldH).Status, "both secrets work while they overlap")
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", oldH).Status, "(now cached)")

	writeACL(t, path, acl(newHash))
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		r := e.sendAs(t, "orders", oldH)
		return r.Status == http.StatusUnauthorized, r.String()
	})
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", newH).Status)
}

// TestE2EAuthBadReloadKeepsTheLastGood: a version that does not load
// leaves the previous ACL in force and /readyz says so (still 200);
// fixing the file clears it.
func TestE2EAuthBadReloadKeepsTheLastGood(t *testing.T) {
	t.Parallel()
	good := "accounts:\n  - accessKey: worker\n    secretKey: worker-secret\n    topicPerms: [\"orders=PUB\"]\n"
	path := newACL(t, good)
	e := startAuthE2E(t, path)
	require.Equal(t, "ok\n", string(e.Get(t, "/readyz").Body))

	writeACL(t, path, good+"    groupPerms: [\"billing=READ\"]\n")
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		r := e.Get(t, "/readyz")
		return r.Status == http.StatusOK && strings.Contains(string(r.Body), "acl file "+path+": auth: invalid acl: line 2"), r.String()
	})
	body := string(e.Get(t, "/readyz").Body)
	require.True(t, strings.HasPrefix(body, "ok ("), body)
	require.Contains(t, body, `permission "READ"`)
	require.Contains(t, body, "serving the version loaded at")
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", basic("worker", "worker-secret")).Status, "the last good ACL is in force")

	require.NoError(t, os.Chmod(path, 0o644)) // still invalid, and now readable by others
	writeACL(t, path, good)
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		r := e.Get(t, "/readyz")
		return string(r.Body) == "ok\n", r.String()
	})
}

// TestE2EAuthJWTHMAC: bearer tokens signed with --jwt-secret name an
// account with their sub claim; a wrong signature, an expired token, a
// wrong issuer or audience, alg none and a token naming no account are
// 401; a valid token of an account without the permission is 403.
func TestE2EAuthJWTHMAC(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef-hmac")
	path := newACL(t, "accounts:\n  - accessKey: token-user\n    topicPerms: [\"orders=PUB\"]\n")
	e := startAuthE2E(t, path, func(c *server.Config) {
		c.JWTSecret, c.JWTIssuer, c.JWTAudience = string(secret), "https://issuer.test", "mqgate"
	})
	sign := func(method jwt.SigningMethod, key any, claims jwt.MapClaims) http.Header {
		s, err := jwt.NewWithClaims(method, claims).SignedString(key)
		require.NoError(t, err)
		return http.Header{"Authorization": {"Bearer " + s}}
	}
	claims := func(change func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "token-user", "iss": "https://issuer.test", "aud": "mqgate",
			"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
		if change != nil {
			change(c)
		}
		return c
	}
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", sign(jwt.SigningMethodHS256, secret, claims(nil))).Status)
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", sign(jwt.SigningMethodHS512, secret, claims(nil))).Status)
	p := servertest.WantProblem(t, e.sendAs(t, "audit", sign(jwt.SigningMethodHS256, secret, claims(nil))), http.StatusForbidden, "forbidden")
	require.Contains(t, p.Detail, `account "token-user" lacks PUB on topic "audit"`)

	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	require.NoError(t, err)
	for name, h := range map[string]http.Header{
		"WrongKey":        sign(jwt.SigningMethodHS256, []byte("another-key-another-key-another-key"), claims(nil)),
		"Expired":         sign(jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })),
		"NoExpiry":        sign(jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { delete(c, "exp") })),
		"NotYetValid":     sign(jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Hour).Unix() })),
		"WrongIssuer":     sign(jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.test" })),
		"WrongAudience":   sign(jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["aud"] = "another-service" })),
		"UnknownAccount":  sign(jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { c["sub"] = "nobody" })),
		"NoSubject":       sign(jwt.SigningMethodHS256, secret, claims(func(c jwt.MapClaims) { delete(c, "sub") })),
		"AlgNone":         {"Authorization": {"Bearer " + none}},
		"Garbage":         {"Authorization": {"Bearer not.a.token"}},
		"BasicForAccount": basic("token-user", "anything-at-all"), // a token-only account has no secret
	} {
		r := e.sendAs(t, "orders", h)
		servertest.WantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
		require.Equal(t, `Basic realm="mqgate", charset="UTF-8", Bearer realm="mqgate"`, r.Header.Get("WWW-Authenticate"), name)
	}
}

// jwksServer serves a JSON Web Key Set of the given public keys (by kid)
// over real HTTP on 127.0.0.1.
func jwksServer(t *testing.T, keys map[string]any) *httptest.Server {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	for kid, k := range keys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			set.Keys = append(set.Keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())})
		case *ecdsa.PublicKey:
			raw, err := k.Bytes()
			require.NoError(t, err)
			set.Keys = append(set.Keys, map[string]string{"kty": "EC", "kid": kid, "crv": "P-256",
				"x": b64(raw[1:33]), "y": b64(raw[33:])})
		}
	}
	body, err := json.Marshal(set)
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestE2EAuthJWKS: tokens signed with RSA and ECDSA keys published in a
// JWKS (served over HTTP by a test server) are accepted, by kid; a token
// with an unknown kid, or signed by a key outside the set, or HS256-signed
// with the RSA key's public bytes (algorithm confusion) is refused.
func TestE2EAuthJWKS(t *testing.T) {
	t.Parallel()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	idp := jwksServer(t, map[string]any{"rsa-1": &rsaKey.PublicKey, "ec-1": &ecKey.PublicKey})

	path := newACL(t, "accounts:\n  - accessKey: reader\n    topicPerms: [\"orders=PUB\"]\n")
	e := startAuthE2E(t, path, func(c *server.Config) {
		c.JWTJWKSURL, c.JWTIssuer, c.JWTAudience, c.JWTAccountClaim = idp.URL+"/jwks.json", "https://idp.test", "mqgate", "preferred_username"
	})
	sign := func(method jwt.SigningMethod, kid string, key any) http.Header {
		tok := jwt.NewWithClaims(method, jwt.MapClaims{"sub": "uuid-1", "preferred_username": "reader",
			"iss": "https://idp.test", "aud": []string{"other", "mqgate"}, "exp": time.Now().Add(time.Minute).Unix()})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return http.Header{"Authorization": {"Bearer " + s}}
	}
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", sign(jwt.SigningMethodRS256, "rsa-1", rsaKey)).Status)
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", sign(jwt.SigningMethodES256, "ec-1", ecKey)).Status)

	pub, err := json.Marshal(rsaKey.PublicKey)
	require.NoError(t, err)
	for name, h := range map[string]http.Header{
		"UnknownKid":       sign(jwt.SigningMethodES256, "ec-2", stranger),
		"KeyOutsideTheSet": sign(jwt.SigningMethodES256, "ec-1", stranger),
		"WrongAlgForKey":   sign(jwt.SigningMethodRS512, "rsa-1", rsaKey), // the set pins RS256
		"HMACConfusion":    sign(jwt.SigningMethodHS256, "rsa-1", pub),
	} {
		r := e.sendAs(t, "orders", h)
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s: %s", name, r)
	}
}

// TestE2EAuthThrottle: a guesser never locks out the right password.
// After --auth-failures-per-minute wrong secrets of one account from one
// address, that pair's failures get 429 with Retry-After, while the right
// secret from that very address is served, and so are other accounts and
// other addresses. Unknown accessKeys count together per address; once
// they are used up every failure from there gets 429, so the answer does
// not tell accounts apart from other names.
func TestE2EAuthThrottle(t *testing.T) {
	t.Parallel()
	path := newACL(t, "accounts:\n  - accessKey: worker\n    secretKey: worker-secret\n    topicPerms: [\"orders=PUB\"]\n  - accessKey: admin\n    secretKey: admin-secret\n    admin: true\n")
	e := startAuthE2E(t, path, func(c *server.Config) { c.AuthFailuresPerMinute = 10 })
	guesser := e.from(t, "127.0.0.4")
	for range 10 {
		servertest.WantProblem(t, guesser.sendAs(t, "orders", basic("worker", "guess")), http.StatusUnauthorized, "unauthenticated")
	}
	r := guesser.sendAs(t, "orders", basic("worker", "guess"))
	servertest.WantProblem(t, r, http.StatusTooManyRequests, "too-many-auth-failures")
	require.Equal(t, "6", r.Header.Get("Retry-After"), "10 per minute: a token every 6 s")
	for range 3 {
		r := guesser.sendAs(t, "orders", basic("worker", "worker-secret"))
		require.Equal(t, http.StatusOK, r.Status, "the right secret from the guesser's own address (one proxy for all): %s", r)
	}
	require.Equal(t, http.StatusOK, guesser.sendAs(t, "orders", basic("admin", "admin-secret")).Status, "another account from that address")
	servertest.WantProblem(t, guesser.sendAs(t, "orders", basic("admin", "typo")), http.StatusUnauthorized, "unauthenticated")
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", basic("worker", "worker-secret")).Status, "another address")
	servertest.WantProblem(t, e.sendAs(t, "orders", basic("worker", "typo")), http.StatusUnauthorized, "unauthenticated")

	sprayer := e.from(t, "127.0.0.5")
	for i := range 10 {
		servertest.WantProblem(t, sprayer.sendAs(t, "orders", basic(fmt.Sprintf("nobody-%d", i), "guess")), http.StatusUnauthorized, "unauthenticated")
	}
	servertest.WantProblem(t, sprayer.sendAs(t, "orders", basic("nobody-else", "guess")), http.StatusTooManyRequests, "too-many-auth-failures")
	servertest.WantProblem(t, sprayer.sendAs(t, "orders", basic("worker", "guess")), http.StatusTooManyRequests, "too-many-auth-failures")
	require.Equal(t, http.StatusOK, sprayer.sendAs(t, "orders", basic("worker", "worker-secret")).Status)
	// No credentials are no failure: an anonymous probe is just told to
	// authenticate.
	servertest.WantProblem(t, sprayer.sendAs(t, "orders", nil), http.StatusUnauthorized, "unauthenticated")

	metrics := string(e.Do(t, http.MethodGet, "/metrics", "", nil, basic("admin", "admin-secret")).Body)
	require.Contains(t, metrics, `mqgate_auth_failures_total{account="worker",reason="bad_secret"} 13`)
	require.Contains(t, metrics, `mqgate_auth_throttled_total{scope="account"} 3`)
	require.Contains(t, metrics, `mqgate_auth_failures_total{account="_none",reason="missing"} 1`)
}

// TestE2EAuthNoSecretsInLogs: with every log line on (trace), after
// requests with right and wrong secrets, valid and invalid tokens, to
// allowed and forbidden routes, and a throttled address, no secret, no
// Authorization value and no token appears in the server's log — while
// the access log does name the accounts.
func TestE2EAuthNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	jwtSecret := "jwt-hmac-key-jwt-hmac-key-jwt-hmac-key"
	path := newACL(t, "accounts:\n  - accessKey: worker\n    secretKey: plain-secret-value\n    topicPerms: [\"orders=PUB\"]\n"+
		"  - accessKey: hashed\n    secretKeyHash: \""+bcryptHash(t, "hashed-secret-value")+"\"\n    admin: true\n")
	var logs syncBuffer
	e := startAuthE2E(t, path, func(c *server.Config) {
		c.LogOutput, c.LogLevel, c.JWTSecret, c.AuthFailuresPerMinute = &logs, "trace", jwtSecret, 5
	})
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "worker", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(jwtSecret))
	require.NoError(t, err)
	badToken, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "worker", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("wrong-key-wrong-key-wrong-key-wrong"))
	require.NoError(t, err)
	headers := []http.Header{
		basic("worker", "plain-secret-value"), basic("worker", "wrong-secret-value"), basic("hashed", "hashed-secret-value"),
		basic("hashed", "wrong-hashed-value"), basic("plain-secret-value", "typed-into-the-user-field"),
		{"Authorization": {"Bearer " + token}}, {"Authorization": {"Bearer " + badToken}}, {"Authorization": {"Basic bm90LWJhc2U2NA=="}},
	}
	for _, h := range headers {
		for _, path := range []string{"/v1/topics/orders/messages", "/v1/topics/audit/messages"} {
			e.Do(t, http.MethodPost, path, "application/json", []byte(`{"body":"x"}`), h)
		}
		e.Do(t, http.MethodGet, "/metrics", "", nil, h)
		e.Do(t, http.MethodGet, "/v1/broker/status", "", nil, h)
	}
	e.Close(t)
	out := logs.String()
	require.Contains(t, out, `"account":"worker"`, "the access log names the account")
	require.Contains(t, out, `"account":"hashed"`)
	require.Contains(t, out, "too many failed authentications on this account from this address")
	for _, h := range headers {
		value := h.Get("Authorization")
		_, credentials, _ := strings.Cut(value, " ")
		require.NotContains(t, out, credentials, "an Authorization value is in the log")
		if decoded, err := base64.StdEncoding.DecodeString(credentials); err == nil {
			if _, secret, ok := strings.Cut(string(decoded), ":"); ok {
				require.NotContains(t, out, secret, "a secret is in the log")
			}
		}
	}
	for _, s := range []string{"plain-secret-value", "hashed-secret-value", "wrong-secret-value", jwtSecret, token, badToken, "$2a$"} {
		require.NotContains(t, out, s)
	}
}

// TestE2ESafeDefaults: without an ACL file a non-loopback listen address
// is refused at start with a message saying what to do; with
// --insecure-no-auth it starts, and the log says loudly that
// authentication is off (also on loopback).
func TestE2ESafeDefaults(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t, t.TempDir())
	cfg.Listen = "0.0.0.0:0"
	_, err := server.Open(context.Background(), cfg)
	require.ErrorIs(t, err, server.ErrInvalidConfig)
	require.ErrorContains(t, err, `listen "0.0.0.0:0" reaches beyond this host`)
	require.ErrorContains(t, err, "give --acl-file")
	require.ErrorContains(t, err, "--insecure-no-auth")

	var logs syncBuffer
	e := startE2E(t, func(c *server.Config) { c.Listen, c.InsecureNoAuth, c.LogOutput = "0.0.0.0:0", true, &logs })
	require.Equal(t, http.StatusOK, e.Do(t, http.MethodGet, "/v1/topics", "", nil, nil).Status, "no credentials needed")
	require.Contains(t, logs.String(), "AUTHENTICATION IS OFF")

	cfg = servertest.Config(t, t.TempDir())
	cfg.ACLFile = newACL(t, "accounts:\n  - accessKey: a\n    secretKey: plain-secret\n")
	require.NoError(t, os.Chmod(cfg.ACLFile, 0o644))
	_, err = server.Open(context.Background(), cfg)
	require.ErrorIs(t, err, server.ErrInvalidConfig)
	require.ErrorContains(t, err, "chmod 600")
}

// BenchmarkAuthOverhead measures a cheap API request (GET /v1/topics/t)
// over real HTTP on two servers side by side, one without authentication
// and one with an ACL file: Basic with a plain secret, Basic with a
// bcrypt hash (verified once, then served from the cache), and an HS256
// bearer token.
//
//	go test -run '^$' -bench AuthOverhead -benchtime 3s ./server/
func BenchmarkAuthOverhead(b *testing.B) {
	const jwtSecret = "bench-jwt-key-bench-jwt-key-bench-jwt-key"
	hash, err := bcrypt.GenerateFromPassword([]byte("bench-hashed"), bcrypt.DefaultCost)
	if err != nil {
		b.Fatal(err)
	}
	aclPath := b.TempDir() + "/plain_acl.yml"
	acl := "accounts:\n  - accessKey: plain\n    secretKey: bench-plain\n    topicPerms: [\"t=PUB|SUB\"]\n" +
		"  - accessKey: hashed\n    secretKeyHash: \"" + string(hash) + "\"\n    topicPerms: [\"t=PUB|SUB\"]\n" +
		"  - accessKey: admin\n    secretKey: bench-admin\n    admin: true\n"
	if err := os.WriteFile(aclPath, []byte(acl), 0o600); err != nil {
		b.Fatal(err)
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "plain", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(jwtSecret))
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	call := func(method, url string, h http.Header) int {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	open := func(withAuth bool) string {
		cfg := server.DefaultConfig()
		cfg.Listen, cfg.DataDir, cfg.SegmentSize, cfg.LogOutput, cfg.LogLevel = "127.0.0.1:0", b.TempDir(), 64<<20, io.Discard, "warn"
		if withAuth {
			cfg.ACLFile, cfg.JWTSecret = aclPath, jwtSecret
		}
		s, err := server.Open(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = s.Serve() }()
		b.Cleanup(func() { _ = s.Close(context.Background()) })
		base := "http://" + s.Addr()
		if status := call(http.MethodPut, base+"/v1/topics/t", basic("admin", "bench-admin")); status != http.StatusCreated {
			b.Fatalf("create topic: %d", status)
		}
		return base
	}
	off, on := open(false), open(true)
	for _, c := range []struct {
		name   string
		base   string
		header http.Header
	}{
		{"Off", off, nil},
		{"BasicPlain", on, basic("plain", "bench-plain")},
		{"BasicBcryptCached", on, basic("hashed", "bench-hashed")},
		{"BearerHS256", on, http.Header{"Authorization": {"Bearer " + token}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if status := call(http.MethodGet, c.base+"/v1/topics/t", c.header); status != http.StatusOK {
					b.Fatalf("%s: %d", c.name, status)
				}
			}
		})
	}
}
