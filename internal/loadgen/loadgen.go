// Package loadgen is mqgate's own load generator (`mqgate bench`): HTTP
// producers and consumers against a running gateway, for sizing a
// deployment the way RocketMQ's benchmark producer and consumer or
// `nats bench` do.
//
//   - Produce sends single messages or batches from Concurrency clients,
//     either closed loop (each client sends its next request when the last
//     one answered) or open loop at a fixed Rate (requests are scheduled on
//     a timer and latency counts from the scheduled time, so a slow server
//     cannot hide its latency by slowing the senders down: no coordinated
//     omission).
//   - Consume pulls (long poll) and acks from Consumers clients.
//   - E2E does both at once and measures each message from its born time,
//     stamped by the producer into the first 19 bytes of the body (Unix
//     nanoseconds; the scheduled send time in rate mode), to its delivery.
//
// Latencies go into HDR histograms (p50, p90, p99, p99.9, max). With
// Baseline set, a bare net/http handler on loopback is measured first with
// the same requests, so the gateway's numbers come with the machine's HTTP
// ceiling beside them.
package loadgen

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// Config configures a run. Zero values take the defaults in withDefaults.
type Config struct {
	URL         string        // gateway base URL (default http://127.0.0.1:8080)
	Topic       string        // default "bench"
	Queues      int           // queues of the topic when the run creates it (default 8; below 0: never create, the first send may auto-create it)
	Group       string        // consumer group (default "bench")
	BodySize    int           // bytes per message body (default 1024)
	Batch       int           // messages per send request (default 1, at most 256)
	Binary      bool          // send application/vnd.mqgate.batch bodies instead of JSON
	BinaryPull  bool          // pull with Accept: application/vnd.mqgate.batch instead of JSON
	Concurrency int           // producer clients (default 32)
	Consumers   int           // consumer clients (default 16)
	PullBatch   int           // maxMessages per pull (default 32)
	Invisible   time.Duration // lease per pulled message (default 30 s)
	Wait        time.Duration // long-poll wait per pull (default 1 s)
	Duration    time.Duration // length of the run; 0 with Count 0 means 10 s
	Count       int64         // messages to send (produce) or ack (consume); 0 = until Duration
	Rate        float64       // open model: messages per second on a timer; 0 = closed loop
	Idle        time.Duration // consume: stop once no message arrived for this long (0 = never)
	Drain       time.Duration // e2e: how long consumers may take after the producers stop (default 30 s)
	Baseline    bool          // measure a bare net/http handler first

	User, Password string // HTTP Basic (accessKey, secretKey)
	Token          string // Bearer token (JWT)
	CAFile         string // PEM CA bundle for https
	Insecure       bool   // skip TLS verification

	// Progress, when set, gets a live progress line (msgs/s, MB/s, errors).
	Progress io.Writer
	// Client, when set, replaces the client built from the TLS options.
	Client *http.Client
}

// MaxBatch is the most messages one send request may carry.
const MaxBatch = 256

func (c Config) withDefaults() Config {
	if c.URL == "" {
		c.URL = "http://127.0.0.1:8080"
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if c.Topic == "" {
		c.Topic = "bench"
	}
	if c.Group == "" {
		c.Group = "bench"
	}
	if c.Queues == 0 {
		c.Queues = 8
	}
	if c.BodySize == 0 {
		c.BodySize = 1024
	}
	if c.Batch == 0 {
		c.Batch = 1
	}
	if c.Concurrency == 0 {
		c.Concurrency = 32
	}
	if c.Consumers == 0 {
		c.Consumers = 16
	}
	if c.PullBatch == 0 {
		c.PullBatch = 32
	}
	if c.Invisible == 0 {
		c.Invisible = 30 * time.Second
	}
	if c.Wait == 0 {
		c.Wait = time.Second
	}
	if c.Duration == 0 && c.Count == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Drain == 0 {
		c.Drain = 30 * time.Second
	}
	return c
}

// Validate reports a configuration no run can use.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.BodySize < 1:
		return errors.New("body size must be at least 1 byte")
	case c.Batch < 1 || c.Batch > MaxBatch:
		return fmt.Errorf("batch must be 1-%d messages", MaxBatch)
	case c.Concurrency < 1 || c.Consumers < 1:
		return errors.New("concurrency and consumers must be at least 1")
	case c.PullBatch < 1 || c.PullBatch > 32:
		return errors.New("pull batch must be 1-32 (the server's maxMessages)")
	case c.Wait < 0 || c.Wait > 30*time.Second:
		return errors.New("wait must be 0-30s")
	case c.Invisible < time.Millisecond || c.Invisible > 12*time.Hour:
		return errors.New("invisible time must be 1ms-12h")
	case c.Rate < 0 || c.Count < 0 || c.Duration < 0:
		return errors.New("rate, count and duration must not be negative")
	case c.User != "" && c.Token != "":
		return errors.New("give --user/--password or --token, not both")
	}
	if _, err := url.Parse(c.URL); err != nil {
		return fmt.Errorf("url: %w", err)
	}
	return nil
}

