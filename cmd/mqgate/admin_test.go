package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// The admin subcommands, run as the real binary (this test binary
// re-executed as `mqgate`) against a real server on loopback; what they
// change is checked over HTTP with servertest's helpers, not through the
// command line itself.

// cliResult is one run of the binary.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs `mqgate args…` with the environment env (MQGATE_SERVER
// and the like) and stdin.
func runCLI(t *testing.T, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := cliCommand(t, args...)
	cmd.Env = append(cleanEnv(), env...)
	if !raceEnabled {
		cmd.Env = append(cmd.Env, e2eArgsEnv+"="+strings.Join(args, "\x1f"))
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		res.code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return res
}

// cleanEnv is the test's environment without the MQGATE_* variables a
// developer's shell may set.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MQGATE_") && !strings.HasPrefix(kv, "COMP_LINE=") {
			out = append(out, kv)
		}
	}
	return out
}

// cliOf returns a runner of the binary against srv: it fails the test
// unless the command exits 0 and returns its standard output.
type cliRunner struct {
	t   *testing.T
	env []string
}

func cliOf(t *testing.T, srv *servertest.Server, env ...string) *cliRunner {
	return &cliRunner{t: t, env: append([]string{"MQGATE_SERVER=" + srv.Base}, env...)}
}

// ok runs args, requires exit 0 and nothing on stderr, returns stdout.
func (c *cliRunner) ok(args ...string) string {
	c.t.Helper()
	r := runCLI(c.t, c.env, "", args...)
	require.Equal(c.t, 0, r.code, "mqgate %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	require.Empty(c.t, r.stderr, "mqgate %s", strings.Join(args, " "))
	return r.stdout
}

// fails runs args and requires exit code and stderr containing each of want.
func (c *cliRunner) fails(code int, want []string, args ...string) cliResult {
	c.t.Helper()
	r := runCLI(c.t, c.env, "", args...)
	require.Equal(c.t, code, r.code, "mqgate %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
	for _, w := range want {
		require.Contains(c.t, r.stderr, w, "mqgate %s", strings.Join(args, " "))
	}
	return r
}

// json runs args with -o json and decodes stdout into out.
func (c *cliRunner) json(out any, args ...string) {
	c.t.Helper()
	stdout := c.ok(append(args, "-o", "json")...)
	require.NoError(c.t, json.Unmarshal([]byte(stdout), out), stdout)
}

// rows parses an aligned table: the header's columns, then each row's
// cells cut at the header's column starts. It fails the test when a row
// is not aligned with the header (a cell not starting at its column).
func rows(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.NotEmpty(t, lines)
	header := lines[0]
	var names []string
	var starts []int
	for i := 0; i < len(header); {
		for i < len(header) && header[i] == ' ' {
			i++
		}
		if i == len(header) {
			break
		}
		j := strings.Index(header[i:], "  ")
		if j < 0 {
			j = len(header) - i
		}
		names, starts = append(names, header[i:i+j]), append(starts, i)
		i += j
	}
	var out2 []map[string]string
	for _, line := range lines[1:] {
		runes := []rune(line)
		row := map[string]string{}
		for k, name := range names {
			from := starts[k]
			if from >= len(runes) {
				row[name] = ""
				continue
			}
			if from > 0 {
				require.Equal(t, ' ', runes[from-1], "row %q: column %s is not aligned", line, name)
			}
			to := len(runes)
			if k+1 < len(starts) && starts[k+1] < to {
				to = starts[k+1]
			}
			row[name] = strings.TrimSpace(string(runes[from:to]))
		}
		out2 = append(out2, row)
	}
	return out2
}

// kvRows parses a two-column key/value table.
func kvRows(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		k, v, _ := strings.Cut(line, "  ")
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m
}

func TestCLITopics(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	cli := cliOf(t, srv)

	// put creates (the server has it with 4 queues), list and get show it.
	out := cli.ok("topic", "put", "orders", "--queues", "4", "--retention-hours", "24")
	require.Equal(t, "orders", rows(t, out)[0]["NAME"])
	var tp api.Topic
	servertest.Decode(t, srv.Get(t, "/v1/topics/orders"), http.StatusOK, &tp)
	require.Equal(t, 4, tp.Queues)
	require.Equal(t, 24, tp.RetentionHours)
	cli.ok("topic", "put", "audit")
	list := rows(t, cli.ok("topic", "list"))
	require.Len(t, list, 2)
	require.Equal(t, map[string]string{"NAME": "audit", "QUEUES": "4", "PERM": "rw", "RETENTION-HOURS": "0", "CREATED": list[0]["CREATED"]}, list[0])
	require.Equal(t, "24", list[1]["RETENTION-HOURS"])
	var listed api.TopicList
	cli.json(&listed, "topic", "list")
	require.Len(t, listed.Topics, 2)
	var got api.Topic
	cli.json(&got, "topic", "get", "orders")
	require.Equal(t, tp, got)

	// patch changes only what it is given; -o yaml is the same object.
	out = cli.ok("topic", "patch", "orders", "--perm", "r", "-o", "yaml")
	var patched map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(out), &patched), out)
	require.Equal(t, "r", patched["perm"])
	require.Equal(t, 4, patched["queues"])
	require.Equal(t, 24, patched["retentionHours"])
	servertest.Decode(t, srv.Get(t, "/v1/topics/orders"), http.StatusOK, &tp)
	require.Equal(t, "r", tp.Perm)
	cli.fails(1, []string{"nothing to change"}, "topic", "patch", "orders")
	cli.fails(80, []string{"--perm"}, "topic", "patch", "orders", "--perm", "x")

	// status counts what is stored per queue.
	for _, b := range []string{"a", "b", "c"} {
		srv.Send(t, "audit", api.SendMessage{Body: b})
	}
	status := rows(t, cli.ok("topic", "status", "audit"))
	require.Len(t, status, 5, "4 queues and the total")
	require.Equal(t, "total", status[4]["QUEUE"])
	require.Equal(t, "3", status[4]["MESSAGES"])
	var st struct {
		Messages int64 `json:"messages"`
		Queues   []struct {
			MaxOffset int64 `json:"maxOffset"`
		} `json:"queues"`
	}
	cli.json(&st, "topic", "status", "audit")
	require.Equal(t, int64(3), st.Messages)
	require.Len(t, st.Queues, 4)

	// delete: a line for a terminal, nothing for -o json; then 404.
	require.Equal(t, "deleted topic audit\n", cli.ok("topic", "delete", "audit"))
	require.Empty(t, cli.ok("topic", "delete", "orders", "-o", "json"))
	servertest.WantProblem(t, srv.Get(t, "/v1/topics/orders"), http.StatusNotFound, "topic-not-found")
	r := cli.fails(1, []string{"(404 topic-not-found)", "orders"}, "topic", "get", "orders")
	require.Empty(t, r.stdout)
}

