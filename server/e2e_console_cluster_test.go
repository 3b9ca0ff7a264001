package server_test

// The console's cluster view in Debian's chromium (playwright-core, see
// e2e_console_test.go) against three real replicas opened in this process
// with server.Open: the view of a follower shows the three replicas and
// the leader, the leader's own view their match index and lag; then the
// leader is closed and the same page, without a reload, shows the leader
// the two survivors elected, while the closed leader's page shows its
// error instead of the view it had. No JS error, nothing wider than the
// screen at 1366 and 390 px. Screenshots go to
// $MQGATE_CONSOLE_SCREENSHOTS when set.
// (The standalone note of a single node is checked by
// e2e_console_live_test.go.)

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// consoleClusterScript drives the view in two phases: it prints one JSON
// line and waits for a line on its standard input (the test closes the
// leader meanwhile), then prints the second.
const consoleClusterScript = `
const { chromium } = require("playwright-core");
const readline = require("readline");
const [follower, leader, shots] = process.argv.slice(2);
const lines = readline.createInterface({ input: process.stdin });
// The line, or null when the test closed standard input instead (it failed).
const nextLine = () => new Promise((resolve) => { lines.once("line", resolve); lines.once("close", () => resolve(null)); });
(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const out = { jsErrors: [], overflow: {}, steps: {} };
  const step = (k, v) => { out.steps[k] = v; };
  const view = (page) => page.evaluate(() => {
    const facts = document.getElementById("cluster-facts");
    return {
      role: facts.dataset.role, leader: facts.dataset.leader, nodeId: facts.dataset.nodeId, polls: Number(facts.dataset.polls || 0),
      cards: [...facts.querySelectorAll("div")].map((d) => d.querySelector("dt").textContent + ": " + d.querySelector("dd").textContent),
      rows: [...document.querySelectorAll("#cluster-peers tbody tr[data-id]")].map((r) => [...r.cells].map((c) => c.textContent)),
      note: document.getElementById("cluster-note").textContent,
      standaloneShown: !document.getElementById("cluster-standalone").classList.contains("hidden"),
      problemShown: !document.getElementById("cluster-problem").classList.contains("hidden"),
    };
  });
  const overflow = async (page, what) => {
    const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    if (widths[0] > widths[1]) out.overflow[what] = widths[0];
  };
  const open = async (base, w, h, what) => {
    const page = await browser.newPage({ viewport: { width: w, height: h } });
    page.on("pageerror", (e) => out.jsErrors.push(what + ": " + String(e)));
    await page.goto(base + "/ui/#cluster");
    await page.waitForFunction(() => document.querySelectorAll("#cluster-peers tbody tr[data-id]").length === 3 &&
      document.getElementById("cluster-facts").dataset.leader, null, { timeout: 15000 });
    return page;
  };
  let page, lead;
  try {
    // 1. A follower's view, at both widths, and the leader's own.
    const phone = await open(follower, 390, 844, "follower 390px");
    await overflow(phone, "390px follower");
    step("phone", await view(phone));
    if (shots) await phone.screenshot({ path: shots + "/cluster-follower-390.png", fullPage: true });
    await phone.close();
    lead = await open(leader, 1366, 900, "leader 1366px");
    await overflow(lead, "1366px leader");
    step("leader", await view(lead));
    if (shots) await lead.screenshot({ path: shots + "/cluster-leader-1366.png", fullPage: true });
    page = await open(follower, 1366, 900, "follower 1366px");
    await overflow(page, "1366px follower");
    const before = await view(page);
    step("before", before);
    // It polls: a few answers arrive by themselves.
    await page.waitForFunction((n) => Number(document.getElementById("cluster-facts").dataset.polls) > n, before.polls, { timeout: 10000 });
    if (shots) await page.screenshot({ path: shots + "/cluster-follower-1366.png", fullPage: true });
    step("loads", await page.evaluate(() => performance.getEntriesByType("navigation").length));
  } catch (e) {
    out.error = String(e && e.stack || e);
  }
  console.log(JSON.stringify(out));
  if (out.error) { await browser.close(); lines.close(); return; }

  // 2. The test closed the leader: the same page shows the new one.
  const line = await nextLine();
  if (line === null) { await browser.close(); return; }
  const old = line.trim();
  try {
    await page.waitForFunction((o) => {
      const l = document.getElementById("cluster-facts").dataset.leader;
      return l && l !== o;
    }, old, { timeout: 20000 });
    step("after", await view(page));
    // The closed leader's own console: its error replaces the view.
    await lead.waitForFunction(() => !document.getElementById("cluster-problem").classList.contains("hidden"), null, { timeout: 10000 });
    step("gone", await view(lead));
    step("goneProblem", await lead.evaluate(() => document.getElementById("cluster-problem").textContent));
    if (shots) await lead.screenshot({ path: shots + "/cluster-unreachable-1366.png", fullPage: true });
    step("reloaded", (await page.evaluate(() => performance.getEntriesByType("navigation").length)) !== out.steps.loads);
    await overflow(page, "1366px after failover");
    if (shots) await page.screenshot({ path: shots + "/cluster-failover-1366.png", fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(300);
    await overflow(page, "390px after failover");
    if (shots) await page.screenshot({ path: shots + "/cluster-failover-390.png", fullPage: true });
  } catch (e) {
    out.error = String(e && e.stack || e);
  } finally {
    await browser.close();
    lines.close();
  }
  console.log(JSON.stringify(out));
})();
`

