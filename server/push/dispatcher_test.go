package push

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

func TestDeliverAcks(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	rc := newReceiver(t, status(http.StatusNoContent))
	g := bd.putGroup(t, "ok", "orders", 0, broker.PushConfig{URL: rc.URL + "/hook"})
	sent := bd.send(t, "orders", "hello")

	d := bd.next(t, "ok")
	require.Equal(t, ResultOK, d.Result)
	require.Equal(t, http.StatusNoContent, d.Status)
	require.Equal(t, broker.ReceiptOK, d.Settled)
	require.Equal(t, sent.MessageID, d.MessageID)
	require.Equal(t, sent.MessageID, d.WebhookID)

	req := rc.requests()
	require.Len(t, req, 1)
	require.Equal(t, "application/json", req[0].Header.Get("Content-Type"))
	require.Equal(t, "ok", req[0].Header.Get(HeaderGroup))
	require.Equal(t, userAgent, req[0].Header.Get("User-Agent"))
	require.Equal(t, "1", req[0].Header.Get(HeaderPushHop), "every push is marked, so no send endpoint stores it again")
	require.NoError(t, Verify(g.Push.Secret, req[0].Header, req[0].Body, time.Now(), DefaultTolerance))
	var m Message
	require.NoError(t, json.Unmarshal(req[0].Body, &m))
	require.Equal(t, Message{
		MessageID: sent.MessageID, Topic: "orders", QueueID: sent.QueueID, QueueOffset: sent.QueueOffset,
		Tag: "t", Keys: []string{"k1", "k2"}, Properties: map[string]string{"color": "blue"},
		Body: "hello", BodyEncoding: "utf8", BornAt: m.BornAt, StoredAt: m.StoredAt,
	}, m)
	require.NotEmpty(t, m.BornAt)

	progress, err := bd.b.Progress(context.Background(), "ok")
	require.NoError(t, err)
	for _, q := range progress {
		require.Zero(t, q.Lag, "%+v", q)
		require.Zero(t, q.InFlight, "%+v", q)
	}
}

// TestPayloadIsAPIMessage: the json-mode body is the pull API's Message
// without the receipt (the gateway settles the lease).
func TestPayloadIsAPIMessage(t *testing.T) {
	t.Parallel()
	body, err := encodeJSON(broker.ReceivedMessage{MessageID: "M", Receipt: "secret-receipt", Body: []byte("b")})
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(body, &fields))
	require.NotContains(t, fields, "receipt")
	want, err := json.Marshal(api.ToMessage(broker.ReceivedMessage{MessageID: "M", Body: []byte("b")}))
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(body))
}

func TestBinaryMode(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	rc := newReceiver(t, status(http.StatusOK))
	g := bd.putGroup(t, "bin", "raw", 0, broker.PushConfig{URL: rc.URL, Mode: ModeBinary})
	res, err := bd.b.Send(context.Background(), "raw", []broker.SendMessage{{Body: []byte{0xff, 0x00, 0x01}, Tag: "x",
		Properties: map[string]string{"ok": "yes", "bad(name)": "dropped", "evil": "a\r\nInjected: 1"}}})
	require.NoError(t, err)
	require.Equal(t, ResultOK, bd.next(t, "bin").Result)

	req := rc.requests()[0]
	require.Equal(t, []byte{0xff, 0x00, 0x01}, req.Body)
	require.NoError(t, Verify(g.Push.Secret, req.Header, req.Body, time.Now(), DefaultTolerance))
	h := req.Header
	require.Equal(t, "application/octet-stream", h.Get("Content-Type"))
	require.Equal(t, res[0].MessageID, h.Get(HeaderMessageID))
	require.Equal(t, res[0].MessageID, h.Get(HeaderID))
	require.Equal(t, "raw", h.Get(HeaderTopic))
	require.Equal(t, "x", h.Get(HeaderTag))
	require.Equal(t, "0", h.Get(HeaderReconsumeTimes))
	require.Equal(t, "yes", h.Get(HeaderPropertyPrefix+"ok"))
	require.Empty(t, h.Get(HeaderPropertyPrefix+"evil"), "a value with CR LF is left out")
	require.Empty(t, h.Get("Injected"))
	require.Empty(t, h.Get(HeaderPropertyPrefix+"bad(name)"), "a name that is no HTTP token is left out")
	require.NotEmpty(t, h.Get(HeaderStoredAt))
}

