package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mqgate/mqgate/server/broker"
)

// drainGate answers Deps.DrainError (a 503 with Retry-After) while the
// server drains.
func (h *handler) drainGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.deps.Draining() {
			WriteError(w, r, h.deps.DrainError)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// methodNotAllowed answers 405 with the Allow header listing the methods
// the path does have.
func methodNotAllowed(routes chi.Routes) http.HandlerFunc {
	candidates := []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodPatch}
	return func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if r.URL.RawPath != "" {
			path = r.URL.RawPath
		}
		if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.RoutePath != "" {
			path = rctx.RoutePath
		}
		var allowed []string
		for _, m := range candidates {
			if routes.Match(chi.NewRouteContext(), m, path) {
				allowed = append(allowed, m)
			}
		}
		if len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
		}
		WriteError(w, r, fmt.Errorf("%w: %s %s", ErrMethodNotAllowed, r.Method, r.URL.Path))
	}
}

// bodyLimit caps the request body at n bytes: a declared Content-Length
// above n is refused with 413 before anything is read, and reading past n
// fails with *http.MaxBytesError (also 413).
func bodyLimit(n int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > n {
				WriteError(w, r, &http.MaxBytesError{Limit: n})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, n)
			next.ServeHTTP(w, r)
		})
	}
}

// requireJSON refuses with 415 a request whose body is not declared as JSON
// (application/json or application/*+json). A request without a body and
// without a Content-Type passes.
// optionsInBody refuses a query string on a route that reads its options
// from the JSON body only: `pull?waitMs=20000` would otherwise answer at
// once, its waitMs never read — a trap for a first curl.
func optionsInBody(route, example string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.RawQuery != "" {
				names := make([]string, 0, 4)
				for name := range r.URL.Query() {
					names = append(names, name)
				}
				slices.Sort(names)
				WriteError(w, r, invalidArgument("%s reads its options from the JSON body (e.g. %s), not from the query string: %s", route, example,
					broker.QuoteValue(strings.Join(names, ", "))))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		switch {
		case ct == "" && r.ContentLength == 0 && len(r.TransferEncoding) == 0:
		case ct == "":
			WriteError(w, r, fmt.Errorf("%w: Content-Type application/json is required", ErrUnsupportedMediaType))
			return
		case !isJSON(ct):
			WriteError(w, r, fmt.Errorf("%w: %s; this route accepts application/json", ErrUnsupportedMediaType, broker.QuoteValue(ct)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isJSON reports whether a Content-Type value is application/json or an
// application/*+json type.
func isJSON(contentType string) bool {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mediaType == "application/json" ||
		(strings.HasPrefix(mediaType, "application/") && strings.HasSuffix(mediaType, "+json"))
}

// readBody reads the whole (already size-limited) request body.
func readBody(r *http.Request) ([]byte, error) {
	var body []byte
	if err := readBodyInto(r, &body); err != nil {
		return nil, err
	}
	return body, nil
}

// readBodyInto reads the whole (already size-limited) request body into
// *buf.
func readBodyInto(r *http.Request, buf *[]byte) error {
	if err := readInto(buf, r.Body, r.ContentLength); err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return err
		}
		return fmt.Errorf("%w: reading body: %v", ErrMalformedRequest, err)
	}
	return nil
}

// readJSON decodes the request body into dst, refusing unknown fields and
// trailing data. An empty body is an error unless optional is set, in which
// case dst keeps its zero value.
func readJSON(r *http.Request, dst any, optional bool) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil
		}
		return fmt.Errorf("%w: the request body is empty; a JSON object is required", ErrMalformedRequest)
	}
	return decodeJSON(body, dst)
}

// decodeJSON strictly decodes exactly one JSON value from body into dst
// (RFC 8259 as I-JSON, RFC 7493, asks): the body must be valid UTF-8,
// without unpaired surrogate escapes, member names match exactly (case
// included), a name may not repeat in an object, unknown members and
// trailing data are refused. Lenient decoders silently store U+FFFD for
// invalid UTF-8 and let the last of {"body":"a","BODY":"b"} win; a broker
// must not guess which one the client meant.
func decodeJSON(body []byte, dst any) error {
	if !utf8.Valid(body) {
		return fmt.Errorf("%w: the JSON body is not valid UTF-8 (at byte %d); JSON text is UTF-8 — "+
			"send binary message bodies as base64 with \"bodyEncoding\": \"base64\"", ErrMalformedRequest, invalidUTF8At(body))
	}
	if err := jsonv2.Unmarshal(body, dst, jsonv2.RejectUnknownMembers(true)); err != nil {
		return jsonError(err)
	}
	return nil
}

// errUnknownMember marks a JSON member no field takes.
var errUnknownMember = errors.New("unknown member")

