package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/servertest"
)

// TestE2EAuthFailuresCostTheSame: no timing oracle. A wrong secret of an
// account with a plain secretKey, a wrong secret of a hashed account and
// an unknown accessKey take the same time to be refused (one check
// against a password hash of the file's cost each), so the time of a
// failure tells neither whether an account exists nor how its secret is
// kept (server/auth/doc.go). The three kinds are sampled interleaved, so
// that a noisy machine slows them alike, and their medians compared with
// a wide tolerance: before, a plain account's failure took well under a
// tenth of the others'.
func TestE2EAuthFailuresCostTheSame(t *testing.T) {
	t.Parallel()
	path := newACL(t, `
accounts:
  - accessKey: plain
    secretKey: plain-secret-1
    topicPerms: ["orders=PUB"]
  - accessKey: hashed
    secretKeyHash: "`+argon2Hash(t, "hashed-secret-1")+`"
    topicPerms: ["orders=PUB"]
`)
	e := startAuthE2E(t, path)
	kinds := []struct {
		name   string
		header http.Header
	}{
		{"unknown accessKey", basic("nobody", "guess-guess")},
		{"plain secretKey, wrong", basic("plain", "guess-guess")},
		{"secretKeyHash, wrong", basic("hashed", "guess-guess")},
	}
	const rounds = 25
	samples := make([][]time.Duration, len(kinds))
	for i := range rounds {
		for j := range kinds {
			k := kinds[(i+j)%len(kinds)] // rotate which kind goes first
			start := time.Now()
			r := e.sendAs(t, "orders", k.header)
			d := time.Since(start)
			servertest.WantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
			samples[(i+j)%len(kinds)] = append(samples[(i+j)%len(kinds)], d)
		}
	}
	medians := make([]time.Duration, len(kinds))
	for j := range kinds {
		medians[j] = percentile(samples[j], 0.5)
		t.Logf("%-24s median %v (p10 %v, p90 %v)", kinds[j].name, medians[j], percentile(samples[j], 0.1), percentile(samples[j], 0.9))
	}
	for j := 1; j < len(kinds); j++ {
		ratio := float64(medians[j]) / float64(medians[0])
		require.True(t, ratio > 0.5 && ratio < 2, "%s takes %.2f× the time of an unknown accessKey (medians %v and %v): the time tells them apart",
			kinds[j].name, ratio, medians[j], medians[0])
	}
	// The right secrets are still served (the plain one without a hash).
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", basic("plain", "plain-secret-1")).Status)
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", basic("hashed", "hashed-secret-1")).Status)
}
