package matrix_test

// The generator matrix (doc.go): each test copies its generator's
// directory into a temporary one, generates a client from
// docs/openapi.json there with the pinned generator, builds the program
// that uses it, and runs the program against a real server on loopback
// through a proxy that validates every answer against the spec.

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestMain fails the binary when a test leaves goroutines running.
func TestMain(m *testing.M) { servertest.VerifyNoLeaks(m) }

// steps are the operations every program must call.
var steps = []string{"sendMessages", "pullMessages", "changeInvisibleTime", "ackMessages"}

// unavailable skips the test with why, except under CI, where it fails.
func unavailable(t *testing.T, why string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but the generator matrix cannot run: "+why, args...)
	}
	t.Skipf("skipping a row of the generator matrix: "+why, args...)
}

// TestOgenClient: ogen (pinned in ogen/go.mod) accepts the spec, its
// client compiles, and ogen/main.go sends, pulls, extends a lease and
// acks with it.
//
// Only with LONG=1: building ogen and its client from a cold module cache
// (every CI run) takes three minutes of the quick tier's two cores;
// clients/go (oapi-codegen) and the @hey-api row generate, build and run
// clients from the same spec in every run.
func TestOgenClient(t *testing.T) {
	if os.Getenv("LONG") == "" {
		t.Skip("LONG=1 runs ogen on the spec (clients/go and the @hey-api row generate clients in every run)")
	}
	t.Parallel()
	goRow(t, "ogen", nil, "tool", "ogen", "-target", "oas", "-package", "oas", "-clean", "SPEC")
}

