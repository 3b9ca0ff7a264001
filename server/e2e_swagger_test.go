package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// swaggerScript opens the Swagger UI and prints what it rendered as JSON:
// the spec documents it fetched, the OpenAPI version badge, the number of
// operations and whether it offers to authorize (securitySchemes).
const swaggerScript = `
const { chromium } = require("playwright-core");
const [base] = process.argv.slice(2);
(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const out = { fetched: [] };
  try {
    const page = await browser.newPage();
    page.on("response", (r) => { if (r.url().endsWith(".json")) out.fetched.push(new URL(r.url()).pathname); });
    await page.goto(base + "/swagger/");
    await page.waitForSelector(".opblock", { timeout: 20000 });
    out.badge = (await page.textContent(".version-stamp")).trim();
    out.operations = await page.$$eval(".opblock", (els) => els.length);
    out.authorize = await page.$$eval(".btn.authorize", (els) => els.length);
    out.errors = await page.$$eval(".errors-wrapper", (els) => els.map((e) => e.textContent));
  } catch (e) {
    out.error = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})();
`

// TestE2ESwaggerUIShowsOpenAPI3: in chromium, /swagger/ renders the
// OpenAPI 3.0 spec the server serves at /openapi.json (every operation,
// the authorize dialog of its security schemes, no errors), not swag's
// Swagger 2.0 document.
func TestE2ESwaggerUIShowsOpenAPI3(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, node := installPlaywright(t, ctx)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "swagger.js"), []byte(swaggerScript), 0o644))

	e := startE2E(t)
	var spec struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(e.Get(t, "/openapi.json").Body, &spec))
	ops := 0
	for _, methods := range spec.Paths {
		ops += len(methods)
	}

	var out struct {
		Fetched    []string `json:"fetched"`
		Badge      string   `json:"badge"`
		Operations int      `json:"operations"`
		Authorize  int      `json:"authorize"`
		Errors     []string `json:"errors"`
		Error      string   `json:"error"`
	}
	runBrowserScript(t, ctx, dir, node, &out, "swagger.js", e.Base)
	require.Empty(t, out.Error)
	require.Equal(t, []string{"/openapi.json"}, out.Fetched)
	require.Equal(t, "OAS3", out.Badge, "the UI's OpenAPI version badge")
	require.Equal(t, ops, out.Operations)
	require.Equal(t, 1, out.Authorize, "the security schemes offer to authorize")
	require.Empty(t, out.Errors)
}
