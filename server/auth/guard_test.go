package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

// staticSource serves one ACL.
type staticSource struct{ acl *ACL }

func (s staticSource) ACL() *ACL { return s.acl }

func mustParse(t *testing.T, content string) *ACL {
	t.Helper()
	acl, err := Parse([]byte(content))
	require.NoError(t, err)
	return acl
}

func basicRequest(remote, user, pass string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/topics", nil)
	r.RemoteAddr = remote
	if user != "" || pass != "" {
		r.SetBasicAuth(user, pass)
	}
	return r
}

func TestGuardBasic(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("hashed-secret"), bcrypt.MinCost)
	require.NoError(t, err)
	acl := mustParse(t, `
globalWhiteRemoteAddresses: ["127.0.0.0/8", "::1"]
accounts:
  - accessKey: plain
    secretKey: plain-secret
  - accessKey: hashed
    secretKeyHash: "`+string(hash)+`"
    whiteRemoteAddress: "127.0.0.1"
  - accessKey: tokens-only
`)
	metrics := NewMetrics()
	prometheus.NewRegistry().MustRegister(metrics)
	g := NewGuard(Options{ACL: staticSource{acl}, Metrics: metrics, FailuresPerMinute: 1000})

	p, err := g.Authenticate(basicRequest("127.0.0.1:1000", "plain", "plain-secret"))
	require.NoError(t, err)
	require.Equal(t, "plain", p.Name())
	require.Equal(t, "basic", p.Method())
	require.False(t, p.Admin())

	p, err = g.Authenticate(basicRequest("127.0.0.1:1000", "hashed", "hashed-secret"))
	require.NoError(t, err)
	require.Equal(t, "hashed", p.Name())
	require.Equal(t, 1, acl.cache.len(), "a verified hash is cached")
	_, err = g.Authenticate(basicRequest("127.0.0.1:1000", "hashed", "hashed-secret"))
	require.NoError(t, err)
	require.Equal(t, 1, acl.cache.len())

	for _, c := range []struct{ user, pass string }{
		{"plain", "wrong-secret"}, {"nobody", "plain-secret"}, {"hashed", "wrong"}, {"tokens-only", "anything"},
	} {
		_, err := g.Authenticate(basicRequest("127.0.0.1:1000", c.user, c.pass))
		require.ErrorIs(t, err, ErrUnauthenticated, c.user)
		require.Equal(t, "authentication required: wrong accessKey or secretKey", err.Error(), "one answer for unknown keys and wrong secrets")
	}
	_, err = g.Authenticate(basicRequest("127.0.0.1:1000", "", ""))
	require.ErrorContains(t, err, "credentials are required")

	_, err = g.Authenticate(basicRequest("127.0.0.2:1000", "hashed", "hashed-secret"))
	require.ErrorIs(t, err, ErrForbidden, "whiteRemoteAddress")
	require.ErrorContains(t, err, "whiteRemoteAddress")
	_, err = g.Authenticate(basicRequest("192.0.2.1:1000", "plain", "plain-secret"))
	require.ErrorIs(t, err, ErrForbidden, "globalWhiteRemoteAddresses")

	bearer := basicRequest("127.0.0.1:1000", "", "")
	bearer.Header.Set("Authorization", "Bearer abc.def.ghi")
	_, err = g.Authenticate(bearer)
	require.ErrorIs(t, err, ErrUnauthenticated)
	require.ErrorContains(t, err, "bearer tokens are not accepted")
	odd := basicRequest("127.0.0.1:1000", "", "")
	odd.Header.Set("Authorization", "Digest username=x")
	_, err = g.Authenticate(odd)
	require.ErrorContains(t, err, "unsupported Authorization scheme")
	bad := basicRequest("127.0.0.1:1000", "", "")
	bad.Header.Set("Authorization", "Basic !!!")
	_, err = g.Authenticate(bad)
	require.ErrorContains(t, err, "not base64")

	require.Equal(t, 1.0, testutil.ToFloat64(metrics.failures.WithLabelValues("_unknown", "bad_secret")))
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.failures.WithLabelValues("tokens-only", "bad_secret")))
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.failures.WithLabelValues("plain", "bad_secret")))
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.failures.WithLabelValues("hashed", "bad_secret")))
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.failures.WithLabelValues("hashed", "address")))
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.failures.WithLabelValues("_none", "missing")))
}

