package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultE2EGroup is the group of an e2e run when none is given: not the
// consume default, so a backlog left for `bench consume` is not in the way.
const DefaultE2EGroup = "bench-e2e"

// E2E produces and consumes at once. Each body starts with its born time
// (the send's scheduled time in rate mode); the consumer records the time
// from it to the pull answer that delivered the message. The producers
// run for Duration or Count (at Rate when set); the consumers then go on
// until every message sent was acked, or Drain has passed.
func E2E(ctx context.Context, cfg Config) ([]Result, error) {
	if cfg.Group == "" {
		cfg.Group = DefaultE2EGroup
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BodySize < stampLen {
		return nil, fmt.Errorf("e2e needs bodies of at least %d bytes (the born-time stamp)", stampLen)
	}
	var out []Result
	if cfg.Baseline {
		r, err := baselineProduce(ctx, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	hc, err := cfg.newClient(cfg.Concurrency + cfg.Consumers)
	if err != nil {
		return out, err
	}
	c := &client{http: hc, base: cfg.URL, auth: cfg.authorization()}
	if err := ensureTopic(ctx, c, cfg); err != nil {
		return out, fmt.Errorf("topic %s: %w", cfg.Topic, err)
	}
	skipBacklog(ctx, c, cfg)

	name := fmt.Sprintf("e2e batch=%d conns=%d consumers=%d pull=%d", cfg.Batch, cfg.Concurrency, cfg.Consumers, cfg.PullBatch)
	if cfg.Rate > 0 {
		name += fmt.Sprintf(" rate=%g", cfg.Rate)
	}
	r := cfg.result("e2e", name)
	cnt := &counters{}
	start := time.Now()
	kcfg := cfg
	kcfg.Count, kcfg.Idle = 0, 0 // the consumers follow the producers, not a budget
	k := newConsumers(kcfg, c, cnt, start)
	k.e2e = true
	var producersDone atomic.Bool
	var drainBy atomic.Int64
	k.finished = func() bool {
		if !producersDone.Load() {
			return false
		}
		return k.fresh.Load() >= cnt.sent.Load() || time.Now().UnixNano() > drainBy.Load()
	}
	bar := startProgress(cfg.Progress, "e2e", cfg.Count, cnt, cnt.acked.Load)
	var consumerSets []histSet
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		consumerSets = k.run(ctx)
	}()
	producerSets, perr := sendLoop(ctx, cfg, c, sendSpec{
		url: cfg.URL + "/v1/topics/" + url.PathEscape(cfg.Topic) + "/messages", path: "/v1/topics/" + cfg.Topic + "/messages", size: cfg.BodySize, noBytes: true,
	}, newPacer(cfg, start), cnt)
	drainBy.Store(time.Now().Add(cfg.Drain).UnixNano())
	producersDone.Store(true)
	if perr != nil {
		k.stop.Store(true)
	}
	wg.Wait()
	wall := time.Since(start)
	bar.end()
	r.finish(cnt, k.elapsed(wall, true), mergeSets(append(producerSets, consumerSets...)))
	if missing := r.Sent - k.fresh.Load(); missing > 0 && perr == nil && k.fatalErr == nil && ctx.Err() == nil {
		r.Undelivered = missing
	}
	if perr == nil {
		perr = k.fatalErr
	}
	return append(out, r), perr
}

// skipBacklog moves the group to the end of the topic, so the run
// measures its own messages and not what earlier runs left (best effort:
// it needs an admin account; without one the consumers count older
// messages as stale and leave them out of the latency).
func skipBacklog(ctx context.Context, c *client, cfg Config) {
	g := "/v1/groups/" + url.PathEscape(cfg.Group)
	err := c.do(ctx, http.MethodGet, g, nil, nil)
	var se *StatusError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		err = c.do(ctx, http.MethodPut, g, []byte(`{}`), nil)
	}
	if err != nil {
		return
	}
	b, _ := json.Marshal(map[string]string{"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "topic": cfg.Topic})
	_ = c.do(ctx, http.MethodPost, g+"/reset-offset", b, nil)
}
