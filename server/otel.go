package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// OpenTelemetry export of server spans (--otlp-endpoint, off by default):
// one span of kind server per HTTP request, named by its method and chi
// route pattern ("POST /v1/topics/{topic}/messages"), a child of the
// request's W3C traceparent when it carries one, exported in batches over
// OTLP/HTTP (protobuf) by the official Go SDK. When a request carries a
// traceparent and its span is sampled, the request goes on with the
// span's own traceparent, so what a send stores with its messages (and
// hands to consumers) names mqgate's span: producer → mqgate → consumer.
// Without --otlp-endpoint nothing of this runs and the traceparent passes
// through unchanged.

// tracing is the tracer provider and the middleware of the root router;
// the zero value (no endpoint) does nothing.
type tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
}

// tracerName names the instrumentation scope of mqgate's spans.
const tracerName = "github.com/mqgate/mqgate/server"

// newTracing starts the exporter of cfg's --otlp-endpoint (nil without
// one). The exporter connects lazily: an unreachable collector costs
// dropped spans, never a failed start or request.
func newTracing(cfg Config) (*tracing, error) {
	if cfg.OTLPEndpoint == "" {
		return nil, nil
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.OTLPEndpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		attribute.String("service.name", cfg.OTelServiceName),
		attribute.String("service.version", cfg.Version),
	))
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.OTelSampleRatio))),
	)
	return &tracing{provider: provider, tracer: provider.Tracer(tracerName), prop: propagation.TraceContext{}}, nil
}

// shutdown exports the spans still buffered and stops the exporter.
func (t *tracing) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// middleware wraps every request of the root router in a server span.
func (t *tracing) middleware(next http.Handler) http.Handler {
	if t == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		incoming := trace.SpanContextFromContext(ctx).IsValid() // a well-formed traceparent came
		ctx, span := t.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("url.scheme", scheme(r)),
			attribute.String("user_agent.original", r.UserAgent()),
		))
		defer span.End()
		if incoming && span.SpanContext().IsSampled() {
			// What the send stores (and consumers get) names this span.
			r.Header = r.Header.Clone()
			t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
		}
		rec := statusRecorder{ResponseWriter: w}
		next.ServeHTTP(&rec, r.WithContext(ctx))

		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		attrs := []attribute.KeyValue{attribute.Int("http.response.status_code", status)}
		if id := w.Header().Get("X-Request-Id"); id != "" {
			attrs = append(attrs, attribute.String("mqgate.request_id", id))
		}
		if rctx := chi.RouteContext(r.Context()); rctx != nil {
			if route := rctx.RoutePattern(); route != "" {
				span.SetName(r.Method + " " + route)
				attrs = append(attrs, attribute.String("http.route", route))
			}
			// The messaging semantic conventions' names for what the
			// route acts on.
			if topic := rctx.URLParam("topic"); topic != "" {
				attrs = append(attrs, attribute.String("messaging.destination.name", topic))
			}
			if group := rctx.URLParam("group"); group != "" {
				attrs = append(attrs, attribute.String("messaging.consumer.group.name", group))
			}
		}
		span.SetAttributes(attrs...)
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// scheme is the request's URL scheme.
func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}
