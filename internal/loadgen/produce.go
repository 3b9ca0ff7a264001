package loadgen

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// stampLen is the length of the born-time stamp at the start of each body:
// Unix nanoseconds, zero-padded to 19 digits.
const stampLen = 19

// template is a send request body with the byte offsets of each
// message's stamp, so a worker stamps a copy in place per request.
type template struct {
	buf    []byte
	stamps []int
	ctype  string // the Content-Type of buf
}

// contentTypeBatch is the gateway's binary batch: a 4-byte big-endian
// message count, then per message a 4-byte big-endian size and the body
// (api.ContentTypeBatch; loadgen talks to the gateway only over HTTP).
const contentTypeBatch = "application/vnd.mqgate.batch"

// newBinaryTemplate builds a binary batch of n messages of size bytes.
func newBinaryTemplate(n, size int) *template {
	t := &template{ctype: contentTypeBatch}
	b := binary.BigEndian.AppendUint32(nil, uint32(n))
	for range n {
		b = binary.BigEndian.AppendUint32(b, uint32(size))
		b = t.appendBody(b, size)
	}
	t.buf = b
	return t
}

// appendBody appends a body of size bytes to b: a stamp placeholder
// (recorded in t.stamps) when the body has room for one, then padding.
func (t *template) appendBody(b []byte, size int) []byte {
	pad := size
	if size >= stampLen {
		t.stamps = append(t.stamps, len(b))
		b = append(b, "0000000000000000000"...)
		pad -= stampLen
	}
	return append(b, bytes.Repeat([]byte{'x'}, pad)...)
}

// newTemplate builds the JSON body of a send of n messages of size bytes:
// {"body":"…"} for one, {"messages":[…]} for more. Bodies of at least
// stampLen bytes start with a stamp.
func newTemplate(n, size int) *template {
	t := &template{ctype: "application/json"}
	var b []byte
	body := func() {
		b = append(b, `{"body":"`...)
		b = t.appendBody(b, size)
		b = append(b, `"}`...)
	}
	if n == 1 {
		body()
	} else {
		b = append(b, `{"messages":[`...)
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			body()
		}
		b = append(b, `]}`...)
	}
	t.buf = b
	return t
}

// stamp writes born into every message of t and returns the body.
func (t *template) stamp(born time.Time) []byte {
	var digits [stampLen]byte
	writeStamp(digits[:], born.UnixNano())
	for _, off := range t.stamps {
		copy(t.buf[off:], digits[:])
	}
	return t.buf
}

func writeStamp(dst []byte, ns int64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + ns%10)
		ns /= 10
	}
}

// parseStamp reads the born time from the start of a body; ok is false
// for a body the bench did not stamp.
func parseStamp(body string) (time.Time, bool) {
	if len(body) < stampLen {
		return time.Time{}, false
	}
	var ns int64
	for i := range stampLen {
		c := body[i]
		if c < '0' || c > '9' {
			return time.Time{}, false
		}
		ns = ns*10 + int64(c-'0')
	}
	return time.Unix(0, ns), true
}

// pacer hands out the requests of a run: how many messages each carries
// and when it is due. Closed loop (rate 0): due now, until the deadline or
// the count. Open loop: request i is due at start + i × batch / rate; a
// worker sleeps until then, and one that is late sends at once and counts
// its latency from the due time.
type pacer struct {
	start    time.Time
	deadline time.Time // zero: none
	total    int64     // messages; 0: no limit
	batch    int64
	perReq   float64 // seconds between requests; 0: closed loop
	next     atomic.Int64
	stop     atomic.Bool
}

func newPacer(cfg Config, start time.Time) *pacer {
	p := &pacer{start: start, total: cfg.Count, batch: int64(cfg.Batch)}
	if cfg.Duration > 0 {
		p.deadline = start.Add(cfg.Duration)
	}
	if cfg.Rate > 0 {
		p.perReq = float64(cfg.Batch) / cfg.Rate
	}
	return p
}

// pastDeadline reports whether the run's time is up (closed loop) or
// long past (open loop: a request still failing a second after it).
func (p *pacer) pastDeadline() bool {
	if p.deadline.IsZero() {
		return false
	}
	grace := time.Duration(0)
	if p.perReq > 0 {
		grace = time.Second
	}
	return time.Now().After(p.deadline.Add(grace))
}

// take returns the next request's message count and due time, or ok false
// when the run is over.
func (p *pacer) take(ctx context.Context) (n int, due time.Time, ok bool) {
	if p.stop.Load() || ctx.Err() != nil {
		return 0, time.Time{}, false
	}
	i := p.next.Add(1) - 1
	n = int(p.batch)
	if p.total > 0 {
		left := p.total - i*p.batch
		if left <= 0 {
			return 0, time.Time{}, false
		}
		n = int(min(p.batch, left))
	}
	if p.perReq == 0 {
		due = time.Now()
		if !p.deadline.IsZero() && !due.Before(p.deadline) {
			return 0, time.Time{}, false
		}
		return n, due, true
	}
	due = p.start.Add(time.Duration(float64(i) * p.perReq * float64(time.Second)))
	if !p.deadline.IsZero() && !due.Before(p.deadline) {
		return 0, time.Time{}, false
	}
	if !sleepCtx(ctx, time.Until(due)) {
		return 0, time.Time{}, false
	}
	return n, due, true
}

