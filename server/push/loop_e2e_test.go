package push_test

// Push loops and private ranges over real HTTP: real servers
// (server.Open on temp dirs, millisecond delay levels) pushing to their
// own or each other's send endpoints, observed through the public API.

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
)

// do performs one API request and returns the status and body.
func (g *gateway) do(t *testing.T, method, path string, in any) (int, []byte) {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, g.Base+path, body)
	require.NoError(t, err)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.Client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// status performs one API request and returns its status.
func (g *gateway) status(t *testing.T, method, path string) int {
	t.Helper()
	code, _ := g.do(t, method, path, nil)
	return code
}

// problem performs one API request that must fail with status and code.
func (g *gateway) problem(t *testing.T, method, path string, in any, status int, code string) api.Problem {
	t.Helper()
	got, body := g.do(t, method, path, in)
	require.Equal(t, status, got, "%s %s: %s", method, path, body)
	var p api.Problem
	require.NoError(t, json.Unmarshal(body, &p), "%s", body)
	require.Equal(t, code, p.Code, "%s", body)
	return p
}

// stored is how many messages topic holds: the sum of its queues' broker
// offsets, read through group's progress (queue -1, the view of the
// group's retry copies, left out).
func (g *gateway) stored(t *testing.T, group, topic string) int64 {
	t.Helper()
	var p api.Progress
	g.call(t, http.MethodGet, "/v1/groups/"+group+"/progress", nil, &p)
	var n int64
	for _, q := range p.Queues {
		if q.Topic == topic && q.QueueID >= 0 {
			n += q.BrokerOffset
		}
	}
	return n
}

// sendURL is g's send endpoint for topic, on host (the gateway's port).
func (g *gateway) sendURL(t *testing.T, host, topic string) string {
	t.Helper()
	u, err := url.Parse(g.Base)
	require.NoError(t, err)
	return "http://" + net.JoinHostPort(host, u.Port()) + "/v1/topics/" + topic + "/messages"
}

// refusedOnSave PUTs group with a push endpoint at pushURL and requires
// the 400 invalid-argument naming the gateway's own listener.
func (g *gateway) refusedOnSave(t *testing.T, group, pushURL string) {
	t.Helper()
	p := g.problem(t, http.MethodPut, "/v1/groups/"+group, api.GroupRequest{
		Subscriptions: []api.Subscription{{Topic: group}}, Push: &api.PushRequest{URL: pushURL, Mode: "binary"},
	}, http.StatusBadRequest, "invalid-argument")
	require.Contains(t, p.Detail, "is this gateway's own listener", pushURL)
	t.Logf("PUT push %s -> 400 %s", pushURL, p.Detail)
}

// nonLoopbackAddr is an address of a local interface that is not
// loopback or link-local (false when the machine has none).
func nonLoopbackAddr(t *testing.T) (netip.Addr, bool) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if ip := p.Addr(); ip.IsGlobalUnicast() && !ip.IsLoopback() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// TestPushLoops: a push endpoint at a gateway's own send endpoint is
// refused when saved, by every spelling of its address; a loop the save
// check cannot see (two gateways pushing into each other, a relay) ends
// with the seeds in the DLQ and nothing stored again, because the send
// endpoint refuses pushed requests (508 push-loop).
func TestPushLoops(t *testing.T) {
	t.Parallel()

	t.Run("SelfPushIsRefusedOnSave", func(t *testing.T) {
		t.Parallel()
		gw := startGateway(t)
		gw.call(t, http.MethodPut, "/v1/topics/self", api.TopicRequest{Queues: 1}, nil)
		for _, host := range []string{"127.0.0.1", "localhost", "LOCALHOST.", "::ffff:127.0.0.1"} {
			gw.refusedOnSave(t, "self", gw.sendURL(t, host, "self"))
		}
		require.Equal(t, http.StatusNotFound, gw.status(t, http.MethodGet, "/v1/groups/self"), "nothing was stored")
		// Another port on the same address is an ordinary receiver.
		rc := newReceiver(t, "127.0.0.1", answer(http.StatusOK, ""))
		gw.putPushGroup(t, "self", "self", 0, api.PushRequest{URL: rc.URL})
	})

	t.Run("SelfPushOverIPv6IsRefusedOnSave", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback here: %v", err)
		}
		require.NoError(t, l.Close())
		gw := startGateway(t, func(c *server.Config) { c.Listen = "[::1]:0" })
		for _, host := range []string{"::1", "localhost"} {
			gw.refusedOnSave(t, "self6", gw.sendURL(t, host, "self6"))
		}
	})

	t.Run("SelfPushToAWildcardListenerIsRefusedOnSave", func(t *testing.T) {
		t.Parallel()
		gw := startGateway(t, func(c *server.Config) { c.Listen, c.InsecureNoAuth = ":0", true })
		hosts := []string{"127.0.0.1", "127.0.0.53", "::1", "localhost"}
		if ip, ok := nonLoopbackAddr(t); ok {
			hosts = append(hosts, ip.String())
		} else {
			t.Log("no non-loopback interface address here: only loopback is checked")
		}
		for _, host := range hosts {
			gw.refusedOnSave(t, "wild", gw.sendURL(t, host, "wild"))
		}
	})

	t.Run("TwoGatewaysPushingIntoEachOtherStop", func(t *testing.T) {
		t.Parallel()
		a, b := startGateway(t), startGateway(t)
		// Binary mode is the one whose request is a valid raw send.
		a.putPushGroup(t, "ping-to-b", "ping", 2, api.PushRequest{URL: b.sendURL(t, "127.0.0.1", "pong"), Mode: "binary"})
		b.putPushGroup(t, "pong-to-a", "pong", 2, api.PushRequest{URL: a.sendURL(t, "127.0.0.1", "ping"), Mode: "binary"})
		a.send(t, "ping", "seed a")
		b.send(t, "pong", "seed b")

		for _, side := range []struct {
			gw    *gateway
			group string
		}{{a, "ping-to-b"}, {b, "pong-to-a"}} {
			dead := side.gw.dlq(t, side.group, 1)[0]
			require.Len(t, dead.Attempts, 3, "retryMaxTimes 2: the ladder, then the DLQ")
			for _, at := range dead.Attempts {
				require.True(t, strings.HasPrefix(at.Reason, "push: HTTP 508 Loop Detected: "), at.Reason)
				require.Contains(t, at.Reason, "push-loop")
			}
			side.gw.settled(t, side.group)
		}
		// Everything is settled and dead-lettered: nothing can push again.
		require.EqualValues(t, 1, a.stored(t, "ping-to-b", "ping"), "ping holds its seed only")
		require.EqualValues(t, 1, b.stored(t, "pong-to-a", "pong"), "pong holds its seed only")
	})

	t.Run("ALoopThroughARelayStops", func(t *testing.T) {
		t.Parallel()
		gw := startGateway(t)
		target, err := url.Parse(gw.Base)
		require.NoError(t, err)
		// A forwarding receiver the guard cannot tell from any other: it
		// keeps the request's headers, the hop header with them.
		relay := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
		t.Cleanup(relay.Close)
		gw.putPushGroup(t, "relayed", "relayed", 1, api.PushRequest{URL: relay.URL + "/v1/topics/relayed/messages", Mode: "binary"})
		gw.send(t, "relayed", "seed")
		dead := gw.dlq(t, "relayed", 1)[0]
		require.Len(t, dead.Attempts, 2)
		require.True(t, strings.HasPrefix(dead.Attempts[0].Reason, "push: HTTP 508 Loop Detected: "), dead.Attempts[0].Reason)
		gw.settled(t, "relayed")
		require.EqualValues(t, 1, gw.stored(t, "relayed", "relayed"), "the seed only")
	})
}

