package server_test

// End-to-end tests of broadcasting groups over real HTTP: every consumer
// instance (X-Mqgate-Client-Id) gets every message by pop pull, with its
// own acks, retries, offsets and progress, across a restart; a pull
// without a client id is a 400 problem; idle instances are forgotten; the
// instances per group are bounded.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// consumer is one consumer instance of a broadcasting group, over HTTP.
type consumer struct {
	e      *e2eServer
	group  string
	client string
}

func (e *e2eServer) consumer(group, client string) consumer {
	return consumer{e: e, group: group, client: client}
}

func (c consumer) do(t *testing.T, method, path string, in any) servertest.Resp {
	t.Helper()
	var body []byte
	ct := ""
	if in != nil {
		var err error
		body, err = json.Marshal(in)
		require.NoError(t, err)
		ct = "application/json"
	}
	return c.e.Do(t, method, path, ct, body, http.Header{api.ClientIDHeader: {c.client}})
}

func (c consumer) pull(t *testing.T, topic string, req api.PullRequest) []api.PulledMessage {
	t.Helper()
	var out api.PullResponse
	servertest.Decode(t, c.do(t, http.MethodPost, "/v1/groups/"+c.group+"/topics/"+topic+"/pull", req), http.StatusOK, &out)
	return out.Messages
}

func (c consumer) settle(t *testing.T, op string, body any) []api.ReceiptResult {
	t.Helper()
	var out api.ReceiptResponse
	servertest.Decode(t, c.do(t, http.MethodPost, "/v1/groups/"+c.group+"/"+op, body), http.StatusOK, &out)
	return out.Results
}

func (c consumer) ack(t *testing.T, msgs ...api.PulledMessage) {
	t.Helper()
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.Receipt
	}
	for _, r := range c.settle(t, "ack", api.AckRequest{Receipts: receipts}) {
		require.Equal(t, "ok", r.Status, "%s: %+v", c.client, r)
	}
}

// drain pulls and acks until a pull waiting wait comes back empty and
// returns the bodies, sorted.
func (c consumer) drain(t *testing.T, topic string, wait time.Duration) []string {
	t.Helper()
	var out []string
	for {
		got := c.pull(t, topic, api.PullRequest{MaxMessages: 32, WaitMs: wait.Milliseconds(), InvisibleMs: 60_000})
		if len(got) == 0 {
			sort.Strings(out)
			return out
		}
		for _, m := range got {
			out = append(out, m.Body)
		}
		c.ack(t, got...)
	}
}

func (e *e2eServer) progressOf(t *testing.T, group string) api.Progress {
	t.Helper()
	var p api.Progress
	servertest.Decode(t, e.Get(t, "/v1/groups/"+group+"/progress"), http.StatusOK, &p)
	return p
}

func instanceOf(t *testing.T, p api.Progress, client string) api.InstanceProgress {
	t.Helper()
	for _, in := range p.Instances {
		if in.ClientID == client {
			return in
		}
	}
	t.Fatalf("instance %s not in the progress of %s: %+v", client, p.Group, p.Instances)
	return api.InstanceProgress{}
}

func clientsOf(p api.Progress) []string {
	out := []string{}
	for _, in := range p.Instances {
		out = append(out, in.ClientID)
	}
	return out
}

