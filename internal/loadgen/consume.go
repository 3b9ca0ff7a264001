package loadgen

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// pulled is the part of a pull answer the consumers read.
type pulled struct {
	Messages []pulledMsg `json:"messages"`
}

type pulledMsg struct {
	Receipt string `json:"receipt"`
	Body    string `json:"body"`
}

// receipts is the part of an ack or lease answer the consumers read.
type receipts struct {
	Results []struct {
		Status string `json:"status"`
	} `json:"results"`
}

// pull posts a pull request and reads the answer into out: JSON, or with
// binary the binary batch (a 4-byte big-endian count, then per message a
// 4-byte length and the metadata's JSON, a 4-byte length and the body).
func (c *client) pull(ctx context.Context, path string, req []byte, binary bool, out *pulled) error {
	if !binary {
		return c.do(ctx, http.MethodPost, path, req, out)
	}
	var raw rawBody
	if err := c.doAccept(ctx, http.MethodPost, c.base+path, path, req, contentTypeBatch, &raw); err != nil {
		return err
	}
	return decodePullBatch(raw, out)
}

// decodePullBatch reads a binary pull answer's receipts and bodies.
func decodePullBatch(b []byte, out *pulled) error {
	bad := fmt.Errorf("malformed %s pull answer (%d bytes)", contentTypeBatch, len(b))
	if len(b) < 4 {
		return bad
	}
	n := int(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n > len(b)/8 {
		return bad
	}
	out.Messages = make([]pulledMsg, n)
	for i := range out.Messages {
		var frames [2][]byte
		for j := range frames {
			if len(b) < 4 || uint64(binary.BigEndian.Uint32(b)) > uint64(len(b)-4) {
				return bad
			}
			size := binary.BigEndian.Uint32(b)
			frames[j], b = b[4:4+size], b[4+size:]
		}
		if err := jsonv2.Unmarshal(frames[0], &out.Messages[i]); err != nil {
			return fmt.Errorf("%w: %w", bad, err)
		}
		out.Messages[i].Body = string(frames[1])
	}
	if len(b) != 0 {
		return bad
	}
	return nil
}

func pullRequest(cfg Config, wait time.Duration) []byte {
	b, _ := json.Marshal(map[string]int64{
		"maxMessages": int64(cfg.PullBatch),
		"waitMs":      wait.Milliseconds(),
		"invisibleMs": cfg.Invisible.Milliseconds(),
	})
	return b
}

// consumers is one set of pull+ack workers.
type consumers struct {
	cfg   Config
	c     *client
	cnt   *counters
	start time.Time
	// e2e: read each body's stamp, record born→delivery latency and count
	// messages born before start as stale.
	e2e bool
	// deadline ends pulling (zero: none).
	deadline time.Time
	// finished, when set, is an extra condition that ends the run (e2e:
	// everything sent is acked, or the drain time is up).
	finished func() bool

	pullPath, ackPath, leasePath string
	reserved                     atomic.Int64 // messages taken out of Count
	fresh                        atomic.Int64 // acked messages born in this run (e2e)
	lastMsg                      atomic.Int64 // Unix ns of the latest non-empty pull
	lastAck                      atomic.Int64 // Unix ns of the latest ack
	stop                         atomic.Bool
	once                         sync.Once
	fatalErr                     error
}

func newConsumers(cfg Config, c *client, cnt *counters, start time.Time) *consumers {
	g, t := url.PathEscape(cfg.Group), url.PathEscape(cfg.Topic)
	k := &consumers{cfg: cfg, c: c, cnt: cnt, start: start,
		pullPath:  "/v1/groups/" + g + "/topics/" + t + "/pull",
		ackPath:   "/v1/groups/" + g + "/ack",
		leasePath: "/v1/groups/" + g + "/leases",
	}
	k.lastMsg.Store(start.UnixNano())
	return k
}

// reserve takes up to n messages out of the Count budget.
func (k *consumers) reserve(n int) int {
	if k.cfg.Count <= 0 {
		return n
	}
	for {
		cur := k.reserved.Load()
		left := k.cfg.Count - cur
		if left <= 0 {
			return 0
		}
		take := min(int64(n), left)
		if k.reserved.CompareAndSwap(cur, cur+take) {
			return int(take)
		}
	}
}

func (k *consumers) done(ctx context.Context) bool {
	switch {
	case ctx.Err() != nil, k.stop.Load():
		return true
	case k.cfg.Count > 0 && k.reserved.Load() >= k.cfg.Count:
		return true
	case !k.deadline.IsZero() && !time.Now().Before(k.deadline):
		return true
	case k.cfg.Idle > 0 && time.Since(time.Unix(0, k.lastMsg.Load())) >= k.cfg.Idle:
		return true
	case k.finished != nil && k.finished():
		return true
	}
	return false
}

func (k *consumers) failed(err error) {
	k.cnt.fail(err)
	if fatal(err) {
		k.once.Do(func() { k.fatalErr = err })
		k.stop.Store(true)
	}
}

// run starts cfg.Consumers workers and waits for them.
func (k *consumers) run(ctx context.Context) []histSet {
	sets := make([]histSet, k.cfg.Consumers)
	var wg sync.WaitGroup
	for w := range k.cfg.Consumers {
		sets[w] = histSet{}
		wg.Add(1)
		go func(hs histSet) {
			defer wg.Done()
			k.work(ctx, hs)
		}(sets[w])
	}
	wg.Wait()
	return sets
}

// work pulls, acks what the budget allows and hands the rest back
// (visible again at once, not a failed attempt), until done.
func (k *consumers) work(ctx context.Context, hs histSet) {
	pullLat, ackLat := hs.get("pull"), hs.get("ack")
	var e2eLat hist
	if k.e2e {
		e2eLat = hs.get("e2e")
	}
	defaultReq := pullRequest(k.cfg, k.cfg.Wait)
	for !k.done(ctx) {
		req, wait := defaultReq, k.cfg.Wait
		if !k.deadline.IsZero() {
			if left := time.Until(k.deadline).Truncate(time.Millisecond); left < wait {
				wait = max(left, 0)
				req = pullRequest(k.cfg, wait)
			}
		}
		t0 := time.Now()
		var pr pulled
		if err := k.c.pull(ctx, k.pullPath, req, k.cfg.BinaryPull, &pr); err != nil {
			if ctx.Err() != nil {
				return
			}
			k.failed(err)
			sleepCtx(ctx, retryPause)
			continue
		}
		delivered := time.Now()
		k.cnt.requests.Add(1)
		if len(pr.Messages) == 0 {
			continue
		}
		k.lastMsg.Store(delivered.UnixNano())
		pullLat.record(delivered.Sub(t0))
		stale := make([]bool, len(pr.Messages))
		for i, m := range pr.Messages {
			if !k.e2e {
				break
			}
			born, ok := parseStamp(m.Body)
			if !ok || born.Before(k.start) {
				stale[i] = true
				continue
			}
			e2eLat.record(delivered.Sub(born))
		}
		take := k.reserve(len(pr.Messages))
		if take > 0 {
			ok := k.ack(ctx, ackLat, pr, take, stale)
			if ok < take && k.cfg.Count > 0 {
				k.reserved.Add(int64(ok - take)) // a later pull delivers those again
			}
		}
		if take < len(pr.Messages) {
			k.release(ctx, pr.Messages[take:])
		}
	}
}

// ack settles the first n messages of pr and returns how many were ok.
func (k *consumers) ack(ctx context.Context, lat hist, pr pulled, n int, stale []bool) int {
	rs := make([]string, n)
	for i := range n {
		rs[i] = pr.Messages[i].Receipt
	}
	body, _ := json.Marshal(map[string][]string{"receipts": rs})
	t0 := time.Now()
	var res receipts
	if err := k.c.do(ctx, http.MethodPost, k.ackPath, body, &res); err != nil {
		if ctx.Err() == nil {
			k.failed(err)
		}
		return 0
	}
	now := time.Now()
	lat.record(now.Sub(t0))
	k.cnt.requests.Add(1)
	ok := 0
	for i, r := range res.Results {
		if i >= n {
			break
		}
		if r.Status != "ok" {
			k.cnt.fail(fmt.Errorf("ack: receipt %s", r.Status))
			continue
		}
		ok++
		k.cnt.bytes.Add(int64(len(pr.Messages[i].Body)))
		if stale[i] {
			k.cnt.stale.Add(1)
		} else if k.e2e {
			k.fresh.Add(1)
		}
	}
	k.cnt.acked.Add(int64(ok))
	k.lastAck.Store(now.UnixNano())
	return ok
}

// release makes messages the budget has no room for visible again.
func (k *consumers) release(ctx context.Context, msgs []pulledMsg) {
	type item struct {
		Receipt     string `json:"receipt"`
		InvisibleMs int64  `json:"invisibleMs"`
	}
	items := make([]item, len(msgs))
	for i, m := range msgs {
		items[i] = item{Receipt: m.Receipt}
	}
	body, _ := json.Marshal(map[string][]item{"items": items})
	if err := k.c.do(ctx, http.MethodPost, k.leasePath, body, nil); err != nil && ctx.Err() == nil {
		k.failed(err)
	}
}

// elapsed is the run's length: up to the last ack when the run ended on
// a count, on idleness or on a drain (so the wait for nothing is not
// counted), else the wall time.
func (k *consumers) elapsed(wall time.Duration, toLastAck bool) time.Duration {
	if last := k.lastAck.Load(); toLastAck && last > 0 {
		return time.Unix(0, last).Sub(k.start)
	}
	return wall
}

// Consume pulls and acks messages of the topic for the group.
func Consume(ctx context.Context, cfg Config) ([]Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var out []Result
	if cfg.Baseline {
		r, err := baselineConsume(ctx, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	hc, err := cfg.newClient(cfg.Consumers)
	if err != nil {
		return out, err
	}
	c := &client{http: hc, base: cfg.URL, auth: cfg.authorization()}
	if err := ensureTopic(ctx, c, Config{Topic: cfg.Topic, Queues: -1}); err != nil {
		return out, fmt.Errorf("topic %s: %w", cfg.Topic, err)
	}
	r := cfg.result("consume", fmt.Sprintf("consume pull=%d consumers=%d", cfg.PullBatch, cfg.Consumers))
	cnt := &counters{}
	start := time.Now()
	k := newConsumers(cfg, c, cnt, start)
	if cfg.Duration > 0 {
		k.deadline = start.Add(cfg.Duration)
	}
	bar := startProgress(cfg.Progress, "consume", cfg.Count, cnt, cnt.acked.Load)
	sets := k.run(ctx)
	wall := time.Since(start)
	bar.end()
	r.finish(cnt, k.elapsed(wall, cfg.Count > 0 || cfg.Idle > 0), mergeSets(sets))
	return append(out, r), k.fatalErr
}
