package clustercheck

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqgate/mqgate/internal/worker"
)

// Config configures a workload. Zero values take the defaults in
// withDefaults.
type Config struct {
	URLs      []string // the endpoints' base URLs (required); any may serve any request
	Topic     string   // created with Queues queues if it does not exist (required)
	Queues    int      // default 4
	Groups    []string // consumer groups, each subscribed to Topic (default "clustercheck")
	Producers int      // default 4
	Consumers int      // per group (default 2)
	// Rate is the messages per second all producers send together; 0
	// sends closed loop (each producer sends when its last send is done).
	Rate float64
	// BatchPercent of the sends are batches of 2..BatchMax messages
	// (defaults 20 and 8).
	BatchPercent, BatchMax int
	// NackPercent of the delivered messages are nacked (default 5; below
	// 0: none), to come back after NackDelay (default 100 ms).
	NackPercent int
	NackDelay   time.Duration
	// SlowAckPercent of the delivered messages are acked only after their
	// lease ended (default 2; below 0: none), so their acks are expired
	// and they come back.
	SlowAckPercent int
	Lease          time.Duration // a pull's invisibleMs (default 2 s)
	PullWait       time.Duration // a pull's waitMs (default 1 s)
	PullMax        int           // a pull's maxMessages (default 16)
	// RequestTimeout bounds a request (beyond a pull's wait; default 5 s).
	RequestTimeout time.Duration
	// SendGiveUp is how long after the run's context ended a producer
	// still retries the send it has not got an answer for (default 30 s).
	SendGiveUp time.Duration
	// DrainQuiet ends the drain of a group when nothing came for this
	// long (default 2 × Lease + 1 s, time for an expired lease's retry
	// copy to come); a group that has settled every body sent ok stops
	// after one empty pull instead.
	DrainQuiet time.Duration
	// DrainTimeout bounds the drain (default 60 s).
	DrainTimeout time.Duration
	// History records the run (default a new one). Pass one to record
	// faults into it while the run goes on.
	History *History
	// Client is the HTTP client (default: one with a 2 s dial timeout).
	Client *http.Client
	// Logf, when set, gets a line per phase.
	Logf func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	if c.Queues == 0 {
		c.Queues = 4
	}
	if len(c.Groups) == 0 {
		c.Groups = []string{"clustercheck"}
	}
	if c.Producers == 0 {
		c.Producers = 4
	}
	if c.Consumers == 0 {
		c.Consumers = 2
	}
	if c.BatchPercent == 0 {
		c.BatchPercent = 20
	}
	if c.BatchMax < 2 {
		c.BatchMax = 8
	}
	if c.NackPercent == 0 {
		c.NackPercent = 5
	}
	if c.NackDelay == 0 {
		c.NackDelay = 100 * time.Millisecond
	}
	if c.SlowAckPercent == 0 {
		c.SlowAckPercent = 2
	}
	if c.Lease == 0 {
		c.Lease = 2 * time.Second
	}
	if c.PullWait == 0 {
		c.PullWait = time.Second
	}
	if c.PullMax == 0 {
		c.PullMax = 16
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.SendGiveUp == 0 {
		c.SendGiveUp = 30 * time.Second
	}
	if c.DrainQuiet == 0 {
		c.DrainQuiet = 2*c.Lease + time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 60 * time.Second
	}
	if c.History == nil {
		c.History = NewHistory()
	}
	if c.Client == nil {
		c.Client = newHTTPClient(c.Producers + len(c.Groups)*c.Consumers)
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// Validate reports a configuration the workload cannot run.
func (c Config) Validate() error {
	var errs []error
	if len(c.URLs) == 0 {
		errs = append(errs, errors.New("no URLs"))
	}
	for _, u := range c.URLs {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("URL %q is not an http(s) base URL", u))
		}
	}
	if c.Topic == "" {
		errs = append(errs, errors.New("no topic"))
	}
	if c.BatchMax > 256 {
		errs = append(errs, fmt.Errorf("batch max %d above 256", c.BatchMax))
	}
	if c.PullMax > 32 {
		errs = append(errs, fmt.Errorf("pull max %d above 32", c.PullMax))
	}
	if c.PullWait > 30*time.Second {
		errs = append(errs, fmt.Errorf("pull wait %v above 30 s", c.PullWait))
	}
	if len(errs) > 0 {
		return fmt.Errorf("clustercheck: %w", errors.Join(errs...))
	}
	return nil
}

// workload is one run's state.
type workload struct {
	cfg   Config
	h     *History
	runID string
	// stoppedAt is when the run's context ended (Unix ns; 0 before).
	stoppedAt atomic.Int64

	mu      sync.Mutex
	sentOK  map[string]bool            // bodies sent ok
	settled map[string]map[string]bool // group → bodies acked ok or unknown
}

// Run sets the topic and groups up, runs the producers and consumers
// until ctx ends, then drains every group (doc.go) and returns the
// history. The error is a configuration or set-up failure; what the
// gateway did is in the history, for Check.
func Run(ctx context.Context, cfg Config) (*History, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return cfg.History, err
	}
	var id [4]byte
	_, _ = crand.Read(id[:])
	w := &workload{cfg: cfg, h: cfg.History, runID: hex.EncodeToString(id[:]), sentOK: map[string]bool{},
		settled: map[string]map[string]bool{}}
	for _, g := range cfg.Groups {
		w.settled[g] = map[string]bool{}
	}
	setupCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := w.setup(setupCtx); err != nil {
		return w.h, err
	}
	stop := context.AfterFunc(ctx, func() { w.stoppedAt.Store(time.Now().UnixNano()) })
	defer stop()

	cfg.Logf("clustercheck: run %s: %d producers, %d consumers per group, groups %v", w.runID, cfg.Producers, cfg.Consumers, cfg.Groups)
	var wg sync.WaitGroup
	process := 0
	for range cfg.Producers {
		p := process
		wg.Go(func() { w.produce(ctx, p) })
		process++
	}
	for _, g := range cfg.Groups {
		for range cfg.Consumers {
			p := process
			wg.Go(func() { w.consume(ctx, p, g) })
			process++
		}
	}
	wg.Wait()
	cfg.Logf("clustercheck: run %s: load stopped, draining", w.runID)
	drainCtx, cancelDrain := context.WithTimeout(context.WithoutCancel(ctx), cfg.DrainTimeout)
	defer cancelDrain()
	for _, g := range cfg.Groups {
		for range cfg.Consumers {
			p := process
			wg.Go(func() { w.drain(drainCtx, p, g) })
			process++
		}
	}
	wg.Wait()
	cfg.Logf("clustercheck: run %s: drained", w.runID)
	return w.h, nil
}

