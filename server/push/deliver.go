package push

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

// Results of one delivery: the result label of
// mqgate_push_deliveries_total and Delivery.Result.
const (
	// ResultOK: the endpoint answered 2xx; the message was acked.
	ResultOK = "ok"
	// Result3xx, Result4xx, Result5xx: any other status (redirects are not
	// followed); the message was nacked.
	Result3xx = "3xx"
	Result4xx = "4xx"
	Result5xx = "5xx"
	// ResultGone: 410 Gone; the endpoint was disabled and the message nacked.
	ResultGone = "gone"
	// ResultTimeout: no answer within the endpoint's timeout; nacked.
	ResultTimeout = "timeout"
	// ResultNetwork: the connection failed (refused, DNS, TLS…); nacked.
	ResultNetwork = "network"
	// ResultForbidden: the SSRF guard refused the endpoint's address;
	// nothing was sent and the message was nacked.
	ResultForbidden = "forbidden"
	// ResultReleased: the endpoint was disabled before the request went
	// out; the lease was given back without counting an attempt.
	ResultReleased = "released"
	// ResultAbandoned: the dispatcher stopped during the request; the lease
	// was given back without counting an attempt.
	ResultAbandoned = "abandoned"
)

// userAgent identifies push requests.
const userAgent = "mqgate-push/1"

// maxSnippet bounds how much of an error answer's body goes into the nack
// reason (which the DLQ shows).
const maxSnippet = 200

// Delivery reports one finished delivery (logs and TestSignals.Delivered).
type Delivery struct {
	Group          string
	Topic          string
	MessageID      string
	WebhookID      string
	ReconsumeTimes int32
	// Result is one of the Result* constants.
	Result string
	// Status is the endpoint's HTTP status (0 without an answer).
	Status int
	// DelayLevel is the nack's delay level: -1 dead-letter now, 0 the
	// broker's ladder (3 + reconsumeTimes), n that level.
	DelayLevel int
	// Reason is the nack's reason (kept in the attempt history and DLQ).
	Reason string
	// Settled is the broker's answer to the ack, nack or release.
	Settled broker.ReceiptStatus
	// Took is how long the request took.
	Took time.Duration
}

// attempt is what one request to the endpoint produced.
type attempt struct {
	result string
	status int
	level  int
	reason string
	sent   bool // a request was attempted (for the latency histogram)
}

// request POSTs m to g's endpoint once and classifies the outcome. ctx is
// the dispatcher's: when it ends during the request, the result is
// ResultAbandoned.
func (d *Dispatcher) request(ctx context.Context, g broker.GroupConfig, m broker.ReceivedMessage) attempt {
	p := g.Push
	signer, err := NewSigner(p.Secret)
	if err != nil {
		return attempt{result: ResultReleased, reason: "push: " + err.Error()}
	}
	header := make(http.Header)
	var body []byte
	if p.Mode == ModeBinary {
		body = m.Body
		setBinaryHeaders(header, m)
	} else {
		if body, err = encodeJSON(m); err != nil {
			return attempt{result: ResultReleased, reason: "push: encode message: " + err.Error()}
		}
		header.Set("Content-Type", "application/json")
	}
	id, ts := webhookID(m), time.Now().Unix()
	header.Set(HeaderID, id)
	header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	header.Set(HeaderSignature, signer.Sign(id, ts, body))
	header.Set(HeaderGroup, g.Name)
	header.Set(HeaderPushHop, "1")
	header.Set("User-Agent", userAgent)
	// The producer's W3C trace context (stored with the message by the
	// send), so the receiver's span joins the producer's trace.
	if tp, ts := api.TraceContextHeaders(m.Properties); tp != "" {
		header.Set("Traceparent", tp)
		if ts != "" {
			header.Set("Tracestate", ts)
		}
	}

	timeout := p.Timeout
	if timeout <= 0 {
		timeout = broker.DefaultPushTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, p.URL, bytes.NewReader(body))
	if err != nil {
		return attempt{result: ResultNetwork, reason: "push: " + err.Error()}
	}
	req.Header = header
	resp, err := d.client.Do(req)
	if err != nil {
		return classifyError(ctx, err, timeout)
	}
	defer resp.Body.Close()
	// Read (a bounded part of) the answer so the connection can be reused
	// and an error answer can be quoted in the reason.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))

	a := attempt{status: resp.StatusCode, sent: true}
	status := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		a.result = ResultOK
		return a
	case resp.StatusCode == http.StatusGone:
		a.result = ResultGone
		a.reason = "push: " + status + ": endpoint disabled"
		return a
	case resp.StatusCode < 400:
		a.result = Result3xx
		status += " (redirects are not followed)"
	case resp.StatusCode < 500:
		a.result = Result4xx
	default:
		a.result = Result5xx
	}
	var why string
	a.level, why = d.delayLevel(resp.Header, time.Now())
	a.reason = "push: " + status + why + quote(answer)
	return a
}

