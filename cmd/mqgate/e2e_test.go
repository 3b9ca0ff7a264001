package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/internal/testnet"
	"github.com/mqgate/mqgate/server/pgmirror/pgtest"
	"github.com/mqgate/mqgate/server/servertest"
)

// Process-level tests: the real binary (this test binary re-executed as
// `mqgate serve`), real HTTP on loopback, a real data dir, real SIGKILL and
// SIGTERM.

const e2eArgsEnv = "MQGATE_E2E_ARGS"

func init() {
	if args := os.Getenv(e2eArgsEnv); args != "" {
		os.Args = append([]string{"mqgate"}, strings.Split(args, "\x1f")...)
		main()
		os.Exit(0)
	}
	// Every run of the binary this test process starts inherits this: a
	// -race build otherwise sleeps a second at exit, and the tests run
	// the CLI hundreds of times.
	_ = os.Setenv("GORACE", strings.TrimPrefix(noRaceExitSleep(), "GORACE="))
}

// e2eLevels are servertest's delay levels (RocketMQ's 18 compressed to
// milliseconds) as the --delay-levels flag takes them.
var e2eLevels = strings.ReplaceAll(servertest.DelayLevels, " ", ",")

type proc struct {
	t    *testing.T
	dir  string
	addr string
	cmd  *exec.Cmd
	done chan error
	log  *bytes.Buffer
}

// freeAddr is a loopback address for a server started later
// (testnet.FreeAddr: a port no outgoing connection takes meanwhile).
func freeAddr(t *testing.T) string { return testnet.FreeAddr(t) }

// startServer runs `mqgate serve` on dir and waits until /readyz is 200.
func startServer(t *testing.T, dir, addr string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--listen", addr, "--data-dir", dir, "--segment-size", "64MiB",
		"--delay-levels", e2eLevels, "--log-format", "json", "--log-level", "warn", "--shutdown-delay", "0s"}, extra...)
	p := &proc{t: t, dir: dir, addr: addr, done: make(chan error, 1), log: &bytes.Buffer{}}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(os.Environ(), e2eArgsEnv+"="+strings.Join(args, "\x1f"), noRaceExitSleep())
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	require.NoError(t, p.cmd.Start())
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case err := <-p.done:
			t.Fatalf("server exited before it was ready: %v\n%s", err, p.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("server not ready after 30s\n%s", p.log.String())
	return nil
}

