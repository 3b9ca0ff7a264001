package server_test

// The console as an operator uses it, in Debian's chromium (playwright-core,
// see e2e_console_test.go): every view opens with no JS error and no
// horizontal overflow at 1366 and 390 px (the cluster view with its
// standalone note); the live overview's numbers and charts move after
// traffic without a reload; create topic → send → watch the lag rise →
// consume → watch it fall → nack to the DLQ → open the message's delivery
// history → resend it from the DLQ view, asserting on what the page shows.
// Screenshots of each view go to $MQGATE_CONSOLE_SCREENSHOTS when set.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
)

const consoleLiveScript = `
const { chromium } = require("playwright-core");
const fs = require("fs");
const [base, shots] = process.argv.slice(2);
const tabs = ["overview", "topics", "groups", "dlq", "timers", "send", "consume", "messages", "sqs", "cluster"];
(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const out = { jsErrors: [], overflow: {}, steps: {} };
  const step = (k, v) => { out.steps[k] = v; };
  try {
    // 1. Every view at both widths: no JS error, nothing wider than the screen.
    for (const [w, h] of [[1366, 900], [390, 844]]) {
      const page = await browser.newPage({ viewport: { width: w, height: h } });
      page.on("pageerror", (e) => out.jsErrors.push(w + "px: " + String(e)));
      page.on("dialog", (d) => d.accept());
      await page.goto(base + "/ui/");
      await page.waitForFunction(() => document.querySelectorAll("#live > *").length > 0, null, { timeout: 10000 });
      for (const tab of tabs) {
        await page.click("button[data-tab=" + tab + "]");
        await page.waitForTimeout(400);
        // A single node's cluster view: the standalone note, no replicas.
        if (tab === "cluster") {
          await page.waitForFunction(() => document.getElementById("cluster-facts").dataset.role === "standalone", null, { timeout: 10000 });
          step("clusterStandalone" + w, await page.evaluate(() => [!document.getElementById("cluster-standalone").classList.contains("hidden"),
            document.getElementById("cluster-replicas").classList.contains("hidden"), document.getElementById("cluster-facts").textContent]));
        }
        const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
        if (widths[0] > widths[1]) out.overflow[w + "px " + tab] = widths[0];
        // This server has no --sqs-listen: its SQS view is the off state
        // (sqs-<width>.png is e2e_console_sqs_test.go's, with queues).
        if (shots) await page.screenshot({ path: shots + "/" + (tab === "sqs" ? "sqs-off" : tab === "cluster" ? "cluster-standalone" : tab) + "-" + w + ".png", fullPage: true });
      }
      await page.close();
    }

    // 2. The operator's path, at 1366 px.
    const page = await browser.newPage({ viewport: { width: 1366, height: 900 } });
    page.on("pageerror", (e) => out.jsErrors.push("flow: " + String(e)));
    page.on("dialog", (d) => d.accept());
    await page.goto(base + "/ui/");
    const liveNumber = (name) => page.evaluate((n) => Number(document.getElementById("live").dataset[n]), name);
    const waitLive = (name, want) => page.waitForFunction(([n, v]) => document.getElementById("live").dataset[n] === String(v), [name, want], { timeout: 15000 });
    const cardText = (label) => page.evaluate((l) => {
      for (const d of document.querySelectorAll("#live > div")) if (d.querySelector("dt").textContent === l) return d.querySelector("dd").textContent;
      return null;
    }, label);
    await waitLive("totalLag", 0);
    step("pointsAtStart", await page.evaluate(() => Number(document.getElementById("chart-rates").dataset.points)));

    await page.click("button[data-tab=topics]");
    await page.fill("#topic-form input[name=name]", "live");
    await page.fill("#topic-form input[name=queues]", "1");
    await page.click("#topic-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("live saved"), null, { timeout: 10000 });
    await page.click("button[data-tab=groups]");
    await page.fill("#group-form input[name=name]", "live-g");
    await page.fill("#group-form input[name=topic]", "live");
    await page.click("#group-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("live-g created"), null, { timeout: 10000 });

    await page.click("button[data-tab=send]");
    for (let i = 0; i < 3; i++) {
      await page.fill("#send-form input[name=topic]", "live");
      await page.fill("#send-form input[name=keys]", "order-" + i);
      await page.fill("#send-form textarea[name=body]", "payload " + i);
      await page.click("#send-form button[type=submit]");
      await page.waitForFunction((n) => document.getElementById("send-result").textContent.includes("messageId") && document.getElementById("notice").textContent.includes("Sent 1"), i, { timeout: 10000 });
      await page.evaluate(() => document.getElementById("notice").classList.add("hidden"));
    }

    // The lag rises on the overview by itself (no reload, no click).
    await page.click("button[data-tab=overview]");
    const loads = await page.evaluate(() => performance.getEntriesByType("navigation").length);
    await waitLive("totalLag", 3);
    step("lagAfterSends", await cardText("Total lag"));
    step("sentCard", await cardText("Sent (since start)"));
    await page.waitForFunction(() => Number(document.getElementById("chart-rates").dataset.points) >= 3, null, { timeout: 15000 });
    step("pointsAfterSends", await page.evaluate(() => Number(document.getElementById("chart-rates").dataset.points)));
    step("chartCanvases", await page.evaluate(() => document.querySelectorAll(".chart canvas").length));
    step("liveTopicRow", await page.evaluate(() => [...document.querySelector("#live-topics tbody tr").cells].slice(0, 2).map((c) => c.textContent).join(" ")));
    step("consumerRow", await page.evaluate(() => document.querySelector("#overview-consumers tbody tr").textContent));
    // The topics table is the tab loader's (its requests, not the stream).
    await page.waitForFunction(() => document.querySelector("#overview-topics tbody").textContent.includes("live"), null, { timeout: 15000 });
    step("maxOffsetRow", await page.evaluate(() => [...document.querySelectorAll("#overview-topics tbody tr")].map((r) => r.textContent).join("|")));
    step("liveMode", await page.evaluate(() => document.getElementById("live").dataset.mode));
    step("mirrorCard", await cardText("PostgreSQL mirror"));
    if (shots) await page.screenshot({ path: shots + "/overview-live-1366.png", fullPage: true });

    // Messages by store time: the three sends, two a page; a name the
    // server would refuse is refused before any request; an error
    // replaces the results shown before.
    await page.click("button[data-tab=messages]");
    await page.fill("#search-form input[name=topic]", "live");
    await page.fill("#search-form input[name=limit]", "2");
    await page.click("#search-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("search-result").dataset.count === "2", null, { timeout: 10000 });
    step("searchPage1", await page.evaluate(() => [...document.querySelectorAll("#search-result tbody tr")].map((r) => r.cells[5].textContent)));
    step("searchNextEnabled", await page.evaluate(() => !document.getElementById("search-next").disabled));
    await page.click("#search-next");
    await page.waitForFunction(() => document.getElementById("search-page").textContent === "page 2", null, { timeout: 10000 });
    step("searchPage2", await page.evaluate(() => [...document.querySelectorAll("#search-result tbody tr")].map((r) => r.cells[5].textContent)));
    if (shots) await page.screenshot({ path: shots + "/message-search-1366.png", fullPage: true });
    let badRequests = 0;
    page.on("request", (r) => { if (r.url().includes("/v1/topics/bad")) badRequests++; });
    await page.fill("#search-form input[name=topic]", "bad topic");
    await page.click("#search-form button[type=submit]");
    await page.waitForTimeout(300);
    step("badNameMessage", await page.evaluate(() => document.querySelector("#search-form input[name=topic]").validationMessage));
    step("badNameRequests", badRequests);
    step("resultsKeptOnBlockedSubmit", await page.evaluate(() => document.querySelectorAll("#search-result tbody tr").length));
    await page.fill("#search-form input[name=topic]", "nope");
    await page.click("#search-form button[type=submit]");
    await page.waitForFunction(() => document.querySelector("#search-result .problem"), null, { timeout: 10000 });
    step("searchProblem", await page.evaluate(() => document.querySelector("#search-result .problem").textContent));
    step("staleSearchGone", await page.evaluate(() => !document.querySelector("#search-result table")));
    await page.click("button[data-tab=overview]");

    // The topic's queues, and the group's detail. The list on the tab was
    // drawn before the sends; its reload is held back, so the click lands
    // on that old row, and the detail must still show the three sends.
    // (unroute lets a held request go on, so a late continue may find it gone.)
    const holdList = async (r) => { await new Promise((res) => setTimeout(res, 1500)); await r.continue().catch(() => {}); };
    await page.route(/\/v1\/topics$/, holdList);
    await page.click("button[data-tab=topics]");
    // The row of "live" itself: %RETRY% and %DLQ% topics sort before it
    // once a nack has made them.
    const liveRow = '#topic-list tbody tr.clickable:has(td:first-child:text-is("live")) td:first-child';
    // The list is drawn again as it refreshes, and a row a nack's topics
    // pushed down may be under the pointer when the click lands: click
    // until the detail is live's.
    const liveShown = () => page.waitForFunction(() => {
      const h = document.querySelector("#topic-detail h3");
      return h && h.textContent.startsWith("Queues of live (");
    }, null, { timeout: 3000 }).then(() => true, () => false);
    for (let i = 0; i < 5; i++) {
      await page.waitForSelector(liveRow);
      await page.click(liveRow);
      if (await liveShown()) break;
    }
    await page.waitForSelector("#topic-queues tbody tr", { timeout: 10000 });
    step("topicQueues", await page.evaluate(() => [...document.querySelectorAll("#topic-queues tbody tr")].map((r) => [...r.cells].slice(0, 4).map((c) => c.textContent).join(" "))));
    await page.unroute(/\/v1\/topics$/, holdList);
    // Once the held reload lands (the list's row of live counts the three),
    // the detail shown was drawn again from it.
    await page.waitForFunction(() => [...document.querySelectorAll("#topic-list tbody tr")].some((r) => r.cells[0].textContent === "live" && r.cells[3].textContent === "3"), null, { timeout: 10000 });
    step("topicQueuesAfterReload", await page.evaluate(() => [...document.querySelectorAll("#topic-queues tbody tr")].map((r) => [...r.cells].slice(0, 4).map((c) => c.textContent).join(" "))));
    await page.click("button[data-tab=groups]");
    await page.waitForSelector("#group-list tbody tr.clickable");
    await page.click("#group-list tbody tr.clickable td:first-child");
    await page.waitForSelector("#group-detail .facts", { timeout: 10000 });
    step("groupFacts", await page.evaluate(() => [...document.querySelectorAll("#group-detail .facts > div")].map((d) => d.querySelector("dt").textContent + ": " + d.querySelector("dd").textContent)));
    step("groupPushColumn", await page.evaluate(() => document.querySelector("#group-list tbody tr td.push").textContent));
    if (shots) await page.screenshot({ path: shots + "/group-detail-1366.png", fullPage: true });

    // Consume: ack two, nack the third to the DLQ.
    await page.click("button[data-tab=consume]");
    await page.fill("#pull-form input[name=group]", "live-g");
    await page.fill("#pull-form input[name=topic]", "live");
    await page.click("#pull-form button[type=submit]");
    await page.waitForFunction(() => document.querySelectorAll("#pulled .msg").length === 3, null, { timeout: 10000 });
    const dead = await page.evaluate(() => document.querySelector("#pulled .msg:last-child header strong").textContent);
    step("deadId", dead);
    await page.fill("#pulled .msg:last-child .actions input[type=number]", "-1");
    await page.click("#pulled .msg:last-child .actions button.secondary");
    await page.waitForFunction(() => document.querySelectorAll("#pulled .msg").length === 2, null, { timeout: 10000 });
    await page.click("#ack-all");
    await page.waitForFunction(() => document.querySelectorAll("#pulled .msg").length === 0, null, { timeout: 10000 });

    await page.click("button[data-tab=overview]");
    await waitLive("totalLag", 0);
    step("lagAfterConsume", await cardText("Total lag"));
    await page.waitForFunction(() => {
      for (const d of document.querySelectorAll("#live > div")) if (d.querySelector("dt").textContent === "Acked (since start)") return d.querySelector("dd").textContent === "2";
      return false;
    }, null, { timeout: 15000 });
    step("ackedCard", await cardText("Acked (since start)"));
    step("reloaded", (await page.evaluate(() => performance.getEntriesByType("navigation").length)) !== loads);

    // The message's delivery history.
    await page.click("button[data-tab=messages]");
    await page.fill("#byid-form input[name=id]", dead);
    await page.click("#byid-form button[type=submit]");
    await page.waitForFunction(() => document.querySelector("#trace-events tbody tr[data-type=delivered]") && document.querySelector("#trace-events tbody tr[data-type=dead-lettered]"), null, { timeout: 15000 });
    step("traceTypes", await page.evaluate(() => [...document.querySelectorAll("#trace-events tbody tr")].map((r) => r.dataset.type)));
    if (shots) await page.screenshot({ path: shots + "/message-detail-1366.png", fullPage: true });
    // An unknown id: the problem replaces the detail shown before.
    await page.fill("#byid-form input[name=id]", "7F00000100001F9000000000000FFFFF");
    await page.click("#byid-form button[type=submit]");
    await page.waitForFunction(() => document.querySelector("#message-detail .problem"), null, { timeout: 10000 });
    step("staleTraceGone", await page.evaluate(() => !document.querySelector("#trace-events")));

    // Resend from the DLQ view.
    await page.click("button[data-tab=dlq]");
    await page.waitForFunction(() => document.querySelector("#dlq-form select[name=group] option[value=live-g]"), null, { timeout: 10000 });
    await page.selectOption("#dlq-form select[name=group]", "live-g");
    await page.click("#dlq-form button[type=submit]");
    try {
      // The dead letter is a copy with an id of its own; its row names the topic.
      await page.waitForFunction(() => [...document.querySelectorAll("#dlq-list tbody tr")].some((r) => r.textContent.includes("nacked from console") && r.querySelector(".pill.dead")), null, { timeout: 10000 });
    } catch (e) {
      step("dlqShown", await page.evaluate(() => document.getElementById("dlq-title").textContent + " | " + document.getElementById("dlq-problem").textContent + " | " + document.querySelector("#dlq-list tbody").textContent));
      throw e;
    }
    const [download] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), page.click("#dlq-export")]);
    const ndjson = fs.readFileSync(await download.path(), "utf8").trim().split("\n").map((l) => JSON.parse(l));
    step("exported", ndjson.map((d) => d.originalTopic + " " + d.status + " " + (d.body || "")));
    step("exportName", download.suggestedFilename());
    await page.check("#dlq-list tbody tr:first-child td.pick input");
    await page.click("#dlq-resend-selected");
    await page.waitForFunction(() => [...document.querySelectorAll("#dlq-list tbody .pill")].some((p) => p.textContent === "resent"), null, { timeout: 10000 });
    step("dlqStatus", await page.evaluate(() => document.querySelector("#dlq-list tbody .pill").textContent));
    if (shots) await page.screenshot({ path: shots + "/dlq-resent-1366.png", fullPage: true });
    await page.click("button[data-tab=overview]");
    await waitLive("totalLag", 1);
    step("lagAfterResend", await cardText("Total lag"));

    // The group view: skip the backlog (the resent message), then reset
    // by time to an hour ago (everything again).
    const lagFact = () => page.evaluate(() => {
      for (const d of document.querySelectorAll("#group-detail .facts > div")) if (d.querySelector("dt").textContent === "Total lag") return d.querySelector("dd").textContent;
      return null;
    });
    await page.click("button[data-tab=groups]");
    await page.waitForSelector("#group-list tbody tr.clickable");
    await page.click("#group-list tbody tr.clickable td:first-child");
    await page.waitForSelector("#skip-form", { timeout: 10000 });
    const waitLagFact = (want) => page.waitForFunction((w) => [...document.querySelectorAll("#group-detail .facts > div")]
      .some((d) => d.querySelector("dt").textContent === "Total lag" && d.querySelector("dd").textContent === w), want, { timeout: 10000 });
    // The group's view may first show what an earlier visit loaded: wait
    // for its refresh (a lag that never comes fails the wait).
    await waitLagFact("1").catch(() => {});
    step("lagBeforeSkip", await lagFact());
    await page.selectOption("#skip-form select[name=topic]", "live");
    await page.click("#skip-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("skipped"), null, { timeout: 10000 });
    step("noticeAfterSkip", await page.textContent("#notice"));
    // The queue's lag is gone; the resent message waits in the group's
    // retry topic, which a skip leaves alone.
    await page.waitForFunction(() => [...document.querySelectorAll("#group-detail table tbody tr")]
      .some((r) => r.cells.length >= 5 && r.cells[1].textContent === "0" && r.cells[4].textContent === "0"), null, { timeout: 10000 });
    step("queuesAfterSkip", await page.evaluate(() => [...document.querySelectorAll("#group-detail table tbody tr")]
      .filter((r) => r.cells.length >= 5).map((r) => r.cells[1].textContent + ":" + r.cells[4].textContent)));
    step("lagAfterSkip", await lagFact());
    await page.click("#reset-here-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("reset"), null, { timeout: 10000 });
    await waitLagFact("4");
    step("lagAfterReset", await lagFact());
    step("noticeAfterReset", await page.textContent("#notice"));
    if (shots) await page.screenshot({ path: shots + "/group-actions-1366.png", fullPage: true });
    await page.click("button[data-tab=overview]");
    await waitLive("totalLag", 4);

    // The detail views at 390 px: nothing wider than the screen.
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
    phone.on("pageerror", (e) => out.jsErrors.push("390px detail: " + String(e)));
    phone.on("dialog", (d) => d.accept());
    const overflow = async (what) => {
      const widths = await phone.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      if (widths[0] > widths[1]) out.overflow["390px " + what] = widths[0];
    };
    await phone.goto(base + "/ui/#groups");
    await phone.waitForSelector("#group-list tbody tr.clickable");
    await phone.click("#group-list tbody tr.clickable td:first-child");
    await phone.waitForSelector("#skip-form", { timeout: 10000 });
    await overflow("group detail");
    if (shots) await phone.screenshot({ path: shots + "/group-detail-390.png", fullPage: true });
    await phone.click("button[data-tab=messages]");
    await phone.fill("#search-form input[name=topic]", "live");
    await phone.click("#search-form button[type=submit]");
    await phone.waitForFunction(() => Number(document.getElementById("search-result").dataset.count) >= 3, null, { timeout: 10000 });
    await overflow("message search");
    if (shots) await phone.screenshot({ path: shots + "/message-search-390.png", fullPage: true });
    await phone.click("#search-result tbody tr td.id button");
    await phone.waitForSelector("#trace-events", { timeout: 10000 });
    await overflow("message detail");
    if (shots) await phone.screenshot({ path: shots + "/message-detail-390.png", fullPage: true });
    await phone.click("button[data-tab=dlq]");
    await phone.waitForFunction(() => document.querySelector("#dlq-list tbody .pill"), null, { timeout: 10000 });
    await overflow("dead letters");
    await phone.click("button[data-tab=overview]");
    await phone.waitForFunction(() => document.querySelectorAll(".chart canvas").length === 2 || document.querySelectorAll("#live > *").length > 0, null, { timeout: 10000 });
    await overflow("overview");
    await phone.close();

    // A topic deleted while its queues are shown: the detail goes with it.
    await page.click("button[data-tab=topics]");
    await page.fill("#topic-form input[name=name]", "doomed");
    await page.fill("#topic-form input[name=queues]", "2");
    await page.click("#topic-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("doomed saved"), null, { timeout: 10000 });
    const doomedRow = '#topic-list tbody tr.clickable:has(td:first-child:text-is("doomed"))';
    await page.click(doomedRow + " td:first-child");
    await page.waitForFunction(() => (document.querySelector("#topic-detail h3") || {}).textContent?.startsWith("Queues of doomed ("), null, { timeout: 10000 });
    step("doomedQueues", await page.evaluate(() => document.querySelectorAll("#topic-queues tbody tr").length));
    await page.click(doomedRow + " button.danger");
    await page.waitForFunction(() => document.getElementById("notice").textContent.includes("Topic doomed deleted"), null, { timeout: 10000 });
    await page.waitForFunction(() => !document.querySelector('#topic-list tbody tr[data-topic="doomed"]'), null, { timeout: 10000 });
    await page.waitForTimeout(500); // a status request the click might have sent would be back by now
    step("detailAfterDelete", await page.evaluate(() => document.getElementById("topic-detail").textContent));
  } catch (e) {
    out.error = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})();
`

