package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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
// block, as written, with `mqgate` the real binary (cliBinary) against a
// real server (only its URL changes), with bash -e.
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
	mqgate := "mqgate() { \"$MQGATE_TEST_BINARY\" \"$@\"; }\n" // the CLI's build (cli_binary_test.go)
	if !raceEnabled {
		mqgate = "mqgate() { local IFS=$'\\x1f'; " + e2eArgsEnv + "=\"$*\" \"$MQGATE_TEST_BINARY\" -test.run='^$'; }\n"
	}
	script = mqgate + strings.ReplaceAll(script, "http://127.0.0.1:8080", srv.Base)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), "MQGATE_TEST_BINARY="+cliBinary(t))
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

// TestReadmeClusterRunsAsPasted runs the README's cluster commands as
// written — the three that start a cluster, then the four that add a
// fourth replica, promote it and remove the third — against the real
// binary (`go run ./cmd/mqgate` becomes this test binary, the ports free
// ones), each curl with -f: every command must succeed.
func TestReadmeClusterRunsAsPasted(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is needed (.ci/run installs it)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	section := regexp.MustCompile("(?s)## Three replicas.*?\n## ").Find(readme)
	require.NotNil(t, section)
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(section, -1)
	require.Len(t, blocks, 2, "the start block and the replacement block")
	start, replace := string(blocks[0][1]), string(blocks[1][1])
	require.Equal(t, 3, strings.Count(start, "go run ./cmd/mqgate serve"))

	// The ports of the README, free ones in their place.
	ports := map[string]string{}
	for _, p := range regexp.MustCompile(`(?:127\.0\.0\.1|localhost):(\d+)`).FindAllStringSubmatch(start+replace, -1) {
		if _, ok := ports[p[1]]; !ok {
			_, port, _ := net.SplitHostPort(freeAddr(t))
			ports[p[1]] = port
		}
	}
	rewrite := func(s string) string {
		return regexp.MustCompile(`(127\.0\.0\.1|localhost):(\d+)`).ReplaceAllStringFunc(s, func(m string) string {
			host, port, _ := net.SplitHostPort(m)
			return net.JoinHostPort(host, ports[port])
		})
	}
	// `go run ./cmd/mqgate ARGS` runs this test binary as mqgate.
	// (Every such line runs in the background: the function's exec makes
	// the job the server itself, which the cleanup kills.)
	race := strings.TrimPrefix(noRaceExitSleep(), "GORACE=")
	prelude := fmt.Sprintf(`go() { [ "$1" = run ] && [ "$2" = ./cmd/mqgate ] || return 1; shift 2; local IFS=$'\x1f'; %s="$*" GORACE=%q exec %q -test.run='^$' >>"server-$RANDOM.log" 2>&1; }
curl() { command curl --fail-with-body -sS --retry 20 --retry-all-errors --retry-delay 1 "$@"; }
`, e2eArgsEnv, race, os.Args[0])
	background := func(block string) string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			if strings.HasPrefix(line, "go run ") {
				line += " &"
			}
			out = append(out, line)
		}
		return strings.Join(out, "\n")
	}
	dir := t.TempDir()
	t.Cleanup(func() {
		k := exec.Command("bash", "-c", "kill -9 $(cat pids 2>/dev/null) 2>/dev/null; true")
		k.Dir = dir
		_ = k.Run()
	})
	leaderUp := fmt.Sprintf(`for i in $(seq 1 300); do command curl -sf localhost:%s/v1/cluster | grep -q '"leader"' && break; sleep 0.1; done
`, ports["8081"])
	script := prelude + rewrite(background(start)) + "\necho $(jobs -p) >> pids\n" + leaderUp +
		rewrite(background(replace)) + "\necho $(jobs -p) >> pids\n"
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the cluster commands did not finish in 2 minutes:\n%s", out.String())
	}
	require.NoError(t, err, "%s", out.String())
	// The fourth replica is a voter, the third gone.
	require.Contains(t, out.String(), `"id":4`)
	resp, err := http.Get("http://127.0.0.1:" + ports["8082"] + "/v1/cluster")
	require.NoError(t, err)
	defer resp.Body.Close()
	var v struct {
		Peers []struct {
			ID   uint64 `json:"id"`
			Role string `json:"role"`
		} `json:"peers"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	var ids []uint64
	for _, p := range v.Peers {
		ids = append(ids, p.ID)
		require.NotEqual(t, "learner", p.Role)
	}
	require.ElementsMatch(t, []uint64{1, 2, 4}, ids, out.String())
}