func (p *proc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// logTail is the last n lines of the log of a server that has stopped
// (its log is read once it has stopped writing).
func (p *proc) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(p.log.String(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (p *proc) url(path string) string { return "http://" + p.addr + path }

var e2eClient = &http.Client{Timeout: 40 * time.Second}

// call does one JSON request; out may be nil. It returns the status.
func call(ctx context.Context, method, url string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e2eClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s: %w", b, err)
		}
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

type wireMsg struct {
	Body    string `json:"body"`
	DedupID string `json:"dedupId,omitempty"`
}

type pulled struct {
	Messages []struct {
		MessageID      string `json:"messageId"`
		Receipt        string `json:"receipt"`
		Body           string `json:"body"`
		ReconsumeTimes int    `json:"reconsumeTimes"`
	} `json:"messages"`
}

type receiptResults struct {
	Results []struct {
		Status string `json:"status"`
	} `json:"results"`
}

// groupLedger is what one consumer group saw.
type groupLedger struct {
	mu        sync.Mutex
	ackedAt   map[string]time.Time // body -> when its ack returned ok
	ackLost   map[string]bool      // bodies that are done without an ok ack: ack without answer, or dead-lettered
	poison    int
	illegal   []string // deliveries that started after an ok ack of the same body
	delivered int
	nacks     int
	slow      int
	slowAcks  sync.WaitGroup // the late acks still on their way
}

// TestKill9UnderLoad (quick tier; LONG=1 for more rounds): producers with idempotency keys,
// three groups of consumers with random nacks and slow acks, and kill -9 of
// the server every few seconds. Afterwards every acknowledged send is
// delivered to every group, and no message comes back after an ok ack.
func TestKill9UnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the server")
	}
	cycles := 3
	if os.Getenv("LONG") != "" {
		cycles = 20
	}
	dir, addr := t.TempDir(), freeAddr(t)
	// With a database (always in CI) the PostgreSQL mirror runs too, and
	// is checked never to be ahead of the log and to hold exactly the
	// log's dead letters.
	var extra []string
	if os.Getenv(pgtest.EnvURL) != "" {
		extra = []string{"--database-url", pgtest.URL(t)}
	}
	var srv atomic.Pointer[proc]
	srv.Store(startServer(t, dir, addr, extra...))
	base := "http://" + addr
	ctx := context.Background()
	_, err := call(ctx, http.MethodPut, base+"/v1/topics/t11", map[string]any{"queues": 4}, nil)
	require.NoError(t, err)
	groups := []string{"g1", "g2", "g3"}
	ledgers := map[string]*groupLedger{}
	for _, g := range groups {
		_, err := call(ctx, http.MethodPut, base+"/v1/groups/"+g, map[string]any{"retryMaxTimes": 16, "invisibleMs": 1500}, nil)
		require.NoError(t, err)
		ledgers[g] = &groupLedger{ackedAt: map[string]time.Time{}, ackLost: map[string]bool{}}
	}

	var sentMu sync.Mutex
	sent := map[string]bool{} // bodies whose send returned 200
	var attempted, unknown atomic.Int64
	stopProducers := make(chan struct{})
	var producers sync.WaitGroup
	for p := 0; p < 4; p++ {
		producers.Add(1)
		go func(p int) {
			defer producers.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 11))
			for i := 0; ; i++ {
				select {
				case <-stopProducers:
					return
				default:
				}
				n := 1
				if rng.IntN(3) == 0 {
					n = 5
				}
				batch := make([]wireMsg, n)
				for j := range batch {
					id := fmt.Sprintf("p%d-%d-%d", p, i, j)
					batch[j] = wireMsg{Body: id, DedupID: id}
				}
				var req any = batch[0]
				if n > 1 {
					req = map[string]any{"messages": batch}
				}
				// Retry the same request (same keys) until it is answered 200:
				// an unknown outcome must not become a lost or doubled message.
				for try := 0; ; try++ {
					attempted.Add(1)
					if _, err := call(ctx, http.MethodPost, base+"/v1/topics/t11/messages", req, nil); err == nil {
						break
					}
					unknown.Add(1)
					time.Sleep(50 * time.Millisecond) // back off (the server may be down), then retry
				}
				sentMu.Lock()
				for _, m := range batch {
					sent[m.Body] = true
				}
				sentMu.Unlock()
			}
		}(p)
	}

	consumeCtx, stopConsumers := context.WithCancel(ctx)
	var consumers sync.WaitGroup
	for _, g := range groups {
		for c := 0; c < 2; c++ {
			consumers.Add(1)
			go func(g string, seed uint64) {
				defer consumers.Done()
				consume(consumeCtx, base, g, ledgers[g], rand.New(rand.NewPCG(seed, 7)))
			}(g, uint64(c))
		}
	}

	var recoveries []time.Duration
	dumpLog := false
	for cycle := 0; cycle < cycles; cycle++ {
		time.Sleep(time.Duration(2000+rand.IntN(2000)) * time.Millisecond) // the load runs 2–4 s before each kill
		killed := srv.Load()
		killed.kill9()
		if dumpLog { // the server that recovered with the mirror ahead of it
			t.Logf("the log of the server that recovered with the mirror ahead (last lines):\n%s", killed.logTail(60))
			dumpLog = false
		}
		start := time.Now()
		srv.Store(startServer(t, dir, addr, extra...))
		recoveries = append(recoveries, time.Since(start))
		if extra != nil {
			for _, g := range groups {
				if ahead := mirrorAhead(t, base, g); ahead != "" {
					// Not fatal: the load goes on, so the checks at the end
					// show what the recovered progress does to deliveries.
					t.Errorf("cycle %d: %s\nthe killed server's log (last lines):\n%s", cycle, ahead, killed.logTail(60))
					dumpLog = true
				}
			}
		}
	}
	time.Sleep(time.Second) // the last server takes the load for a second
	close(stopProducers)
	producers.Wait()

	// Drain: every group must see every acknowledged send.
	deadline := time.Now().Add(90 * time.Second)
	for {
		missing := 0
		for _, g := range groups {
			l := ledgers[g]
			l.mu.Lock()
			for body := range sent {
				// An ack that got no answer may have been applied: then the
				// message is done and legitimately never comes back.
				if _, ok := l.ackedAt[body]; !ok && !l.ackLost[body] {
					missing++
				}
			}
			l.mu.Unlock()
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, g := range groups {
				l := ledgers[g]
				l.mu.Lock()
				var lost []string
				for body := range sent {
					if _, ok := l.ackedAt[body]; !ok && !l.ackLost[body] {
						lost = append(lost, body)
					}
				}
				l.mu.Unlock()
				var prog json.RawMessage
				_, _ = call(ctx, http.MethodGet, base+"/v1/groups/"+g+"/progress", nil, &prog)
				t.Logf("group %s: %d missing, e.g. %v; progress %s", g, len(lost), lost[:min(len(lost), 10)], prog)
			}
			t.Fatalf("%d (group, message) pairs never acknowledged after the drain", missing)
		}
		time.Sleep(200 * time.Millisecond) // poll again (a hand-rolled Eventually, for the diagnostics at its deadline)
	}
	stopConsumers()
	consumers.Wait()
	for _, l := range ledgers {
		l.slowAcks.Wait()
	}
	if extra != nil {
		checkMirroredDeadLetters(t, srv.Load(), dir, addr, groups)
	}

	for _, g := range groups {
		l := ledgers[g]
		require.Empty(t, l.illegal, "group %s: delivered again after an ok ack", g)
		var dlq struct {
			Items []json.RawMessage `json:"items"`
		}
		_, err := call(ctx, http.MethodGet, base+"/v1/groups/"+g+"/dlq", nil, &dlq)
		require.NoError(t, err)
		_ = dlq // dead letters come from the poison nacks only (checked against PostgreSQL when configured)
		t.Logf("group %s: %d deliveries, %d nacks, %d to the DLQ, %d slow acks, %d acknowledged, %d done without an ok ack", g, l.delivered, l.nacks, l.poison, l.slow, len(l.ackedAt), len(l.ackLost))
	}
	t.Logf("sends: %d attempted, %d acknowledged messages, %d unknown outcomes retried; %d kills, recovery %v",
		attempted.Load(), len(sent), unknown.Load(), cycles, recoveries)
}