// TestPushDenyPrivate: with --push-deny-private loopback, private and
// unique-local endpoints are refused when saved and, for a group saved
// before the flag was set, at delivery (into the DLQ, nothing sent).
func TestPushDenyPrivate(t *testing.T) {
	t.Parallel()
	private := func(c *server.Config) { c.PushDenyPrivate = true }

	t.Run("RefusedOnSave", func(t *testing.T) {
		t.Parallel()
		gw := startGateway(t, private)
		for _, tc := range []struct{ url, reason string }{
			{"http://[::1]:9/", "::1 is loopback"},
			{"http://127.0.0.1:9/", "127.0.0.1 is loopback"},
			{"http://10.1.2.3/", "10.1.2.3 is private"},
			{"http://[fd00::1]/", "fd00::1 is unique-local"},
			{"http://[::ffff:127.0.0.1]:9/", "127.0.0.1 (::ffff:127.0.0.1) is loopback"},
			{"http://localhost:9/", "127.0.0.1 (localhost) is loopback"},
		} {
			p := gw.problem(t, http.MethodPut, "/v1/groups/private", api.GroupRequest{Push: &api.PushRequest{URL: tc.url}},
				http.StatusBadRequest, "invalid-argument")
			require.Equal(t, "invalid argument: push url: forbidden address: "+tc.reason+" (private ranges are denied)", p.Detail)
		}
		// A public name is not resolved at save time, and is accepted (the
		// group subscribes to nothing, so nothing is ever pushed).
		var g api.Group
		require.Equal(t, http.StatusCreated, gw.call(t, http.MethodPut, "/v1/groups/private", api.GroupRequest{
			Push: &api.PushRequest{URL: "https://hooks.example.com/mq"},
		}, &g))
	})

	t.Run("RefusedAtDeliveryAfterARestart", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, "127.0.0.1", answer(http.StatusOK, ""))
		gw := startGateway(t)
		gw.putPushGroup(t, "was-fine", "was-fine", 1, api.PushRequest{URL: rc.URL})
		gw.Close(t)

		cfg := gw.Cfg
		private(&cfg)
		gw = openGateway(t, cfg)
		gw.send(t, "was-fine", "now private")
		dead := gw.dlq(t, "was-fine", 1)[0]
		require.Len(t, dead.Attempts, 2)
		for _, at := range dead.Attempts {
			require.Equal(t, "push: refused: 127.0.0.1 is loopback (private ranges are denied)", at.Reason)
		}
		require.Empty(t, rc.got(), "nothing was sent to the loopback receiver")
		// The dead letter can be listed a moment before the attempt that sent it is counted.
		require.Eventually(t, func() bool {
			return gw.metric(t, `mqgate_push_deliveries_total{group="was-fine",result="forbidden"}`) == 2
		}, 5*time.Second, 10*time.Millisecond, "two refused deliveries counted")
		p := gw.problem(t, http.MethodPut, "/v1/groups/was-fine", api.GroupRequest{
			Subscriptions: []api.Subscription{{Topic: "was-fine"}}, Push: &api.PushRequest{URL: rc.URL},
		}, http.StatusBadRequest, "invalid-argument")
		require.Contains(t, p.Detail, "127.0.0.1 is loopback")
	})
}