// sendSpec is what a send loop posts: the gateway's send route, or the
// baseline's handler.
type sendSpec struct {
	url  string // full URL
	path string // for error messages
	size int    // body bytes per message
	// noBytes leaves the bytes sent out of the counters (e2e counts the
	// bytes delivered).
	noBytes bool
}

// sendLoop runs cfg.Concurrency senders until the pacer says stop, and
// returns their histograms. A fatal error stops every sender and is
// returned.
func sendLoop(ctx context.Context, cfg Config, c *client, spec sendSpec, p *pacer, cnt *counters) ([]histSet, error) {
	var (
		wg       sync.WaitGroup
		once     sync.Once
		fatalErr error
	)
	sets := make([]histSet, cfg.Concurrency)
	for w := range cfg.Concurrency {
		sets[w] = histSet{}
		wg.Add(1)
		go func(hs histSet) {
			defer wg.Done()
			lat := hs.get("send")
			build := newTemplate
			if cfg.Binary {
				build = newBinaryTemplate
			}
			full := build(cfg.Batch, spec.size)
			var tail *template // the count's last, shorter batch
			for {
				n, due, ok := p.take(ctx)
				if !ok {
					return
				}
				t := full
				if n != cfg.Batch {
					if tail == nil {
						tail = build(n, spec.size)
					}
					t = tail
				}
				body := t.stamp(due)
				// A request that fails for a reason that may pass is sent
				// again (its latency still counts from due), so a --count
				// run stores exactly count messages.
				for {
					err := c.doType(ctx, http.MethodPost, spec.url, spec.path, t.ctype, body, nil)
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						return
					}
					cnt.fail(err)
					if fatal(err) {
						once.Do(func() { fatalErr = err })
						p.stop.Store(true)
						return
					}
					if !sleepCtx(ctx, retryPause) || p.stop.Load() || p.pastDeadline() {
						return
					}
				}
				lat.record(time.Since(due))
				cnt.requests.Add(1)
				cnt.sent.Add(int64(n))
				if !spec.noBytes {
					cnt.bytes.Add(int64(n * spec.size))
				}
			}
		}(sets[w])
	}
	wg.Wait()
	return sets, fatalErr
}

// Produce sends messages to the topic and measures each send request.
func Produce(ctx context.Context, cfg Config) ([]Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var out []Result
	if cfg.Baseline {
		r, err := baselineProduce(ctx, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	hc, err := cfg.newClient(cfg.Concurrency)
	if err != nil {
		return out, err
	}
	c := &client{http: hc, base: cfg.URL, auth: cfg.authorization()}
	if err := ensureTopic(ctx, c, cfg); err != nil {
		return out, fmt.Errorf("topic %s: %w", cfg.Topic, err)
	}
	path := "/v1/topics/" + url.PathEscape(cfg.Topic) + "/messages"
	r := cfg.result("produce", produceName(cfg))
	cnt := &counters{}
	bar := startProgress(cfg.Progress, "produce", cfg.Count, cnt, cnt.sent.Load)
	start := time.Now()
	sets, err := sendLoop(ctx, cfg, c, sendSpec{url: cfg.URL + path, path: path, size: cfg.BodySize}, newPacer(cfg, start), cnt)
	elapsed := time.Since(start)
	bar.end()
	r.finish(cnt, elapsed, mergeSets(sets))
	return append(out, r), err
}

func produceName(cfg Config) string {
	s := fmt.Sprintf("produce batch=%d conns=%d", cfg.Batch, cfg.Concurrency)
	if cfg.Rate > 0 {
		s += fmt.Sprintf(" rate=%s", strconv.FormatFloat(cfg.Rate, 'f', -1, 64))
	}
	return s
}

// result is a Result with cfg's settings filled in.
func (cfg Config) result(mode, name string) Result {
	r := Result{Name: name, Mode: mode, Target: cfg.URL, Topic: cfg.Topic, BodySize: cfg.BodySize, Rate: cfg.Rate}
	switch mode {
	case "produce", "baseline":
		r.Batch, r.Concurrency = cfg.Batch, cfg.Concurrency
	case "consume":
		r.Group, r.Consumers, r.PullBatch = cfg.Group, cfg.Consumers, cfg.PullBatch
	case "e2e":
		r.Group, r.Batch, r.Concurrency, r.Consumers, r.PullBatch = cfg.Group, cfg.Batch, cfg.Concurrency, cfg.Consumers, cfg.PullBatch
	}
	return r
}