func TestCLIMessages(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	cli := cliOf(t, srv)
	cli.ok("topic", "put", "orders", "--queues", "2")

	// send: the flags are the API's fields.
	out := cli.ok("msg", "send", "orders", "--body", `{"id":1}`, "--tag", "paid", "--key", "order-1", "--key", "customer-7",
		"--property", "source=web", "--property", "region=eu", "--idempotency-key", "order-1-paid")
	sent := rows(t, out)
	require.Len(t, sent, 1)
	id := sent[0]["MESSAGE-ID"]
	require.Equal(t, "no", sent[0]["DUPLICATE"])
	m := srv.Message(t, id)
	require.Equal(t, `{"id":1}`, m.Body)
	require.Equal(t, "paid", m.Tag)
	require.Equal(t, []string{"order-1", "customer-7"}, m.Keys)
	require.Equal(t, map[string]string{"source": "web", "region": "eu"}, m.Properties)
	// The same idempotency key replays the first result.
	var replay api.SendResponse
	cli.json(&replay, "msg", "send", "orders", "--body", `{"id":1}`, "--tag", "paid", "--key", "order-1", "--key", "customer-7",
		"--property", "source=web", "--property", "region=eu", "--idempotency-key", "order-1-paid")
	require.Equal(t, id, replay.Results[0].MessageID)
	require.True(t, replay.Results[0].Duplicate)

	// A body from a file: bytes that are not UTF-8 go as base64.
	bin := filepath.Join(t.TempDir(), "payload.bin")
	require.NoError(t, os.WriteFile(bin, []byte{0xff, 0, 1, 'x'}, 0o600))
	var binSent api.SendResponse
	cli.json(&binSent, "msg", "send", "orders", "--body", "@"+bin, "--key", "order-1")
	bm := srv.Message(t, binSent.Results[0].MessageID)
	require.Equal(t, "base64", bm.BodyEncoding)
	require.Equal(t, base64.StdEncoding.EncodeToString([]byte{0xff, 0, 1, 'x'}), bm.Body)

	// get: key/value for a terminal, the API's Message for scripts.
	kv := kvRows(cli.ok("msg", "get", id))
	require.Equal(t, "paid", kv["tag"])
	require.Equal(t, "order-1,customer-7", kv["keys"])
	require.Equal(t, "region=eu,source=web", kv["properties"])
	require.Equal(t, `{"id":1}`, kv["body"])
	var gm api.Message
	cli.json(&gm, "msg", "get", id)
	require.Equal(t, id, gm.MessageID)
	cli.fails(1, []string{"(404 message-not-found)"}, "msg", "get", "7F00000100001F9000000000FFFFFFFF")

	// find by key (newest first), and by store time.
	found := rows(t, cli.ok("msg", "find", "--topic", "orders", "--key", "order-1"))
	require.Len(t, found, 2)
	require.Equal(t, binSent.Results[0].MessageID, found[0]["MESSAGE-ID"])
	require.Equal(t, "<base64, 4 bytes>", found[0]["BODY"])
	require.Equal(t, id, found[1]["MESSAGE-ID"])
	mid := time.Now().UTC()
	var late api.SendResponse
	cli.json(&late, "msg", "send", "orders", "--body", "late")
	var inRange api.MessageList
	cli.json(&inRange, "msg", "find", "--topic", "orders", "--from", mid.Format(time.RFC3339Nano))
	require.Len(t, inRange.Messages, 1)
	require.Equal(t, late.Results[0].MessageID, inRange.Messages[0].MessageID)
	cli.json(&inRange, "msg", "find", "--topic", "orders", "--from", "2020-01-01T00:00:00Z", "--to", mid.Format(time.RFC3339Nano))
	require.Len(t, inRange.Messages, 2)
	cli.json(&inRange, "msg", "find", "--topic", "orders", "--from", "2020-01-01T00:00:00Z", "--max", "1")
	require.Len(t, inRange.Messages, 1)
	cli.fails(1, []string{"--key"}, "msg", "find", "--topic", "orders")

	// pull (long poll) and ack by receipt.
	pulled := rows(t, cli.ok("msg", "pull", "billing", "orders", "--max-messages", "10", "--wait-ms", "2000", "--invisible-ms", "60000"))
	require.Len(t, pulled, 3)
	receipts := map[string]string{}
	for _, p := range pulled {
		require.NotEqual(t, "-", p["RECEIPT"])
		receipts[p["MESSAGE-ID"]] = p["RECEIPT"]
	}
	acked := rows(t, cli.ok("msg", "ack", "billing", receipts[id], receipts[late.Results[0].MessageID]))
	require.Len(t, acked, 2)
	require.Equal(t, "ok", acked[0]["STATUS"])
	require.Equal(t, "ok", acked[1]["STATUS"])
	// A forged receipt: the table says so and the exit status is 1.
	r := cli.fails(1, []string{"1 of 1 receipts not acked"}, "msg", "ack", "billing", "forged")
	require.Equal(t, "invalid", rows(t, r.stdout)[0]["STATUS"])

	// nack straight to the DLQ (--delay-level=-1): it is a dead letter.
	var nacked api.ReceiptResponse
	cli.json(&nacked, "msg", "nack", "billing", receipts[binSent.Results[0].MessageID], "--delay-level=-1", "--reason", "cannot parse", "--client-id", "cli-1")
	require.Equal(t, "ok", nacked.Results[0].Status)
	var dead api.DeadLetterList
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		servertest.Decode(t, srv.Get(t, "/v1/groups/billing/dlq"), http.StatusOK, &dead)
		return len(dead.Items) == 1, "one dead letter"
	})
	require.Equal(t, "cannot parse", dead.Items[0].Reason)
	require.Equal(t, "cli-1", dead.Items[0].Attempts[0].Client)
	// msg trace: the dead letter's id finds the life of the message (this
	// server runs without the trace follower: the copies' events).
	out = cli.ok("msg", "trace", dead.Items[0].MessageID)
	var types []string
	for _, r := range rows(t, out) {
		types = append(types, r["TYPE"])
	}
	require.Subset(t, types, []string{"stored", "nacked", "dead-lettered"}, "%s", out)
	require.Contains(t, out, "cannot parse")
	var tr api.MessageTrace
	cli.json(&tr, "msg", "trace", binSent.Results[0].MessageID)
	require.Equal(t, binSent.Results[0].MessageID, tr.OriginMessageID)
	require.True(t, tr.Partial)

	// nack with a level: delivered again, then acked by pull --ack.
	srv.Send(t, "orders", api.SendMessage{Body: "retry-me"})
	var again api.PullResponse
	cli.json(&again, "msg", "pull", "billing", "orders", "--wait-ms", "2000")
	require.Len(t, again.Messages, 1)
	cli.ok("msg", "nack", "billing", again.Messages[0].Receipt, "--delay-level", "1")
	cli.json(&again, "msg", "pull", "billing", "orders", "--wait-ms", "5000", "--ack")
	require.Len(t, again.Messages, 1)
	require.Equal(t, "retry-me", again.Messages[0].Body)
	require.Equal(t, int32(1), again.Messages[0].ReconsumeTimes)
	var prog api.Progress
	servertest.Decode(t, srv.Get(t, "/v1/groups/billing/progress"), http.StatusOK, &prog)
	require.Zero(t, prog.TotalLag, "everything acked or dead")
	// An empty pull prints the header only.
	require.Len(t, rows(t, cli.ok("msg", "pull", "billing", "orders")), 0)
}

