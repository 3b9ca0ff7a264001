package api

import (
	"bufio"
	"net/http"
	"net/textproto"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/server/broker"
)

// TestHeaderConstantsAreCanonical: header() indexes a request's header
// map directly, which finds a header only when its key is in the
// canonical form net/http stores incoming names in.
func TestHeaderConstantsAreCanonical(t *testing.T) {
	for _, k := range []string{headerContentType, headerIdempotencyKey, headerTag, headerKeys, headerShardingKey,
		headerDelayLevel, headerDelayMs, headerDeliverAt, headerTransactional, headerProducerGroup, headerCheckAfterMs,
		ClientIDHeader, HeaderPushHop} {
		if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
		if !strings.HasPrefix(k, headerMqgatePrefix) && strings.HasPrefix(strings.ToLower(k), "x-mqgate") {
			t.Errorf("%q does not start with %q", k, headerMqgatePrefix)
		}
	}
}

// readRequest parses raw HTTP/1.1 request text as net/http's server does.
func readRequest(t *testing.T, raw string) *http.Request {
	t.Helper()
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(strings.ReplaceAll(raw, "\n", "\r\n"))))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestHeaderAttributesAsWritten: attributes are read whatever the case a
// client writes the names in, and a send with no X-Mqgate-* header has
// none (the short cut that skips the lookups).
func TestHeaderAttributesAsWritten(t *testing.T) {
	r := readRequest(t, `POST /v1/topics/t/messages HTTP/1.1
Host: x
content-type: text/plain
x-mqgate-tag: created
X-MQGATE-KEYS: a, b
X-Mqgate-Keys: c
x-mqgate-property-Region: eu
x-mqgate-sharding-key: k1
x-mqgate-delay-ms: 1500
x-mqgate-deliver-at: 2030-01-02T03:04:05Z
x-mqgate-producer-group: pg

`)
	got, err := headerAttributes(r)
	if err != nil {
		t.Fatal(err)
	}
	want := broker.SendMessage{Tag: "created", Keys: []string{"a", "b", "c"}, Properties: map[string]string{"region": "eu"},
		ShardingKey: "k1", DelayMs: 1500, DeliverAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), ProducerGroup: "pg"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if header(r.Header, headerContentType) != "text/plain" {
		t.Fatalf("Content-Type: %q", header(r.Header, headerContentType))
	}

	plain := readRequest(t, "POST /v1/topics/t/messages HTTP/1.1\nHost: x\nContent-Type: text/plain\nX-Other: 1\nX-Mqgate: 2\n\n")
	if got, err := headerAttributes(plain); err != nil || !reflect.DeepEqual(got, broker.SendMessage{}) {
		t.Fatalf("no attributes: got %+v, %v", got, err)
	}
	bad := readRequest(t, "POST /v1/topics/t/messages HTTP/1.1\nHost: x\nx-mqgate-delay-level: soon\n\n")
	if _, err := headerAttributes(bad); err == nil || !strings.Contains(err.Error(), "X-Mqgate-Delay-Level") {
		t.Fatalf("a bad delay level: %v", err)
	}
}