func TestE2EBroadcast(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/bc", api.TopicRequest{Queues: 3}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/fan", api.GroupRequest{ConsumeMode: "broadcasting", RetryMaxTimes: 2,
		Subscriptions: []api.Subscription{{Topic: "bc", TagExpression: "sport || tech", SQL: "region = 'eu'"}}}), http.StatusCreated, nil)
	var want []string
	for i := range 24 {
		tag, region := []string{"sport", "tech", "food"}[i%3], []string{"eu", "us"}[i/3%2]
		body := fmt.Sprintf("%s-%s-%d", tag, region, i)
		e.Send(t, "bc", api.SendMessage{Body: body, Tag: tag, Properties: map[string]string{"region": region}})
		if tag != "food" && region == "eu" {
			want = append(want, body)
		}
	}
	sort.Strings(want)

	// A broadcasting pull names its consumer instance.
	p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, "/v1/groups/fan/topics/bc/pull", api.PullRequest{}), http.StatusBadRequest, "client-id-required")
	require.Contains(t, p.Detail, api.ClientIDHeader)
	a, b := e.consumer("fan", "worker-a"), e.consumer("fan", "worker-b")
	servertest.WantProblem(t, e.consumer("fan", "bad id").do(t, http.MethodPost, "/v1/groups/fan/topics/bc/pull", api.PullRequest{}),
		http.StatusBadRequest, "invalid-argument")

	// Both get every message the tag and SQL filters take; b's leases stay b's.
	held := b.pull(t, "bc", api.PullRequest{MaxMessages: 32, WaitMs: 1000, InvisibleMs: 60_000})
	require.Len(t, held, len(want))
	require.Equal(t, want, a.drain(t, "bc", 100*time.Millisecond))
	prog := e.progressOf(t, "fan")
	require.Equal(t, []string{"worker-a", "worker-b"}, clientsOf(prog))
	require.Zero(t, instanceOf(t, prog, "worker-a").TotalLag, "a consumed everything")
	bLag := instanceOf(t, prog, "worker-b").TotalLag
	require.Positive(t, bLag, "a's acks leave b's progress alone")
	require.Equal(t, bLag, prog.TotalLag, "the group's lag is its slowest consumer's")
	require.Empty(t, prog.Queues, "the group has no offsets of its own: its instances consume")
	require.Len(t, instanceOf(t, prog, "worker-b").Queues, 3)
	require.Equal(t, len(want), sumInFlight(instanceOf(t, prog, "worker-b").Queues))
	require.NotEmpty(t, instanceOf(t, prog, "worker-a").ForgetAt)

	// A nack of b is retried to b, in place; a sees nothing of it.
	res := b.settle(t, "nack", api.NackRequest{Items: []api.NackItem{{Receipt: held[0].Receipt, Reason: "try again"}}})
	require.Equal(t, "ok", res[0].Status)
	again := b.pull(t, "bc", api.PullRequest{MaxMessages: 1, WaitMs: 5000, InvisibleMs: 300})
	require.Len(t, again, 1)
	require.Equal(t, held[0].Body, again[0].Body)
	require.Equal(t, int32(1), again[0].ReconsumeTimes)
	require.Empty(t, a.pull(t, "bc", api.PullRequest{MaxMessages: 32, WaitMs: 100}), "a is not affected")
	// Its 300 ms lease runs out: back to b once more.
	third := b.pull(t, "bc", api.PullRequest{MaxMessages: 1, WaitMs: 5000, InvisibleMs: 60_000})
	require.Len(t, third, 1, "an expired lease comes back to the same instance")
	require.Equal(t, held[0].Body, third[0].Body)
	require.Equal(t, int32(2), third[0].ReconsumeTimes)
	b.ack(t, third...)
	b.ack(t, held[1:5]...)

	// An offset read as b applies the subscription's filters, from b's offset.
	var page api.QueueMessages
	servertest.Decode(t, b.do(t, http.MethodGet, "/v1/topics/bc/queues/0/messages?group=fan&offset=0", nil), http.StatusOK, &page)
	for _, m := range page.Messages {
		require.Contains(t, want, m.Body, "the group's filters apply to the read")
	}
	require.Positive(t, page.NextOffset)
	var offs api.Offsets
	servertest.Decode(t, b.do(t, http.MethodGet, "/v1/groups/fan/offsets", nil), http.StatusOK, &offs)
	require.Len(t, offs.Offsets, 3, "b's own offsets")

	// A restart keeps each instance's offsets and leases.
	e = &e2eServer{e.Reopen(t)}
	a, b = e.consumer("fan", "worker-a"), e.consumer("fan", "worker-b")
	require.Empty(t, a.pull(t, "bc", api.PullRequest{MaxMessages: 32, WaitMs: 200}), "a's acks survive")
	require.Empty(t, b.pull(t, "bc", api.PullRequest{MaxMessages: 32, WaitMs: 200}), "b's leases survive")
	b.ack(t, held[5:]...) // with their receipts of before the restart
	prog = e.progressOf(t, "fan")
	require.Zero(t, prog.TotalLag)
	require.Equal(t, []string{"worker-a", "worker-b"}, clientsOf(prog))
	e.Send(t, "bc", api.SendMessage{Body: "late", Tag: "tech", Properties: map[string]string{"region": "eu"}})
	require.Equal(t, []string{"late"}, a.drain(t, "bc", time.Second))
	require.Equal(t, []string{"late"}, b.drain(t, "bc", time.Second))
}