func TestCLIGroups(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	cli := cliOf(t, srv)
	cli.ok("topic", "put", "orders", "--queues", "2")

	out := cli.ok("group", "put", "billing", "--subscription", "orders:created || paid", "--retry-max-times", "3", "--consume-from", "last")
	g := rows(t, out)[0]
	require.Equal(t, "billing", g["NAME"])
	require.Equal(t, "orders:created || paid", g["SUBSCRIPTIONS"])
	require.Equal(t, "3", g["RETRY-MAX-TIMES"])
	var got api.Group
	servertest.Decode(t, srv.Get(t, "/v1/groups/billing"), http.StatusOK, &got)
	require.Equal(t, "created || paid", got.Subscriptions[0].TagExpression)
	require.Equal(t, "last", got.ConsumeFrom)

	// patch: only what is given; --sql adds a property filter.
	var patched api.Group
	cli.json(&patched, "group", "patch", "billing", "--orderly", "--sql", "orders:region = 'eu'")
	require.True(t, patched.Orderly)
	require.Equal(t, 3, patched.RetryMaxTimes)
	require.Equal(t, "region = 'eu'", patched.Subscriptions[0].SQL)
	cli.fails(1, []string{"(400 invalid-sql)", "subscriptions[0].sql"}, "group", "patch", "billing", "--sql", "orders:region =")
	body := filepath.Join(t.TempDir(), "group.json")
	require.NoError(t, os.WriteFile(body, []byte(`{"subscriptions":[{"topic":"orders"}],"invisibleMs":45000}`), 0o600))
	cli.ok("group", "put", "audit", "--file", "@"+body, "--retry-max-times", "2")
	servertest.Decode(t, srv.Get(t, "/v1/groups/audit"), http.StatusOK, &got)
	require.Equal(t, int64(45000), got.InvisibleMs)
	require.Equal(t, 2, got.RetryMaxTimes)

	list := rows(t, cli.ok("group", "list"))
	require.Len(t, list, 2)
	require.Equal(t, "audit", list[0]["NAME"])
	require.Equal(t, "45s", list[0]["INVISIBLE"])
	var gl api.GroupList
	cli.json(&gl, "group", "list")
	require.Len(t, gl.Groups, 2)
	var one api.Group
	cli.json(&one, "group", "get", "audit")
	require.Equal(t, "audit", one.Name)

	// progress: audit (from the first message) has a backlog of 3.
	for _, b := range []string{"a", "b", "c"} {
		srv.Send(t, "orders", api.SendMessage{Body: b})
	}
	prog := rows(t, cli.ok("group", "progress", "audit"))
	require.Equal(t, "total lag", prog[len(prog)-1]["TOPIC"])
	require.Equal(t, "3", prog[len(prog)-1]["LAG"])
	var p api.Progress
	cli.json(&p, "group", "progress", "audit")
	require.Equal(t, int64(3), p.TotalLag)

	// skip-backlog: nothing left; reset-offset to a time before: all back.
	cli.json(&p, "group", "skip-backlog", "audit")
	require.Zero(t, p.TotalLag)
	require.Empty(t, srv.Pull(t, "audit", "orders", api.PullRequest{MaxMessages: 10}))
	cli.json(&p, "group", "reset-offset", "audit", "--topic", "orders", "--timestamp", "2020-01-01T00:00:00Z")
	require.Equal(t, int64(3), p.TotalLag)
	require.Len(t, srv.PullN(t, "audit", "orders", 3, 30_000, 5*time.Second), 3)
	cli.fails(80, []string{"--timestamp"}, "group", "reset-offset", "audit")
	cli.fails(80, []string{"--timestamp"}, "group", "reset-offset", "audit", "--timestamp", "yesterday")

	require.Equal(t, "deleted group audit\n", cli.ok("group", "delete", "audit"))
	cli.fails(1, []string{"(404 group-not-found)"}, "group", "get", "audit")
}

