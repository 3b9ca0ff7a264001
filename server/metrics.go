package server

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// httpMetrics are the RED metrics of the HTTP server, labelled by chi
// route pattern (never the raw path) to keep cardinality bounded.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge

	mu    sync.RWMutex
	cache map[seriesKey]series
}

// newRegistry returns a registry with the Go runtime, process and build
// info collectors; the broker and other components register into it.
func newRegistry(version, revision string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "mqgate_build_info",
			Help:        "Always 1; labels carry the build's version, the git commit it was built from (revision) and the Go version.",
			ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
		}, func() float64 { return 1 }),
	)
	return reg
}

// newHTTPMetrics creates and registers the HTTP metrics.
func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		cache: make(map[seriesKey]series),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mqgate_http_requests_total",
			Help: "HTTP requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mqgate_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and method (long polls included).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 31},
		}, []string{"route", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mqgate_http_requests_in_flight",
			Help: "HTTP requests being served, long polls included.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.inFlight)
	return m
}

// middleware records every request once it has been routed and served.
// The series of a (route, method, code) are looked up once and kept: a
// request then costs two map reads, not a label hash and a join of its
// route's patterns.
func (m *httpMetrics) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		defer m.inFlight.Dec()
		rec := statusRecorder{ResponseWriter: w}
		next.ServeHTTP(&rec, r)

		key := seriesKey{method: metricMethod(r.Method), code: rec.status}
		if key.code == 0 {
			key.code = http.StatusOK
		}
		if rctx := chi.RouteContext(r.Context()); rctx != nil {
			if n := len(rctx.RoutePatterns); n <= len(key.patterns) {
				key.n = copy(key.patterns[:], rctx.RoutePatterns)
			} else {
				key.n, key.patterns[0] = -1, rctx.RoutePattern()
			}
		}
		sr := m.series(key, r)
		sr.requests.Inc()
		sr.duration.Observe(time.Since(start).Seconds())
	})
}

// seriesKey names the series of one request: its route (chi's patterns,
// or the joined pattern when n is -1), method and status code.
type seriesKey struct {
	patterns [3]string
	n        int
	method   string
	code     int
}

// series are the metric children of one seriesKey.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// series returns (creating once) the children of key.
func (m *httpMetrics) series(key seriesKey, r *http.Request) series {
	m.mu.RLock()
	sr, ok := m.cache[key]
	m.mu.RUnlock()
	if ok {
		return sr
	}
	route := "unmatched"
	switch {
	case key.n < 0:
		route = key.patterns[0]
	case key.n > 0:
		if rctx := chi.RouteContext(r.Context()); rctx != nil {
			if p := rctx.RoutePattern(); p != "" {
				route = p
			}
		}
	}
	if route == "" {
		route = "unmatched"
	}
	sr = series{
		requests: m.requests.WithLabelValues(route, key.method, strconv.Itoa(key.code)),
		duration: m.duration.WithLabelValues(route, key.method),
	}
	m.mu.Lock()
	m.cache[key] = sr
	m.mu.Unlock()
	return sr
}

// statusRecorder notes the status a handler answers; Unwrap lets
// http.ResponseController reach the connection.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader notes the first final status.
func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write notes an implicit 200.
func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the writer underneath.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// metricMethod folds unknown methods into "other" so that clients cannot
// create label values at will.
func metricMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}
