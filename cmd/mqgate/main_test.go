package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
)

// parse parses args as main does, without running the command.
func parse(t *testing.T, args ...string) (*cli, *kong.Context) {
	t.Helper()
	var c cli
	parser, err := kong.New(&c, kong.Name("mqgate"), kong.Vars(server.DefaultConfig().FlagDefaults()))
	require.NoError(t, err)
	ctx, err := parser.Parse(args)
	require.NoError(t, err)
	return &c, ctx
}

// TestServeHelpNamesTheDefaultLease: `mqgate serve --help` says how long a
// pulled message is leased when nobody sets invisibleMs, and where a
// consumer reads when its lease ends.
func TestServeHelpNamesTheDefaultLease(t *testing.T) {
	var c cli
	var out bytes.Buffer
	exited := -1
	parser, err := kong.New(&c, kong.Name("mqgate"), kong.Vars(server.DefaultConfig().FlagDefaults()),
		kong.Writers(&out, &out), kong.Exit(func(code int) { exited = code }))
	require.NoError(t, err)
	_, _ = parser.Parse([]string{"serve", "--help"})
	require.Zero(t, exited)
	help := strings.Join(strings.Fields(out.String()), " ")
	require.Contains(t, help, "else the default lease of 30s (at most 12h)")
	require.Contains(t, help, "leaseUntil")
}

func TestServeIsTheDefaultWithDefaults(t *testing.T) {
	c, ctx := parse(t)
	require.Equal(t, "serve", ctx.Command())
	want := server.DefaultConfig()
	want.Version, want.Commit = "", "" // set by Run
	require.Equal(t, want, c.Serve.Config)
}

func TestFlagsAndEnvironment(t *testing.T) {
	t.Setenv("MQGATE_DATA_DIR", "/var/lib/mqgate")
	t.Setenv("MQGATE_FLUSH", "async")
	t.Setenv("DATABASE_URL", "postgres://db/mq")
	t.Setenv("MQGATE_LISTEN", ":9000")
	t.Setenv("MQGATE_ADVERTISE_ADDR", "10.0.0.7:8080")
	c, _ := parse(t, "--listen", "127.0.0.1:7000", "--segment-size", "64MiB", "--delay-levels", "1s,5s",
		"--no-auto-create", "--max-waiters", "5", "--write-timeout", "90s", "--metrics-max-label-values", "10",
		"--sqs-max-waiting-receives", "7")
	cfg := c.Serve.Config
	require.Equal(t, "127.0.0.1:7000", cfg.Listen, "flags win over the environment")
	require.Equal(t, "/var/lib/mqgate", cfg.DataDir)
	require.Equal(t, "10.0.0.7:8080", cfg.AdvertiseAddr)
	require.Equal(t, "async", cfg.Flush)
	require.Equal(t, 7, cfg.SQSMaxWaitingReceives)
	require.Equal(t, "postgres://db/mq", cfg.DatabaseURL, "DATABASE_URL is the twin of --database-url")
	require.Equal(t, server.ByteSize(64<<20), cfg.SegmentSize)
	require.Equal(t, server.DelayLevels{time.Second, 5 * time.Second}, cfg.DelayLevels)
	require.False(t, cfg.AutoCreate)
	require.Equal(t, 5, cfg.MaxWaiters)
	require.Equal(t, 10, cfg.MetricsMaxLabelValues)
	require.Equal(t, 90*time.Second, cfg.WriteTimeout)
	require.NoError(t, cfg.Validate())
}

func TestScrubRateFlagAndEnvironment(t *testing.T) {
	c, _ := parse(t)
	require.Equal(t, server.ByteSize(16<<20), c.Serve.Config.ScrubRate)
	t.Setenv("MQGATE_SCRUB_RATE", "0")
	c, _ = parse(t)
	require.Zero(t, c.Serve.Config.ScrubRate, "0 disables the scrubber")
	c, _ = parse(t, "--scrub-rate", "64MiB")
	require.Equal(t, server.ByteSize(64<<20), c.Serve.Config.ScrubRate)
}

func TestHealthcheckUsesListen(t *testing.T) {
	t.Setenv("MQGATE_LISTEN", ":9000")
	c, ctx := parse(t, "healthcheck")
	require.Equal(t, "healthcheck", ctx.Command())
	require.Equal(t, ":9000", c.Healthcheck.Listen)
}

func TestInvalidFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"--flush", "sometimes"},
		{"--segment-size", "big"},
		{"--log-format", "xml"},
	} {
		var c cli
		parser, err := kong.New(&c, kong.Vars(server.DefaultConfig().FlagDefaults()))
		require.NoError(t, err)
		_, err = parser.Parse(args)
		require.Error(t, err, args)
	}
}

// --message-trace is off by default; --message-trace and
// MQGATE_MESSAGE_TRACE=true turn it on, --no-message-trace off again.
func TestMessageTraceFlag(t *testing.T) {
	c, _ := parse(t)
	require.False(t, c.Serve.Config.MessageTrace)
	c, _ = parse(t, "--message-trace")
	require.True(t, c.Serve.Config.MessageTrace)
	c, _ = parse(t, "--message-trace", "--no-message-trace")
	require.False(t, c.Serve.Config.MessageTrace)
	t.Setenv("MQGATE_MESSAGE_TRACE", "true")
	c, _ = parse(t)
	require.True(t, c.Serve.Config.MessageTrace)
}

// TestOTelFlags: OpenTelemetry export is off by default; --otlp-endpoint
// turns it on, its twins come from the environment.
func TestOTelFlags(t *testing.T) {
	c, _ := parse(t)
	require.Empty(t, c.Serve.OTLPEndpoint)
	require.Equal(t, "mqgate", c.Serve.OTelServiceName)
	require.InDelta(t, 1.0, c.Serve.OTelSampleRatio, 0)
	t.Setenv("MQGATE_OTEL_SERVICE_NAME", "gateway-eu")
	c, _ = parse(t, "serve", "--otlp-endpoint", "http://127.0.0.1:4318", "--otel-sample-ratio", "0.25")
	require.Equal(t, "http://127.0.0.1:4318", c.Serve.OTLPEndpoint)
	require.Equal(t, "gateway-eu", c.Serve.OTelServiceName)
	require.InDelta(t, 0.25, c.Serve.OTelSampleRatio, 1e-12)
	require.NoError(t, c.Serve.Validate())
}