type progressView struct {
	Queues []struct {
		Topic          string `json:"topic"`
		QueueID        int    `json:"queueId"`
		ConsumerOffset int64  `json:"consumerOffset"`
		MirroredOffset *int64 `json:"mirroredOffset"`
	} `json:"queues"`
}

// mirrorAhead reports the first queue whose mirrored offset exceeds the
// live (recovered) one, "" when none does: PostgreSQL is never ahead of
// the log.
func mirrorAhead(t *testing.T, base, group string) string {
	t.Helper()
	var p progressView
	_, err := call(context.Background(), http.MethodGet, base+"/v1/groups/"+group+"/progress", nil, &p)
	require.NoError(t, err)
	for _, q := range p.Queues {
		if q.MirroredOffset != nil && *q.MirroredOffset > q.ConsumerOffset {
			return fmt.Sprintf("mirror ahead of the log: %s %s/%d: mirrored %d, live %d", group, q.Topic, q.QueueID, *q.MirroredOffset, q.ConsumerOffset)
		}
	}
	return ""
}

// deadLetterIDs lists a group's dead-letter ids through the API.
func deadLetterIDs(t *testing.T, base, group string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for cursor := ""; ; {
		var page struct {
			Items []struct {
				MessageID string `json:"messageId"`
			} `json:"items"`
			Next string `json:"next"`
		}
		_, err := call(context.Background(), http.MethodGet, base+"/v1/groups/"+group+"/dlq?limit=500&cursor="+cursor, nil, &page)
		require.NoError(t, err)
		for _, it := range page.Items {
			require.False(t, ids[it.MessageID], "dead letter %s listed twice", it.MessageID)
			ids[it.MessageID] = true
		}
		if page.Next == "" {
			return ids
		}
		cursor = page.Next
	}
}