// TestSlowDeliveryKeepsItsLease: a request that outlasts the lease has it
// extended (ChangeLease), so the message is neither redelivered nor counted
// as failed meanwhile, and the late 2xx still acks.
func TestSlowDeliveryKeepsItsLease(t *testing.T) {
	t.Parallel()
	// On a virtual clock, moved a quarter lease at a time and only after a
	// run of the dispatcher's loop: the lease lapses only if extending it
	// is broken, never because this machine is slow.
	fc := clockwork.NewFakeClock()
	bd := setupOn(t, fc, func(c *Config) { c.Lease = 200 * time.Millisecond })
	release := make(chan struct{})
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	bd.putGroup(t, "slow", "slow", 0, broker.PushConfig{URL: rc.URL, Timeout: 5 * time.Second})
	bd.send(t, "slow", "take your time")
	<-rc.seen
	// Four lease lengths go by, a quarter lease at a time, each step seen
	// by a run of the dispatcher's loop; then the receiver answers.
	for step := 0; step < 16; step++ {
		fc.Advance(50 * time.Millisecond)
		bd.waitRun(t)
	}
	close(release)
	d := bd.next(t, "slow")
	require.Equal(t, ResultOK, d.Result)
	require.Equal(t, broker.ReceiptOK, d.Settled, "the lease was still held when the answer came")
	require.Zero(t, d.ReconsumeTimes)
	require.Len(t, rc.requests(), 1, "never delivered twice at once")
}

func TestRedirectIsAFailure(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	target := newReceiver(t, status(http.StatusOK))
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	})
	bd.putGroup(t, "redir", "redir", 0, broker.PushConfig{URL: rc.URL})
	bd.send(t, "redir", "x")
	d := bd.next(t, "redir")
	require.Equal(t, Result3xx, d.Result)
	require.Equal(t, http.StatusFound, d.Status)
	require.Contains(t, d.Reason, "HTTP 302 Found (redirects are not followed)")
	require.Equal(t, broker.ReceiptOK, d.Settled, "nacked")
	require.Empty(t, target.requests(), "the redirect was not followed")
}

// TestSSRF: endpoints resolving to the metadata address or a denied range
// are refused at delivery time and nothing is sent; the message is nacked.
func TestSSRF(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, status(http.StatusOK))
	port := rc.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "metadata.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		case "receiver.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return nil, &net404{host}
	}
	bd := setup(t, func(c *Config) {
		c.Lookup = lookup
		c.DenyCIDRs = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	for _, tc := range []struct{ group, url, why string }{
		{"metadata", "http://metadata.test:" + strconv.Itoa(int(port)) + "/latest/meta-data/", "push: refused: 169.254.169.254 (metadata.test) is the cloud metadata address"},
		{"denied", "http://receiver.test:" + strconv.Itoa(int(port)) + "/", "push: refused: 127.0.0.1 (receiver.test) is in the denied range 127.0.0.1/32"},
		{"literal", rc.URL, "push: refused: 127.0.0.1 is in the denied range 127.0.0.1/32"},
	} {
		bd.putGroup(t, tc.group, "ssrf-"+tc.group, 0, broker.PushConfig{URL: tc.url})
		bd.send(t, "ssrf-"+tc.group, "x")
		d := bd.next(t, tc.group)
		require.Equal(t, ResultForbidden, d.Result, tc.group)
		require.Equal(t, tc.why, d.Reason, tc.group)
		require.NotContains(t, d.Reason, "Post ", "the reason does not quote the URL")
		require.Equal(t, broker.ReceiptOK, d.Settled, "nacked")
	}
	require.Empty(t, rc.requests(), "nothing reached the receiver")
}

// TestOwnListenerIsRefusedAtDelivery: an endpoint that reaches one of the
// gateway's own listeners — by address or by a name resolving to it, a
// group stored without the save-time check — is refused before any
// connection, so a push can never feed the gateway's own send endpoint.
func TestOwnListenerIsRefusedAtDelivery(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, status(http.StatusOK)) // plays the gateway's own listener
	own := rc.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort()
	other := newReceiver(t, status(http.StatusOK))
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "gateway.test" {
			return []netip.Addr{netip.MustParseAddr("::ffff:127.0.0.1")}, nil
		}
		return nil, &net404{host}
	}
	bd := setup(t, func(c *Config) {
		c.Lookup = lookup
		c.Self = []netip.AddrPort{own}
	})
	port := strconv.Itoa(int(own.Port()))
	for _, tc := range []struct{ group, url, why string }{
		{"self-ip", rc.URL + "/v1/topics/self-ip/messages", "push: refused: " + own.String() + " is this gateway's own listener " + own.String()},
		{"self-name", "http://gateway.test:" + port + "/v1/topics/self-name/messages", "push: refused: " + own.String() + " (gateway.test) is this gateway's own listener " + own.String()},
	} {
		bd.putGroup(t, tc.group, tc.group, 0, broker.PushConfig{URL: tc.url})
		bd.send(t, tc.group, "loop?")
		d := bd.next(t, tc.group)
		require.Equal(t, ResultForbidden, d.Result, tc.group)
		require.Equal(t, tc.why+" (a push there would store every message again)", d.Reason, tc.group)
	}
	require.Empty(t, rc.requests(), "nothing reached the own listener")

	// Another port of the same address is a receiver like any other.
	bd.putGroup(t, "other", "other", 0, broker.PushConfig{URL: other.URL})
	bd.send(t, "other", "fine")
	require.Equal(t, ResultOK, bd.next(t, "other").Result)
}

