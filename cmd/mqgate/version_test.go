package main

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBuiltBinaryNamesItsCommit builds mqgate with `go build` from a git
// checkout of this source (the checkout itself; in a `git worktree`,
// where go build stamps no commit, a clone of it with the worktree's
// files copied over) and checks that
// `mqgate version`, `mqgate --version` and the mqgate_build_info metric
// of `mqgate serve` name the HEAD commit, and that -ldflags -X still wins.
func TestBuiltBinaryNamesItsCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	top := gitOut(t, "", "rev-parse", "--show-toplevel")
	src := top
	if fi, err := os.Stat(filepath.Join(top, ".git")); err != nil || !fi.IsDir() {
		src = filepath.Join(t.TempDir(), "src")
		gitOut(t, "", "clone", "-q", "--no-checkout", top, src)
		gitOut(t, src, "reset", "-q", gitOut(t, top, "rev-parse", "HEAD"))
		for _, f := range strings.Split(gitOut(t, top, "ls-files", "-co", "--exclude-standard", "-z"), "\x00") {
			b, err := os.ReadFile(filepath.Join(top, f))
			if f == "" || os.IsNotExist(err) {
				continue
			}
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(src, f)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(src, f), b, 0o644))
		}
	}
	head := gitOut(t, src, "rev-parse", "HEAD")
	bin := goBuild(t, src, "-buildvcs=true")

	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		require.NoError(t, err, "mqgate %s: %s", args[0], out)
		require.Contains(t, string(out), "(commit "+head, "mqgate %s", args[0])
		require.NotContains(t, string(out), "unknown", "mqgate %s", args[0])
	}

	// The server's build_info carries the commit as its revision label.
	addr := freeAddr(t)
	srv := exec.Command(bin, "serve", "--listen", addr, "--data-dir", t.TempDir(), "--log-level", "warn", "--shutdown-delay", "0s")
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	var info string
	deadline := time.Now().Add(30 * time.Second)
	for info == "" && time.Now().Before(deadline) {
		info = metricLine("http://"+addr+"/metrics", "mqgate_build_info{")
		if info == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	require.Contains(t, info, `revision="`+head+`"`)

	// -X main.version and -X main.commit (the Dockerfile's) win over
	// what go build stamps (the same checkout: only the link is new).
	bin = goBuild(t, src, "-buildvcs=true", "-ldflags=-X main.version=9.8.7 -X main.commit=feedc0de")
	out, err := exec.Command(bin, "--version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.HasPrefix(string(out), "mqgate 9.8.7 (commit feedc0de, go"), "%s", out)
}

func TestBuildOf(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	require.Equal(t, build{Version: "dev", Commit: "0123abcd", Modified: true, Time: "2026-01-02T03:04:05Z"}, buildOf("dev", "unknown", stamped))
	require.Equal(t, build{Version: "1.2.3", Commit: "feed"}, buildOf("1.2.3", "feed", stamped))
	installed := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}
	require.Equal(t, build{Version: "v1.4.0", Commit: "unknown"}, buildOf("dev", "unknown", installed))
	require.Equal(t, build{Version: "dev", Commit: "unknown"}, buildOf("dev", "unknown", nil))
	require.Regexp(t, `^mqgate dev \(commit 0123abcd, modified, 2026-01-02T03:04:05Z, go\S+\)$`, buildOf("dev", "unknown", stamped).String())
}

// gitOut runs git in dir and returns its trimmed output; without git or
// outside a git checkout the test is skipped.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil && args[0] == "rev-parse" && dir == "" {
		t.Skipf("not a git checkout: %s", out)
	}
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// goBuild builds ./cmd/mqgate of the module in dir into a temporary
// directory with the extra go build flags.
func goBuild(t *testing.T, dir string, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mqgate")
	dir = filepath.Join(dir, "cmd", "mqgate")
	cliBinary(t) // under -race, the CLI's build: the packages compiled without it, cached
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, ".")...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// metricLine returns the first line of url's metrics that starts with
// prefix, or "".
func metricLine(url, prefix string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), prefix) {
			return sc.Text()
		}
	}
	return ""
}
