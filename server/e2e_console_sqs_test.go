package server_test

// The console's SQS view in Debian's chromium (playwright-core, see
// e2e_console_test.go): queues made through the real aws-sdk-go-v2 SQS
// client on --sqs-listen show by their SQS names with the topic and group
// that hold them, their redrive and tags, at 1366 and 390 px; the topics
// and groups lists mark what backs a queue; the prefix filter refuses what
// the server would refuse before sending; a server without --sqs-listen
// says so, and an account that may not list the queues sees the 403.
// Screenshots go to $MQGATE_CONSOLE_SCREENSHOTS when set.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
)

const consoleSQSScript = `
const { chromium } = require("playwright-core");
const [base, offBase, adminSecret, consumerSecret, shots] = process.argv.slice(2);
(async () => {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const out = { jsErrors: [], overflow: {}, steps: {} };
  const step = (k, v) => { out.steps[k] = v; };
  // open opens a page; with an account, signed in as it (the console
  // keeps the account in sessionStorage).
  const open = async (w, h, what, account) => {
    const page = await browser.newPage({ viewport: { width: w, height: h } });
    if (account) await page.addInitScript((c) => sessionStorage.setItem("mqgate.credentials", JSON.stringify(c)), account);
    page.on("pageerror", (e) => out.jsErrors.push(what + ": " + String(e)));
    page.on("console", (m) => { if (m.type() === "error" && !m.text().includes("Failed to load resource")) out.jsErrors.push(what + " console: " + m.text()); });
    page.on("dialog", (d) => d.accept());
    page.sqsCalls = [];
    page.on("request", (r) => { if (r.url().includes("/v1/sqs/queues")) page.sqsCalls.push(r.url().slice(r.url().indexOf("/v1/"))); });
    return page;
  };
  const overflow = async (page, what) => {
    const widths = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    if (widths[0] > widths[1]) out.overflow[what] = widths[0];
  };
  const rows = (page) => page.evaluate(() => [...document.querySelectorAll("#sqs-list tbody tr")].map((r) => ({
    name: r.querySelector(".sqs-name strong").textContent,
    fifo: !!r.querySelector(".sqs-name .pill.fifo"),
    arn: r.querySelector(".sqs-name .small").textContent,
    topic: r.querySelector(".sqs-topic").textContent,
    group: r.querySelector(".sqs-group").textContent,
    counts: r.querySelector(".sqs-counts").textContent,
    redrive: r.querySelector(".sqs-redrive").textContent,
    tags: r.querySelector(".sqs-tags").textContent,
    url: r.querySelector(".sqs-url").textContent,
  })));
  const waitRows = (page, n) => page.waitForFunction((n) => document.getElementById("sqs-result").dataset.count === String(n) &&
    document.querySelectorAll("#sqs-list tbody tr").length === n, n, { timeout: 10000 });
  try {
    // 1. The SQS view at 1366 px: every queue by its SQS name.
    const page = await open(1366, 900, "1366px");
    await page.goto(base + "/ui/#sqs");
    await waitRows(page, 3);
    // The counts come from each group's progress, after the list.
    await page.waitForFunction(() => ![...document.querySelectorAll("#sqs-list .sqs-counts")].some((c) => c.textContent === "…"), null, { timeout: 10000 });
    step("rows1366", await rows(page));
    step("endpoint", await page.textContent("#sqs-endpoint"));
    step("activeTab", await page.evaluate(() => document.querySelector("#tabs button.active").dataset.tab));
    await overflow(page, "1366px sqs");
    if (shots) await page.screenshot({ path: shots + "/sqs-1366.png", fullPage: true });

    // 2. A queue's topic and group open their views; both lists badge
    // what backs an SQS queue (one listing per view load).
    let before = page.sqsCalls.length;
    await page.click("#sqs-list tr[data-queue=orders] .sqs-topic");
    await page.waitForSelector("#topic-queues tbody tr", { timeout: 10000 });
    step("topicOpened", await page.evaluate(() => [document.querySelector("#tabs button.active").dataset.tab, document.querySelector("#topic-detail h3").textContent]));
    await page.waitForSelector("#topic-list tr[data-topic=sqs_orders] .pill.sqs", { timeout: 10000 });
    step("topicBadges", await page.evaluate(() => Object.fromEntries([...document.querySelectorAll("#topic-list tbody tr[data-topic]")]
      .map((r) => [r.dataset.topic, (r.querySelector(".pill.sqs") || { textContent: "" }).textContent]))));
    step("topicViewSQSCalls", page.sqsCalls.length - before);
    if (shots) await page.screenshot({ path: shots + "/sqs-topics-badge-1366.png", fullPage: true });
    // The badge leads back to the queue.
    await page.click("#topic-list tr[data-topic=sqsfifo_jobs] .pill.sqs");
    await waitRows(page, 1);
    step("badgeLeadsTo", [await page.evaluate(() => location.hash), (await rows(page)).map((r) => r.name)]);

    await page.click("#sqs-list tr[data-queue='jobs.fifo'] .sqs-group");
    await page.waitForSelector("#group-detail .facts", { timeout: 10000 });
    step("groupOpened", await page.evaluate(() => [document.querySelector("#tabs button.active").dataset.tab, document.querySelector("#group-detail h3").textContent]));
    await page.waitForSelector("#group-list tr[data-group=sqsfifo_jobs] .pill.sqs", { timeout: 10000 });
    step("groupBadges", await page.evaluate(() => Object.fromEntries([...document.querySelectorAll("#group-list tbody tr[data-group]")]
      .map((r) => [r.dataset.group, (r.querySelector(".pill.sqs") || { textContent: "" }).textContent]))));

    // 3. The prefix filter.
    await page.click("button[data-tab=sqs]");
    await waitRows(page, 3);
    await page.fill("#sqs-prefix", "orders");
    await page.click("#sqs-form button[type=submit]");
    await waitRows(page, 2);
    step("filtered", [await page.evaluate(() => location.hash), (await rows(page)).map((r) => r.name), await page.textContent("#sqs-endpoint")]);
    before = page.sqsCalls.length;
    await page.fill("#sqs-prefix", "no spaces!");
    await page.click("#sqs-form button[type=submit]");
    await page.waitForTimeout(300);
    step("badPrefixMessage", await page.evaluate(() => document.getElementById("sqs-prefix").validationMessage));
    step("rowsKeptOnBlockedSubmit", await page.evaluate(() => document.querySelectorAll("#sqs-list tbody tr").length));
    // Refresh with it: the check's error replaces the listing, still unsent.
    await page.click("#sqs-refresh");
    await page.waitForSelector("#sqs-result .problem", { timeout: 10000 });
    step("badPrefixProblem", await page.textContent("#sqs-result .problem"));
    step("staleRowsGone", await page.evaluate(() => !document.querySelector("#sqs-list") && document.getElementById("sqs-state").textContent === ""));
    await page.evaluate(() => { const i = document.getElementById("sqs-prefix"); i.removeAttribute("maxlength"); });
    await page.fill("#sqs-prefix", "a".repeat(81));
    await page.click("#sqs-refresh");
    await page.waitForFunction(() => document.querySelector("#sqs-result .problem") && document.querySelector("#sqs-result .problem").textContent.includes("80"), null, { timeout: 10000 });
    step("longPrefixProblem", await page.textContent("#sqs-result .problem"));
    step("badPrefixRequests", page.sqsCalls.length - before);
    await page.fill("#sqs-prefix", "nothing-here");
    await page.click("#sqs-form button[type=submit]");
    await page.waitForFunction(() => document.getElementById("sqs-result").dataset.count === "0", null, { timeout: 10000 });
    step("noMatch", [await page.textContent("#sqs-result"), await page.evaluate(() => !document.querySelector("#sqs-result .problem"))]);
    step("sqsCalls", page.sqsCalls);
    await page.close();

    // 4. At 390 px: nothing wider than the screen.
    const phone = await open(390, 844, "390px");
    await phone.goto(base + "/ui/#sqs");
    await waitRows(phone, 3);
    await phone.waitForFunction(() => ![...document.querySelectorAll("#sqs-list .sqs-counts")].some((c) => c.textContent === "…"), null, { timeout: 10000 });
    step("rows390", (await rows(phone)).map((r) => r.name + " " + r.topic + " " + r.group));
    await overflow(phone, "390px sqs");
    if (shots) await phone.screenshot({ path: shots + "/sqs-390.png", fullPage: true });
    await phone.click("button[data-tab=topics]");
    await phone.waitForSelector("#topic-list tr[data-topic=sqs_orders] .pill.sqs", { timeout: 10000 });
    await overflow(phone, "390px topics with badges");
    await phone.click("button[data-tab=groups]");
    await phone.waitForSelector("#group-list tr[data-group=sqs_orders] .pill.sqs", { timeout: 10000 });
    await overflow(phone, "390px groups with badges");
    await phone.close();

    // 5. A server without --sqs-listen (and with an ACL file).
    const admin = { accessKey: "admin", secretKey: adminSecret };
    const off = await open(1366, 900, "off", admin);
    await off.goto(offBase + "/ui/#sqs");
    await off.waitForSelector("#sqs-off", { timeout: 10000 });
    step("offText", await off.textContent("#sqs-off"));
    step("offEnabled", await off.evaluate(() => document.getElementById("sqs-result").dataset.enabled));
    if (shots) await off.screenshot({ path: shots + "/sqs-off-1366.png", fullPage: true });
    await off.click("button[data-tab=topics]");
    await off.waitForSelector("#topic-list tr[data-topic=plain]", { timeout: 10000 });
    step("offBadges", await off.evaluate(() => document.querySelectorAll("#topic-list .pill.sqs").length));
    await off.close();
    const offPhone = await open(390, 844, "off 390px", admin);
    await offPhone.goto(offBase + "/ui/#sqs");
    await offPhone.waitForSelector("#sqs-off", { timeout: 10000 });
    await overflow(offPhone, "390px sqs off");
    await offPhone.close();
    // An account that may not list the SQS queues (not admin) sees the
    // server's refusal in the view.
    const consumer = await open(1366, 900, "consumer", { accessKey: "consumer", secretKey: consumerSecret });
    await consumer.goto(offBase + "/ui/#sqs");
    await consumer.waitForSelector("#sqs-result .problem", { timeout: 10000 });
    step("consumerProblem", await consumer.textContent("#sqs-result .problem"));
    step("consumerSignedIn", await consumer.evaluate(() => document.getElementById("login").classList.contains("hidden")));
    await consumer.close();
  } catch (e) {
    out.error = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})();
`