// checkMirroredDeadLetters waits for the mirror to catch up, takes the
// dead letters PostgreSQL lists, then restarts without the database so the
// log lists them, and requires the two sets to be equal.
func checkMirroredDeadLetters(t *testing.T, p *proc, dir, addr string, groups []string) {
	t.Helper()
	base := "http://" + addr
	for _, g := range groups {
		servertest.Eventually(t, 30*time.Second, func() (bool, string) {
			var pv progressView
			_, err := call(context.Background(), http.MethodGet, base+"/v1/groups/"+g+"/progress", nil, &pv)
			require.NoError(t, err)
			synced := true
			for _, q := range pv.Queues {
				if q.ConsumerOffset > 0 && (q.MirroredOffset == nil || *q.MirroredOffset != q.ConsumerOffset) {
					synced = false
				}
			}
			return synced, "mirror never caught up for " + g
		})
	}
	// The mirror writes dead-letter arrivals and status changes in a pass
	// it starts on the change (after its batch delay) or at its next poll
	// (every second), and nothing outside shows when that pass has run:
	// wait out one and a half poll periods.
	time.Sleep(1500 * time.Millisecond)
	mirrored := map[string]map[string]bool{}
	for _, g := range groups {
		mirrored[g] = deadLetterIDs(t, base, g)
	}
	p.kill9()
	startServer(t, dir, addr) // no --database-url: the log answers
	total := 0
	for _, g := range groups {
		fromLog := deadLetterIDs(t, base, g)
		require.Equal(t, fromLog, mirrored[g], "group %s: PostgreSQL rows and log dead letters differ", g)
		total += len(fromLog)
	}
	require.Positive(t, total, "the poison nacks produced dead letters")
	t.Logf("postgres mirror: %d dead letters equal in PostgreSQL and the log; mirror never ahead after any restart", total)
}

// consume pulls, acks (or nacks 5 %, or acks too late 3 %) until ctx ends.
func consume(ctx context.Context, base, group string, l *groupLedger, rng *rand.Rand) {
	for ctx.Err() == nil {
		started := time.Now()
		var got pulled
		_, err := call(ctx, http.MethodPost, base+"/v1/groups/"+group+"/topics/t11/pull",
			map[string]any{"maxMessages": 16, "waitMs": 500}, &got)
		if err != nil {
			time.Sleep(50 * time.Millisecond) // the server is down: retry
			continue
		}
		var acks []string
		var ackBodies []string
		for _, m := range got.Messages {
			l.mu.Lock()
			l.delivered++
			if at, ok := l.ackedAt[m.Body]; ok && started.After(at) {
				l.illegal = append(l.illegal, m.Body)
			}
			l.mu.Unlock()
			switch r := rng.IntN(200); {
			case r < 2:
				// Poison: straight to the dead-letter queue.
				_, _ = call(ctx, http.MethodPost, base+"/v1/groups/"+group+"/nack",
					map[string]any{"items": []map[string]any{{"receipt": m.Receipt, "delayLevel": -1, "reason": "poison"}}}, nil)
				l.mu.Lock()
				l.ackLost[m.Body] = true // done for this group: it never comes back
				l.poison++
				l.mu.Unlock()
			case r < 10:
				l.mu.Lock()
				l.nacks++
				l.mu.Unlock()
				_, _ = call(ctx, http.MethodPost, base+"/v1/groups/"+group+"/nack",
					map[string]any{"items": []map[string]any{{"receipt": m.Receipt, "reason": "random failure"}}}, nil)
			case r < 16:
				l.mu.Lock()
				l.slow++
				l.mu.Unlock()
				l.slowAcks.Add(1)
				go func(receipt, body string) { // too late: the lease expires first
					defer l.slowAcks.Done()
					time.Sleep(2 * time.Second)
					// Usually expired; ok when the expired lease was not sent
					// back yet (a lease restored by a restart that ended while
					// the server was down, before the reaper's first pass).
					var res receiptResults
					_, err := call(ctx, http.MethodPost, base+"/v1/groups/"+group+"/ack", map[string]any{"receipts": []string{receipt}}, &res)
					l.mu.Lock()
					defer l.mu.Unlock()
					switch {
					case err != nil:
						l.ackLost[body] = true // unknown outcome
					case len(res.Results) == 1 && res.Results[0].Status == "ok":
						if _, seen := l.ackedAt[body]; !seen {
							l.ackedAt[body] = time.Now()
						}
					}
				}(m.Receipt, m.Body)
			default:
				acks = append(acks, m.Receipt)
				ackBodies = append(ackBodies, m.Body)
			}
		}
		if len(acks) == 0 {
			continue
		}
		var res receiptResults
		if _, err := call(ctx, http.MethodPost, base+"/v1/groups/"+group+"/ack", map[string]any{"receipts": acks}, &res); err != nil {
			// Unknown outcome: the message may come back (then it is acked
			// again) or not (the ack was applied).
			l.mu.Lock()
			for _, b := range ackBodies {
				l.ackLost[b] = true
			}
			l.mu.Unlock()
			continue
		}
		now := time.Now()
		l.mu.Lock()
		for i, r := range res.Results {
			if r.Status == "ok" {
				if _, seen := l.ackedAt[ackBodies[i]]; !seen {
					l.ackedAt[ackBodies[i]] = now
				}
			}
		}
		l.mu.Unlock()
	}
}

