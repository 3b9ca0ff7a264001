package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// baselineServer is a bare net/http server on loopback that reads each
// request body and answers resp: the machine's HTTP ceiling, measured in
// the same run as the gateway.
func baselineServer(resp []byte) (base string, closeFn func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(resp)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// sendResponse is a send answer of n results, as the gateway writes it.
func sendResponse(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"results":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"messageId":"7F00000100001F9000000000000004D2","queueId":%d,"queueOffset":%d}`, i%8, 1000+i)
	}
	b.WriteString("]}\n")
	return b.Bytes()
}

// baselineProduce measures cfg's send requests against the bare handler,
// with the same pacing and concurrency.
func baselineProduce(ctx context.Context, cfg Config) (Result, error) {
	base, closeFn, err := baselineServer(sendResponse(cfg.Batch))
	if err != nil {
		return Result{}, err
	}
	defer closeFn()
	hc, err := (Config{}).newClient(cfg.Concurrency)
	if err != nil {
		return Result{}, err
	}
	defer hc.CloseIdleConnections()
	c := &client{http: hc, base: base}
	r := cfg.result("baseline", fmt.Sprintf("baseline net/http batch=%d conns=%d", cfg.Batch, cfg.Concurrency))
	r.Target = base
	cnt := &counters{}
	bar := startProgress(cfg.Progress, "baseline", cfg.Count, cnt, cnt.sent.Load)
	start := time.Now()
	sets, err := sendLoop(ctx, cfg, c, sendSpec{url: base + "/", path: "/", size: cfg.BodySize}, newPacer(cfg, start), cnt)
	elapsed := time.Since(start)
	bar.end()
	r.finish(cnt, elapsed, mergeSets(sets))
	return r, err
}

// pullResponse is a pull answer of n leased messages of size bytes, as
// the gateway writes it.
func pullResponse(n, size int) []byte {
	type msg struct {
		MessageID    string `json:"messageId"`
		Receipt      string `json:"receipt"`
		Topic        string `json:"topic"`
		QueueID      int    `json:"queueId"`
		QueueOffset  int    `json:"queueOffset"`
		Reconsume    int    `json:"reconsumeTimes"`
		Body         string `json:"body"`
		BodyEncoding string `json:"bodyEncoding"`
		BornAt       string `json:"bornAt"`
		StoredAt     string `json:"storedAt"`
	}
	msgs := make([]msg, n)
	for i := range msgs {
		msgs[i] = msg{MessageID: "7F00000100001F9000000000000004D2", Receipt: strings.Repeat("r", 120), Topic: "bench",
			QueueID: i % 8, QueueOffset: 1000 + i, Body: strings.Repeat("x", size), BodyEncoding: "utf8",
			BornAt: "2026-01-01T00:00:00.000Z", StoredAt: "2026-01-01T00:00:00.001Z"}
	}
	b, _ := json.Marshal(map[string]any{"messages": msgs})
	return b
}

// baselineConsume measures pull-sized exchanges against the bare handler:
// cfg.Consumers clients post a pull request and decode an answer of
// PullBatch messages, closed loop.
func baselineConsume(ctx context.Context, cfg Config) (Result, error) {
	base, closeFn, err := baselineServer(pullResponse(cfg.PullBatch, cfg.BodySize))
	if err != nil {
		return Result{}, err
	}
	defer closeFn()
	hc, err := (Config{}).newClient(cfg.Consumers)
	if err != nil {
		return Result{}, err
	}
	defer hc.CloseIdleConnections()
	c := &client{http: hc, base: base}
	r := cfg.result("baseline", fmt.Sprintf("baseline net/http pull=%d consumers=%d", cfg.PullBatch, cfg.Consumers))
	r.Target, r.Consumers, r.PullBatch = base, cfg.Consumers, cfg.PullBatch
	pcfg := cfg
	pcfg.Batch, pcfg.Rate = cfg.PullBatch, 0
	p := newPacer(pcfg, time.Now())
	req := pullRequest(cfg, cfg.Wait)
	cnt := &counters{}
	bar := startProgress(cfg.Progress, "baseline", cfg.Count, cnt, cnt.sent.Load)
	start := time.Now()
	sets := make([]histSet, cfg.Consumers)
	var wg sync.WaitGroup
	for w := range cfg.Consumers {
		sets[w] = histSet{}
		wg.Add(1)
		go func(lat hist) {
			defer wg.Done()
			for {
				_, _, ok := p.take(ctx)
				if !ok {
					return
				}
				t0 := time.Now()
				var pr pulled
				if err := c.do(ctx, http.MethodPost, "/", req, &pr); err != nil {
					cnt.fail(err)
					continue
				}
				lat.record(time.Since(t0))
				cnt.requests.Add(1)
				cnt.sent.Add(int64(len(pr.Messages)))
				for _, m := range pr.Messages {
					cnt.bytes.Add(int64(len(m.Body)))
				}
			}
		}(sets[w].get("pull"))
	}
	wg.Wait()
	elapsed := time.Since(start)
	bar.end()
	r.finish(cnt, elapsed, mergeSets(sets))
	return r, nil
}