// newClient builds the HTTP client: keep-alive connections for every
// worker, the TLS options.
func (c Config) newClient(conns int) (*http.Client, error) {
	if c.Client != nil {
		return c.Client, nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conns * 2
	t.MaxIdleConnsPerHost = conns * 2
	t.MaxConnsPerHost = 0
	if c.CAFile != "" || c.Insecure {
		cfg := &tls.Config{InsecureSkipVerify: c.Insecure} //nolint:gosec // the user asked for it
		if c.CAFile != "" {
			pem, err := os.ReadFile(c.CAFile)
			if err != nil {
				return nil, fmt.Errorf("ca file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("ca file %s: no PEM certificates", c.CAFile)
			}
			cfg.RootCAs = pool
		}
		t.TLSClientConfig = cfg
	}
	return &http.Client{Transport: t}, nil
}

// authorization is the Authorization header value, or "".
func (c Config) authorization() string {
	switch {
	case c.Token != "":
		return "Bearer " + c.Token
	case c.User != "" || c.Password != "":
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(c.User+":"+c.Password))
	}
	return ""
}

// StatusError is an answer other than 2xx, with the problem's code and
// detail when the body is application/problem+json.
type StatusError struct {
	Method, Path string
	Status       int
	Code         string
	Detail       string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// fatal reports whether err ends the run at once: wrong credentials, a
// missing permission or a topic that is not there will not get better by
// retrying.
func fatal(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true // nothing listens (any more)
	}
	var se *StatusError
	if errors.As(err, &se) {
		switch se.Status {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMisdirectedRequest:
			return true
		}
	}
	return false
}

// client is one configured HTTP client of the gateway.
type client struct {
	http *http.Client
	base string
	auth string
}

// do sends body (JSON) and decodes a 2xx answer into out when out is not
// nil; anything else is a *StatusError.
func (c *client) do(ctx context.Context, method, path string, body []byte, out any) error {
	return c.doURL(ctx, method, c.base+path, path, body, out)
}

func (c *client) doURL(ctx context.Context, method, u, path string, body []byte, out any) error {
	return c.doType(ctx, method, u, path, "application/json", body, out)
}

// rawBody receives a 2xx answer's bytes as they are (see doType).
type rawBody []byte

// doAccept is doURL asking for the answer in accept.
func (c *client) doAccept(ctx context.Context, method, u, path string, body []byte, accept string, out any) error {
	return c.send(ctx, method, u, path, "application/json", accept, body, out)
}

// doType sends body with the given Content-Type.
func (c *client) doType(ctx context.Context, method, u, path, ctype string, body []byte, out any) error {
	return c.send(ctx, method, u, path, ctype, "", body, out)
}

// send performs one request; a 2xx answer is decoded into out as JSON,
// or copied into it when out is a *rawBody.
func (c *client) send(ctx context.Context, method, u, path, ctype, accept string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		se := &StatusError{Method: method, Path: path, Status: resp.StatusCode}
		var p struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		}
		if b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)); json.Unmarshal(b, &p) == nil {
			se.Code, se.Detail = p.Code, p.Detail
		}
		return se
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if raw, ok := out.(*rawBody); ok {
		*raw, err = io.ReadAll(resp.Body)
		return err
	}
	// jsonv2: a 32 × 1 KiB pull answer decodes in a third of encoding/json's
	// time, and the consumers' decoding is most of the load tool's CPU.
	return jsonv2.UnmarshalRead(resp.Body, out)
}

// ensureTopic probes the gateway (reachable, credentials accepted) and
// creates the topic with cfg.Queues queues when it is missing and Queues
// is above 0. A 403 (an account without admin rights) is not an error:
// the topic may exist already, or the first send auto-creates it.
func ensureTopic(ctx context.Context, c *client, cfg Config) error {
	var t struct {
		Queues int `json:"queues"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/topics/"+url.PathEscape(cfg.Topic), nil, &t)
	var se *StatusError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se.Status == http.StatusForbidden:
		return nil
	case errors.As(err, &se) && se.Status == http.StatusNotFound:
		if cfg.Queues <= 0 {
			return nil
		}
	default:
		return err
	}
	b, _ := json.Marshal(map[string]int{"queues": cfg.Queues})
	err = c.do(ctx, http.MethodPut, "/v1/topics/"+url.PathEscape(cfg.Topic), b, nil)
	if errors.As(err, &se) && se.Status == http.StatusForbidden {
		return nil
	}
	return err
}

// retryPause is how long a worker waits after an error that may pass
// (429, 5xx, a dropped connection) before it tries again.
const retryPause = 20 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
