package clustercheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// maxAnswer bounds the bytes of an answer the client reads.
const maxAnswer = 16 << 20

// errStatus is an answer other than 2xx; the problem's text is in the
// wrapping error.
var errStatus = errors.New("clustercheck: unexpected status")

// newHTTPClient is the workload's default client: short dials, so a dead
// node is noticed at once; per-request deadlines come from the contexts.
func newHTTPClient(conns int) *http.Client {
	dialer := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}
	return &http.Client{Transport: &http.Transport{
		DialContext:         dialer.DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
}

// post sends in as JSON with the headers and decodes a 2xx answer into out
// (nil: discard). It returns the status (0 when none came).
func post(ctx context.Context, c *http.Client, method, url string, header map[string]string, in, out any) (int, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return 0, fmt.Errorf("encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(b))
	if err != nil {
		return 0, fmt.Errorf("new request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		// The status came but not the whole answer: for a 200 the
		// operation took effect yet the client cannot tell what it got.
		return 0, fmt.Errorf("read answer (status %d): %w", resp.StatusCode, err)
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%w %d: %s", errStatus, resp.StatusCode, bytes.TrimSpace(answer))
	}
	if out != nil {
		if err := json.Unmarshal(answer, out); err != nil {
			return 0, fmt.Errorf("decode answer: %w", err)
		}
	}
	return resp.StatusCode, nil
}

// classify maps a request's outcome to an event type (doc.go, "The
// history"): a 2xx is ok; the 4xx statuses that say the request was not
// carried out are fail; everything else (no answer, 409 in flight, 5xx)
// is info.
func classify(status int, err error) Type {
	switch {
	case err == nil && status/100 == 2:
		return OK
	case status == http.StatusBadRequest, status == http.StatusUnauthorized, status == http.StatusForbidden,
		status == http.StatusNotFound, status == http.StatusRequestEntityTooLarge,
		status == http.StatusUnsupportedMediaType, status == http.StatusUnprocessableEntity,
		status == http.StatusTooManyRequests:
		return Fail
	default:
		return Info
	}
}

// Wire shapes of the gateway's JSON (docs/openapi.json).
type (
	wireSend struct {
		Body        string      `json:"body,omitempty"`
		ShardingKey string      `json:"shardingKey,omitempty"`
		Messages    *[]wireBody `json:"messages,omitempty"`
	}
	wireBody struct {
		Body        string `json:"body"`
		ShardingKey string `json:"shardingKey,omitempty"`
	}
	wireSendResponse struct {
		Results []struct {
			MessageID   string `json:"messageId"`
			QueueID     int32  `json:"queueId"`
			QueueOffset int64  `json:"queueOffset"`
		} `json:"results"`
	}
	wirePull struct {
		MaxMessages int   `json:"maxMessages"`
		WaitMs      int64 `json:"waitMs"`
		InvisibleMs int64 `json:"invisibleMs"`
	}
	wirePullResponse struct {
		Messages []struct {
			MessageID       string    `json:"messageId"`
			Receipt         string    `json:"receipt"`
			LeaseUntil      time.Time `json:"leaseUntil"`
			Topic           string    `json:"topic"`
			QueueID         int32     `json:"queueId"`
			QueueOffset     int64     `json:"queueOffset"`
			ReconsumeTimes  int32     `json:"reconsumeTimes"`
			OriginMessageID string    `json:"originMessageId"`
			Body            string    `json:"body"`
		} `json:"messages"`
	}
	wireAck struct {
		Receipts []string `json:"receipts"`
	}
	wireNack struct {
		Items []wireNackItem `json:"items"`
	}
	wireNackItem struct {
		Receipt string `json:"receipt"`
		DelayMs int64  `json:"delayMs,omitempty"`
		Reason  string `json:"reason,omitempty"`
	}
	wireReceiptResponse struct {
		Results []struct {
			Status string `json:"status"`
		} `json:"results"`
	}
	wireTopic struct {
		Queues int `json:"queues"`
	}
	wireGroup struct {
		Subscriptions []wireSubscription `json:"subscriptions"`
		RetryMaxTimes int                `json:"retryMaxTimes"`
		RetryPolicy   wireRetryPolicy    `json:"retryPolicy"`
	}
	wireSubscription struct {
		Topic string `json:"topic"`
	}
	wireRetryPolicy struct {
		Backoff   string `json:"backoff"`
		InitialMs int64  `json:"initialMs"`
	}
)
