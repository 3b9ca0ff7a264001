package push_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/push"
)

// standardWebhooksNPM is the reference implementation our signatures are
// cross-checked with.
const standardWebhooksNPM = "standardwebhooks@1.1.1"

// verifyScript verifies every captured request with the npm package's
// Webhook.verify and checks that a tampered body is refused. It prints
// "verified N" on success.
const verifyScript = `
const { Webhook } = require("standardwebhooks");
const cases = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const wh = new Webhook(cases.secret);
let n = 0;
for (const r of cases.requests) {
  wh.verify(r.body, r.headers); // throws on a bad signature or timestamp
  let refused = false;
  try { wh.verify(r.body + " ", r.headers); } catch (e) { refused = true; }
  if (!refused) { console.error("a tampered body verified"); process.exit(1); }
  n++;
}
console.log("verified " + n);
`

// unavailable skips the calling test with why, except under CI, where the
// cross-check must run.
func unavailable(t *testing.T, why string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but the npm cross-check cannot run: "+why, args...)
	}
	t.Skipf("skipping the cross-check with npm "+standardWebhooksNPM+": "+why, args...)
}

// verifyWithNPM checks hits' signatures with the npm standardwebhooks
// package, installed into a temp dir.
func verifyWithNPM(t *testing.T, secret string, hits []hit) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "node is not installed")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		unavailable(t, "npm is not installed")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true}`), 0o644))
	install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", standardWebhooksNPM)
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		unavailable(t, "npm install %s failed: %v\n%s", standardWebhooksNPM, err, out)
	}

	type request struct {
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	cases := struct {
		Secret   string    `json:"secret"`
		Requests []request `json:"requests"`
	}{Secret: secret}
	for _, h := range hits {
		cases.Requests = append(cases.Requests, request{
			Headers: map[string]string{
				push.HeaderID:        h.Header.Get(push.HeaderID),
				push.HeaderTimestamp: h.Header.Get(push.HeaderTimestamp),
				push.HeaderSignature: h.Header.Get(push.HeaderSignature),
			},
			Body: string(h.Body), // json mode: UTF-8
		})
	}
	data, err := json.Marshal(cases)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cases.json"), data, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "verify.js"), []byte(verifyScript), 0o644))
	run := exec.CommandContext(ctx, node, "verify.js", "cases.json")
	run.Dir = dir
	out, err := run.CombinedOutput()
	require.NoError(t, err, "standardwebhooks refused our signatures:\n%s", out)
	require.Equal(t, "verified "+strconv.Itoa(len(hits)), strings.TrimSpace(string(out)))
	t.Logf("npm %s verified %d signatures", standardWebhooksNPM, len(hits))
}
