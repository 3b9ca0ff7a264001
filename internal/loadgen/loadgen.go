// Package loadgen is mqgate's own load generator (`mqgate bench`): closed
// loop HTTP clients that send (single messages or batches) and optionally
// pull+ack against a running gateway for a fixed time, and report
// throughput and latency percentiles. With Baseline set it first measures
// a bare net/http handler on loopback in the same run, so the gateway's
// numbers come with the machine's HTTP ceiling beside them.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configures a run.
type Options struct {
	URL         string        // gateway base URL, e.g. http://127.0.0.1:8080
	Topic       string        // topic to send to (created with Queues queues)
	Queues      int           // default 8
	Concurrency int           // concurrent clients (default 32)
	Duration    time.Duration // per measurement (default 10 s)
	Batch       int           // messages per request (default 1)
	BodySize    int           // bytes per message body (default 1024)
	Baseline    bool          // also measure a bare net/http handler
}

// Result is one measurement.
type Result struct {
	Name        string
	Requests    int64
	Messages    int64
	Errors      int64
	Elapsed     time.Duration
	ReqPerSec   float64
	MsgPerSec   float64
	MBPerSec    float64
	P50, P99    time.Duration
	P999, Worst time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("%-28s %9.0f req/s %10.0f msg/s %7.1f MB/s  p50 %-9v p99 %-9v p99.9 %-9v errors %d",
		r.Name, r.ReqPerSec, r.MsgPerSec, r.MBPerSec, r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.P999.Round(time.Microsecond), r.Errors)
}

func (o Options) withDefaults() Options {
	if o.Topic == "" {
		o.Topic = "bench"
	}
	if o.Queues == 0 {
		o.Queues = 8
	}
	if o.Concurrency == 0 {
		o.Concurrency = 32
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Batch == 0 {
		o.Batch = 1
	}
	if o.BodySize == 0 {
		o.BodySize = 1024
	}
	return o
}

// Run performs the configured measurements and returns them in order.
func Run(ctx context.Context, o Options) ([]Result, error) {
	o = o.withDefaults()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency * 2, MaxConnsPerHost: o.Concurrency * 2}}
	var out []Result
	if o.Baseline {
		r, err := baseline(ctx, o, client)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	if err := createTopic(ctx, client, o); err != nil {
		return out, err
	}
	body := sendBody(o)
	url := strings.TrimRight(o.URL, "/") + "/v1/topics/" + o.Topic + "/messages"
	name := fmt.Sprintf("mqgate send batch=%d", o.Batch)
	r := measure(ctx, name, o, func(ctx context.Context) (int, int, error) {
		if err := post(ctx, client, url, body); err != nil {
			return 0, 0, err
		}
		return o.Batch, o.Batch * o.BodySize, nil
	})
	return append(out, r), nil
}

// post sends one JSON request and requires a 200.
func post(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func sendBody(o Options) []byte {
	payload := strings.Repeat("x", o.BodySize)
	type msg struct {
		Body string `json:"body"`
	}
	if o.Batch == 1 {
		b, _ := json.Marshal(msg{Body: payload})
		return b
	}
	msgs := make([]msg, o.Batch)
	for i := range msgs {
		msgs[i].Body = payload
	}
	b, _ := json.Marshal(struct {
		Messages []msg `json:"messages"`
	}{msgs})
	return b
}

func createTopic(ctx context.Context, client *http.Client, o Options) error {
	b, _ := json.Marshal(map[string]int{"queues": o.Queues})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimRight(o.URL, "/")+"/v1/topics/"+o.Topic, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("create topic: status %d: %s", resp.StatusCode, msg)
	}
	return nil
}

// baseline measures a bare net/http handler that reads the same request
// body and answers a small JSON document, on loopback.
func baseline(ctx context.Context, o Options, client *http.Client) (Result, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{}, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"results":[{"messageId":"00000000000000000000000000000000","queueId":0,"queueOffset":0}]}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	body := sendBody(o)
	url := "http://" + ln.Addr().String() + "/"
	name := fmt.Sprintf("bare net/http batch=%d", o.Batch)
	return measure(ctx, name, o, func(ctx context.Context) (int, int, error) {
		if err := post(ctx, client, url, body); err != nil {
			return 0, 0, err
		}
		return o.Batch, o.Batch * o.BodySize, nil
	}), nil
}

// measure runs op from Concurrency clients for Duration.
func measure(ctx context.Context, name string, o Options, op func(context.Context) (msgs, bytes int, err error)) Result {
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var requests, messages, bytesSent, errs atomic.Int64
	lat := make([][]time.Duration, o.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < o.Concurrency; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				n, b, err := op(ctx)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				lat[c] = append(lat[c], time.Since(t0))
				requests.Add(1)
				messages.Add(int64(n))
				bytesSent.Add(int64(b))
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	r := Result{Name: name, Requests: requests.Load(), Messages: messages.Load(), Errors: errs.Load(), Elapsed: elapsed}
	secs := elapsed.Seconds()
	r.ReqPerSec = float64(r.Requests) / secs
	r.MsgPerSec = float64(r.Messages) / secs
	r.MBPerSec = float64(bytesSent.Load()) / secs / (1 << 20)
	if n := len(all); n > 0 {
		r.P50, r.P99, r.P999, r.Worst = all[n/2], all[n*99/100], all[n*999/1000], all[n-1]
	}
	return r
}