func TestCLIDeadLetters(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	cli := cliOf(t, srv)
	for _, b := range []string{"one", "two", "three"} {
		srv.Send(t, "orders", api.SendMessage{Body: b, Tag: "t"})
	}
	for _, m := range srv.PullN(t, "billing", "orders", 3, 30_000, 5*time.Second) {
		srv.Nack(t, "billing", m.Receipt, -1, "bad "+m.Body)
	}
	var dead api.DeadLetterList
	servertest.Eventually(t, 5*time.Second, func() (bool, string) {
		cli.json(&dead, "dlq", "list", "billing")
		return len(dead.Items) == 3, "three dead letters"
	})
	ids := map[string]string{}
	for _, d := range dead.Items {
		ids[d.Reason] = d.MessageID
	}
	list := rows(t, cli.ok("dlq", "list", "billing", "--reason-contains", "TWO"))
	require.Len(t, list, 1)
	require.Equal(t, ids["bad two"], list[0]["MESSAGE-ID"])
	require.Equal(t, "dead", list[0]["STATUS"])
	// Pages: --limit 2 leaves a cursor, --all follows it.
	paged := rows(t, cli.ok("dlq", "list", "billing", "--limit", "2"))
	require.Len(t, paged, 3, "two letters and the next cursor")
	require.True(t, strings.HasPrefix(paged[2]["MESSAGE-ID"], "next: "))
	var all api.DeadLetterList
	cli.json(&all, "dlq", "list", "billing", "--limit", "1", "--all")
	require.Len(t, all.Items, 3)

	kv := kvRows(cli.ok("dlq", "get", "billing", ids["bad one"]))
	require.Equal(t, "one", kv["body"])
	require.Equal(t, "bad one", kv["reason"])

	// export: one JSON object a line, bodies included.
	var lines []api.DeadLetter
	sc := bufio.NewScanner(strings.NewReader(cli.ok("dlq", "export", "billing")))
	for sc.Scan() {
		var d api.DeadLetter
		require.NoError(t, json.Unmarshal(sc.Bytes(), &d), sc.Text())
		lines = append(lines, d)
	}
	require.Len(t, lines, 3)
	bodies := map[string]bool{}
	for _, d := range lines {
		bodies[d.Body] = true
	}
	require.Equal(t, map[string]bool{"one": true, "two": true, "three": true}, bodies)

	// resend one: billing gets it again; discard another.
	out := rows(t, cli.ok("dlq", "resend", "billing", ids["bad one"]))
	require.Equal(t, []map[string]string{{"MESSAGE-ID": ids["bad one"], "RESULT": "resent"}}, out)
	back := srv.PullN(t, "billing", "orders", 1, 30_000, 5*time.Second)
	require.Equal(t, "one", back[0].Body)
	require.Equal(t, "discarded "+ids["bad two"]+"\n", cli.ok("dlq", "discard", "billing", ids["bad two"]))
	var st api.DeadLetter
	servertest.Decode(t, srv.Get(t, "/v1/groups/billing/dlq/"+ids["bad two"]), http.StatusOK, &st)
	require.Equal(t, "discarded", st.Status)
	// resend by filter: the one left dead.
	var res api.ResendResponse
	cli.json(&res, "dlq", "resend", "billing", "--reason-contains", "three")
	require.Equal(t, []string{ids["bad three"]}, res.Resent)
	cli.fails(1, []string{"message ids or filter"}, "dlq", "resend", "billing")
	cli.fails(1, []string{"(404 group-not-found)"}, "dlq", "list", "nobody")
	require.Empty(t, cli.ok("dlq", "export", "billing", "--status", "dead"))
}

