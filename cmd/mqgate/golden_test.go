package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// updateGolden rewrites the golden files of TestCLITablesGolden:
// go test ./cmd/mqgate -run TestCLITablesGolden -update
var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// withoutGolden are the admin commands whose output is not compared with
// a golden file, and why.
var withoutGolden = map[string]string{
	// Membership changes need a cluster (the golden server is a single
	// node, where they fail); their table is `cluster status`'s, which has
	// a case. TestCLIClusterMembership runs them against three replicas.
	"cluster add-learner": "needs a cluster; the table is cluster status's",
	"cluster promote":     "needs a cluster; the table is cluster status's",
	"cluster remove":      "needs a cluster; the table is cluster status's",
	"replica rebuild":     "needs a cluster and a stopped replica (TestCLIReplicaRebuild); the table is cluster status's",
}

// TestCLITablesGolden runs every admin command against a real server
// with deterministic state (one queue, fixed bodies, keys and delays),
// normalises what changes from run to run (times, message ids, receipts,
// the broker's uptime and sizes) and compares the table with a golden
// file under testdata/golden. A cell that shows a Go pointer
// (0xc000…) or a Go struct ({…}) fails it whatever the golden file says.
// Every leaf of the command tree's admin group must have a case.
func TestCLITablesGolden(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, func(c *server.Config) { c.MessageTrace = true })
	cli := cliOf(t, srv)
	norm := newNormaliser()
	covered := map[string]bool{}
	show := func(name string, args ...string) string {
		t.Helper()
		out := cli.ok(args...)
		covered[commandPath(args)] = true
		checkGolden(t, name, norm.apply("$ mqgate "+strings.Join(args, " ")+"\n"+out))
		return out
	}

	show("topic-put", "topic", "put", "orders", "--queues", "1", "--retention-hours", "24")
	cli.ok("topic", "put", "audit", "--queues", "2")
	show("topic-patch", "topic", "patch", "audit", "--perm", "r")
	show("topic-list", "topic", "list")
	show("topic-get", "topic", "get", "orders")
	show("group-put", "group", "put", "billing", "--subscription", "orders", "--invisible-ms", "60000", "--retry-max-times", "3")
	cli.ok("group", "put", "audit-readers", "--subscription", "audit:a || b", "--consume-from", "last")
	show("group-patch", "group", "patch", "audit-readers", "--orderly", "--push-url", "http://127.0.0.1:9/hook")
	show("group-list", "group", "list")
	show("group-get", "group", "get", "billing")

	send := func(args ...string) string {
		t.Helper()
		var res api.SendResponse
		cli.json(&res, append([]string{"msg", "send", "orders"}, args...)...)
		return res.Results[0].MessageID
	}
	sent := show("msg-send", "msg", "send", "orders", "--body", `{"id":1}`, "--tag", "paid", "--key", "order-1",
		"--property", "source=web", "--property", "region=eu", "--idempotency-key", "order-1-paid")
	id1 := rows(t, sent)[0]["MESSAGE-ID"]
	id2 := send("--body", "second", "--key", "order-2", "--tag", "created")
	id3 := send("--body", "third", "--key", "order-1")
	id4 := send("--body", "fourth")
	norm.ids(id1, id2, id3, id4)
	timer1 := send("--body", "in an hour", "--delay-ms", "3600000", "--tag", "timed")
	timer2 := send("--body", "in two hours", "--delay-ms", "7200000", "--key", "order-9")
	norm.ids(timer1, timer2)
	show("topic-status", "topic", "status", "orders")
	show("msg-get", "msg", "get", id1)
	show("msg-find", "msg", "find", "--topic", "orders", "--key", "order-1")

	pulled := rows(t, show("msg-pull", "msg", "pull", "billing", "orders", "--max-messages", "4", "--wait-ms", "5000", "--client-id", "cli-1"))
	require.Len(t, pulled, 4)
	receipt := map[string]string{}
	for _, p := range pulled {
		receipt[p["MESSAGE-ID"]] = p["RECEIPT"]
	}
	show("group-progress", "group", "progress", "billing")
	show("msg-ack", "msg", "ack", "billing", receipt[id1])
	show("msg-nack", "msg", "nack", "billing", receipt[id2], "--delay-level=-1", "--reason", "cannot parse", "--client-id", "cli-1")
	cli.ok("msg", "nack", "billing", receipt[id3], "--delay-ms", "3600000", "--reason", "later", "--client-id", "cli-1")
	cli.ok("msg", "nack", "billing", receipt[id4], "--delay-level=-1", "--reason", "no such order", "--client-id", "cli-1")

	// The dead letters and the trace follower's events are written in
	// the background: wait for them over HTTP.
	var dead api.DeadLetterList
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		servertest.Decode(t, srv.Get(t, "/v1/groups/billing/dlq"), http.StatusOK, &dead)
		return len(dead.Items) == 2, "two dead letters"
	})
	dl2, dl4 := dead.Items[0].MessageID, dead.Items[1].MessageID
	if dead.Items[0].OriginMessageID != id2 {
		dl2, dl4 = dl4, dl2
	}
	norm.ids(dl2, dl4)
	traced := func(id string, want ...string) {
		servertest.Eventually(t, 10*time.Second, func() (bool, string) {
			var tr api.MessageTrace
			servertest.Decode(t, srv.Get(t, "/v1/messages/"+id+"/trace"), http.StatusOK, &tr)
			var types []string
			for _, e := range tr.Events {
				types = append(types, e.Type)
			}
			return slices.Equal(types, want), fmt.Sprintf("trace of %s: %v, want %v", id, types, want)
		})
	}
	traced(id1, "stored", "delivered", "acked")
	traced(id2, "stored", "delivered", "nacked", "dead-lettered")
	traced(id3, "stored", "delivered", "nacked", "retried")
	// The retry of id3 waits in %RETRY%billing (the timers of the sends
	// wait in orders).
	var retry api.TimerList
	servertest.Decode(t, srv.Get(t, "/v1/timers?topic=%25RETRY%25billing"), http.StatusOK, &retry)
	require.Len(t, retry.Items, 1)
	norm.ids(retry.Items[0].ID)
	show("msg-trace-acked", "msg", "trace", id1)
	show("msg-trace-dead", "msg", "trace", id2)
	show("msg-trace-retried", "msg", "trace", id3)

	show("dlq-list", "dlq", "list", "billing")
	show("dlq-get", "dlq", "get", "billing", dl2)
	show("dlq-export", "dlq", "export", "billing")
	show("dlq-resend", "dlq", "resend", "billing", dl2)
	show("dlq-discard", "dlq", "discard", "billing", dl4)

	show("timer-list", "timer", "list", "--topic", "orders")
	show("timer-get", "timer", "get", timer1)
	show("timer-reschedule", "timer", "reschedule", timer1, "--delay-ms", "5400000")
	show("timer-cancel", "timer", "cancel", timer2)

	show("group-reset-offset", "group", "reset-offset", "billing", "--timestamp", "2020-01-01T00:00:00Z")
	show("group-skip-backlog", "group", "skip-backlog", "billing")
	show("broker-status", "broker", "status")
	show("cluster-status", "cluster", "status")
	show("group-delete", "group", "delete", "audit-readers")
	show("topic-delete", "topic", "delete", "audit")

	// Every admin command has a case here (or says why not).
	for _, path := range adminCommands(t) {
		if _, ok := withoutGolden[path]; ok {
			continue
		}
		require.True(t, covered[path], "mqgate %s has no case in TestCLITablesGolden: add one (or list it in withoutGolden with the reason)", path)
	}
}