// TestGracefulShutdownUnderLoad: SIGTERM with long polls waiting and
// sends in flight. Every send answered 200 is there after a restart; every
// other one got a retryable error; long polls return; the exit code is 0.
func TestGracefulShutdownUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns the server")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	p := startServer(t, dir, addr)
	ctx := context.Background()
	_, err := call(ctx, http.MethodPut, p.url("/v1/topics/t18"), map[string]any{"queues": 2}, nil)
	require.NoError(t, err)
	_, err = call(ctx, http.MethodPut, p.url("/v1/topics/t18idle"), map[string]any{"queues": 1}, nil)
	require.NoError(t, err)

	// Requests being served, from the server's gauge (what a scrape
	// itself adds is in the baseline).
	inFlight := func() float64 {
		resp, err := http.Get(p.url("/metrics"))
		require.NoError(t, err)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "mqgate_http_requests_in_flight "); ok {
				f, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err)
				return f
			}
		}
		t.Fatal("no mqgate_http_requests_in_flight in /metrics")
		return 0
	}
	baseline := inFlight()
	var polls sync.WaitGroup
	pollErrs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		polls.Add(1)
		go func(i int) {
			defer polls.Done()
			var got pulled
			_, err := call(ctx, http.MethodPost, p.url(fmt.Sprintf("/v1/groups/idle%d/topics/t18idle/pull", i)), map[string]any{"waitMs": 30000}, &got)
			if err != nil && !strings.Contains(err.Error(), "503") {
				pollErrs <- err
			}
		}(i)
	}
	// Every long poll is parked in the server before the senders start
	// (one still on its way in when the listener closes would get EOF, as
	// from any server); nothing is sent to their topic, so they are still
	// waiting at the SIGTERM.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		parked := inFlight() - baseline
		if parked >= 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v of the 100 long polls parked after 20 s", parked)
		}
	}
	var okMu sync.Mutex
	var ok []string
	var senders sync.WaitGroup
	stop := make(chan struct{})
	for s := 0; s < 8; s++ {
		senders.Add(1)
		go func(s int) {
			defer senders.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("s%d-%d", s, i)
				status, err := call(ctx, http.MethodPost, p.url("/v1/topics/t18/messages"), wireMsg{Body: body}, nil)
				if err == nil {
					okMu.Lock()
					ok = append(ok, body)
					okMu.Unlock()
					continue
				}
				if status != 0 && status != http.StatusServiceUnavailable {
					t.Errorf("send during shutdown: %v", err)
				}
				if status == 0 { // listener closed: the server is gone
					return
				}
			}
		}(s)
	}
	time.Sleep(500 * time.Millisecond) // the senders run for half a second before the SIGTERM
	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		require.NoError(t, err, "exit code must be 0\n%s", p.log.String())
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
	shutdown := time.Since(start)
	close(stop)
	senders.Wait()
	polls.Wait()
	close(pollErrs)
	for err := range pollErrs {
		t.Errorf("long poll: %v", err)
	}
	require.NotEmpty(t, ok)

	start = time.Now()
	p = startServer(t, dir, addr)
	restart := time.Since(start)
	seen := map[string]bool{}
	for q := 0; q < 2; q++ {
		for off := 0; ; {
			var got pulled
			_, err := call(ctx, http.MethodGet, p.url(fmt.Sprintf("/v1/topics/t18/queues/%d/messages?offset=%d&max=32", q, off)), nil, &got)
			require.NoError(t, err)
			if len(got.Messages) == 0 {
				break
			}
			for _, m := range got.Messages {
				seen[m.Body] = true
			}
			off += len(got.Messages)
		}
	}
	for _, body := range ok {
		require.True(t, seen[body], "send %s answered 200 but is missing after restart", body)
	}
	t.Logf("%d sends answered 200 and all survived; shutdown took %v, clean restart %v", len(ok), shutdown, restart)
}
