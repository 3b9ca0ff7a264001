package server_test

// OpenTelemetry export (--otlp-endpoint) against a real OTLP/HTTP
// receiver: an httptest server that decodes the SDK's protobuf export
// requests as a collector does. Each HTTP request becomes a server span
// named by its route, a child of the request's traceparent, and a send's
// messages carry mqgate's span as their traceparent.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes every export
// request and keeps its spans with their resource's service.name.
type otlpReceiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
	requests int
	bad      []string
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		rc.bad = append(rc.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		rc.bad = append(rc.bad, "undecodable: "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				rc.spans = append(rc.spans, sp)
				rc.services = append(rc.services, service)
			}
		}
	}
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// span returns the first span named name.
func (rc *otlpReceiver) span(t *testing.T, name string) (*tracepb.Span, string) {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var names []string
	for i, sp := range rc.spans {
		if sp.Name == name {
			return sp, rc.services[i]
		}
		names = append(names, sp.Name)
	}
	t.Fatalf("no span %q among %q", name, names)
	return nil, ""
}

// attrs are a span's attributes as strings.
func attrs(sp *tracepb.Span) map[string]string {
	out := map[string]string{}
	for _, a := range sp.Attributes {
		v := a.GetValue()
		switch {
		case v.GetStringValue() != "":
			out[a.Key] = v.GetStringValue()
		default:
			out[a.Key] = strings.TrimSpace(strings.TrimPrefix(v.String(), "int_value:"))
		}
	}
	return out
}

func TestE2EOTLPExport(t *testing.T) {
	t.Parallel()
	receiver := &otlpReceiver{}
	collector := httptest.NewServer(receiver)
	defer collector.Close()
	e := startE2E(t, func(c *server.Config) {
		c.OTLPEndpoint = collector.URL
		c.OTelServiceName = "mqgate-test"
	})
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/otel", api.TopicRequest{Queues: 1}), http.StatusCreated, nil)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/groups/og", api.GroupRequest{Subscriptions: []api.Subscription{{Topic: "otel"}}}), http.StatusCreated, nil)

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	b := []byte(`{"body":"traced"}`)
	sent := e.Do(t, http.MethodPost, "/v1/topics/otel/messages", "application/json", b,
		http.Header{"Traceparent": {"00-" + traceID + "-" + parentID + "-01"}, "X-Request-Id": {"otel-send-1"}})
	require.Equal(t, http.StatusOK, sent.Status, "%s", sent)
	got := e.PullN(t, "og", "otel", 1, 30_000, 10*time.Second)
	stored := got[0].Properties["traceparent"]
	require.True(t, strings.HasPrefix(stored, "00-"+traceID+"-"), "the trace goes on: %s", stored)
	require.NotContains(t, stored, parentID, "the consumer's parent is mqgate's span, not the producer's")
	servertest.WantProblem(t, e.Get(t, "/v1/topics/nope"), http.StatusNotFound, "topic-not-found")
	// A malformed traceparent is still ignored: nothing stored.
	bad := e.Do(t, http.MethodPost, "/v1/topics/otel-bad/messages", "application/json", []byte(`{"body":"x"}`),
		http.Header{"Traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}})
	require.Equal(t, http.StatusOK, bad.Status, "%s", bad)
	require.NotContains(t, e.PullN(t, "og", "otel-bad", 1, 30_000, 10*time.Second)[0].Properties, "traceparent")

	// Close flushes the batch.
	require.NoError(t, e.Srv.Close(context.Background()))
	receiver.mu.Lock()
	require.Empty(t, receiver.bad)
	require.Positive(t, receiver.requests)
	receiver.mu.Unlock()

	send, service := receiver.span(t, "POST /v1/topics/{topic}/messages")
	require.Equal(t, "mqgate-test", service)
	require.Equal(t, tracepb.Span_SPAN_KIND_SERVER, send.Kind)
	require.Equal(t, traceID, hex.EncodeToString(send.TraceId), "joined to the incoming trace")
	require.Equal(t, parentID, hex.EncodeToString(send.ParentSpanId), "a child of the producer's span")
	require.Equal(t, "00-"+traceID+"-"+hex.EncodeToString(send.SpanId)+"-01", stored, "the stored traceparent names the send's span")
	a := attrs(send)
	require.Equal(t, "otel", a["messaging.destination.name"])
	require.Equal(t, "200", a["http.response.status_code"])
	require.Equal(t, "/v1/topics/{topic}/messages", a["http.route"])
	require.Equal(t, "POST", a["http.request.method"])
	require.Equal(t, "otel-send-1", a["mqgate.request_id"], "the span names the request id of the log lines")
	require.Positive(t, send.EndTimeUnixNano-send.StartTimeUnixNano)

	pull, _ := receiver.span(t, "POST /v1/groups/{group}/topics/{topic}/pull")
	require.Equal(t, "og", attrs(pull)["messaging.consumer.group.name"])
	require.Empty(t, pull.ParentSpanId, "no traceparent: a root span")
	require.False(t, bytes.Equal(pull.TraceId, send.TraceId), "a trace of its own")
	missing, _ := receiver.span(t, "GET /v1/topics/{topic}")
	require.Equal(t, "404", attrs(missing)["http.response.status_code"])
	require.Equal(t, tracepb.Status_STATUS_CODE_UNSET, missing.GetStatus().GetCode(), "a 4xx is the client's error, not the span's")
}

// TestE2EOTLPUnreachable: a collector that is down costs dropped spans,
// never a failed request or a failed shutdown.
func TestE2EOTLPUnreachable(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	e := startE2E(t, func(c *server.Config) { c.OTLPEndpoint = url })
	for range 20 {
		e.Send(t, "dropped", api.SendMessage{Body: "x"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_ = e.Srv.Close(ctx) // the flush fails; the broker still closed
	require.Less(t, time.Since(start), 25*time.Second)
}