// TestDenyPrivateAtDelivery: with DenyPrivate, loopback, private and
// unique-local endpoints — literal, IPv4-mapped, or names resolving to
// them — are refused before any connection; the same loopback receiver
// works without it. Refused addresses are never dialed: the guard answers
// before connect(2) (and its Control hook would refuse it there too).
func TestDenyPrivateAtDelivery(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, status(http.StatusOK))
	port := strconv.Itoa(int(rc.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()))
	names := map[string]string{"v6-loopback.test": "::1", "loopback.test": "127.0.0.1", "ten.test": "10.1.2.3", "ula.test": "fd00::1", "mapped.test": "::ffff:127.0.0.1"}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := names[host]; ok {
			return []netip.Addr{netip.MustParseAddr(a)}, nil
		}
		return nil, &net404{host}
	}
	bd := setup(t, func(c *Config) {
		c.Lookup = lookup
		c.DenyPrivate = true
	})
	for i, tc := range []struct{ url, why string }{
		{"http://[::1]:" + port + "/", "::1 is loopback"},
		{rc.URL, "127.0.0.1 is loopback"},
		{"http://10.1.2.3:" + port + "/", "10.1.2.3 is private"},
		{"http://[fd00::1]:" + port + "/", "fd00::1 is unique-local"},
		{"http://[::ffff:127.0.0.1]:" + port + "/", "127.0.0.1 (::ffff:127.0.0.1) is loopback"},
		{"http://v6-loopback.test:" + port + "/", "::1 (v6-loopback.test) is loopback"},
		{"http://loopback.test:" + port + "/", "127.0.0.1 (loopback.test) is loopback"},
		{"http://ten.test:" + port + "/", "10.1.2.3 (ten.test) is private"},
		{"http://ula.test:" + port + "/", "fd00::1 (ula.test) is unique-local"},
		{"http://mapped.test:" + port + "/", "127.0.0.1 (mapped.test) is loopback"},
	} {
		group := "private-" + strconv.Itoa(i)
		bd.putGroup(t, group, group, 0, broker.PushConfig{URL: tc.url})
		bd.send(t, group, "x")
		d := bd.next(t, group)
		require.Equal(t, ResultForbidden, d.Result, tc.url)
		require.Equal(t, "push: refused: "+tc.why+" (private ranges are denied)", d.Reason, tc.url)
		require.Equal(t, broker.ReceiptOK, d.Settled, "nacked")
	}
	require.Empty(t, rc.requests(), "nothing reached the loopback receiver")

	open := setup(t)
	open.putGroup(t, "loopback-ok", "loopback-ok", 0, broker.PushConfig{URL: rc.URL})
	open.send(t, "loopback-ok", "x")
	require.Equal(t, ResultOK, open.next(t, "loopback-ok").Result, "loopback is allowed without DenyPrivate")
}

// TestDenyPrivateAllowsPublic: a receiver whose name resolves to public
// addresses passes the guard with DenyPrivate (checked without dialing:
// this machine reaches no public address).
func TestDenyPrivateAllowsPublic(t *testing.T) {
	t.Parallel()
	g := newGuard(Config{DenyPrivate: true, Self: []netip.AddrPort{netip.MustParseAddrPort("[::]:443")},
		LocalAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("10.0.0.5")}, nil }})
	public := []netip.Addr{netip.MustParseAddr("203.0.113.7"), netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("::ffff:198.51.100.7")}
	require.NoError(t, g.checkAll("hooks.example.com", public, 443))
	require.NoError(t, Config{DenyPrivate: true}.CheckURL("https://hooks.example.com/mq"))
	require.NoError(t, Config{DenyPrivate: true}.CheckURL("https://203.0.113.7/mq"))
}

type net404 struct{ host string }

func (e *net404) Error() string { return "no such host " + e.host }