// invalidUTF8At is the offset of the first byte of b that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// jsonError turns a decoding error into an ErrMalformedRequest with a
// detail that names the member (as a JSON Pointer) and what was wrong.
func jsonError(err error) error {
	var syntax *jsontext.SyntacticError
	var semantic *jsonv2.SemanticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		name := "a member"
		if errors.As(err, &syntax) && syntax.JSONPointer != "" {
			name = pointerName(syntax.JSONPointer)
		}
		return fmt.Errorf("%w: %s appears twice in one object; a member name may appear only once", ErrMalformedRequest, name)
	case errors.As(err, &syntax):
		detail := syntax.Err.Error()
		if strings.Contains(detail, "surrogate") || strings.Contains(detail, "UTF-8") {
			return fmt.Errorf("%w: invalid JSON string%s at byte %d: %v — JSON strings hold Unicode text; "+
				"send binary message bodies as base64 with \"bodyEncoding\": \"base64\"", ErrMalformedRequest, pointerAt(syntax.JSONPointer), syntax.ByteOffset, syntax.Err)
		}
		if errors.Is(syntax.Err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: truncated JSON", ErrMalformedRequest)
		}
		return fmt.Errorf("%w: invalid JSON at byte %d: %v", ErrMalformedRequest, syntax.ByteOffset, syntax.Err)
	case errors.As(err, &semantic):
		if errors.Is(err, jsonv2.ErrUnknownName) {
			name := ""
			if len(semantic.JSONPointer) > 0 {
				name = semantic.JSONPointer.LastToken()
			}
			return fmt.Errorf("%w: %w %s%s (member names are case-sensitive)", ErrMalformedRequest, errUnknownMember,
				broker.QuoteValue(name), pointerAt(semantic.JSONPointer.Parent()))
		}
		want := "a different type"
		if semantic.GoType != nil {
			want = jsonKindOf(semantic.GoType)
		}
		got := "value"
		if semantic.JSONKind != 0 {
			got = semantic.JSONKind.String()
		}
		return fmt.Errorf("%w: %s: expected %s, got JSON %s", ErrMalformedRequest, pointerName(semantic.JSONPointer), want, got)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("%w: truncated JSON", ErrMalformedRequest)
	default:
		return fmt.Errorf("%w: %v", ErrMalformedRequest, err)
	}
}

// pointerAt renders " in <pointer>" for a member pointer, "" at the root.
func pointerAt(p jsontext.Pointer) string {
	if p == "" {
		return ""
	}
	return " in " + broker.QuoteValue(string(p))
}

// pointerName names the member at p for a detail ("(root)" for the top).
func pointerName(p jsontext.Pointer) string {
	if p == "" {
		return "(root)"
	}
	return "member " + broker.QuoteValue(string(p))
}

// jsonKindOf says in JSON words what a Go type decodes from.
func jsonKindOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKindOf(t.Elem()) + " or null"
	}
	return t.String()
}

// writeJSON renders v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	jb := jsonBufferPool.Get().(*jsonBuffer)
	defer func() {
		if jb.buf.Cap() <= maxPooledBuffer {
			jb.buf.Reset()
			jsonBufferPool.Put(jb)
		}
	}()
	if err := jb.enc.Encode(v); err != nil { // Encode appends the newline
		WriteError(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	setContentLength(h, jb.buf.Len())
	w.WriteHeader(status)
	_, _ = w.Write(jb.buf.Bytes())
}

// maxNameLength is the longest name the transport lets through; the broker
// applies the exact rules (127 for topics, 120 for groups, reserved names).
const maxNameLength = 255

// nameParam returns the path parameter key, unescaped, after a cheap check
// that it could be a topic or group name (1-255 of A-Z a-z 0-9 _ - %); the
// broker applies the exact naming rules.
func nameParam(r *http.Request, key, what string) (string, error) {
	value := chi.URLParam(r, key)
	if r.URL.RawPath != "" {
		// chi routed on the escaped path, so the parameter is still escaped.
		unescaped, err := url.PathUnescape(value)
		if err != nil {
			return "", fmt.Errorf("%w: %s %s is not a valid path segment", broker.ErrInvalidName, what, broker.QuoteValue(value))
		}
		value = unescaped
	}
	if !validName(value) {
		return "", fmt.Errorf("%w: %s %s must be 1-%d characters of A-Z a-z 0-9 _ - (and %% for system names)",
			broker.ErrInvalidName, what, broker.QuoteValue(value), maxNameLength)
	}
	return value, nil
}

// validName reports whether s passes the transport's coarse name check.
func validName(s string) bool {
	if len(s) == 0 || len(s) > maxNameLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '%':
		default:
			return false
		}
	}
	return true
}

// invalidArgument returns a broker.ErrInvalidArgument with a detail.
func invalidArgument(format string, args ...any) error {
	return fmt.Errorf("%w: %s", broker.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// formatTime renders t as RFC 3339 with milliseconds in UTC, or "" for the
// zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// ClientIDHeader names the calling consumer in failure histories.
const ClientIDHeader = "X-Mqgate-Client-Id"

// clientIdentity passes the X-Mqgate-Client-Id header (at most
// broker.MaxClientIDBytes of printable ASCII) to the broker, which records
// it in leases and attempt histories; a longer or otherwise invalid one is
// refused with 400.
func clientIdentity(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := header(r.Header, ClientIDHeader); id != "" {
			if err := broker.CheckClientID(ClientIDHeader, id); err != nil {
				WriteError(w, r, err)
				return
			}
			r = r.WithContext(broker.WithClient(r.Context(), id))
		}
		next.ServeHTTP(w, r)
	})
}
