package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/broker"
)

// fuzzErrors are the answers the fuzzed broker picks from (nil = success).
var fuzzErrors = []error{
	nil, nil, nil, nil,
	broker.ErrInvalidName, broker.ErrTopicNotFound, broker.ErrGroupNotFound, broker.ErrTooLarge,
	broker.ErrShuttingDown, broker.ErrFlushTimeout, broker.ErrDiskFull, broker.ErrIdempotencyKeyReused,
	broker.ErrTransactionNotFound, &broker.TransactionFinishedError{Transaction: broker.Transaction{ID: "x", State: broker.TxnCommitted}},
}

// FuzzRouter drives the whole /v1 router (paths are prefixed with /v1/) with arbitrary method, path,
// query, header, content type and body against a fake broker. It holds
// that no request panics or yields a 500, that every 4xx/5xx is
// application/problem+json whose status equals the HTTP status, and that
// every 2xx JSON body is valid JSON.
func FuzzRouter(f *testing.F) {
	f.Add("POST", "topics/orders/messages", "", "X-Mqgate-Tag", "t", "application/json", []byte(`{"body":"hi"}`), uint8(0))
	f.Add("POST", "topics/orders/messages", "", "Idempotency-Key", "k", "application/json", []byte(`{"messages":[{"body":"YQ==","bodyEncoding":"base64"}]}`), uint8(1))
	f.Add("POST", "topics/orders/messages", "", "X-Mqgate-Property-A", "b", "application/octet-stream", []byte{0, 1, 2}, uint8(2))
	f.Add("POST", "groups/g/topics/orders/pull", "", "", "", "application/json", []byte(`{"maxMessages":3,"waitMs":0}`), uint8(3))
	f.Add("POST", "groups/g/ack", "", "", "", "application/json", []byte(`{"receipts":["r"]}`), uint8(4))
	f.Add("POST", "groups/g/nack", "", "", "", "application/json", []byte(`{"items":[{"receipt":"r","delayLevel":-1}]}`), uint8(5))
	f.Add("POST", "groups/g/leases", "", "", "", "application/json", []byte(`{"items":[{"receipt":"r","invisibleMs":10}]}`), uint8(6))
	f.Add("PUT", "topics/orders", "", "", "", "application/json", []byte(`{"queues":2}`), uint8(7))
	f.Add("PUT", "groups/g", "", "", "", "application/json", []byte(`{"subscriptions":[{"topic":"orders"}]}`), uint8(8))
	f.Add("PUT", "groups/g/offsets", "", "", "", "application/json", []byte(`{"offsets":[{"topic":"o","queueId":0,"offset":1}]}`), uint8(9))
	f.Add("POST", "groups/g/reset-offset", "", "", "", "application/json", []byte(`{"timestamp":"2026-01-01T00:00:00Z"}`), uint8(10))
	f.Add("GET", "topics/orders/queues/0/messages", "offset=1&max=2", "", "", "", []byte(nil), uint8(11))
	f.Add("GET", "messages", "topic=orders&key=k", "", "", "", []byte(nil), uint8(12))
	f.Add("GET", "messages/7F00000100001F9000000000000004D2", "", "", "", "", []byte(nil), uint8(13))
	f.Add("DELETE", "topics/%25DLQ%25g", "", "", "", "", []byte(nil), uint8(14))
	f.Add("GET", "broker/status", "", "", "", "", []byte(nil), uint8(15))
	f.Add("GET", "groups/g/progress", "", "", "", "", []byte(nil), uint8(16))
	f.Add("PUT", "groups/g", "", "", "", "application/json", []byte(`{"consumeFrom":"last","retryPolicy":{"backoff":"exponential","initialMs":200,"maxMs":9223372036854775807,"jitter":0.5}}`), uint8(17))
	f.Add("POST", "groups/g/nack", "", "", "", "application/json", []byte(`{"items":[{"receipt":"r","delayMs":9223372036854775807}]}`), uint8(18))
	f.Add("PATCH", "groups/g", "", "", "", "application/merge-patch+json", []byte(`{"retryPolicy":{"jitter":1e308},"consumeFrom":null}`), uint8(19))
	f.Add("POST", "topics/orders/messages", "", "", "", "application/json", []byte(`{"body":"h","transactional":true,"producerGroup":"pg","checkAfterMs":1000}`), uint8(17))
	f.Add("POST", "topics/orders/messages", "", "X-Mqgate-Transactional", "true", "text/plain", []byte("raw"), uint8(18))
	f.Add("POST", "topics/orders/messages", "", "X-Mqgate-Check-After-Ms", "1x", "text/plain", []byte("raw"), uint8(19))
	f.Add("POST", "transactions/7F00000100001F9000000000000004D2/commit", "", "", "", "", []byte(nil), uint8(20))
	f.Add("POST", "transactions/7F00000100001F9000000000000004D2/rollback", "", "", "", "", []byte(nil), uint8(21))
	f.Add("GET", "transactions/7F00000100001F9000000000000004D2", "", "", "", "", []byte(nil), uint8(22))
	f.Add("POST", "producer-groups/pg/transactions/pull", "", "", "", "application/json", []byte(`{"maxMessages":2,"waitMs":0}`), uint8(23))

	f.Fuzz(func(t *testing.T, method, path, query, headerName, headerValue, contentType string, body []byte, mode uint8) {
		target := "/v1/" + strings.TrimPrefix(path, "/")
		if query != "" {
			target += "?" + query
		}
		req, err := http.NewRequest(method, target, bytes.NewReader(body))
		if err != nil {
			return // net/http refuses such a request line before any handler runs
		}
		if !validHeader(headerName, headerValue) || !validHeader("Content-Type", contentType) {
			return // net/http refuses such a header block
		}
		if headerName != "" {
			req.Header.Set(headerName, headerValue)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if mode&0x80 != 0 {
			req.ContentLength = -1 // as a chunked body
		}

		b := setup(t, func(d *api.Deps) { d.MaxWaiters = 4 })
		b.broker.err = fuzzErrors[int(mode)%len(fuzzErrors)]
		rec := httptest.NewRecorder()
		b.handler.ServeHTTP(rec, req)

		if rec.Code == http.StatusInternalServerError {
			t.Fatalf("%s %s: 500: %s", method, target, rec.Body.String())
		}
		if rec.Code >= 400 {
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%s %s: status %d with Content-Type %q", method, target, rec.Code, ct)
			}
			var p api.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("%s %s: problem body: %v", method, target, err)
			}
			if p.Status != rec.Code || p.Code == "" {
				t.Fatalf("%s %s: problem %+v for HTTP %d", method, target, p, rec.Code)
			}
			return
		}
		if rec.Header().Get("Content-Type") == "application/json" && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s: invalid JSON body %q", method, target, rec.Body.String())
		}
	})
}

// validHeader reports whether net/http would accept the header field.
func validHeader(name, value string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c == '\r' || c == '\n' || c == 0 || c == 0x7f || (c < ' ' && c != '\t') {
			return false
		}
	}
	return true
}

// FuzzValidTraceparent: the traceparent check never panics, and what it
// accepts has the W3C shape and is propagated unchanged.
func FuzzValidTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !api.ValidTraceparent(v) {
			return
		}
		if len(v) < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' || v[:2] == "ff" {
			t.Fatalf("accepted %q", v)
		}
		tp, _ := api.TraceContextHeaders(map[string]string{"traceparent": v})
		if tp != v {
			t.Fatalf("propagated %q as %q", v, tp)
		}
	})
}
