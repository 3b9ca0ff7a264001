package server_test

// The web console's sign-in in a real browser: Debian's chromium driven
// by playwright-core (installed from npm into a temporary directory),
// against the real server with an ACL file. Skipped when chromium, node
// or npm are missing, unless CI is set (.ci/run installs them).

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// playwrightCore is the npm package that drives chromium.
const playwrightCore = "playwright-core@1.65.1"

// chromiumPath is Debian's chromium.
const chromiumPath = "/usr/bin/chromium"

// consoleScript signs in to the console with a wrong and then the right
// secret, creates a topic through the form, signs out, and prints what
// it saw as JSON. Every 401 of an API call is recorded with its
// WWW-Authenticate (which would make chromium show its own dialog).
const consoleScript = `
const { chromium } = require("playwright-core");
const [base, user, secret, shot] = process.argv.slice(2);
(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const out = { unauthorized: [], apiCalls: 0, apiCallsWithBasic: 0, dialogs: 0 };
  try {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on("dialog", (d) => { out.dialogs++; d.dismiss(); });
    page.on("response", (r) => {
      if (r.url().includes("/v1/") && r.status() === 401) out.unauthorized.push(r.headers()["www-authenticate"] || "");
    });
    page.on("request", (r) => {
      if (!r.url().includes("/v1/")) return;
      out.apiCalls++;
      if ((r.headers()["authorization"] || "").startsWith("Basic ")) out.apiCallsWithBasic++;
    });
    await page.goto(base + "/ui/");
    await page.waitForSelector("#login:not(.hidden)", { timeout: 10000 });
    out.loginShownAtStart = true;
    // Before any attempt: the form, and no error (the calls refused with
    // 401 before sign-in are what shows the form, nothing to report).
    // The overview's three calls (broker status, topics, groups) are
    // refused; give the page a moment to handle the answers.
    for (let i = 0; i < 200 && out.unauthorized.length < 3; i++) await page.waitForTimeout(50);
    await page.waitForTimeout(500);
    out.noticeAtStart = await page.evaluate(() => {
      const n = document.getElementById("notice");
      return n.classList.contains("hidden") ? "" : n.textContent;
    });
    out.loginWhyAtStart = await page.textContent("#login-why");

    await page.fill("#login input[name=accessKey]", user);
    await page.fill("#login input[name=secretKey]", "not-" + secret);
    await page.click("#login button[type=submit]");
    await page.waitForFunction(() => document.getElementById("login-why").textContent.startsWith("Wrong"), null, { timeout: 10000 });
    out.wrongSecretMessage = await page.textContent("#login-why");

    await page.fill("#login input[name=secretKey]", secret);
    await page.click("#login button[type=submit]");
    await page.waitForSelector("#login.hidden", { state: "attached", timeout: 10000 });
    out.account = await page.textContent("#account-name");
    out.stored = await page.evaluate(() => sessionStorage.getItem("mqgate.credentials") !== null);
    await page.waitForFunction(() => document.querySelectorAll("#status > *").length > 0, null, { timeout: 10000 });

    const before = out.apiCallsWithBasic;
    await page.click("button[data-tab=topics]");
    await page.fill("#topic-form input[name=name]", "console-topic");
    await page.fill("#topic-form input[name=queues]", "2");
    await page.click("#topic-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("console-topic saved"), null, { timeout: 10000 });
    out.basicAfterLogin = out.apiCallsWithBasic > before;

    // A group created with a retry policy and consumeFrom, then changed
    // through the same form with only one field filled in.
    await page.click("button[data-tab=groups]");
    await page.fill("#group-form input[name=name]", "console-group");
    await page.fill("#group-form input[name=topic]", "console-topic");
    await page.fill("#group-form input[name=consumeFrom]", "last");
    await page.selectOption("#group-form select[name=backoff]", "exponential");
    await page.fill("#group-form input[name=initialMs]", "500");
    await page.fill("#group-form input[name=maxMs]", "60000");
    await page.fill("#group-form input[name=jitter]", "0.2");
    await page.click("#group-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("console-group created"), null, { timeout: 10000 });
    out.groupCreated = await page.textContent("#notice");
    await page.evaluate(() => document.getElementById("group-form").reset());
    await page.fill("#group-form input[name=name]", "console-group");
    await page.fill("#group-form input[name=retryMaxTimes]", "5");
    await page.click("#group-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("console-group updated"), null, { timeout: 10000 });
    out.groupUpdated = await page.textContent("#notice");
    await page.screenshot({ path: shot });

    await page.click("#sign-out");
    await page.waitForSelector("#login:not(.hidden)", { timeout: 10000 });
    out.storedAfterSignOut = await page.evaluate(() => sessionStorage.getItem("mqgate.credentials") !== null);
    await page.reload();
    await page.waitForSelector("#login:not(.hidden)", { timeout: 10000 });
    out.loginShownAfterReload = true;
  } catch (e) {
    out.error = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})();
`