// classifyError turns a failed request into an attempt.
func classifyError(ctx context.Context, err error, timeout time.Duration) attempt {
	var netErr net.Error
	var refused *forbiddenError
	switch {
	case errors.As(err, &refused):
		return attempt{result: ResultForbidden, reason: "push: refused: " + refused.detail()}
	case errors.Is(err, ErrForbiddenAddress):
		return attempt{result: ResultForbidden, reason: "push: refused: " + cause(err)}
	case ctx.Err() != nil:
		return attempt{result: ResultAbandoned, reason: "push: the dispatcher stopped", sent: true}
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return attempt{result: ResultTimeout, reason: fmt.Sprintf("push: timeout: no answer within %v", timeout), sent: true}
	}
	return attempt{result: ResultNetwork, reason: "push: " + cause(err), sent: true}
}

// cause is err without net/http's "Post \"<url>\": " prefix (the URL may
// carry tokens the DLQ should not show).
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// quote renders the start of an error answer's body for the reason.
func quote(body []byte) string {
	s := strings.TrimSpace(string(body))
	if s == "" {
		return ""
	}
	if len(s) > maxSnippet {
		s = s[:maxSnippet] + "…"
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return ' '
		}
		return r
	}, s)
	return ": " + s
}

// delayLevel picks the nack's delay level from an error answer's headers:
// X-Mqgate-Delay-Level (-1, 0 or a level; larger levels mean the top
// one) wins over Retry-After (seconds or an HTTP date), which maps to the
// smallest level at least that long (the top level when none is). Without
// either the broker's ladder decides (0).
func (d *Dispatcher) delayLevel(h http.Header, now time.Time) (int, string) {
	top := len(d.cfg.DelayLevels)
	if v := strings.TrimSpace(h.Get(HeaderDelayLevel)); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= -1 {
			n = min(n, top)
			return n, fmt.Sprintf(" (%s %s)", HeaderDelayLevel, v)
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if wait, ok := parseRetryAfter(v, now); ok {
			level := levelAtLeast(d.cfg.DelayLevels, wait)
			return level, fmt.Sprintf(" (Retry-After %s: delay level %d, %v)", v, level, d.cfg.DelayLevels[level-1])
		}
	}
	return 0, ""
}

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): delay
// seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		return time.Duration(min(n, int64(365*24*3600))) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// levelAtLeast returns the level (1-based) with the shortest delay that
// is at least wait, or the level with the longest delay when none is.
func levelAtLeast(levels []time.Duration, wait time.Duration) int {
	best, longest := 0, 0
	for i, d := range levels {
		if d >= wait && (best == 0 || d < levels[best-1]) {
			best = i + 1
		}
		if longest == 0 || d > levels[longest-1] {
			longest = i + 1
		}
	}
	if best == 0 {
		return longest
	}
	return best
}
