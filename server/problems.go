package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/api"
)

// Every error response of the server is an RFC 9457 problem from the api
// package's one error mapping: the API's own (api.WriteError), the root
// router's 404 and 405, and the two kinds of error answers other code
// writes in plain text, which are rewritten here:
//
//   - net/http's canned answers to requests it refuses before any handler
//     runs (serverConn.Write, see conn.go): 431 header-too-large, 400
//     malformed-request (request line, URL escape, Host, header syntax),
//     501 not-implemented (transfer coding), 505 http-version-not-supported
//     and 417 expectation-failed;
//   - the plain-text errors of the handlers that are not the API's — the
//     web console's file server, the API docs, pprof (problemErrors).

// problemResponse turns a complete HTTP/1.x error response that net/http
// wrote itself ("HTTP/1.1 400 Bad Request: missing required Host header
// ...") into the same status with a problem body. ok is false for anything
// else, which is then written unchanged.
func (l *connListener) problemResponse(p []byte) (resp []byte, ok bool) {
	if !bytes.Contains(p, []byte("\r\n\r\n")) {
		return nil, false
	}
	line, _, _ := bytes.Cut(p, []byte("\r\n"))
	proto, rest, ok := strings.Cut(string(line), " ")
	if !ok || (proto != "HTTP/1.1" && proto != "HTTP/1.0") || len(rest) < 3 {
		return nil, false
	}
	status, err := strconv.Atoi(rest[:3])
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	// net/http puts the detail of a 400 into the status line:
	// "400 Bad Request: malformed Host header".
	_, detail, _ := strings.Cut(rest[3:], ": ")
	return rawProblem(proto, api.ProblemOf(l.netHTTPError(status, detail)))
}

// plainHTTPSRequired is the answer to plain HTTP on the TLS port, written
// in plain text on the raw connection.
func plainHTTPSRequired() []byte {
	resp, _ := rawProblem("HTTP/1.1", api.ProblemOf(fmt.Errorf("%w: %v", api.ErrHTTPSRequired, errHTTPSRequired)))
	return resp
}

// rawProblem renders a whole response (status line, headers, body) of
// problem that closes the connection.
func rawProblem(proto string, problem api.Problem) ([]byte, bool) {
	body, err := json.Marshal(problem)
	if err != nil {
		return nil, false
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d %s\r\n", proto, problem.Status, http.StatusText(problem.Status))
	b.WriteString("Content-Type: application/problem+json\r\nCache-Control: no-store\r\nConnection: close\r\n")
	fmt.Fprintf(&b, "Date: %s\r\nContent-Length: %d\r\n\r\n", time.Now().UTC().Format(http.TimeFormat), len(body)+1)
	b.Write(body)
	b.WriteByte('\n')
	return b.Bytes(), true
}

// netHTTPError is the error behind a status net/http answered itself.
func (l *connListener) netHTTPError(status int, detail string) error {
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return fmt.Errorf("%w: the request line and headers exceed %s (--max-header-bytes)", api.ErrHeaderTooLarge, ByteSize(l.maxHeaderBytes))
	case http.StatusExpectationFailed:
		return fmt.Errorf("%w: the only expectation served is 100-continue", api.ErrExpectationFailed)
	case http.StatusNotImplemented:
		return fmt.Errorf("%w: send the body with Content-Length or Transfer-Encoding: chunked", api.ErrTransferEncoding)
	case http.StatusHTTPVersionNotSupported:
		return fmt.Errorf("%w: this server speaks HTTP/1.0 and HTTP/1.1", api.ErrHTTPVersion)
	}
	if status >= 500 {
		return fmt.Errorf("net/http answered %d %s", status, detail)
	}
	if detail == "" {
		detail = "the request line, the URL (a bad %-escape?) or the header block cannot be parsed"
	}
	return fmt.Errorf("%w: %s", api.ErrMalformedRequest, detail)
}

// problemErrors turns the error responses of handlers that write plain
// text (http.Error: the console's file server, the API docs, pprof) into
// problems with the same status.
func problemErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pw := &problemWriter{ResponseWriter: w}
		next.ServeHTTP(pw, r)
		if pw.held != 0 {
			api.WriteError(w, r, handlerError(pw.held, strings.TrimSpace(pw.text.String())))
		}
	})
}

// handlerError is the error behind a plain-text error status of a handler.
func handlerError(status int, text string) error {
	switch status {
	case http.StatusNotFound:
		return fmt.Errorf("%w: %s", api.ErrRouteNotFound, text)
	case http.StatusMethodNotAllowed:
		return fmt.Errorf("%w: %s", api.ErrMethodNotAllowed, text)
	case http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %s", api.ErrRangeNotSatisfiable, text)
	}
	if status >= 500 {
		return fmt.Errorf("handler answered %d: %s", status, text)
	}
	return fmt.Errorf("%w: %s", api.ErrMalformedRequest, text)
}

// problemWriter holds back an error status that is not already a problem
// (and the start of its body, for the detail); everything else passes.
type problemWriter struct {
	http.ResponseWriter
	// held is the held-back error status, 0 when passing through.
	held    int
	written bool
	text    bytes.Buffer
}

// maxHeldText is how much of a held-back body becomes the detail.
const maxHeldText = 256

// WriteHeader implements http.ResponseWriter.
func (w *problemWriter) WriteHeader(code int) {
	switch {
	case w.written:
		return
	case code < 200: // informational: more headers follow
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.written = true
	if code >= 400 && !strings.HasPrefix(w.Header().Get("Content-Type"), "application/problem+json") {
		w.held = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write implements http.ResponseWriter.
func (w *problemWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	if w.held != 0 {
		w.text.Write(p[:min(len(p), max(0, maxHeldText-w.text.Len()))])
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *problemWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