// setup creates the topic and the groups, trying each endpoint in turn
// until one answers (PUTs are idempotent).
func (w *workload) setup(ctx context.Context) error {
	puts := []struct {
		path string
		body any
	}{{"/v1/topics/" + url.PathEscape(w.cfg.Topic), wireTopic{Queues: w.cfg.Queues}}}
	for _, g := range w.cfg.Groups {
		puts = append(puts, struct {
			path string
			body any
		}{"/v1/groups/" + url.PathEscape(g), wireGroup{
			Subscriptions: []wireSubscription{{Topic: w.cfg.Topic}},
			// Nothing goes to the dead-letter queue in a run: a message
			// there would look lost to the checker.
			RetryMaxTimes: 64, // the most the broker allows
			// Retries of expired leases come back at once, not after
			// RocketMQ's 10 s first level.
			RetryPolicy: wireRetryPolicy{Backoff: "fixed", InitialMs: max(1, w.cfg.NackDelay.Milliseconds())},
		}})
	}
	for _, p := range puts {
		var err error
		for attempt := 0; ; attempt++ {
			base := w.cfg.URLs[attempt%len(w.cfg.URLs)]
			var status int
			reqCtx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
			status, err = post(reqCtx, w.cfg.Client, http.MethodPut, base+p.path, nil, p.body, nil)
			cancel()
			if err == nil {
				break
			}
			if classify(status, err) == Fail || !worker.Sleep(ctx, 100*time.Millisecond) {
				return fmt.Errorf("clustercheck: set up %s: %w", p.path, err)
			}
		}
	}
	return nil
}

