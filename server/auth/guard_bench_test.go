package auth

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
)

// BenchmarkAuthenticate is the cost of Guard.Authenticate per request,
// without HTTP: plain secret, bcrypt (cost 10) served from the cache and
// not, argon2id with HashArgon2id's parameters (uncached), HS256 bearer.
//
//	go test -run '^$' -bench Authenticate ./server/auth/
func BenchmarkAuthenticate(b *testing.B) {
	h, err := bcrypt.GenerateFromPassword([]byte("bcrypt-secret"), bcrypt.DefaultCost)
	if err != nil {
		b.Fatal(err)
	}
	phc, err := HashArgon2id("argon2-secret")
	if err != nil {
		b.Fatal(err)
	}
	acl, err := Parse([]byte("accounts:\n  - accessKey: plain\n    secretKey: plain-secret\n" +
		"  - accessKey: bcrypt\n    secretKeyHash: \"" + string(h) + "\"\n" +
		"  - accessKey: argon2\n    secretKeyHash: \"" + phc + "\"\n"))
	if err != nil {
		b.Fatal(err)
	}
	const key = "bench-jwt-key-bench-jwt-key-bench-jwt-key"
	v, err := NewJWTVerifier(context.Background(), JWTOptions{Secret: []byte(key)})
	if err != nil {
		b.Fatal(err)
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "plain", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(key))
	if err != nil {
		b.Fatal(err)
	}
	g := NewGuard(Options{ACL: staticSource{acl}, JWT: v, FailuresPerMinute: 1 << 30})
	run := func(name string, r *http.Request, uncached bool) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if uncached {
					acl.cache = newCredentialCache(defaultCacheSize, defaultCacheTTL)
				}
				if _, err := g.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("BasicPlain", basicRequest("127.0.0.1:1", "plain", "plain-secret"), false)
	run("BasicBcryptCached", basicRequest("127.0.0.1:1", "bcrypt", "bcrypt-secret"), false)
	run("BasicBcryptUncached", basicRequest("127.0.0.1:1", "bcrypt", "bcrypt-secret"), true)
	run("BasicArgon2idUncached", basicRequest("127.0.0.1:1", "argon2", "argon2-secret"), true)
	bearer := basicRequest("127.0.0.1:1", "", "")
	bearer.Header.Set("Authorization", "Bearer "+token)
	run("BearerHS256", bearer, false)
}