func TestCLITimersAndBroker(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	cli := cliOf(t, srv)
	var ids []string
	for _, b := range []string{"cancel-me", "move-me"} {
		var sent api.SendResponse
		cli.json(&sent, "msg", "send", "reminders", "--body", b, "--delay-ms", "3600000", "--tag", "later")
		ids = append(ids, sent.Results[0].MessageID)
	}
	list := rows(t, cli.ok("timer", "list", "--topic", "reminders"))
	require.Len(t, list, 2)
	require.Equal(t, "later", list[0]["TAG"])
	var tl api.TimerList
	cli.json(&tl, "timer", "list", "--limit", "1", "--all")
	require.Len(t, tl.Items, 2)
	var tm api.Timer
	cli.json(&tm, "timer", "get", ids[0])
	require.Equal(t, "reminders", tm.Topic)

	// broker status counts them.
	kv := kvRows(cli.ok("broker", "status"))
	require.Equal(t, "2", kv["timersPending"])
	require.Equal(t, "sync", kv["flushMode"])
	var bs api.BrokerStatus
	cli.json(&bs, "broker", "status")
	require.Equal(t, 2, bs.TimersPending)

	require.Equal(t, "cancelled timer "+ids[0]+"\n", cli.ok("timer", "cancel", ids[0]))
	servertest.WantProblem(t, srv.Get(t, "/v1/timers/"+ids[0]), http.StatusNotFound, "message-not-found")
	cli.fails(1, []string{"(404 message-not-found)"}, "timer", "get", ids[0])
	out := rows(t, cli.ok("timer", "reschedule", ids[1], "--delay-ms", "50"))
	require.Equal(t, ids[1], out[0]["ID"])
	got := srv.PullN(t, "reader", "reminders", 1, 30_000, 5*time.Second)
	require.Equal(t, "move-me", got[0].Body)
	cli.fails(1, []string{"--delay-ms or --deliver-at"}, "timer", "reschedule", ids[1])
}