func TestGuardSlowsFailuresPerAccountAndAddress(t *testing.T) {
	acl := mustParse(t, oneAccount("victim", "right-secret")+`
  - accessKey: other
    secretKey: other-secret
`)
	metrics := NewMetrics()
	g := NewGuard(Options{ACL: staticSource{acl}, Metrics: metrics, FailuresPerMinute: 3})
	now := time.Unix(1_700_000_000, 0)
	g.now = func() time.Time { return now }

	for i := 0; i < 3; i++ {
		_, err := g.Authenticate(basicRequest("127.0.0.9:1", "victim", "wrong"))
		require.ErrorIs(t, err, ErrUnauthenticated)
		require.NotErrorIs(t, err, ErrThrottled)
	}
	start := time.Now()
	_, err := g.Authenticate(basicRequest("127.0.0.9:1", "victim", "wrong"))
	var throttled *ThrottledError
	require.ErrorAs(t, err, &throttled, "the pair is out of tokens")
	require.Equal(t, 20*time.Second, throttled.RetryAfter(), "3 per minute: one token every 20 s")
	require.GreaterOrEqual(t, time.Since(start), failureDelayBase, "answered late")

	// The right secret from the same address is never slowed nor refused.
	start = time.Now()
	_, err = g.Authenticate(basicRequest("127.0.0.9:1", "victim", "right-secret"))
	require.NoError(t, err)
	require.Less(t, time.Since(start), failureDelayBase)
	// Another account's failures from that address, and the account's
	// from another address, are within their own limits.
	_, err = g.Authenticate(basicRequest("127.0.0.9:1", "other", "wrong"))
	require.NotErrorIs(t, err, ErrThrottled)
	_, err = g.Authenticate(basicRequest("127.0.0.10:1", "victim", "wrong"))
	require.NotErrorIs(t, err, ErrThrottled)

	now = now.Add(20 * time.Second)
	_, err = g.Authenticate(basicRequest("127.0.0.9:1", "victim", "wrong"))
	require.NotErrorIs(t, err, ErrThrottled, "a token is back")
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.throttled.WithLabelValues("account")))

	// Unknown accessKeys count together per address (IPv6 per /64); once
	// they are used up, every failure from there is over the limit, so the
	// answer does not tell accounts from other names; the right secret
	// still passes.
	for i := 0; i < 3; i++ {
		_, err := g.Authenticate(basicRequest("[2001:db8::1]:1", fmt.Sprintf("nobody-%d", i), "wrong"))
		require.NotErrorIs(t, err, ErrThrottled)
	}
	_, err = g.Authenticate(basicRequest("[2001:db8::ffff]:1", "nobody-else", "wrong"))
	require.ErrorIs(t, err, ErrThrottled)
	_, err = g.Authenticate(basicRequest("[2001:db8::ffff]:1", "other", "wrong"))
	require.ErrorIs(t, err, ErrThrottled)
	_, err = g.Authenticate(basicRequest("[2001:db8::ffff]:1", "other", "other-secret"))
	require.NoError(t, err)
	_, err = g.Authenticate(basicRequest("[2001:db8:0:1::1]:1", "nobody-else", "wrong"))
	require.NotErrorIs(t, err, ErrThrottled, "another /64")

	// A held-back answer ends with the request (the pair took its token
	// back above and is over again).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = g.Authenticate(basicRequest("127.0.0.9:1", "victim", "wrong").WithContext(ctx))
	require.ErrorIs(t, err, context.Canceled)
}

func TestLimiterDelays(t *testing.T) {
	l := newFailureLimiter(2)
	now := time.Unix(1_700_000_000, 0)
	var delays []time.Duration
	for i := 0; i < 5; i++ {
		delays = append(delays, l.fail(netipAddr(t, 1), "victim", now).delay)
	}
	require.Equal(t, []time.Duration{0, 0, failureDelayBase, 2 * failureDelayBase, 4 * failureDelayBase}, delays)
	for i := 0; i < 30; i++ {
		require.LessOrEqual(t, l.fail(netipAddr(t, 1), "victim", now).delay, failureDelayMax)
	}
}

func TestLimiterIsBounded(t *testing.T) {
	l := newFailureLimiter(5)
	now := time.Unix(1_700_000_000, 0)
	for i := 0; i < maxTracked+100; i++ {
		l.fail(netipAddr(t, i), "k", now)
	}
	require.LessOrEqual(t, l.tracked(), maxTracked)
}

func TestCredentialCache(t *testing.T) {
	c := newCredentialCache(2, time.Minute)
	now := time.Unix(1_700_000_000, 0)
	a, b, d := c.key("a", []byte("s")), c.key("b", []byte("s")), c.key("d", []byte("s"))
	require.NotEqual(t, c.key("a", []byte("s")), c.key("a", []byte("t")))
	require.NotEqual(t, c.key("ab", []byte("c")), c.key("a", []byte("bc")), "the separator keeps pairs apart")
	c.add(a, now)
	c.add(b, now)
	require.True(t, c.has(a, now)) // a is now the most recent
	c.add(d, now)                  // evicts b
	require.False(t, c.has(b, now))
	require.True(t, c.has(a, now))
	require.True(t, c.has(d, now))
	require.False(t, c.has(a, now.Add(time.Minute+time.Second)), "expired")
	require.Equal(t, 1, c.len())
}

// netipAddr is the i-th address of 10.0.0.0/8.
func netipAddr(t *testing.T, i int) netip.Addr {
	t.Helper()
	return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
}