// commandPath is the admin command of args: the family and the command
// ("topic list"; every admin command has two words).
func commandPath(args []string) string {
	return args[0] + " " + args[1]
}

// adminCommands are the leaves of the command tree under the admin
// group ("topic list", "msg trace", …).
func adminCommands(t *testing.T) []string {
	t.Helper()
	var c cli
	parser, err := kong.New(&c, kong.Name("mqgate"), kong.Vars(server.DefaultConfig().FlagDefaults()),
		kong.ExplicitGroups([]kong.Group{{Key: "admin", Title: "admin"}}))
	require.NoError(t, err)
	var out []string
	var walk func(n *kong.Node, admin bool)
	walk = func(n *kong.Node, admin bool) {
		leaf := true
		for _, ch := range n.Children {
			if ch.Type != kong.CommandNode {
				continue
			}
			leaf = false
			walk(ch, admin || (ch.Group != nil && ch.Group.Key == "admin"))
		}
		if leaf && admin {
			out = append(out, strings.TrimPrefix(n.FullPath(), "mqgate "))
		}
	}
	walk(parser.Model.Node, false)
	require.NotEmpty(t, out)
	return out
}

// normaliser replaces what changes from run to run with placeholders of
// the same width, so that the tables stay aligned as they were printed.
type normaliser struct {
	names map[string]string // message id -> its placeholder
}

func newNormaliser() *normaliser { return &normaliser{names: map[string]string{}} }

// ids names message ids in the order given: the first is ID-1, …
func (n *normaliser) ids(ids ...string) {
	for _, id := range ids {
		if _, ok := n.names[id]; !ok {
			n.names[id] = pad(fmt.Sprintf("<id-%d>", len(n.names)+1), len(id))
		}
	}
}

var (
	// a table's times have 24 characters; the JSON's vary
	anyTime   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	messageID = regexp.MustCompile(`\b[0-9A-F]{32}\b`)
	// a receipt is long base64url; the table's RECEIPT column
	receiptCell = regexp.MustCompile(`[A-Za-z0-9_-]{40,}`)
	// lines of broker status whose values are the clock's or the disk's
	volatileKV = regexp.MustCompile(`(?m)^(uptime|storeBytes|commitLog|dispatch|schedulerLateness|disk|scrub)( +).*$`)
	goPointer  = regexp.MustCompile(`0x[0-9a-f]{6,}|\{0x|&\{`)
)

// apply normalises s.
func (n *normaliser) apply(s string) string {
	for id, name := range n.names {
		s = strings.ReplaceAll(s, id, name)
	}
	s = messageID.ReplaceAllStringFunc(s, func(id string) string { return pad("<unnamed-id>", len(id)) })
	s = anyTime.ReplaceAllString(s, "YYYY-MM-DDThh:mm:ss.mmmZ")
	s = receiptCell.ReplaceAllStringFunc(s, func(r string) string { return pad("<receipt>", len(r)) })
	s = volatileKV.ReplaceAllString(s, "$1$2<varies>")
	return s
}

// pad widens s to n with dots.
func pad(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat(".", n-len(s))
}

// checkGolden compares got with testdata/golden/name.txt, or writes it
// with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	require.NotRegexp(t, goPointer, got, "%s shows a Go pointer or struct", name)
	path := filepath.Join("testdata", "golden", name+".txt")
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file: run go test ./cmd/mqgate -run TestCLITablesGolden -update")
	require.Equal(t, string(want), got, "%s differs from its golden file (go test ./cmd/mqgate -run TestCLITablesGolden -update rewrites it)", path)
}
