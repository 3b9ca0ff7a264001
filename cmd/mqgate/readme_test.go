package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/servertest"
)

// TestReadmeTourRunsAsPasted runs the README's curl tour, exactly as
// written, against the real binary (only localhost:8080 becomes the test
// server's address), in a fresh directory, with bash -e: every command
// must succeed, every curl must get a 2xx (-f), and the jq captures must
// find what they look for.
func TestReadmeTourRunsAsPasted(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed by the README tour (.ci/run installs it)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	tour := regexp.MustCompile("(?s)## A tour with curl.*?```sh\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, tour, "README.md has a tour section with a sh block")
	script := string(tour[1])
	require.Contains(t, script, "localhost:8080")

	p := startServer(t, t.TempDir(), freeAddr(t))
	// Every curl must get a 2xx: --fail-with-body makes a 4xx or 5xx fail
	// the script (and still prints the problem).
	script = "curl() { command curl --fail-with-body \"$@\"; }\n" + strings.ReplaceAll(script, "localhost:8080", p.addr)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	require.NoError(t, cmd.Start())
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the tour did not finish in 2 minutes:\n%s", out.String())
	}
	if err != nil {
		p.kill9() // its log is read once it has stopped writing
		t.Fatalf("the tour failed: %v\n%s\nserver log:\n%s", err, out.String(), p.log.String())
	}
	t.Logf("tour output:\n%s", out.String())
}

// TestReadmeCommandLineRunsAsPasted runs the README's "Command line"
// block, as written, with `mqgate` the real binary (this test binary
// re-executed) against a real server (only its URL changes), with bash -e.
func TestReadmeCommandLineRunsAsPasted(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "jq", "grep"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed by the README command line block (.ci/run installs it)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)## Command line.*?```sh\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, block, "README.md has a Command line section with a sh block")
	script := string(block[1])
	require.Contains(t, script, "http://127.0.0.1:8080")

	srv := servertest.Start(t)
	script = "mqgate() { local IFS=$'\\x1f'; " + e2eArgsEnv + "=\"$*\" \"$MQGATE_TEST_BINARY\" -test.run='^$'; }\n" +
		strings.ReplaceAll(script, "http://127.0.0.1:8080", srv.Base)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), "MQGATE_TEST_BINARY="+os.Args[0])
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	text := string(out)
	for _, want := range []string{
		"orders  4       rw", "orders:created || paid", "total lag", "cannot parse", "timersPending: 1",
		"(404 topic-not-found)", "exit status 1",
	} {
		require.Contains(t, text, want)
	}
	dead, err := os.ReadFile(filepath.Join(cmd.Dir, "dead-letters.ndjson"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(dead), "\n"), "%s", dead)
	require.Contains(t, string(dead), `"body":"not json"`)
	t.Logf("output:\n%s", out)
}