func TestDelayLevel(t *testing.T) {
	t.Parallel()
	d, err := New(nil, Config{DelayLevels: testLevels})
	require.NoError(t, err)
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header map[string]string
		level  int
	}{
		{"None", nil, 0},
		{"RetryAfterSeconds", map[string]string{"Retry-After": "1"}, 10},
		{"RetryAfterZero", map[string]string{"Retry-After": "0"}, 1},
		{"RetryAfterBetween", map[string]string{"Retry-After": "2"}, 11},
		{"RetryAfterBeyondTop", map[string]string{"Retry-After": "3600"}, 18},
		{"RetryAfterDate", map[string]string{"Retry-After": now.Add(3 * time.Second).Format(http.TimeFormat)}, 12},
		{"RetryAfterPastDate", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 1},
		{"RetryAfterGarbage", map[string]string{"Retry-After": "soon"}, 0},
		{"RetryAfterNegative", map[string]string{"Retry-After": "-5"}, 0},
		{"DelayLevel", map[string]string{HeaderDelayLevel: "7"}, 7},
		{"DelayLevelWins", map[string]string{HeaderDelayLevel: "2", "Retry-After": "1"}, 2},
		{"DelayLevelDLQ", map[string]string{HeaderDelayLevel: "-1"}, -1},
		{"DelayLevelLadder", map[string]string{HeaderDelayLevel: "0", "Retry-After": "1"}, 0},
		{"DelayLevelAboveTop", map[string]string{HeaderDelayLevel: "99"}, 18},
		{"DelayLevelGarbageFallsBack", map[string]string{HeaderDelayLevel: "x", "Retry-After": "1"}, 10},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		level, _ := d.delayLevel(h, now)
		require.Equal(t, tc.level, level, tc.name)
	}
	require.Equal(t, 2, levelAtLeast([]time.Duration{time.Second, 5 * time.Second, 2 * time.Second}, 3*time.Second), "the shortest delay that is long enough")
	require.Equal(t, 2, levelAtLeast([]time.Duration{time.Second, 5 * time.Second, 2 * time.Second}, time.Hour), "else the longest")
}

// TestRunOnceReconciles drives runOnce by hand (no Start): new, changed,
// disabled and removed endpoints start and stop their pullers.
func TestRunOnceReconciles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bd := setup(t)
	d, err := New(bd.b, Config{DelayLevels: testLevels})
	require.NoError(t, err)
	t.Cleanup(d.Stop)

	res, err := d.runOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, RunResult{}, res)

	g := bd.putGroup(t, "g1", "t1", 0, broker.PushConfig{URL: "http://127.0.0.1:9/"})
	_, _, err = bd.b.PutGroup(ctx, broker.GroupConfig{Name: "pull-only", Subscriptions: []broker.Subscription{{Topic: "t1"}}})
	require.NoError(t, err)
	res, err = d.runOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, RunResult{PushGroups: 1, Active: 1, Started: 1}, res)
	res, _ = d.runOnce(ctx)
	require.Equal(t, RunResult{PushGroups: 1, Active: 1}, res, "unchanged: nothing to do")

	// Every change stores a new PushConfig: the registry keeps the pointer
	// it is given, so a stored one is never modified.
	change := func(edit func(p *broker.PushConfig)) {
		p := *g.Push
		edit(&p)
		g.Push = &p
		_, _, err := bd.b.PutGroup(ctx, g)
		require.NoError(t, err)
	}
	// A new URL applies to the next delivery without a restart...
	change(func(p *broker.PushConfig) { p.URL = "http://127.0.0.1:10/" })
	res, _ = d.runOnce(ctx)
	require.Equal(t, RunResult{PushGroups: 1, Active: 1}, res)
	require.Equal(t, "http://127.0.0.1:10/", d.groups["g1"].cfg.Load().Push.URL)
	// ...a new concurrency restarts the pullers...
	change(func(p *broker.PushConfig) { p.MaxConcurrency = 2 })
	res, _ = d.runOnce(ctx)
	require.Equal(t, RunResult{PushGroups: 1, Active: 1, Started: 1, Stopped: 1}, res)
	require.Equal(t, 2, cap(d.groups["g1"].slots))
	// ...disabling stops them, enabling starts them again.
	change(func(p *broker.PushConfig) { p.Disabled = true })
	res, _ = d.runOnce(ctx)
	require.Equal(t, RunResult{PushGroups: 1, Active: 0, Stopped: 1}, res)
	change(func(p *broker.PushConfig) { p.Disabled = false })
	res, _ = d.runOnce(ctx)
	require.Equal(t, RunResult{PushGroups: 1, Active: 1, Started: 1}, res)
	// An endpoint that cannot be served is skipped (and logged once).
	bad := g
	badPush := *g.Push
	badPush.Secret = "whsec_AAAA"
	bad.Name, bad.Push = "g2", &badPush
	_, _, err = bd.b.PutGroup(ctx, bad)
	require.NoError(t, err)
	res, _ = d.runOnce(ctx)
	require.Equal(t, RunResult{PushGroups: 2, Active: 1}, res)
	require.Contains(t, d.invalid["g2"], "24 to 64 bytes")
	// A removed group is stopped.
	require.NoError(t, bd.b.DeleteGroup(ctx, "g1"))
	res, _ = d.runOnce(ctx)
	require.Equal(t, RunResult{PushGroups: 1, Active: 0, Stopped: 1}, res)

	d.Stop()
	res, err = d.runOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, RunResult{}, res, "a stopped dispatcher starts nothing")
}

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := New(nil, Config{Lease: time.Second, RefreshInterval: time.Second})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = New(nil, Config{PollWait: time.Minute})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = New(nil, Config{DelayLevels: []time.Duration{0}})
	require.ErrorIs(t, err, ErrInvalidConfig)
	d, err := New(nil, Config{})
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, d.cfg.Lease)
	require.Equal(t, time.Second, d.cfg.RefreshInterval)
	require.Equal(t, 20*time.Second, d.cfg.PollWait)
	require.Equal(t, "mqgate-push", d.cfg.ClientID)
	d.Stop()
	d.Stop() // idempotent, also without Start
}

