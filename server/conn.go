package server

import (
	"context"
	"crypto/tls"
	"errors"
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
// With TLS (tls.go) the listener wraps the connections of a tls.Listener,
// so that serverConn sees plain text: it sits above TLS. net/http then
// sees no *tls.Conn, so a tlsServerConn does the handshake itself when
// net/http asks for its ConnectionState (once, before the first request,
// in the connection's own goroutine, which sets Request.TLS), and answers
// plain HTTP sent to the TLS port with a 400 https-required problem in
// plain text, followed by a lingering close on the raw connection.

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
	// tls is set when the inner listener is a tls.Listener;
	// handshakeTimeout bounds each handshake.
	tls              bool
	handshakeTimeout time.Duration

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
	sc := &serverConn{Conn: c, listener: l}
	if tc, ok := c.(*tls.Conn); ok && l.tls {
		sc.tlsConn = tc
		return &tlsServerConn{sc}, nil
	}
	return sc, nil
}

// Close closes the listener and ends every lingering close.
func (l *connListener) Close() error {
	l.mu.Lock()
	l.closed = true
	for c := range l.lingering {
		_ = c.drained().SetReadDeadline(time.Now())
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

	// tlsConn is Conn as a *tls.Conn (nil without TLS). handshakeErr is
	// set when its handshake failed: reads then see EOF, so that net/http
	// closes quietly. plain is the raw connection when it carried plain
	// HTTP: the answer was written to it, and a lingering close drains it.
	tlsConn      *tls.Conn
	handshakeErr error
	plain        net.Conn

	closeOnce sync.Once
	closeErr  error

	// body wraps the body of the request being served (net/http serves a
	// connection's requests one at a time, so one is enough).
	body trackedBody
}

// Read reads the request stream; after a failed TLS handshake it is at
// its end.
func (c *serverConn) Read(p []byte) (int, error) {
	if c.handshakeErr != nil {
		return 0, io.EOF
	}
	return c.Conn.Read(p)
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
	if cw, ok := c.drained().(interface{ CloseWrite() error }); ok {
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
	c.closeOnce.Do(func() {
		if c.plain != nil {
			c.closeErr = c.plain.Close()
			return
		}
		c.closeErr = c.Conn.Close()
	})
	return c.closeErr
}

// drained is the connection a lingering close reads from: the raw one
// after plain HTTP on the TLS port, else Conn.
func (c *serverConn) drained() net.Conn {
	if c.plain != nil {
		return c.plain
	}
	return c.Conn
}

// tlsServerConn is a serverConn over TLS. Only it has ConnectionState,
// which net/http reads to set Request.TLS (a plain connection must not
// look like a TLS one).
type tlsServerConn struct{ *serverConn }

// ConnectionState performs the handshake, bounded by the listener's
// handshake timeout, and returns its state (net/http calls it once, before
// reading the first request). A client that sent plain HTTP gets a 400
// https-required problem in plain text.
func (c *tlsServerConn) ConnectionState() tls.ConnectionState {
	if !c.tlsConn.ConnectionState().HandshakeComplete && c.handshakeErr == nil {
		c.handshake()
	}
	return c.tlsConn.ConnectionState()
}

// handshake runs the TLS handshake.
func (c *tlsServerConn) handshake() {
	l := c.listener
	if l.handshakeTimeout > 0 {
		_ = c.tlsConn.SetDeadline(time.Now().Add(l.handshakeTimeout))
	}
	err := c.tlsConn.Handshake()
	_ = c.tlsConn.SetDeadline(time.Time{})
	if err == nil {
		return
	}
	c.handshakeErr = err
	var re tls.RecordHeaderError
	if errors.As(err, &re) && re.Conn != nil && tlsRecordLooksLikeHTTP(re.RecordHeader) {
		c.plain = re.Conn
		resp := plainHTTPSRequired()
		_ = re.Conn.SetWriteDeadline(time.Now().Add(lingerTimeout))
		if _, werr := re.Conn.Write(resp); werr == nil {
			c.linger.Store(true) // the client may still be sending its request
		}
		l.log.Debug().Str("remote", c.RemoteAddr().String()).Msg("plain HTTP on the TLS port: answered 400 https-required")
		return
	}
	l.log.Debug().Str("remote", c.RemoteAddr().String()).Err(err).Msg("TLS handshake failed")
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
		n, err = c.drained().Read(buf[:min(int64(len(buf)), l.limits.maxBytes-drained)])
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
	return c.drained().SetReadDeadline(t) == nil
}

// connKey is the context key of the request's *serverConn.
type connKey struct{}

// connContext stores the connection in its requests' contexts
// (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if sc := asServerConn(c); sc != nil {
		return context.WithValue(ctx, connKey{}, sc)
	}
	return ctx
}

// asServerConn is c as a *serverConn (nil when it is none).
func asServerConn(c net.Conn) *serverConn {
	switch sc := c.(type) {
	case *serverConn:
		return sc
	case *tlsServerConn:
		return sc.serverConn
	}
	return nil
}

// connStateChanged resets a connection that goes idle between requests
// (http.Server.ConnState): net/http has consumed the request, so there is
// nothing to linger for, and the next writes are its own again until a
// handler takes the next request.
func connStateChanged(c net.Conn, state http.ConnState) {
	if sc := asServerConn(c); sc != nil && state == http.StateIdle {
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
		body := &sc.body
		*body = trackedBody{ReadCloser: r.Body, remaining: r.ContentLength}
		// net/http closes the body through its own reference; the request
		// is the handler's to change, as http.MaxBytesReader does.
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