// produce sends unique bodies until ctx ends.
func (w *workload) produce(ctx context.Context, process int) {
	rng := rand.New(rand.NewPCG(uint64(process), uint64(time.Now().UnixNano())))
	node := process % len(w.cfg.URLs)
	var perMessage time.Duration
	if w.cfg.Rate > 0 {
		perMessage = time.Duration(float64(time.Second) * float64(w.cfg.Producers) / w.cfg.Rate)
	}
	next := time.Now()
	seq := 0
	for req := 0; ctx.Err() == nil; req++ {
		n := 1
		if rng.IntN(100) < w.cfg.BatchPercent {
			n = 2 + rng.IntN(w.cfg.BatchMax-1)
		}
		msgs := make([]Message, n)
		for i := range msgs {
			msgs[i].Body = fmt.Sprintf("%s-p%d-%d", w.runID, process, seq)
			// One sharding key per producer: its messages go to one queue
			// in the order it sends them (Check's per-key order).
			msgs[i].ShardingKey = fmt.Sprintf("%s-p%d", w.runID, process)
			seq++
		}
		key := fmt.Sprintf("%s-p%d-r%d", w.runID, process, req)
		node = w.sendUntilDone(ctx, process, node, key, msgs)
		if perMessage > 0 {
			next = next.Add(time.Duration(n) * perMessage)
			if !worker.Sleep(ctx, time.Until(next)) {
				return
			}
		}
	}
}

// sendUntilDone sends msgs with the Idempotency-Key key, again and again
// (the same key, the next endpoint after a failure) until a send is ok or
// definitely failed for good, or SendGiveUp after the run ended. It
// returns the endpoint to use next.
func (w *workload) sendUntilDone(ctx context.Context, process, node int, key string, msgs []Message) int {
	req := wireSend{}
	if len(msgs) == 1 {
		req.Body, req.ShardingKey = msgs[0].Body, msgs[0].ShardingKey
	} else {
		bodies := make([]wireBody, len(msgs))
		for i, m := range msgs {
			bodies[i] = wireBody{Body: m.Body, ShardingKey: m.ShardingKey}
		}
		req.Messages = &bodies
	}
	path := "/v1/topics/" + url.PathEscape(w.cfg.Topic) + "/messages"
	reqs := context.WithoutCancel(ctx) // an answer is worth waiting for after the run ends
	for attempt := 0; ; attempt++ {
		base := w.cfg.URLs[node]
		o := w.h.Invoke(Event{Process: process, Kind: Send, Node: base, Topic: w.cfg.Topic, Key: key, Messages: msgs})
		var out wireSendResponse
		reqCtx, cancel := context.WithTimeout(reqs, w.cfg.RequestTimeout)
		status, err := post(reqCtx, w.cfg.Client, http.MethodPost, base+path, map[string]string{"Idempotency-Key": key}, req, &out)
		cancel()
		typ := classify(status, err)
		if typ == OK && len(out.Results) != len(msgs) {
			typ, err = Info, fmt.Errorf("%d results for %d messages", len(out.Results), len(msgs))
		}
		if typ != OK {
			o.Complete(typ, nil, status, err)
			// A rate limit passes; any other definite failure will not.
			if typ == Fail && status != http.StatusTooManyRequests {
				return node
			}
			node = (node + 1) % len(w.cfg.URLs)
			if w.givenUp() || !worker.Sleep(reqs, backoff(attempt)) {
				return node
			}
			continue
		}
		done := make([]Message, len(msgs))
		for i, r := range out.Results {
			done[i] = Message{Body: msgs[i].Body, ShardingKey: msgs[i].ShardingKey, MessageID: r.MessageID, Topic: w.cfg.Topic, QueueID: r.QueueID, QueueOffset: r.QueueOffset}
		}
		o.Complete(OK, done, status, nil)
		w.mu.Lock()
		for _, m := range msgs {
			w.sentOK[m.Body] = true
		}
		w.mu.Unlock()
		return node
	}
}

