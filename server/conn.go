package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// Connection-level behaviour that net/http leaves to the application. The
// listener wraps every accepted connection in a serverConn, which does two
// things:
//
//   - Problem bodies for net/http's own errors. Before any handler runs,
//     net/http answers some requests itself with a canned text/plain
//     response written straight onto the connection: 431 for a header block
//     over MaxHeaderBytes, 400 for an unparsable request line, URL escape or
//     Host header, 501 for a transfer coding other than chunked, 505 for a
//     version other than HTTP/1.x and 417 for an Expect other than
//     100-continue. A write made while no handler owns the connection can
//     only be one of those; serverConn replaces each by the same status
//     with an application/problem+json body (problemResponse, in
//     problems.go).
//   - Lingering close, as nginx's lingering_close. When the server closes a
//     connection on which the client may still be sending — an answer
//     written while request body bytes remained unread (a 413, or any error
//     answered before the body was read), or one of the canned errors above
//     — the connection first half-closes (the answer is complete), then
//     reads and discards what still arrives until the client closes, for at
//     most lingerMaxBytes and lingerTime, and lingerTimeout between reads.
//     Without it the kernel answers the unread bytes with a reset, and
//     clients that write their whole request before reading the answer
//     (Python's urllib and requests, Java's HttpURLConnection) report
//     "connection reset" instead of the 413.
//
// serverConn needs only a net.Conn: to serve TLS, wrap the connections of
// a tls.Listener (and forward ConnectionState) so that it sees plain text.

// Lingering close limits.
const (
	// lingerMaxBytes is the most a lingering close discards (a few times
	// the default max request size); a client sending more is cut off.
	lingerMaxBytes = 64 << 20
	// lingerTime bounds a lingering close as a whole.
	lingerTime = 30 * time.Second
	// lingerTimeout bounds each wait for more bytes during a lingering close.
	lingerTimeout = 5 * time.Second
)

// lingerLimits bound the lingering close of a connection.
type lingerLimits struct {
	maxBytes int64
	time     time.Duration
	timeout  time.Duration
}

// connListener wraps the HTTP listener's connections in serverConns and
// keeps track of the lingering ones, so that closing the listener (the
// start of a shutdown) ends them at once.
type connListener struct {
	net.Listener
	// maxHeaderBytes is the server's MaxHeaderBytes (for the 431 detail).
	maxHeaderBytes int64
	limits         lingerLimits
	log            zerolog.Logger

	mu        sync.Mutex
	closed    bool
	lingering map[*serverConn]struct{}
}

// newConnListener wraps inner.
func newConnListener(inner net.Listener, maxHeaderBytes int64, log zerolog.Logger) *connListener {
	return &connListener{
		Listener:       inner,
		maxHeaderBytes: maxHeaderBytes,
		limits:         lingerLimits{maxBytes: lingerMaxBytes, time: lingerTime, timeout: lingerTimeout},
		log:            log,
		lingering:      make(map[*serverConn]struct{}),
	}
}

// Accept implements net.Listener.
func (l *connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &serverConn{Conn: c, listener: l}, nil
}

// Close closes the listener and ends every lingering close.
func (l *connListener) Close() error {
	l.mu.Lock()
	l.closed = true
	for c := range l.lingering {
		_ = c.Conn.SetReadDeadline(time.Now())
	}
	l.mu.Unlock()
	return l.Listener.Close()
}

