package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzParseACL feeds arbitrary bytes to the ACL parser: it either refuses
// them with ErrInvalidACL or returns an ACL whose accounts answer every
// permission question without panicking.
func FuzzParseACL(f *testing.F) {
	f.Add([]byte(`accounts: [{accessKey: a, secretKey: "0123456789abcdef"}]`))
	f.Add([]byte(`
globalWhiteRemoteAddresses: ["127.0.0.1", "10.0.*", "::1"]
accounts:
  - accessKey: billing
    secretKey: "s3cret-s3cret"
    whiteRemoteAddress: "10.0.1.*"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["orders=PUB|SUB", "audit=DENY"]
    groupPerms: ["billing=SUB"]
    limits: {requestsPerSecond: 10, messagesPerSecond: 100, longPolls: 4}
`))
	f.Add([]byte("accounts:\n  - accessKey: x\n    topicPerms: [\"=\"]\n"))
	f.Add([]byte("{accounts: [{accessKey: &a x, secretKey: *a}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		acl, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidACL) {
				t.Fatalf("Parse refused with an error that is not ErrInvalidACL: %v", err)
			}
			return
		}
		for _, key := range acl.AccessKeys() {
			a := acl.Account(key)
			if a == nil {
				t.Fatalf("AccessKeys lists %q but Account does not find it", key)
			}
			for _, need := range []Perm{PermPub, PermSub} {
				a.Can(Topic, "orders", need)
				a.Can(Group, "billing", need)
			}
		}
	})
}

// FuzzAuthenticate sends arbitrary Authorization headers and remote
// addresses through the guard. Whatever arrives, the answer is a principal
// of the ACL or one of the guard's sentinel errors, never a panic; and a
// principal only for the right secret or a validly signed token.
func FuzzAuthenticate(f *testing.F) {
	const secret = "fuzz-secret-fuzz-secret"
	hmacKey := []byte("0123456789abcdef0123456789abcdef")
	acl, err := Parse([]byte(`
accounts:
  - accessKey: alice
    secretKey: "` + secret + `"
  - accessKey: bob
`))
	if err != nil {
		f.Fatal(err)
	}
	verifier, err := NewJWTVerifier(context.Background(), JWTOptions{Secret: hmacKey})
	if err != nil {
		f.Fatal(err)
	}
	g := NewGuard(Options{ACL: staticSource{acl}, JWT: verifier, FailuresPerMinute: 1 << 30})
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "bob", "exp": time.Now().Add(24 * time.Hour).Unix(), "iat": time.Now().Unix(),
	}).SignedString(hmacKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Basic YWxpY2U6ZnV6ei1zZWNyZXQtZnV6ei1zZWNyZXQ=", "127.0.0.1:1")
	f.Add("Basic YWxpY2U6d3Jvbmc=", "[::1]:2")
	f.Add("Bearer "+token, "10.1.2.3:4")
	f.Add("Bearer "+token[:len(token)-2], "10.1.2.3:4")
	f.Add("bAsIc !!!", "not-an-address")
	f.Add("Digest username=x", "127.0.0.1:5")
	f.Add("", "127.0.0.1:6")
	f.Fuzz(func(t *testing.T, header, remote string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/topics", nil)
		r.RemoteAddr = remote
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		p, err := g.Authenticate(r)
		if err != nil {
			if !errors.Is(err, ErrUnauthenticated) && !errors.Is(err, ErrForbidden) && !errors.Is(err, ErrThrottled) {
				t.Fatalf("Authenticate failed with an unexpected error: %v", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error repeats the secret: %v", err)
			}
			return
		}
		switch p.Name() {
		case "alice":
			user, pass, ok := r.BasicAuth()
			if !ok || user != "alice" || pass != secret {
				t.Fatalf("alice signed in without her secret: %q", header)
			}
		case "bob":
			if p.Method() != "bearer" {
				t.Fatalf("bob has no secret and signed in by %s: %q", p.Method(), header)
			}
		default:
			t.Fatalf("unknown principal %q", p.Name())
		}
	})
}
