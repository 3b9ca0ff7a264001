package loadgen_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/internal/loadgen"
	"github.com/mqgate/mqgate/server"
)

// The tests drive the real server (server.Open: the real broker and
// store on a temporary data dir) over real HTTP on 127.0.0.1. Without an
// ACL file a loopback listener runs with authentication off.

func startServer(t *testing.T, opts ...func(*server.Config)) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.SegmentSize = "127.0.0.1:0", t.TempDir(), 64<<20
	cfg.LogOutput, cfg.LogFormat, cfg.LogLevel = io.Discard, "json", "warn"
	cfg.ShutdownDelay, cfg.ShutdownTimeout = 0, 10*time.Second
	for _, o := range opts {
		o(&cfg)
	}
	s, err := server.Open(context.Background(), cfg)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, s.Close(ctx))
		require.NoError(t, <-served)
	})
	return "http://" + s.Addr()
}

// progress returns how many messages of topic group has not acked.
func lag(t *testing.T, base, group string) int64 {
	t.Helper()
	resp, err := http.Get(base + "/v1/groups/" + group + "/progress")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var p struct {
		TotalLag int64 `json:"totalLag"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	return p.TotalLag
}

func TestProduceThenConsumeExactCount(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	ctx := context.Background()
	// 500 in batches of 7: 71 full requests and a last one of 3.
	res, err := loadgen.Produce(ctx, loadgen.Config{URL: base, Topic: "exact", Queues: 4, Count: 500, Batch: 7, Concurrency: 4, BodySize: 100})
	require.NoError(t, err)
	require.Len(t, res, 1)
	p := res[0]
	require.Equal(t, "produce", p.Mode)
	require.EqualValues(t, 500, p.Sent)
	require.EqualValues(t, 72, p.Requests)
	require.EqualValues(t, 500*100, p.Bytes)
	require.Zero(t, p.Errors)
	require.EqualValues(t, 72, p.Latency["send"].Count)
	require.Positive(t, p.Latency["send"].P50Ms)
	require.GreaterOrEqual(t, p.Latency["send"].MaxMs, p.Latency["send"].P99Ms)

	// Pulls of 32 from 4 consumers overshoot 500; what is over the count
	// is handed back, not acked.
	res, err = loadgen.Consume(ctx, loadgen.Config{URL: base, Topic: "exact", Group: "g", Count: 500, Consumers: 4, PullBatch: 32, Duration: time.Minute})
	require.NoError(t, err)
	c := res[0]
	require.Equal(t, "consume", c.Mode)
	require.EqualValues(t, 500, c.Acked)
	require.Zero(t, c.Errors, c.ErrorSamples)
	require.Positive(t, c.Latency["pull"].Count)
	require.Positive(t, c.Latency["ack"].P50Ms)
	require.EqualValues(t, 500*100, c.Bytes)
	require.Zero(t, lag(t, base, "g"), "every message acked")

	// Nothing is left: an idle-bounded consume ends with none.
	res, err = loadgen.Consume(ctx, loadgen.Config{URL: base, Topic: "exact", Group: "g", Consumers: 2, Wait: 100 * time.Millisecond, Idle: 300 * time.Millisecond})
	require.NoError(t, err)
	require.Zero(t, res[0].Acked)
}

// TestBinaryBatchesRoundTrip: binary batches store exactly the count, and
// their stamps survive to the consumer (e2e latencies from every message).
func TestBinaryBatchesRoundTrip(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	ctx := context.Background()
	res, err := loadgen.Produce(ctx, loadgen.Config{URL: base, Topic: "bin", Queues: 2, Count: 250, Batch: 100, Binary: true, Concurrency: 2, BodySize: 64})
	require.NoError(t, err)
	require.EqualValues(t, 250, res[0].Sent)
	require.EqualValues(t, 3, res[0].Requests)
	require.Zero(t, res[0].Errors, res[0].ErrorSamples)
	res, err = loadgen.Consume(ctx, loadgen.Config{URL: base, Topic: "bin", Group: "g", Count: 250, Consumers: 2, Duration: time.Minute})
	require.NoError(t, err)
	require.EqualValues(t, 250, res[0].Acked)
	require.EqualValues(t, 250*64, res[0].Bytes)

	res, err = loadgen.E2E(ctx, loadgen.Config{URL: base, Topic: "bin-e2e", Count: 200, Batch: 50, Binary: true, Concurrency: 2, Consumers: 2, BodySize: 64})
	require.NoError(t, err)
	require.EqualValues(t, 200, res[0].Latency["e2e"].Count, "every binary message carried its stamp")
}

// TestBinaryPulls: consumers that pull binary batches ack exactly the
// count and read every body (the bytes and the e2e stamps come through).
func TestBinaryPulls(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	ctx := context.Background()
	_, err := loadgen.Produce(ctx, loadgen.Config{URL: base, Topic: "binpull", Queues: 2, Count: 300, Batch: 50, Concurrency: 2, BodySize: 100})
	require.NoError(t, err)
	res, err := loadgen.Consume(ctx, loadgen.Config{URL: base, Topic: "binpull", Group: "g", Count: 300, Consumers: 3, BinaryPull: true, Duration: time.Minute})
	require.NoError(t, err)
	require.EqualValues(t, 300, res[0].Acked)
	require.EqualValues(t, 300*100, res[0].Bytes)
	require.Zero(t, res[0].Errors, res[0].ErrorSamples)
	require.Zero(t, lag(t, base, "g"))

	res, err = loadgen.E2E(ctx, loadgen.Config{URL: base, Topic: "binpull-e2e", Count: 200, Batch: 50, Concurrency: 2, Consumers: 2, BinaryPull: true, BodySize: 64})
	require.NoError(t, err)
	require.EqualValues(t, 200, res[0].Latency["e2e"].Count, "every message of a binary pull carried its stamp")
}

func TestConsumeCountBelowBacklogLeavesTheRest(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	ctx := context.Background()
	_, err := loadgen.Produce(ctx, loadgen.Config{URL: base, Topic: "rest", Queues: 2, Count: 300, Batch: 50, Concurrency: 2, BodySize: 32})
	require.NoError(t, err)
	res, err := loadgen.Consume(ctx, loadgen.Config{URL: base, Topic: "rest", Group: "g", Count: 100, Consumers: 3, PullBatch: 32, Duration: time.Minute})
	require.NoError(t, err)
	require.EqualValues(t, 100, res[0].Acked)
	// Lag is counted from each queue's committed offset (the lowest one not
	// acknowledged), as RocketMQ's is: a released lease below an acked
	// message holds the acked one in it. So it is at least the 200 not
	// acknowledged, and at most all pulls' worth more.
	l := lag(t, base, "g")
	require.GreaterOrEqual(t, l, int64(200), "the released messages are still there")
	require.LessOrEqual(t, l, int64(200+3*32))
	res, err = loadgen.Consume(ctx, loadgen.Config{URL: base, Topic: "rest", Group: "g", Count: 200, Consumers: 3, Duration: time.Minute})
	require.NoError(t, err)
	require.EqualValues(t, 200, res[0].Acked, "released messages are delivered again at once")
	require.Zero(t, lag(t, base, "g"), "exactly the 200 released messages were left")
}

func TestE2EReportsLatencies(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	ctx := context.Background()
	res, err := loadgen.E2E(ctx, loadgen.Config{URL: base, Topic: "e2e", Count: 400, Batch: 4, Concurrency: 4, Consumers: 4, PullBatch: 16, BodySize: 64})
	require.NoError(t, err)
	r := res[0]
	require.Equal(t, "e2e", r.Mode)
	require.Equal(t, loadgen.DefaultE2EGroup, r.Group)
	require.EqualValues(t, 400, r.Sent)
	require.EqualValues(t, 400, r.Acked)
	require.Zero(t, r.Undelivered)
	require.Zero(t, r.Stale)
	e := r.Latency["e2e"]
	require.EqualValues(t, 400, e.Count)
	require.Positive(t, e.P50Ms)
	require.Positive(t, e.MaxMs)
	require.Less(t, e.P50Ms, 10_000.0)
	for _, kind := range []string{"send", "pull", "ack"} {
		require.Positive(t, r.Latency[kind].Count, kind)
	}

	// A second run on the same topic and group measures only its own
	// messages: the group was moved to the end of the topic.
	_, err = loadgen.Produce(ctx, loadgen.Config{URL: base, Topic: "e2e", Count: 50, BodySize: 64})
	require.NoError(t, err)
	res, err = loadgen.E2E(ctx, loadgen.Config{URL: base, Topic: "e2e", Count: 100, Concurrency: 2, Consumers: 2, BodySize: 64})
	require.NoError(t, err)
	require.EqualValues(t, 100, res[0].Latency["e2e"].Count)
	require.EqualValues(t, 100, res[0].Acked, "the 50 sent before the run are skipped")

	_, err = loadgen.E2E(ctx, loadgen.Config{URL: base, BodySize: 10})
	require.ErrorContains(t, err, "at least 19 bytes")
}

func TestRateIsOpenModel(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	res, err := loadgen.Produce(context.Background(), loadgen.Config{URL: base, Topic: "rate", Rate: 200, Duration: 2 * time.Second, Concurrency: 8, BodySize: 128})
	require.NoError(t, err)
	r := res[0]
	require.InDelta(t, 400, r.Sent, 40, "200 msg/s for 2 s")
	// The elapsed time runs until the last answer, which a loaded machine
	// delays: the rate is never above the schedule's, and may be below.
	require.LessOrEqual(t, r.MsgPerSec, 225.0)
	require.Positive(t, r.MsgPerSec)
	require.Zero(t, r.Errors)

	// Batches: the rate counts messages, not requests.
	res, err = loadgen.Produce(context.Background(), loadgen.Config{URL: base, Topic: "rate", Rate: 500, Batch: 10, Duration: time.Second, Concurrency: 4, BodySize: 128})
	require.NoError(t, err)
	require.InDelta(t, 500, res[0].Sent, 50)
	require.InDelta(t, 50, res[0].Requests, 5)
}

// TestRateLatencyCountsFromTheSchedule: a server that takes 50 ms per
// request with one connection can do 20 requests a second; at 100 a
// second the schedule falls behind, and the latency (from each send's
// due time) grows far past the 50 ms of service time, as it does for a
// real client whose requests queue. A closed loop would report 50 ms.
func TestRateLatencyCountsFromTheSchedule(t *testing.T) {
	t.Parallel()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodGet {
			_, _ = w.Write([]byte(`{"queues":1}`))
			return
		}
		time.Sleep(50 * time.Millisecond)
		_, _ = w.Write([]byte(`{"results":[]}`))
	})}
	base := serve(t, srv)
	res, err := loadgen.Produce(context.Background(), loadgen.Config{URL: base, Rate: 100, Duration: time.Second, Concurrency: 1, BodySize: 16})
	require.NoError(t, err)
	l := res[0].Latency["send"]
	require.Greater(t, l.MaxMs, 500.0, "the last sends were due long before they went out: %+v", l)
	require.Greater(t, l.P50Ms, 200.0)
	require.EqualValues(t, 100, res[0].Sent, "every scheduled send is made, late")
}

func serve(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func TestBaselineIsMeasuredFirst(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	ctx := context.Background()
	res, err := loadgen.Produce(ctx, loadgen.Config{URL: base, Topic: "b", Baseline: true, Duration: 300 * time.Millisecond, Concurrency: 2, Batch: 10})
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.Equal(t, "baseline", res[0].Mode)
	require.Positive(t, res[0].Sent)
	require.NotEqual(t, base, res[0].Target)
	require.Equal(t, "produce", res[1].Mode)
	require.Positive(t, res[1].Sent)

	res, err = loadgen.Consume(ctx, loadgen.Config{URL: base, Topic: "b", Group: "g", Baseline: true, Duration: 300 * time.Millisecond, Consumers: 2})
	require.NoError(t, err)
	require.Len(t, res, 2)
	require.Equal(t, "baseline", res[0].Mode)
	require.Positive(t, res[0].Latency["pull"].Count)
	require.Positive(t, res[1].Acked)
}

func TestWrongCredentialsFailWith401(t *testing.T) {
	t.Parallel()
	acl := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(acl, []byte("accounts:\n  - accessKey: bench\n    secretKey: right-secret\n    admin: true\n"), 0o600))
	base := startServer(t, func(c *server.Config) { c.ACLFile = acl; c.AuthFailuresPerMinute = 10_000 })
	ctx := context.Background()

	for _, cfg := range []loadgen.Config{
		{User: "bench", Password: "wrong"},
		{},
		{Token: "not-a-jwt"},
	} {
		cfg.URL, cfg.Count, cfg.Topic = base, 10, "auth"
		_, err := loadgen.Produce(ctx, cfg)
		var se *loadgen.StatusError
		require.ErrorAs(t, err, &se)
		require.Equal(t, http.StatusUnauthorized, se.Status)
		require.Equal(t, "unauthenticated", se.Code)
		require.Contains(t, err.Error(), "401")

		cfg.Count = 0
		cfg.Duration = 5 * time.Second
		start := time.Now()
		_, err = loadgen.Consume(ctx, cfg)
		require.ErrorAs(t, err, &se)
		require.Equal(t, http.StatusUnauthorized, se.Status)
		require.Less(t, time.Since(start), 3*time.Second, "a 401 ends the run at once")
	}

	res, err := loadgen.Produce(ctx, loadgen.Config{URL: base, Topic: "auth", Count: 20, User: "bench", Password: "right-secret"})
	require.NoError(t, err)
	require.EqualValues(t, 20, res[0].Sent)
	res, err = loadgen.Consume(ctx, loadgen.Config{URL: base, Topic: "auth", Count: 20, User: "bench", Password: "right-secret", Duration: time.Minute})
	require.NoError(t, err)
	require.EqualValues(t, 20, res[0].Acked)
}

func TestReports(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	res, err := loadgen.Produce(context.Background(), loadgen.Config{URL: base, Count: 50, Concurrency: 2})
	require.NoError(t, err)

	var b bytes.Buffer
	require.NoError(t, loadgen.WriteJSON(&b, res))
	var rep loadgen.Report
	require.NoError(t, json.Unmarshal(b.Bytes(), &rep))
	require.Len(t, rep.Results, 1)
	require.EqualValues(t, 50, rep.Results[0].Sent)
	require.Positive(t, rep.Results[0].Latency["send"].P999Ms)

	b.Reset()
	require.NoError(t, loadgen.WriteTable(&b, res))
	for _, want := range []string{"msg/s", "MB/s", "p50", "p90", "p99", "p99.9", "max", "produce batch=1 conns=2"} {
		require.Contains(t, b.String(), want)
	}
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	base := startServer(t)
	var b syncBuffer
	_, err := loadgen.Produce(context.Background(), loadgen.Config{URL: base, Duration: 700 * time.Millisecond, Concurrency: 2, Progress: &b})
	require.NoError(t, err)
	require.Contains(t, b.String(), "msg/s")
	require.Contains(t, b.String(), "errors 0")
}

func TestInvalidConfig(t *testing.T) {
	for _, cfg := range []loadgen.Config{
		{Batch: 257},
		{PullBatch: 33},
		{Wait: time.Minute},
		{User: "a", Token: "b"},
		{Rate: -1},
	} {
		require.Error(t, cfg.Validate(), "%+v", cfg)
	}
	require.NoError(t, loadgen.Config{}.Validate())
	_, err := loadgen.Produce(context.Background(), loadgen.Config{URL: "http://127.0.0.1:1", Count: 1})
	require.Error(t, err, "nothing listens")
	var se *loadgen.StatusError
	require.False(t, errors.As(err, &se))
}

// syncBuffer is a bytes.Buffer safe for the progress goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// to dir and returns their paths.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mqgate bench test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600))
	return certFile, keyFile
}

func TestTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile := selfSigned(t, t.TempDir())
	base := startServer(t, func(c *server.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	base = "https" + strings.TrimPrefix(base, "http")
	ctx := context.Background()

	res, err := loadgen.Produce(ctx, loadgen.Config{URL: base, Count: 20, CAFile: certFile})
	require.NoError(t, err)
	require.EqualValues(t, 20, res[0].Sent)
	res, err = loadgen.Consume(ctx, loadgen.Config{URL: base, Count: 20, Insecure: true, Duration: time.Minute})
	require.NoError(t, err)
	require.EqualValues(t, 20, res[0].Acked)

	_, err = loadgen.Produce(ctx, loadgen.Config{URL: base, Count: 1})
	require.ErrorContains(t, err, "certificate", "an unknown CA is refused")
	_, err = loadgen.Produce(ctx, loadgen.Config{URL: base, Count: 1, CAFile: keyFile})
	require.ErrorContains(t, err, "no PEM certificates")
}
