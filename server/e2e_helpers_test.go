package server_test

// Helpers of the end-to-end tests (e2e_*_test.go): the real server of
// servertest — server.Open with the real broker and a real data dir —
// serving real HTTP on 127.0.0.1, driven with net/http and the api
// package's wire types. e2eServer adds the helpers of single topics
// (auth, TLS, DLQ, progress…) to it, in the files of those topics.

import (
	"sort"
	"testing"
	"time"

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestMain fails the binary when a test leaves goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// e2eServer is one running servertest server.
type e2eServer struct{ *servertest.Server }

// startE2E opens a server on a fresh data dir; opts adjust the config.
// Cleanup closes it.
func startE2E(t *testing.T, opts ...func(*server.Config)) *e2eServer {
	t.Helper()
	return &e2eServer{servertest.Start(t, opts...)}
}

// openE2E opens a server with cfg (e.g. again on the data dir of a closed
// one) and serves it in the background. Cleanup closes it.
func openE2E(t *testing.T, cfg server.Config) *e2eServer {
	t.Helper()
	return &e2eServer{servertest.Open(t, cfg)}
}

// percentile returns the q-quantile (0..1) of ds (nearest rank).
func percentile(ds []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