// TestStopGivesLeasesBack: a request still running when Stop's drain
// timeout ends is cancelled and its lease given back without counting an
// attempt: the message comes again as it was.
func TestStopGivesLeasesBack(t *testing.T) {
	t.Parallel()
	bd := setup(t, func(c *Config) { c.DrainTimeout = 100 * time.Millisecond })
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	bd.putGroup(t, "stop", "stop", 0, broker.PushConfig{URL: rc.URL, Timeout: 30 * time.Second})
	sent := bd.send(t, "stop", "interrupted")
	<-rc.seen
	bd.d.Stop()
	d := bd.next(t, "stop")
	require.Equal(t, ResultAbandoned, d.Result)
	require.Equal(t, broker.ReceiptOK, d.Settled, "released")

	msgs, err := bd.b.Pull(context.Background(), broker.PullRequest{Group: "stop", Topic: "stop", MaxMessages: 1, Wait: 5 * time.Second})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, sent.MessageID, msgs[0].MessageID, "the same message, not a retry copy")
	require.Zero(t, msgs[0].ReconsumeTimes, "giving the lease back is no failed attempt")
}

// TestFewerSlotsThanTopics: with maxConcurrency 1 and two topics, neither
// topic's long poll starves the other.
func TestFewerSlotsThanTopics(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	rc := newReceiver(t, status(http.StatusOK))
	ctx := context.Background()
	for _, topic := range []string{"a", "b"} {
		_, _, err := bd.b.PutTopic(ctx, broker.TopicConfig{Name: topic, Queues: 1})
		require.NoError(t, err)
	}
	g := broker.GroupConfig{Name: "two", Subscriptions: []broker.Subscription{{Topic: "a"}, {Topic: "b"}},
		Push: &broker.PushConfig{URL: rc.URL, MaxConcurrency: 1}}
	_, err := broker.NormalizePush(&g, nil)
	require.NoError(t, err)
	_, _, err = bd.b.PutGroup(ctx, g)
	require.NoError(t, err)
	bd.waitRun(t)
	bd.send(t, "a", "to a")
	bd.send(t, "b", "to b")
	topics := map[string]bool{}
	for range 2 {
		d := bd.next(t, "two")
		require.Equal(t, ResultOK, d.Result)
		topics[d.Topic] = true
	}
	require.Equal(t, map[string]bool{"a": true, "b": true}, topics)
}

// TestDeletedGroupIsNotRecreated: deleting a push group stops its
// pullers; none of them re-creates it by pulling.
func TestDeletedGroupIsNotRecreated(t *testing.T) {
	t.Parallel()
	bd := setup(t)
	bd.putGroup(t, "gone", "gone", 0, broker.PushConfig{URL: "http://127.0.0.1:9/"})
	require.Equal(t, 1, bd.waitRun(t).Active)
	require.NoError(t, bd.b.DeleteGroup(context.Background(), "gone"))
	require.Equal(t, 0, bd.waitRun(t).Active)
	bd.waitRun(t)
	_, err := bd.b.GetGroup(context.Background(), "gone")
	require.ErrorIs(t, err, broker.ErrGroupNotFound)
}
