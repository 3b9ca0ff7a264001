package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/xid"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/auth"
)

// scope is what the transport keeps for one request, in one value of the
// request's context: its id (X-Request-Id, echoed in problem bodies and
// log lines), the caller once authenticated, and the status and size of
// the answer for the access-log line. One value instead of one per
// concern: each context value costs a copy of the request.
type scope struct {
	idHeader  [1]string       // the id: X-Request-Id's value, without a slice per request
	log       *zerolog.Logger // the transport's logger (shared)
	start     time.Time
	principal *auth.Principal
	w         recorder
}

// headerRequestID is the request id's header, in canonical form.
const headerRequestID = "X-Request-Id"

// maxRequestIDLen bounds an incoming X-Request-Id kept as the request's id.
const maxRequestIDLen = 128

// wellFormedRequestID reports whether an incoming X-Request-Id is kept
// as the request's id: 1 to maxRequestIDLen letters, digits and "-_.:"
// (UUIDs, xids, ULIDs, hex trace ids). Anything else — empty, longer, or
// with spaces, quotes or control characters that could forge log lines —
// is replaced by a fresh id.
func wellFormedRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// scopeKey is the context key of a request's scope.
type scopeKey struct{}

// scopeOf returns r's scope, nil outside the API's handler.
func scopeOf(r *http.Request) *scope {
	s, _ := r.Context().Value(scopeKey{}).(*scope)
	return s
}

// recorder is the response writer handlers get: it notes the status and
// the bytes written. Unwrap lets http.ResponseController reach the
// connection (deadlines, flushes).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

// WriteHeader notes the first status.
func (w *recorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write notes the bytes and an implicit 200.
func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// Unwrap returns the writer underneath.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestScope is the API's first middleware: it opens the request's
// scope, answers X-Request-Id (the request's own when well formed, else a
// fresh xid), turns a handler panic into a logged 500
// (re-panicking http.ErrAbortHandler, which net/http uses to abort a
// response on purpose), and writes one access-log line per request with
// method, path, route pattern, status, bytes, latency and the account.
func requestScope(log zerolog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := &scope{log: &log, start: time.Now()}
			s.w.ResponseWriter = w
			if id := r.Header[headerRequestID]; len(id) == 1 && wellFormedRequestID(id[0]) {
				s.idHeader[0] = id[0] // the caller's (a proxy's, a client's): one id across the hops
			} else {
				s.idHeader[0] = xid.New().String()
			}
			w.Header()[headerRequestID] = s.idHeader[:] // canonical already; Set would allocate the slice
			r = r.WithContext(context.WithValue(r.Context(), scopeKey{}, s))
			defer s.finish(r)
			next.ServeHTTP(&s.w, r)
		})
	}
}

// finish runs when the request's handlers return or panic.
func (s *scope) finish(r *http.Request) {
	if v := recover(); v != nil {
		if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
			panic(v)
		}
		if ev := s.event(r, zerolog.ErrorLevel); ev != nil {
			ev.Str("panic", fmt.Sprint(v)).Bytes("stack", debug.Stack()).Msg("handler panicked")
		}
		WriteError(&s.w, r, fmt.Errorf("panic: %v", v))
	}
	status := s.w.status
	if status == 0 {
		status = http.StatusOK // nothing written: net/http sends 200
	}
	level := zerolog.InfoLevel
	if status >= 500 {
		level = zerolog.WarnLevel
	}
	ev := s.event(r, level)
	if ev == nil {
		return
	}
	route := ""
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		route = rctx.RoutePattern()
	}
	ev.Str("method", r.Method).
		Str("path", r.URL.Path).
		Str("route", route).
		Int("status", status).
		Int("bytes", s.w.bytes).
		Float64("latency_ms", float64(time.Since(s.start).Microseconds())/1000).
		Msg("http request")
}

// event starts a log event at level carrying the request's id, the
// client's address and the account; nil when the level is off.
func (s *scope) event(r *http.Request, level zerolog.Level) *zerolog.Event {
	ev := s.log.WithLevel(level)
	if ev == nil || !ev.Enabled() {
		return nil
	}
	ev.Str("req_id", s.idHeader[0])
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		ev.Str("ip", host)
	}
	if s.principal != nil {
		ev.Str("account", s.principal.Name())
	}
	return ev
}

// logEvent starts a log event for r at level (nil when off, or outside
// the API).
func logEvent(r *http.Request, level zerolog.Level) *zerolog.Event {
	if s := scopeOf(r); s != nil {
		return s.event(r, level)
	}
	return nil
}