// givenUp reports whether the run ended more than SendGiveUp ago.
func (w *workload) givenUp() bool {
	at := w.stoppedAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) > w.cfg.SendGiveUp
}

// backoff is the pause before retry attempt+1: 20 ms doubling to 250 ms,
// short so that the first ok send after a fault shows when the gateway
// came back.
func backoff(attempt int) time.Duration {
	return min(20*time.Millisecond<<min(attempt, 4), 250*time.Millisecond)
}

// consume pulls for group until ctx ends: most messages are acked at
// once, NackPercent nacked, SlowAckPercent acked after their lease ended.
func (w *workload) consume(ctx context.Context, process int, group string) {
	rng := rand.New(rand.NewPCG(uint64(process), uint64(time.Now().UnixNano())))
	node := process % len(w.cfg.URLs)
	type slow struct {
		m   Message
		due time.Time
	}
	var held []slow
	reqs := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		var due []Message
		kept := held[:0]
		for _, s := range held {
			if time.Now().After(s.due) {
				due = append(due, s.m)
			} else {
				kept = append(kept, s)
			}
		}
		held = kept
		if len(due) > 0 {
			node = w.ack(reqs, process, node, group, due)
		}
		msgs, ok := w.pull(reqs, process, node, group, w.cfg.PullWait)
		if !ok {
			node = (node + 1) % len(w.cfg.URLs)
			worker.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		var acks, nacks []Message
		for _, m := range msgs {
			switch p := rng.IntN(100); {
			case p < w.cfg.NackPercent:
				nacks = append(nacks, m)
			case p < w.cfg.NackPercent+w.cfg.SlowAckPercent:
				held = append(held, slow{m: m, due: m.LeaseUntil.Add(200 * time.Millisecond)})
			default:
				acks = append(acks, m)
			}
		}
		if len(acks) > 0 {
			node = w.ack(reqs, process, node, group, acks)
		}
		if len(nacks) > 0 {
			node = w.nack(reqs, process, node, group, nacks)
		}
	}
	// The held messages' leases run out; the drain gets them again.
}

