package web_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestConsoleTypeChecks type-checks the console's scripts that start with
// // @ts-check (live.js) against the API types generated into clients/ts
// (types.d.ts imports its schema.ts) with the tsc pinned there:
// a field the API renamed or dropped fails here, not in a browser. The
// scripts are served as written; nothing is built. tsc comes from
// clients/ts/node_modules (make clients-ts, which make lint runs first);
// without it the test skips, or fails when CI is set.
func TestConsoleTypeChecks(t *testing.T) {
	t.Parallel()
	tsc, err := filepath.Abs(filepath.Join("..", "clients", "ts", "node_modules", ".bin", "tsc"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tsc); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is missing (make clients-ts installs it): %v", tsc, err)
		}
		t.Skipf("SKIPPED: %s is missing (run make clients-ts)", tsc)
	}
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but node is missing")
		}
		t.Skip("SKIPPED: node is missing")
	}
	out, err := exec.Command(tsc, "-p", "tsconfig.json").CombinedOutput()
	if err != nil {
		t.Fatalf("tsc -p web/tsconfig.json: %v\n%s", err, out)
	}
}

// TestVendoredClientIsFresh: web/dist/vendor/mqgate-client.js is
// clients/ts/src/index.ts as the pinned tsc compiles it today, and
// openapi-fetch.mjs the pinned package's browser build
// (web/scripts/vendor-client.mjs --check; make console-client writes them).
func TestVendoredClientIsFresh(t *testing.T) {
	t.Parallel()
	tsc, err := filepath.Abs(filepath.Join("..", "clients", "ts", "node_modules", ".bin", "tsc"))
	if err != nil {
		t.Fatal(err)
	}
	node, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(tsc); err != nil || nodeErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but tsc (make clients-ts) or node is missing")
		}
		t.Skip("SKIPPED: tsc or node is missing (run make clients-ts)")
	}
	out, err := exec.Command(node, filepath.Join("scripts", "vendor-client.mjs"), "--check").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}