// consoleUnavailable skips, or fails under CI, when the browser test
// cannot run.
func consoleUnavailable(t *testing.T, why string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set but the console browser test cannot run: "+why, args...)
	}
	t.Skipf("skipping the console browser test: "+why, args...)
}

// installPlaywright installs playwrightCore into a temporary directory
// and returns it with the path of node; it skips (fails under CI) when
// chromium, node or npm are missing.
func installPlaywright(t *testing.T, ctx context.Context) (dir, node string) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		consoleUnavailable(t, "%s is not installed (apt-get install chromium)", chromiumPath)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		consoleUnavailable(t, "node is not installed")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		consoleUnavailable(t, "npm is not installed")
	}
	dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true}`), 0o644))
	install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", playwrightCore)
	install.Dir = dir
	install.Env = append(os.Environ(), "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	if out, err := install.CombinedOutput(); err != nil {
		consoleUnavailable(t, "npm install %s failed: %v\n%s", playwrightCore, err, out)
	}
	return dir, node
}

// runBrowserScript runs the script file (written into dir) with node and
// decodes the JSON it prints into out.
func runBrowserScript(t *testing.T, ctx context.Context, dir, node string, out any, script string, args ...string) {
	t.Helper()
	run := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	run.Dir = dir
	run.Env = append(os.Environ(), "HOME="+dir)
	raw, err := run.Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	require.NoError(t, err, "stdout: %s\nstderr: %s", raw, stderr)
	require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
}

// screenshotDir is MQGATE_CONSOLE_SCREENSHOTS made absolute and created
// ("" when unset: no screenshots).
func screenshotDir(t *testing.T) string {
	t.Helper()
	shots := os.Getenv("MQGATE_CONSOLE_SCREENSHOTS")
	if shots != "" {
		require.NoError(t, os.MkdirAll(shots, 0o755))
		shots, _ = filepath.Abs(shots)
	}
	return shots
}

// TestE2EConsoleSignIn: in chromium, the console asks for an account
// with its own form and no error banner before the user tried (no 401 of
// its calls carries WWW-Authenticate, so the browser never shows its
// dialog), refuses a wrong secret, keeps the right one in sessionStorage
// and sends it as Basic with every call (creating a topic through the
// form), and forgets it on sign-out; curl's 401 keeps its challenge.
func TestE2EConsoleSignIn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, node := installPlaywright(t, ctx)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "console.js"), []byte(consoleScript), 0o644))

	e := startAuthE2E(t, newACL(t, matrixACL(t)), func(c *server.Config) { c.ShutdownTimeout = 5 * time.Second })
	shot := filepath.Join(dir, "console.png")
	var out struct {
		Unauthorized          []string `json:"unauthorized"`
		APICalls              int      `json:"apiCalls"`
		APICallsWithBasic     int      `json:"apiCallsWithBasic"`
		Dialogs               int      `json:"dialogs"`
		LoginShownAtStart     bool     `json:"loginShownAtStart"`
		NoticeAtStart         string   `json:"noticeAtStart"`
		LoginWhyAtStart       string   `json:"loginWhyAtStart"`
		WrongSecretMessage    string   `json:"wrongSecretMessage"`
		Account               string   `json:"account"`
		Stored                bool     `json:"stored"`
		BasicAfterLogin       bool     `json:"basicAfterLogin"`
		StoredAfterSignOut    bool     `json:"storedAfterSignOut"`
		LoginShownAfterReload bool     `json:"loginShownAfterReload"`
		GroupCreated          string   `json:"groupCreated"`
		GroupUpdated          string   `json:"groupUpdated"`
		Error                 string   `json:"error"`
	}
	runBrowserScript(t, ctx, dir, node, &out, "console.js", e.Base, "admin", adminSecret, shot)
	require.Empty(t, out.Error)
	t.Logf("console: %d API calls, %d with Basic, 401s: %q; screenshot %s", out.APICalls, out.APICallsWithBasic, out.Unauthorized, shot)
	require.True(t, out.LoginShownAtStart)
	require.Empty(t, out.NoticeAtStart, "an error banner before the user tried to sign in")
	require.Equal(t, "This gateway needs an account of its ACL file.", out.LoginWhyAtStart)
	require.NotEmpty(t, out.Unauthorized, "the calls before sign-in were refused")
	for _, challenge := range out.Unauthorized {
		require.Empty(t, challenge, "a 401 of the console's calls must not carry WWW-Authenticate")
	}
	require.Zero(t, out.Dialogs)
	require.Contains(t, out.WrongSecretMessage, "Wrong access key or secret key")
	require.Equal(t, "signed in as admin", strings.TrimSpace(out.Account))
	require.True(t, out.Stored)
	require.True(t, out.BasicAfterLogin)
	require.False(t, out.StoredAfterSignOut)
	require.True(t, out.LoginShownAfterReload)

	servertest.Decode(t, e.Do(t, http.MethodGet, "/v1/topics/console-topic", "", nil, basic("admin", adminSecret)), http.StatusOK, nil)
	// The group form: created with its policy, then patched: the one field
	// changed, everything left blank kept.
	require.Contains(t, out.GroupCreated, "retry exponential, from last")
	require.Contains(t, out.GroupUpdated, "retry exponential, from last")
	var g struct {
		RetryMaxTimes int    `json:"retryMaxTimes"`
		ConsumeFrom   string `json:"consumeFrom"`
		RetryPolicy   struct {
			Backoff   string  `json:"backoff"`
			InitialMs int64   `json:"initialMs"`
			MaxMs     int64   `json:"maxMs"`
			Jitter    float64 `json:"jitter"`
		} `json:"retryPolicy"`
		Subscriptions []struct {
			Topic string `json:"topic"`
		} `json:"subscriptions"`
	}
	servertest.Decode(t, e.Do(t, http.MethodGet, "/v1/groups/console-group", "", nil, basic("admin", adminSecret)), http.StatusOK, &g)
	require.Equal(t, 5, g.RetryMaxTimes)
	require.Equal(t, "last", g.ConsumeFrom)
	require.Equal(t, "exponential", g.RetryPolicy.Backoff)
	require.Equal(t, int64(500), g.RetryPolicy.InitialMs)
	require.Equal(t, int64(60000), g.RetryPolicy.MaxMs)
	require.InDelta(t, 0.2, g.RetryPolicy.Jitter, 1e-9)
	require.Len(t, g.Subscriptions, 1)
	require.Equal(t, "console-topic", g.Subscriptions[0].Topic)
	r := e.Get(t, "/v1/topics")
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Equal(t, `Basic realm="mqgate", charset="UTF-8"`, r.Header.Get("WWW-Authenticate"), "curl keeps its challenge")
	r = e.Do(t, http.MethodGet, "/v1/topics", "", nil, http.Header{"X-Requested-With": {"XMLHttpRequest"}})
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Empty(t, r.Header.Get("WWW-Authenticate"))
}