// drain pulls group and acks everything until the group has been quiet
// for DrainQuiet (or, once it has settled every body sent ok, for one
// empty pull), or ctx ends.
func (w *workload) drain(ctx context.Context, process int, group string) {
	node := process % len(w.cfg.URLs)
	last := time.Now()
	for ctx.Err() == nil {
		msgs, ok := w.pull(ctx, process, node, group, min(w.cfg.PullWait, 500*time.Millisecond))
		if !ok {
			node = (node + 1) % len(w.cfg.URLs)
			worker.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		if len(msgs) > 0 {
			last = time.Now()
			node = w.ack(ctx, process, node, group, msgs)
			continue
		}
		quiet := time.Since(last)
		if quiet >= w.cfg.DrainQuiet || (quiet >= w.cfg.PullWait && w.complete(group)) {
			return
		}
	}
}

// complete reports whether group has settled every body sent ok.
func (w *workload) complete(group string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for b := range w.sentOK {
		if !w.settled[group][b] {
			return false
		}
	}
	return true
}

// pull does one long poll; ok is false when it was not ok.
func (w *workload) pull(ctx context.Context, process, node int, group string, wait time.Duration) ([]Message, bool) {
	base := w.cfg.URLs[node]
	o := w.h.Invoke(Event{Process: process, Kind: Pull, Node: base, Group: group, Topic: w.cfg.Topic})
	var out wirePullResponse
	reqCtx, cancel := context.WithTimeout(ctx, wait+w.cfg.RequestTimeout)
	defer cancel()
	path := "/v1/groups/" + url.PathEscape(group) + "/topics/" + url.PathEscape(w.cfg.Topic) + "/pull"
	status, err := post(reqCtx, w.cfg.Client, http.MethodPost, base+path, nil,
		wirePull{MaxMessages: w.cfg.PullMax, WaitMs: wait.Milliseconds(), InvisibleMs: w.cfg.Lease.Milliseconds()}, &out)
	typ := classify(status, err)
	if typ != OK {
		o.Complete(typ, nil, status, err)
		return nil, false
	}
	msgs := make([]Message, len(out.Messages))
	for i, m := range out.Messages {
		msgs[i] = Message{Body: m.Body, MessageID: m.MessageID, OriginID: m.OriginMessageID, Topic: m.Topic,
			QueueID: m.QueueID, QueueOffset: m.QueueOffset, ReconsumeTimes: m.ReconsumeTimes, Receipt: m.Receipt,
			LeaseUntil: m.LeaseUntil}
	}
	o.Complete(OK, msgs, status, nil)
	return msgs, true
}

// settleAttempts is how many times an ack or nack whose outcome is
// unknown is sent again (each on the next endpoint): both are idempotent.
const settleAttempts = 3

// ack acks msgs' receipts in one request and returns the endpoint to use
// next.
func (w *workload) ack(ctx context.Context, process, node int, group string, msgs []Message) int {
	receipts := make([]string, len(msgs))
	for i, m := range msgs {
		receipts[i] = m.Receipt
	}
	return w.settle(ctx, process, node, group, Ack, msgs, wireAck{Receipts: receipts})
}

// nack nacks msgs (back after NackDelay) and returns the endpoint to use
// next.
func (w *workload) nack(ctx context.Context, process, node int, group string, msgs []Message) int {
	items := make([]wireNackItem, len(msgs))
	for i, m := range msgs {
		items[i] = wireNackItem{Receipt: m.Receipt, DelayMs: max(1, w.cfg.NackDelay.Milliseconds()), Reason: "clustercheck"}
	}
	return w.settle(ctx, process, node, group, Nack, msgs, wireNack{Items: items})
}

func (w *workload) settle(ctx context.Context, process, node int, group string, kind Kind, msgs []Message, body any) int {
	invoked := make([]Message, len(msgs))
	for i, m := range msgs {
		invoked[i] = Message{Body: m.Body, MessageID: m.MessageID, Receipt: m.Receipt}
	}
	for attempt := range settleAttempts {
		base := w.cfg.URLs[node]
		o := w.h.Invoke(Event{Process: process, Kind: kind, Node: base, Group: group, Topic: w.cfg.Topic, Messages: invoked})
		var out wireReceiptResponse
		reqCtx, cancel := context.WithTimeout(ctx, w.cfg.RequestTimeout)
		status, err := post(reqCtx, w.cfg.Client, http.MethodPost, base+"/v1/groups/"+url.PathEscape(group)+"/"+strings.ToLower(string(kind)), nil, body, &out)
		cancel()
		typ := classify(status, err)
		if typ == OK && len(out.Results) != len(msgs) {
			typ, err = Info, fmt.Errorf("%d results for %d receipts", len(out.Results), len(msgs))
		}
		if typ != OK {
			o.Complete(typ, nil, status, err)
			if kind == Ack && typ == Info {
				w.markSettled(group, msgs) // it may have acked
			}
			node = (node + 1) % len(w.cfg.URLs)
			if typ == Fail || !worker.Sleep(ctx, backoff(attempt)) {
				return node
			}
			continue
		}
		done := make([]Message, len(msgs))
		var acked []Message
		for i, r := range out.Results {
			done[i] = invoked[i]
			done[i].Status = r.Status
			if r.Status == "ok" {
				acked = append(acked, msgs[i])
			}
		}
		o.Complete(OK, done, status, nil)
		if kind == Ack {
			w.markSettled(group, acked)
		}
		return node
	}
	return node
}

func (w *workload) markSettled(group string, msgs []Message) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range msgs {
		w.settled[group][m.Body] = true
	}
}