// TestOapiCodegenClient: oapi-codegen (pinned in oapicodegen/go.mod)
// generates models and a client from the spec as it is — without the
// overlay clients/go adds to trim error headers — which compile, and
// oapicodegen/main.go sends, pulls, extends a lease and acks with them.
func TestOapiCodegenClient(t *testing.T) {
	if os.Getenv("LONG") == "" {
		// clients/go runs the same generator, pinned at the same version,
		// on the same spec (with its overlay) in every run; this row costs
		// minutes of CPU on a cold build cache.
		t.Skip("LONG=1 runs oapi-codegen on the spec without the overlay (clients/go covers the generator in every run)")
	}
	t.Parallel()
	goRow(t, "oapi-codegen", []string{"oapi-codegen.yaml"}, "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "SPEC")
}

// goRow runs the row of a Go generator: its directory (row without
// dashes) has go.mod, go.sum and main.go, plus extra files; generate are
// the go command's arguments that generate the client into ./oas (SPEC
// stands for the spec's path).
func goRow(t *testing.T, row string, extra []string, generate ...string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		unavailable(t, "the go command is not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := copyRow(t, strings.ReplaceAll(row, "-", ""), append([]string{"go.mod", "go.sum", "main.go"}, extra...)...)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "oas"), 0o755))
	env := []string{"GOWORK=off", "GOFLAGS=-mod=readonly"}
	if out, err := command(ctx, dir, env, goTool, "mod", "download"); err != nil {
		unavailable(t, "%s's modules cannot be downloaded (no module proxy, nothing cached):\n%s", row, out)
	}
	for i, a := range generate {
		if a == "SPEC" {
			generate[i] = spec(t)
		}
	}
	started := time.Now()
	mustRun(t, ctx, dir, env, goTool, generate...)
	generated := time.Since(started)
	mustRun(t, ctx, dir, env, goTool, "build", "-trimpath", "-o", "check", ".") // -trimpath: the same generated code hits the build cache from any temporary directory
	t.Logf("%s generated the client in %v, built in %v", row, generated.Round(time.Millisecond), (time.Since(started) - generated).Round(time.Millisecond))
	runProgram(t, ctx, dir, row, filepath.Join(dir, "check"))
}

// TestHeyAPIClient: @hey-api/openapi-ts (pinned in
// heyapi/package-lock.json) generates an SDK from the spec, tsc compiles
// it with heyapi/src/main.ts, and the program sends, pulls, extends a
// lease and acks with it.
func TestHeyAPIClient(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "node is not installed")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		unavailable(t, "npm is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := copyRow(t, "heyapi", "package.json", "package-lock.json", "tsconfig.json", "openapi-ts.config.mjs", "src")
	npmEnv := []string{"NO_UPDATE_NOTIFIER=1", "npm_config_update_notifier=false"}
	started := time.Now()
	mustRun(t, ctx, dir, npmEnv, npm, "ci", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	installed := time.Since(started)
	// The config names ../../../docs/openapi.json; the copy points at the real one.
	config := filepath.Join(dir, "openapi-ts.config.mjs")
	raw, err := os.ReadFile(config)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"../../../docs/openapi.json"`)
	raw = bytes.Replace(raw, []byte(`"../../../docs/openapi.json"`), []byte(`"`+filepath.ToSlash(spec(t))+`"`), 1)
	require.NoError(t, os.WriteFile(config, raw, 0o644))
	mustRun(t, ctx, dir, []string{"NO_COLOR=1"}, node, "node_modules/@hey-api/openapi-ts/bin/run.js")
	mustRun(t, ctx, dir, nil, node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json")
	t.Logf("npm ci %v, generated and compiled in %v", installed.Round(time.Millisecond), (time.Since(started) - installed).Round(time.Millisecond))
	runProgram(t, ctx, dir, "hey-api", node, "build/main.js")
}

// spec is the absolute path of docs/openapi.json.
func spec(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "docs", "openapi.json"))
	require.NoError(t, err)
	require.FileExists(t, p)
	return p
}

// copyRow copies the named files and directories of the row's directory
// into a temporary directory and returns it.
func copyRow(t *testing.T, row string, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range names {
		src := filepath.Join(row, name)
		st, err := os.Stat(src)
		require.NoError(t, err)
		if st.IsDir() {
			require.NoError(t, os.CopyFS(filepath.Join(dir, name), os.DirFS(src)), src)
			continue
		}
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	return dir
}

// command runs name with args in dir (env added to the test's) and
// returns its combined output.
func command(ctx context.Context, dir string, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd.CombinedOutput()
}

// mustRun runs a command and fails the test with its output.
func mustRun(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) {
	t.Helper()
	out, err := command(ctx, dir, env, name, args...)
	require.NoError(t, err, "%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), out)
}

// runProgram starts a server, runs a row's program against it through
// the validating proxy, and checks what it printed, the operations it
// called and that every answer matched the spec.
func runProgram(t *testing.T, ctx context.Context, dir, row, name string, args ...string) {
	t.Helper()
	srv := servertest.Start(t)
	topic, group := "matrix-"+strings.ReplaceAll(row, "-", ""), "matrix-workers"
	servertest.Decode(t, srv.JSON(t, http.MethodPut, "/v1/topics/"+topic, api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	checks := &contract{}
	out, err := command(ctx, dir, []string{"MQGATE_URL=" + checks.proxy(t, srv.Base), "MQGATE_TOPIC=" + topic, "MQGATE_GROUP=" + group}, name, args...)
	require.NoError(t, err, "the %s program failed:\n%s", row, out)
	t.Logf("the %s program:\n%s", row, out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Len(t, lines, 5, "sent, pulled, lease extended, acked, empty:\n%s", out)
	sent := regexp.MustCompile(`^sent ([0-9A-F]{32})$`).FindStringSubmatch(lines[0])
	require.NotNil(t, sent, lines[0])
	require.Equal(t, []string{"pulled " + sent[1] + " hello from " + row, "lease extended", "acked", "empty"}, lines[1:])
	checks.report(t)
}

// contract is the validating proxy's record: the operations called and
// the answers that did not match the spec.
type contract struct {
	mu       sync.Mutex
	ops      map[string]int
	mismatch []string
}

// proxy starts a reverse proxy to base on a free loopback port (closed at
// cleanup) that checks every answer with servertest.ValidateResponse, and
// returns its URL.
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
			path := res.Request.URL.RequestURI()
			op := servertest.OperationID(res.Request.Method, path)
			err = servertest.ValidateResponse(res.Request.Method, path, res.StatusCode, res.Header, body)
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.ops == nil {
				c.ops = map[string]int{}
			}
			c.ops[op]++
			if err != nil {
				c.mismatch = append(c.mismatch, err.Error())
			}
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

// report fails t when a step was not called or an answer did not match.
func (c *contract) report(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, op := range steps {
		require.Positive(t, c.ops[op], "the program never called %s: %v", op, c.ops)
	}
	require.Empty(t, c.mismatch, "answers that do not match docs/openapi.json")
}