// TestE2EConsoleLive drives the console through every view at two widths
// and the operator's path from a new topic to a resent dead letter.
func TestE2EConsoleLive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, node := installPlaywright(t, ctx)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "live.js"), []byte(consoleLiveScript), 0o644))
	e := startE2E(t, withTrace, func(c *server.Config) { c.ShutdownTimeout = 5 * time.Second })

	shots := screenshotDir(t)
	var out struct {
		JSErrors []string       `json:"jsErrors"`
		Overflow map[string]int `json:"overflow"`
		Steps    map[string]any `json:"steps"`
		Error    string         `json:"error"`
	}
	runBrowserScript(t, ctx, dir, node, &out, "live.js", e.Base, shots)
	t.Logf("console steps: %v", out.Steps)
	require.Empty(t, out.JSErrors, "JS errors")
	require.Empty(t, out.Error)
	require.Empty(t, out.Overflow, "views wider than the viewport (px of scrollWidth)")

	s := out.Steps
	for _, w := range []string{"1366", "390"} {
		require.Equal(t, []any{true, true, "This nodesingle nodeRolestandalone"}, s["clusterStandalone"+w],
			"%s px: a single node's cluster view is its standalone note, without replicas", w)
	}
	require.Equal(t, "3", s["lagAfterSends"], "the lag card after three sends")
	require.Equal(t, "3", s["sentCard"])
	require.Greater(t, s["pointsAfterSends"].(float64), s["pointsAtStart"].(float64), "the charts got new points without a reload")
	require.EqualValues(t, 2, s["chartCanvases"], "two uPlot charts")
	require.Contains(t, s["consumerRow"], "live-g")
	require.Equal(t, "live 3", s["liveTopicRow"], "the live topics table: sent since start")
	require.Contains(t, s["maxOffsetRow"], "live133rw", "topic live: 1 queue, max offset (sum) 3, 3 messages retained, perm rw")
	require.Equal(t, "0", s["lagAfterConsume"])
	require.Equal(t, "2", s["ackedCard"])
	require.Equal(t, false, s["reloaded"], "the overview updated without a reload")
	types := strings.Join(func() []string {
		var o []string
		for _, v := range s["traceTypes"].([]any) {
			o = append(o, v.(string))
		}
		return o
	}(), ",")
	require.Contains(t, types, "stored")
	require.Contains(t, types, "delivered")
	require.Contains(t, types, "dead-lettered")
	require.Equal(t, true, s["staleTraceGone"], "an error replaces the detail shown before")
	require.Equal(t, []any{"0 0 3 3"}, s["topicQueues"], "queue 0: min 0, max 3, 3 messages, though the row clicked was drawn before the sends")
	require.Equal(t, []any{"0 0 3 3"}, s["topicQueuesAfterReload"], "the list's reload draws the detail again")
	facts := strings.Join(func() []string {
		var o []string
		for _, v := range s["groupFacts"].([]any) {
			o = append(o, v.(string))
		}
		return o
	}(), "\n")
	require.Contains(t, facts, "Total lag: 3")
	require.Contains(t, facts, "Retry backlog: 0")
	require.Contains(t, facts, "Push endpoint: none (pull)")
	require.Equal(t, []any{"live dead payload 2"}, s["exported"], "the NDJSON export holds the dead letter with its body")
	require.Equal(t, "dlq-live-g.ndjson", s["exportName"])
	require.Equal(t, "resent", s["dlqStatus"])
	require.Equal(t, "1", s["lagAfterResend"], "the resent message waits for the group again")

	require.Equal(t, "stream", s["liveMode"], "the overview follows GET /v1/stats/stream")
	require.Equal(t, "off", s["mirrorCard"], "no --database-url")
	require.Equal(t, []any{"payload 0", "payload 1"}, s["searchPage1"], "by store time: queue 0 in offset order, two a page")
	require.Equal(t, true, s["searchNextEnabled"])
	require.Equal(t, []any{"payload 2"}, s["searchPage2"])
	require.NotEmpty(t, s["badNameMessage"], "a name the server refuses is refused by the form")
	require.EqualValues(t, 0, s["badNameRequests"], "and never sent")
	require.EqualValues(t, 1, s["resultsKeptOnBlockedSubmit"])
	require.Contains(t, s["searchProblem"], "topic-not-found")
	require.Equal(t, true, s["staleSearchGone"], "an error replaces the results shown before")
	require.Equal(t, "pull", s["groupPushColumn"])
	require.Equal(t, "1", s["lagBeforeSkip"])
	require.Equal(t, "Backlog of live-g skipped; lag now 1", s["noticeAfterSkip"])
	require.ElementsMatch(t, []any{"0:0", "retry:1"}, s["queuesAfterSkip"], "skip backlog from the group view: the queue's lag gone, the resent retry kept")
	require.Equal(t, "1", s["lagAfterSkip"])
	require.EqualValues(t, 2, s["doomedQueues"], "the detail of a new topic of two queues")
	require.Equal(t, "", s["detailAfterDelete"], "the detail of a deleted topic goes with it")
	require.Equal(t, "4", s["lagAfterReset"], "reset by time to an hour ago: the three sends again, and the resent retry")
}