// clusterView is the script's reading of the view.
type clusterView struct {
	Role            string     `json:"role"`
	Leader          string     `json:"leader"`
	NodeID          string     `json:"nodeId"`
	Polls           int        `json:"polls"`
	Cards           []string   `json:"cards"`
	Rows            [][]string `json:"rows"`
	Note            string     `json:"note"`
	StandaloneShown bool       `json:"standaloneShown"`
	ProblemShown    bool       `json:"problemShown"`
}

// clusterReport is one JSON line of consoleClusterScript.
type clusterReport struct {
	JSErrors []string       `json:"jsErrors"`
	Overflow map[string]int `json:"overflow"`
	Steps    struct {
		Phone       clusterView `json:"phone"`
		Leader      clusterView `json:"leader"`
		Before      clusterView `json:"before"`
		After       clusterView `json:"after"`
		Gone        clusterView `json:"gone"`
		GoneProblem string      `json:"goneProblem"`
		Reloaded    bool        `json:"reloaded"`
	} `json:"steps"`
	Error string `json:"error"`
}

// startConsoleCluster opens the three replicas of startCluster (Raft's
// tick 50 ms) and waits until one of them serves as the leader; it
// returns them and the leader's index. Cleanup closes them.
func startConsoleCluster(t *testing.T) ([]*servertest.Server, int) {
	t.Helper()
	c := startCluster(t, func(cfg *server.Config) {
		cfg.RaftTick = 50 * time.Millisecond
		cfg.ShutdownTimeout = 5 * time.Second
	})
	nodes := make([]*servertest.Server, len(c.nodes))
	for i, e := range c.nodes {
		nodes[i] = e.Server
	}
	return nodes, waitLeader(t, nodes, 0)
}

// waitLeader waits until a node other than the one of id not (0: any)
// serves as the leader and every open node names it; it returns its index.
func waitLeader(t *testing.T, nodes []*servertest.Server, not uint64) int {
	t.Helper()
	leader := -1
	servertest.Eventually(t, 15*time.Second, func() (bool, string) {
		var views []string
		leader = -1
		agreed := uint64(0)
		for i, e := range nodes {
			if uint64(i+1) == not {
				continue
			}
			var cl api.Cluster
			servertest.Decode(t, e.Get(t, "/v1/cluster"), http.StatusOK, &cl)
			views = append(views, fmt.Sprintf("node %d: %s, leader %d, serving %v", cl.NodeID, cl.Role, cl.Leader, cl.Serving))
			if cl.Leader == 0 || cl.Leader == not || (agreed != 0 && cl.Leader != agreed) {
				return false, strings.Join(views, "; ")
			}
			agreed = cl.Leader
			if cl.Serving {
				leader = i
			}
		}
		return leader >= 0, strings.Join(views, "; ")
	})
	return leader
}