// serverConn is one accepted connection (see the comment at the top of
// this file).
type serverConn struct {
	net.Conn
	listener *connListener

	// serving is set from the moment a handler gets a request of this
	// connection until the connection goes idle: writes meanwhile are the
	// handler's response. Writes made while it is clear are net/http's own.
	serving atomic.Bool
	// linger makes Close drain the connection first.
	linger atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// Write passes the handlers' responses through and replaces net/http's
// own error answers by problem responses.
func (c *serverConn) Write(p []byte) (int, error) {
	if c.serving.Load() {
		return c.Conn.Write(p)
	}
	resp, ok := c.listener.problemResponse(p)
	if !ok {
		return c.Conn.Write(p)
	}
	// net/http closes the connection after these answers, maybe while
	// the client is still sending the rest of its request.
	c.linger.Store(true)
	if _, err := c.Conn.Write(resp); err != nil {
		return 0, err
	}
	return len(p), nil
}

// CloseWrite half-closes the connection when the underlying one can
// (net/http calls it before closing a connection with unread input).
func (c *serverConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Close closes the connection, after a lingering close if one is due. A
// Close during a lingering close (a forced shutdown) ends it at once.
func (c *serverConn) Close() error {
	if c.linger.Swap(false) {
		c.listener.lingerClose(c)
	}
	c.closeOnce.Do(func() { c.closeErr = c.Conn.Close() })
	return c.closeErr
}

// lingerClose half-closes c and reads and discards its input until the
// client closes or a limit is reached.
func (l *connListener) lingerClose(c *serverConn) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return // shutting down: no time to wait for clients
	}
	l.lingering[c] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.lingering, c)
		l.mu.Unlock()
	}()

	_ = c.CloseWrite()
	start := time.Now()
	end := start.Add(l.limits.time)
	buf := make([]byte, 32<<10)
	var drained int64
	var err error
	for drained < l.limits.maxBytes {
		deadline := min(time.Until(end), l.limits.timeout)
		if deadline <= 0 || !l.setLingerDeadline(c, time.Now().Add(deadline)) {
			break
		}
		var n int
		n, err = c.Conn.Read(buf[:min(int64(len(buf)), l.limits.maxBytes-drained)])
		drained += int64(n)
		if err != nil {
			break
		}
	}
	outcome := "client closed"
	switch {
	case drained >= l.limits.maxBytes:
		outcome = "byte limit"
	case err == nil:
		outcome = "time limit"
	case err != io.EOF:
		outcome = err.Error()
	}
	l.log.Debug().
		Str("remote", c.RemoteAddr().String()).
		Int64("drained_bytes", drained).
		Dur("took", time.Since(start)).
		Str("outcome", outcome).
		Msg("lingering close")
}

// setLingerDeadline sets c's read deadline unless the listener has closed
// (under the lock, so that Close's own deadline is never overwritten).
func (l *connListener) setLingerDeadline(c *serverConn, t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	return c.Conn.SetReadDeadline(t) == nil
}

// connKey is the context key of the request's *serverConn.
type connKey struct{}

// connContext stores the connection in its requests' contexts
// (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if sc, ok := c.(*serverConn); ok {
		return context.WithValue(ctx, connKey{}, sc)
	}
	return ctx
}

// connStateChanged resets a connection that goes idle between requests
// (http.Server.ConnState): net/http has consumed the request, so there is
// nothing to linger for, and the next writes are its own again until a
// handler takes the next request.
func connStateChanged(c net.Conn, state http.ConnState) {
	if sc, ok := c.(*serverConn); ok && state == http.StateIdle {
		sc.serving.Store(false)
		sc.linger.Store(false)
	}
}

// trackConn marks the connection as serving a handler's response and,
// when the handler returns with request body bytes unread that the client
// may still be sending, asks for a lingering close should net/http close
// the connection.
func trackConn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, _ := r.Context().Value(connKey{}).(*serverConn)
		if sc == nil {
			next.ServeHTTP(w, r)
			return
		}
		sc.serving.Store(true)
		if r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		body := &trackedBody{ReadCloser: r.Body, remaining: r.ContentLength}
		// A shallow copy: net/http keeps looking at its own r.Body.
		r = r.WithContext(r.Context())
		r.Body = body
		next.ServeHTTP(w, r)
		if body.unread() {
			sc.linger.Store(true)
		}
	})
}

// trackedBody is a request body that knows whether it was read to the end.
type trackedBody struct {
	io.ReadCloser
	// remaining is the declared length minus what was read; -1 when the
	// length is unknown (chunked).
	remaining int64
	eof       bool
	failed    bool
}

// Read implements io.Reader.
func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.remaining > 0 {
		b.remaining -= int64(n)
	}
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.failed = true
	}
	return n, err
}

// unread reports whether the client may still be sending body bytes that
// nobody read: not read to the end, and no read failed (a timeout or a
// broken connection is not worth lingering for).
func (b *trackedBody) unread() bool { return !b.eof && !b.failed && b.remaining != 0 }