func TestCLIErrorsAndAuth(t *testing.T) {
	t.Parallel()
	secret := "0123456789abcdef0123456789abcdef-hmac"
	acl := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(acl, []byte("accounts:\n"+
		"  - accessKey: ops\n    secretKey: ops-secret\n    admin: true\n"+
		"  - accessKey: producer\n    topicPerms: [\"orders=PUB\"]\n"), 0o600))
	srv := servertest.Start(t, func(c *server.Config) { c.ACLFile, c.JWTSecret, c.AuthFailuresPerMinute = acl, secret, 100_000 })

	anon := cliOf(t, srv)
	anon.fails(1, []string{"(401 unauthenticated)"}, "topic", "list")
	cliOf(t, srv, "MQGATE_USER=ops", "MQGATE_PASSWORD=wrong").fails(1, []string{"(401 unauthenticated)"}, "topic", "list")
	// Basic from the environment or the flags.
	ops := cliOf(t, srv, "MQGATE_USER=ops", "MQGATE_PASSWORD=ops-secret")
	ops.ok("topic", "put", "orders")
	anon.ok("topic", "list", "--user", "ops", "--password", "ops-secret")
	// A bearer token naming producer: may send to orders, nothing else.
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "producer", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	require.NoError(t, err)
	producer := cliOf(t, srv, "MQGATE_TOKEN="+tok)
	producer.ok("msg", "send", "orders", "--body", "hi")
	producer.fails(1, []string{"(403 forbidden)", "producer"}, "topic", "list")
	anon.fails(1, []string{"exclude each other"}, "topic", "list", "--user", "ops", "--token", tok)

	// Invalid arguments: the problem's detail, status and code (and field).
	ops.fails(1, []string{"(400 invalid-argument)", "maxMessages"}, "msg", "pull", "g", "orders", "--max-messages", "100")
	ops.fails(1, []string{"(400 invalid-name)"}, "topic", "put", "bad.name")
	ops.fails(1, []string{"(400 value-too-long)", "field tag"}, "msg", "send", "orders", "--body", "x", "--tag", strings.Repeat("t", 300))
	// Usage errors exit 80 with kong's message.
	ops.fails(80, []string{"unknown flag"}, "topic", "list", "--nope")
	ops.fails(80, []string{"expected \"<topic>\""}, "topic", "get")
	ops.fails(80, []string{"-o"}, "topic", "list", "-o", "xml")
	// No server there: exit 1, the transport's error.
	cliOf(t, &servertest.Server{Base: "http://" + freeAddr(t)}).fails(1, []string{"connection refused"}, "topic", "list")
}

