package server_test

import (
	"net/http"
	"sort"
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
// kept (server/auth/doc.go). Each round samples the three kinds back to
// back, in rotating order, and compares each with the unknown accessKey
// of the same round, so that a machine whose load changes slows both
// sides of a ratio alike; the median of those ratios must be within a
// factor of 3 of 1. Before, a plain account's failure took about 0.04×
// an unknown accessKey's.
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
	const rounds = 31
	samples := make([][]time.Duration, len(kinds))
	ratios := make([][]float64, len(kinds))
	for i := range rounds {
		round := make([]time.Duration, len(kinds))
		for j := range kinds {
			k := (i + j) % len(kinds) // rotate which kind goes first
			start := time.Now()
			r := e.sendAs(t, "orders", kinds[k].header)
			round[k] = time.Since(start)
			servertest.WantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
		}
		for k := range kinds {
			samples[k] = append(samples[k], round[k])
			ratios[k] = append(ratios[k], float64(round[k])/float64(round[0]))
		}
	}
	for k := range kinds {
		t.Logf("%-24s median %v (p10 %v, p90 %v)", kinds[k].name, percentile(samples[k], 0.5), percentile(samples[k], 0.1), percentile(samples[k], 0.9))
	}
	for k := 1; k < len(kinds); k++ {
		sort.Float64s(ratios[k])
		ratio := ratios[k][len(ratios[k])/2]
		t.Logf("%-24s median ratio to an unknown accessKey in the same round %.2f", kinds[k].name, ratio)
		require.True(t, ratio > 1.0/3 && ratio < 3, "%s takes %.2f× the time of an unknown accessKey: the time tells them apart", kinds[k].name, ratio)
	}
	// The right secrets are still served (the plain one without a hash).
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", basic("plain", "plain-secret-1")).Status)
	require.Equal(t, http.StatusOK, e.sendAs(t, "orders", basic("hashed", "hashed-secret-1")).Status)
}