func sumInFlight(qs []api.QueueProgress) int {
	n := 0
	for _, q := range qs {
		n += q.InFlight
	}
	return n
}

// Idle instances are forgotten after the group's instanceIdleMs, and a
// returning one starts again by consumeFrom; the instances of a group are
// bounded (409 quota-exceeded before anything is written).
func TestE2EBroadcastIdleInstancesAndLimit(t *testing.T) {
	t.Parallel()
	e := startE2E(t, func(c *server.Config) { c.MaxInstancesPerGroup = 2 })
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/fan", api.GroupRequest{ConsumeMode: "broadcasting", ConsumeFrom: "last",
		InstanceIdleMs: 1000, Subscriptions: []api.Subscription{{Topic: "idle"}}}), http.StatusCreated, nil)
	var g api.Group
	servertest.Decode(t, e.Get(t, "/v1/groups/fan"), http.StatusOK, &g)
	require.Equal(t, int64(1000), g.InstanceIdleMs)
	e.Send(t, "idle", api.SendMessage{Body: "old"})
	a, b, c := e.consumer("fan", "a"), e.consumer("fan", "b"), e.consumer("fan", "c")
	require.Empty(t, a.drain(t, "idle", 100*time.Millisecond), "last: the backlog is skipped")
	require.Empty(t, b.drain(t, "idle", 100*time.Millisecond))
	p := servertest.WantProblem(t, c.do(t, http.MethodPost, "/v1/groups/fan/topics/idle/pull", api.PullRequest{}), http.StatusConflict, "quota-exceeded")
	require.Equal(t, "instancesPerGroup", p.Field)
	require.Equal(t, 2, p.Limit)
	servertest.WantProblem(t, c.do(t, http.MethodPut, "/v1/groups/fan/offsets", api.Offsets{Offsets: []api.QueueOffset{{Topic: "idle", QueueID: 0, Offset: 0}}}),
		http.StatusConflict, "quota-exceeded")
	require.Equal(t, []string{"a", "b"}, clientsOf(e.progressOf(t, "fan")), "the refused instance wrote nothing")

	e.Send(t, "idle", api.SendMessage{Body: "new"})
	got := a.pull(t, "idle", api.PullRequest{MaxMessages: 1, WaitMs: 1000, InvisibleMs: 60_000}) // leased, never acked
	require.Len(t, got, 1)
	servertest.Eventually(t, 10*time.Second, func() (bool, string) {
		clients := clientsOf(e.progressOf(t, "fan"))
		return len(clients) == 0, fmt.Sprintf("instances %v", clients)
	})
	res := a.settle(t, "ack", api.AckRequest{Receipts: []string{got[0].Receipt}})
	require.Equal(t, "expired", res[0].Status, "a forgotten instance's receipts are void")
	// Forgotten for good: a restart does not bring them back, and back,
	// an instance starts again at last.
	e = &e2eServer{e.Reopen(t)}
	c = e.consumer("fan", "c")
	require.Empty(t, clientsOf(e.progressOf(t, "fan")))
	a = e.consumer("fan", "a")
	require.Empty(t, a.drain(t, "idle", 100*time.Millisecond), "a starts at last again: \"new\" is skipped")
	require.Empty(t, c.drain(t, "idle", 100*time.Millisecond), "room for c now")
	e.Send(t, "idle", api.SendMessage{Body: "newer"})
	require.Equal(t, []string{"newer"}, a.drain(t, "idle", time.Second))
	require.Equal(t, []string{"newer"}, c.drain(t, "idle", time.Second))
	var offs api.Offsets
	servertest.Decode(t, e.Get(t, "/v1/groups/fan/offsets?"+url.Values{}.Encode()), http.StatusOK, &offs)
	require.Empty(t, offs.Offsets, "without a client id: the group's own offsets, which it has none of")
}
