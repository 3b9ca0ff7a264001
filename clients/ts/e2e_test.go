package tsclient_test

// The TypeScript client's end-to-end suite (test/e2e.test.ts), run by
// `go test ./...`: two real servers on loopback (one open, one with an ACL
// file and a JWT secret), the package installed with `npm ci` into a
// temporary copy (from npm's cache when it can), compiled with its pinned
// tsc, and run with node's test runner. The client reaches the servers
// through a reverse proxy that validates every answer against
// docs/openapi.json and records the operations called, so the suite is
// also a contract test of what the TypeScript types promise. Skipped when
// node or npm are missing, unless CI is set (.ci/run installs them).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// Credentials of the server with an ACL file (test values).
const (
	accessKey = "ts-admin"
	secretKey = "ts-admin-secret-0123"
	jwtSecret = "ts-client-jwt-secret-0123456789abcdef"
)

// packageFiles are what the suite needs of the package (node_modules,
// dist and build are not copied).
var packageFiles = []string{"package.json", "package-lock.json", "tsconfig.json", "tsconfig.test.json", "src", "test"}

// covered are the operations the suite must call (the Go side checks it,
// so a step dropped from the suite fails here).
var covered = []string{
	"putTopic", "getTopic", "listTopics", "sendMessages", "pullMessages", "ackMessages", "nackMessages",
	"changeInvisibleTime", "getMessage", "putGroup", "listDeadLetters", "getDeadLetter", "resendDeadLetters",
	"discardDeadLetter", "listTimers", "getTimer", "cancelTimer", "rescheduleTimer", "resetOffsets", "getProgress",
}

// unavailable skips the test with why, except under CI, where it must run.
func unavailable(t *testing.T, why string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but the TypeScript client suite cannot run: "+why, args...)
	}
	t.Skipf("skipping the TypeScript client suite: "+why, args...)
}

// TestTypeScriptClientE2E runs test/e2e.test.ts against real servers: it
// fails with node's output when a step of the suite fails, when an answer
// does not match the spec, or when the suite skipped an operation of
// covered.
func TestTypeScriptClientE2E(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "node is not installed")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		unavailable(t, "npm is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	dir := t.TempDir()
	for _, name := range packageFiles {
		copyTo(t, dir, name)
	}
	readme := readmeExample(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test", "readme.ts"), []byte(readme), 0o644))
	// An installed package's own files are left alone (no prepare/build):
	// the suite compiles the sources itself below.
	started := time.Now()
	run(t, ctx, dir, npm, "ci", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	installed := time.Since(started)
	run(t, ctx, dir, node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.test.json")
	compiled := time.Since(started) - installed

	open := servertest.Start(t)
	acl := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(acl, []byte(fmt.Sprintf("accounts:\n  - accessKey: %s\n    secretKey: %s\n    admin: true\n", accessKey, secretKey)), 0o600))
	guarded := servertest.Start(t, func(c *server.Config) {
		c.ACLFile = acl
		c.JWTSecret = jwtSecret
	})
	checks := &contract{}
	openURL := checks.proxy(t, open.Base)
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "build/test/e2e.test.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"MQGATE_URL="+openURL,
		"MQGATE_AUTH_URL="+checks.proxy(t, guarded.Base),
		"MQGATE_ACCESS_KEY="+accessKey,
		"MQGATE_SECRET_KEY="+secretKey,
		"MQGATE_JWT_SECRET="+jwtSecret,
		"NO_COLOR=1",
	)
	suiteStart := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the TypeScript suite failed:\n%s", out)
	t.Logf("npm ci %v, tsc %v, suite %v:\n%s", installed.Round(time.Millisecond), compiled.Round(time.Millisecond),
		time.Since(suiteStart).Round(time.Millisecond), out)

	// The README's example, compiled with the suite, runs as written
	// against the open server.
	example := exec.CommandContext(ctx, node, "build/test/readme.js")
	example.Dir = dir
	example.Env = append(os.Environ(), "MQGATE_URL="+openURL)
	out, err = example.CombinedOutput()
	require.NoError(t, err, "the README example failed:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 4, "the example prints a message id, the two messages and the problem:\n%s", out)
	require.Regexp(t, `^[0-9A-F]{32}$`, lines[0])
	require.Equal(t, `created {"id":1001}`, lines[1])
	require.Equal(t, "raw \x01\x02\x03", lines[2])
	require.Equal(t, "404 topic not found: nope", lines[3])

	called := checks.operations()
	for _, op := range covered {
		require.Contains(t, called, op, "the TypeScript suite never called %s", op)
	}
	checks.report(t)
}

// readmeExample is the TypeScript example of README.md, importing the
// package's sources and talking to the server at $MQGATE_URL.
func readmeExample(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(data), "```ts\n")
	require.True(t, ok, "README.md has a ts example")
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	for _, s := range []string{`"@mqgate/client"`, `"http://127.0.0.1:8080"`} {
		require.Contains(t, block, s, "the example imports the package and names the default server")
	}
	block = strings.Replace(block, `"@mqgate/client"`, `"../src/index.js"`, 1)
	return strings.Replace(block, `"http://127.0.0.1:8080"`, `process.env.MQGATE_URL!`, 1)
}

// copyTo copies the file or directory name (relative to the package)
// into dir.
func copyTo(t *testing.T, dir, name string) {
	t.Helper()
	st, err := os.Stat(name)
	require.NoError(t, err)
	if st.IsDir() {
		require.NoError(t, os.CopyFS(filepath.Join(dir, name), os.DirFS(name)), name)
		return
	}
	data, err := os.ReadFile(name)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
}

// run runs name with args in dir and fails with its output.
func run(t *testing.T, ctx context.Context, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), out)
}

// contract is the reverse proxy's record: the operations called and the
// answers that did not match the spec.
type contract struct {
	mu       sync.Mutex
	ops      map[string]int
	mismatch []string
}

// proxy starts a reverse proxy to base on a free loopback port (closed
// at cleanup) that validates every answer with
// servertest.ValidateResponse, and returns its URL.
func (c *contract) proxy(t *testing.T, base string) string {
	t.Helper()
	target, err := url.Parse(base)
	require.NoError(t, err)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		ModifyResponse: func(res *http.Response) error {
			body, err := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if err != nil {
				return err
			}
			res.Body = io.NopCloser(bytes.NewReader(body))
			c.record(res.Request, res, body)
			return nil
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// record notes the operation of one exchange and checks its answer.
func (c *contract) record(req *http.Request, res *http.Response, body []byte) {
	path := req.URL.RequestURI()
	op := servertest.OperationID(req.Method, path)
	err := servertest.ValidateResponse(req.Method, path, res.StatusCode, res.Header, body)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == nil {
		c.ops = make(map[string]int)
	}
	if op != "" {
		c.ops[op]++
	}
	if err != nil {
		c.mismatch = append(c.mismatch, err.Error())
	}
}

// operations lists the operations called, sorted.
func (c *contract) operations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := make([]string, 0, len(c.ops))
	for op := range c.ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	return ops
}

// report fails the test with every answer that did not match the spec.
func (c *contract) report(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.mismatch, "answers to the TypeScript client that do not match docs/openapi.json")
	t.Logf("operations called through the TypeScript client: %v", c.ops)
}