// TestE2EConsoleCluster: the cluster view of three replicas, before and
// after the leader goes.
func TestE2EConsoleCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, node := installPlaywright(t, ctx)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cluster.js"), []byte(consoleClusterScript), 0o644))
	nodes, li := startConsoleCluster(t)
	oldLeader := uint64(li + 1)
	fi := (li + 1) % len(nodes) // a follower: it survives

	run := exec.CommandContext(ctx, node, "cluster.js", nodes[fi].Base, nodes[li].Base, screenshotDir(t))
	run.Dir = dir
	run.Env = append(os.Environ(), "HOME="+dir)
	stdin, err := run.StdinPipe()
	require.NoError(t, err)
	stdout, err := run.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	run.Stderr = &stderr
	require.NoError(t, run.Start())
	// On a failure before the second phase, closing its input ends the
	// script (it closes the browser) before the replicas close.
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = run.Wait()
	})
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	report := func() clusterReport {
		t.Helper()
		require.True(t, lines.Scan(), "the browser script ended early: %v\n%s", lines.Err(), stderr.String())
		var r clusterReport
		require.NoError(t, json.Unmarshal(lines.Bytes(), &r), "%s", lines.Bytes())
		require.Empty(t, r.Error, "browser script")
		require.Empty(t, r.JSErrors, "JS errors")
		require.Empty(t, r.Overflow, "views wider than the viewport (px of scrollWidth)")
		return r
	}

	first := report()
	want := fmt.Sprint(oldLeader)
	for name, v := range map[string]clusterView{"follower 390px": first.Steps.Phone, "follower 1366px": first.Steps.Before, "leader": first.Steps.Leader} {
		require.Equal(t, want, v.Leader, "%s: the leader", name)
		require.Len(t, v.Rows, 3, "%s: three replicas", name)
		require.False(t, v.StandaloneShown, name)
		require.False(t, v.ProblemShown, name)
		for i, row := range v.Rows {
			require.Equal(t, fmt.Sprint(i+1), row[0], "%s: replica ids in order", name)
			require.Contains(t, nodes[0].Cfg.Peers, fmt.Sprintf("%d=%s", i+1, strings.TrimSuffix(row[1], "this node")), "%s: replica %d's peer address", name, i+1)
			role := "follower"
			if uint64(i+1) == oldLeader {
				role = "leader"
			}
			require.Equal(t, role, row[2], "%s: replica %d's role", name, i+1)
		}
		require.Contains(t, v.Cards, "Leader: node "+want+func() string {
			if v.Role == "leader" {
				return " (this node)"
			}
			return " (" + strings.TrimPrefix(strings.Split(nodes[0].Cfg.Peers, ",")[oldLeader-1], want+"=") + ")"
		}(), name)
	}
	before := first.Steps.Before
	require.Equal(t, "follower", before.Role)
	require.Equal(t, fmt.Sprint(fi+1), before.NodeID)
	require.Contains(t, before.Cards, "Role: follower")
	require.Contains(t, before.Cards, "Serves the API: forwards to node "+want)
	require.Equal(t, []string{"—", "—"}, before.Rows[0][3:], "a follower knows no match index or lag")
	require.Contains(t, before.Note, "known on the leader only")
	require.Contains(t, before.Rows[fi][1], "this node")
	lead := first.Steps.Leader
	require.Equal(t, "leader", lead.Role)
	require.Contains(t, lead.Cards, "Serves the API: yes (leader, log applied)")
	for _, row := range lead.Rows {
		require.NotEqual(t, "—", row[3], "the leader knows each match index")
		require.NotEqual(t, "0", row[3], "each replica has the leader's first entry")
		require.Regexp(t, `^\d+(\.\d)? (B|KiB|MiB)$`, row[4], "lag in bytes")
	}

	// Close the leader; the two others elect one of them.
	nodes[li].Close(t)
	nl := waitLeader(t, nodes, oldLeader)
	_, err = fmt.Fprintln(stdin, want)
	require.NoError(t, err)
	require.NoError(t, stdin.Close())
	second := report()
	after := second.Steps.After
	t.Logf("before: %+v\nafter: %+v", before, after)
	require.Equal(t, fmt.Sprint(nl+1), after.Leader, "the survivor's view names the new leader")
	require.NotEqual(t, want, after.Leader)
	require.Len(t, after.Rows, 3, "the closed replica is still a member")
	require.Equal(t, "leader", after.Rows[nl][2])
	require.Equal(t, "follower", after.Rows[li][2], "the old leader is not the leader any more")
	require.False(t, after.ProblemShown)
	require.Greater(t, after.Polls, before.Polls)
	require.False(t, second.Steps.Reloaded, "the view followed without a reload")
	gone := second.Steps.Gone
	require.True(t, gone.ProblemShown, "the closed leader's console shows its error")
	require.Contains(t, second.Steps.GoneProblem, "Failed to fetch")
	require.NotContains(t, second.Steps.GoneProblem, "null", "a problem without code or request id shows no \"null\"")
	require.Empty(t, gone.Cards, "an error replaces the view it makes stale")
	require.Empty(t, gone.Rows)
	require.Empty(t, gone.Leader)
	require.NoError(t, run.Wait())
}