func TestCLICompletion(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	cli := cliOf(t, srv)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		script := cli.ok("completion", sh)
		require.Contains(t, script, cliBinary(t), sh)
		require.Contains(t, script, "mqgate", sh)
	}
	cli.fails(80, []string{`"bash","zsh","fish"`}, "completion", "tcsh")
	cli.ok("topic", "put", "orders")
	cli.ok("topic", "put", "other")
	cli.ok("group", "put", "billing", "--subscription", "orders")
	complete := func(line string) []string {
		t.Helper()
		// The shell runs the binary with COMP_LINE (the arguments do not
		// matter: the completion answers and exits before they are parsed).
		r := runCLI(t, append(cli.env, "COMP_LINE="+line), "", "version")
		require.Equal(t, 0, r.code, r.stderr)
		return strings.Fields(r.stdout)
	}
	require.Contains(t, complete("mqgate to"), "topic")
	require.ElementsMatch(t, []string{"list", "get", "put", "patch", "delete", "status"}, complete("mqgate topic "))
	require.ElementsMatch(t, []string{"orders", "other"}, complete("mqgate topic get "))
	require.Equal(t, []string{"orders"}, complete("mqgate topic status or"))
	require.Equal(t, []string{"billing"}, complete("mqgate group progress "))
	require.ElementsMatch(t, []string{"table", "json", "yaml"}, complete("mqgate dlq list billing -o "))
	require.Contains(t, complete("mqgate serve --data"), "--data-dir")
}

// TestCLIKeepsTheOtherCommands: serve is still the default (flags only),
// and version and hash-secret run beside the admin commands.
func TestCLIKeepsTheOtherCommands(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "", "version")
	require.Equal(t, 0, r.code)
	require.True(t, strings.HasPrefix(r.stdout, "mqgate dev"), r.stdout)
	r = runCLI(t, nil, "a-longer-s3cret\n", "hash-secret")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "$argon2id$"), r.stdout)
	c, ctx := parse(t, "--listen", "127.0.0.1:7001")
	require.Equal(t, "serve", ctx.Command())
	require.Equal(t, "127.0.0.1:7001", c.Serve.Listen)
	_, ctx = parse(t, "topic", "list", "-o", "json")
	require.Equal(t, "topic list", ctx.Command())
	_, ctx = parse(t, "group", "reset-offset", "billing", "--topic", "orders", "--timestamp", "2026-12-01T10:00:00Z")
	require.Equal(t, "group reset-offset <group>", ctx.Command())
}