// TestE2EConsoleSQS: queues created with the AWS SDK show in the console's
// SQS view and mark their topics and groups.
func TestE2EConsoleSQS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, node := installPlaywright(t, ctx)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sqs.js"), []byte(consoleSQSScript), 0o644))

	shutdown := func(c *server.Config) { c.ShutdownTimeout = 5 * time.Second }
	e := startE2E(t, shutdown, func(c *server.Config) { c.SQSListen = "127.0.0.1:0" })
	c := sqs.New(sqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://" + e.Srv.SQSAddr()),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "test"}, nil
		}),
	})
	_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders-dlq")})
	require.NoError(t, err)
	dlqURL := "http://" + e.Srv.SQSAddr() + "/000000000000/orders-dlq"
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	require.NoError(t, err)
	orders, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders"),
		Attributes: map[string]string{"RedrivePolicy": `{"deadLetterTargetArn":"` + attrs.Attributes["QueueArn"] + `","maxReceiveCount":3}`},
		Tags:       map[string]string{"team": "payments", "env": "test"}})
	require.NoError(t, err)
	_, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	require.NoError(t, err)
	for _, body := range []string{"a", "b"} {
		_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: orders.QueueUrl, MessageBody: aws.String(body)})
		require.NoError(t, err)
	}
	// A topic of the REST API backs no queue.
	off := startAuthE2E(t, newACL(t, matrixACL(t)), shutdown)
	for _, s := range []*e2eServer{e, off} {
		r := s.Do(t, "PUT", "/v1/topics/plain", "application/json", []byte(`{"queues":1}`), basic("admin", adminSecret))
		require.Less(t, r.Status, 300, "%s", r.Body)
	}

	shots := screenshotDir(t)
	var out struct {
		JSErrors []string       `json:"jsErrors"`
		Overflow map[string]int `json:"overflow"`
		Steps    struct {
			Rows1366 []struct {
				Name, Arn, Topic, Group, Counts, Redrive, Tags, URL string
				Fifo                                                bool
			} `json:"rows1366"`
			Endpoint                string            `json:"endpoint"`
			ActiveTab               string            `json:"activeTab"`
			TopicOpened             []string          `json:"topicOpened"`
			TopicBadges             map[string]string `json:"topicBadges"`
			TopicViewSQSCalls       int               `json:"topicViewSQSCalls"`
			BadgeLeadsTo            []any             `json:"badgeLeadsTo"`
			GroupOpened             []string          `json:"groupOpened"`
			GroupBadges             map[string]string `json:"groupBadges"`
			Filtered                []any             `json:"filtered"`
			BadPrefixMessage        string            `json:"badPrefixMessage"`
			RowsKeptOnBlockedSubmit int               `json:"rowsKeptOnBlockedSubmit"`
			BadPrefixProblem        string            `json:"badPrefixProblem"`
			StaleRowsGone           bool              `json:"staleRowsGone"`
			LongPrefixProblem       string            `json:"longPrefixProblem"`
			BadPrefixRequests       int               `json:"badPrefixRequests"`
			NoMatch                 []any             `json:"noMatch"`
			SQSCalls                []string          `json:"sqsCalls"`
			Rows390                 []string          `json:"rows390"`
			OffText                 string            `json:"offText"`
			OffEnabled              string            `json:"offEnabled"`
			OffBadges               int               `json:"offBadges"`
			ConsumerProblem         string            `json:"consumerProblem"`
			ConsumerSignedIn        bool              `json:"consumerSignedIn"`
		} `json:"steps"`
		Error string `json:"error"`
	}
	runBrowserScript(t, ctx, dir, node, &out, "sqs.js", e.Base, off.Base, adminSecret, consumerSecret, shots)
	s := out.Steps
	t.Logf("console SQS steps: %+v", s)
	require.Empty(t, out.JSErrors, "JS errors")
	require.Empty(t, out.Error)
	require.Empty(t, out.Overflow, "views wider than the viewport (px of scrollWidth)")

	// What the page shows matches what the SDK made, and the REST listing.
	var list api.SQSQueueList
	r := e.Get(t, "/v1/sqs/queues")
	require.NoError(t, json.Unmarshal(r.Body, &list), "%s", r.Body)
	require.Len(t, list.Queues, 3)
	require.Len(t, s.Rows1366, 3)
	require.Contains(t, s.Endpoint, list.Endpoint)
	require.Contains(t, s.Endpoint, "3 queues")
	require.Equal(t, "sqs", s.ActiveTab)
	byName := map[string]int{}
	for i, row := range s.Rows1366 {
		byName[row.Name] = i
		require.Equal(t, list.Queues[i].Name, row.Name, "by name, as the API lists them")
		require.Equal(t, list.Queues[i].URL, row.URL)
		require.Equal(t, list.Queues[i].Arn, row.Arn)
	}
	o, dlq, jobs := s.Rows1366[byName["orders"]], s.Rows1366[byName["orders-dlq"]], s.Rows1366[byName["jobs.fifo"]]
	require.Equal(t, "sqs_orders", o.Topic)
	require.Equal(t, "sqs_orders", o.Group)
	require.False(t, o.Fifo)
	require.Equal(t, *orders.QueueUrl, o.URL)
	require.Equal(t, "→ orders-dlq after 3 receives", o.Redrive)
	require.Equal(t, "env=testteam=payments", o.Tags)
	require.Equal(t, "2 waiting, 0 in flight", o.Counts, "the two sends wait in the queue's group")
	require.Equal(t, "dead letters of orders", dlq.Redrive)
	require.Equal(t, "sqs_orders-dlq", dlq.Topic)
	require.Equal(t, "—", dlq.Tags)
	require.Equal(t, "0 waiting, 0 in flight", dlq.Counts)
	require.True(t, jobs.Fifo)
	require.Equal(t, "sqsfifo_jobs", jobs.Topic)
	require.Equal(t, "sqsfifo_jobs", jobs.Group)
	require.Equal(t, "—", jobs.Redrive)

	require.Equal(t, []string{"topics", "Queues of sqs_orders (2 messages retained)"}, s.TopicOpened)
	require.Equal(t, "SQS orders", s.TopicBadges["sqs_orders"])
	require.Equal(t, "SQS orders-dlq", s.TopicBadges["sqs_orders-dlq"])
	require.Equal(t, "SQS jobs.fifo", s.TopicBadges["sqsfifo_jobs"])
	require.Equal(t, "", s.TopicBadges["plain"], "a topic of the REST API backs no queue")
	require.Equal(t, 1, s.TopicViewSQSCalls, "one listing per load of the topics view")
	require.Equal(t, []any{"#sqs?prefix=jobs.fifo", []any{"jobs.fifo"}}, s.BadgeLeadsTo)
	require.Equal(t, []string{"groups", "Group sqsfifo_jobs"}, s.GroupOpened)
	require.Equal(t, "SQS jobs.fifo", s.GroupBadges["sqsfifo_jobs"])
	require.Equal(t, "SQS orders", s.GroupBadges["sqs_orders"])

	require.Equal(t, "#sqs?prefix=orders", s.Filtered[0])
	require.Equal(t, []any{"orders", "orders-dlq"}, s.Filtered[1])
	require.Contains(t, s.Filtered[2], "2 queues named orders")
	require.Contains(t, s.BadPrefixMessage, "only letters, digits")
	require.Equal(t, 2, s.RowsKeptOnBlockedSubmit, "a blocked submit keeps what is shown")
	require.Contains(t, s.BadPrefixProblem, "Not sent: the server would refuse this prefix")
	require.Contains(t, s.BadPrefixProblem, "only letters, digits")
	require.True(t, s.StaleRowsGone, "an error replaces the listing shown before")
	require.Contains(t, s.LongPrefixProblem, "at most 80 characters (this one has 81)")
	require.Zero(t, s.BadPrefixRequests, "a prefix the server refuses is never sent")
	require.Contains(t, s.NoMatch[0], "No queue's name starts with nothing-here.")
	require.Equal(t, true, s.NoMatch[1])
	require.Contains(t, s.SQSCalls, "/v1/sqs/queues?prefix=orders")
	require.Contains(t, s.SQSCalls, "/v1/sqs/queues?prefix=jobs.fifo")
	require.Equal(t, []string{"jobs.fifo sqsfifo_jobs sqsfifo_jobs", "orders sqs_orders sqs_orders", "orders-dlq sqs_orders-dlq sqs_orders-dlq"}, s.Rows390)

	require.Contains(t, s.OffText, "The SQS endpoint is off.")
	require.Contains(t, s.OffText, "--sqs-listen")
	require.Equal(t, "false", s.OffEnabled)
	require.Zero(t, s.OffBadges)
	require.Contains(t, s.ConsumerProblem, "(403)")
	require.True(t, s.ConsumerSignedIn, "a 403 is no reason to sign in again")
}
