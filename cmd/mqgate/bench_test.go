package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/internal/loadgen"
)

// runBench runs `mqgate <args>` (the real binary) with extra environment
// and returns its standard output and standard error apart.
func runBench(t *testing.T, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env...), e2eArgsEnv+"="+strings.Join(args, "\x1f"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

// benchJSON runs a bench command with -o json and decodes its report.
func benchJSON(t *testing.T, args ...string) loadgen.Report {
	t.Helper()
	out, errOut, err := runBench(t, nil, append(args, "-o", "json")...)
	require.NoError(t, err, "stderr: %s", errOut)
	var rep loadgen.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	return rep
}

func TestBenchCLIProduceThenConsume(t *testing.T) {
	t.Parallel()
	p := startServer(t, t.TempDir(), freeAddr(t))
	url := "--url=" + p.url("")
	rep := benchJSON(t, "bench", "produce", url, "--topic", "cli", "--count", "500", "--batch", "10", "-c", "4", "--body-size", "1KiB")
	require.Len(t, rep.Results, 1)
	require.EqualValues(t, 500, rep.Results[0].Sent)
	require.EqualValues(t, 50, rep.Results[0].Requests)
	require.Equal(t, 1024, rep.Results[0].BodySize)

	rep = benchJSON(t, "bench", "consume", url, "--topic", "cli", "--group", "cli", "--count", "500", "--consumers", "4", "--pull-batch", "16", "--lease", "10s")
	require.EqualValues(t, 500, rep.Results[0].Acked)
	require.Equal(t, 16, rep.Results[0].PullBatch)
	require.Positive(t, rep.Results[0].Latency["ack"].P99Ms)

	rep = benchJSON(t, "bench", "e2e", url, "--topic", "cli", "--count", "200", "-c", "2", "--consumers", "2", "--body-size", "64")
	e := rep.Results[0]
	require.EqualValues(t, 200, e.Sent)
	require.EqualValues(t, 200, e.Acked)
	require.EqualValues(t, 200, e.Latency["e2e"].Count)
	require.Positive(t, e.Latency["e2e"].P50Ms)

	// The table: throughput and the percentiles.
	out, errOut, err := runBench(t, nil, "bench", url, "--count", "50", "-c", "2")
	require.NoError(t, err, errOut)
	for _, want := range []string{"produce batch=1 conns=2", "msg/s", "MB/s", "p50", "p90", "p99", "p99.9", "max"} {
		require.Contains(t, out, want)
	}
	require.Empty(t, errOut, "no progress line when stderr is not a terminal")
}

// TestBenchReadmeCommandsRun runs every `mqgate bench` command of the
// README as written, against a test server (only the address is added,
// and each run is cut to --duration 1s).
func TestBenchReadmeCommandsRun(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	cmds := regexp.MustCompile(`(?m)^(?:go run \./cmd/mqgate|mqgate|bin/mqgate) (bench[^\n#|]*)`).FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, cmds, "the README shows mqgate bench")
	p := startServer(t, t.TempDir(), freeAddr(t))
	dur := regexp.MustCompile(`--duration[ =]\S+`)
	for _, c := range cmds {
		line := strings.TrimSpace(c[1])
		args := strings.Fields(dur.ReplaceAllString(line, "--duration 1s"))
		if strings.Contains(line, "$") || strings.Contains(line, "'") {
			t.Fatalf("the README's bench commands are plain arguments, got %q", line)
		}
		args = append(args, "--url", p.url(""))
		if !strings.Contains(line, "--duration") {
			args = append(args, "--duration", "1s")
		}
		// As the CLI's other commands, the load tool runs as the non-race
		// build (cli_binary_test.go): what is checked here is that the
		// README's commands run; the bench tests below run it race-built.
		cmd := cliCommand(t, args...)
		var outb, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &outb, &errb
		err := cmd.Run()
		out, errOut := outb.String(), errb.String()
		require.NoError(t, err, "%s\nstdout: %s\nstderr: %s", line, out, errOut)
		require.Contains(t, out, "msg", line)
	}
}

func TestBenchCLIWrongCredentials(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	acl := filepath.Join(dir, "plain_acl.yml")
	require.NoError(t, os.WriteFile(acl, []byte("accounts:\n  - accessKey: bench\n    secretKey: right-secret\n    admin: true\n"), 0o600))
	p := startServer(t, filepath.Join(dir, "data"), freeAddr(t), "--acl-file", acl)

	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--user", "bench", "--password", "wrong"}},
		{[]string{"MQGATE_USER=bench", "MQGATE_PASSWORD=wrong"}, nil},
		{nil, nil},
	} {
		args := append([]string{"bench", "consume", "--url", p.url(""), "--duration", "5s"}, tc.args...)
		out, errOut, err := runBench(t, tc.env, args...)
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, out)
		require.Equal(t, 1, exit.ExitCode())
		require.Contains(t, errOut, "401 Unauthorized (unauthenticated)")
	}
	out, errOut, err := runBench(t, []string{"MQGATE_USER=bench", "MQGATE_PASSWORD=right-secret"},
		"bench", "--url", p.url(""), "--count", "20", "-o", "json")
	require.NoError(t, err, errOut)
	var rep loadgen.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.EqualValues(t, 20, rep.Results[0].Sent)
}

func TestBenchFlags(t *testing.T) {
	c, ctx := parse(t, "bench", "--baseline", "--batch", "1", "--batch", "100", "--duration", "10s")
	require.Equal(t, "bench produce", ctx.Command(), "bench alone is bench produce")
	require.Equal(t, []int{1, 100}, c.Bench.Produce.Batch)
	require.True(t, c.Bench.Produce.Baseline)

	t.Setenv("MQGATE_URL", "https://mq.example:8443")
	t.Setenv("MQGATE_TOKEN", "tok")
	c, ctx = parse(t, "bench", "e2e", "--rate", "500", "--conns", "8", "--consumers", "4", "--pull-batch", "8", "--invisible-time", "5s", "--ca-file", "ca.pem", "-o", "json")
	require.Equal(t, "bench e2e", ctx.Command())
	e := c.Bench.E2E
	require.Equal(t, "https://mq.example:8443", e.URL)
	require.Equal(t, "tok", e.Token)
	require.InDelta(t, 500, e.Rate, 0)
	require.Equal(t, 8, e.Concurrency)
	require.Equal(t, 4, e.Consumers)
	require.Equal(t, 8, e.PullBatch)
	require.Equal(t, "ca.pem", e.CAFile)
	require.Equal(t, "json", e.Output)
	require.Equal(t, "bench-e2e", e.Group)
	cfg := e.config()
	require.Equal(t, "Bearer tok", "Bearer "+cfg.Token)
}
